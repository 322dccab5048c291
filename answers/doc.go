// Package answers persists released noisy answers in their own SQLite
// file (Open), or in the PostgreSQL state database several proxies share
// (OpenDB), so that a repeated batch is re-released for free across proxy
// restarts and across the processes and hosts sharing the store, and
// arbitrates between those processes so that a batch is measured (and
// charged) once.
//
// Everything stored here has already been paid for in the ledger:
// re-releasing it is post-processing and costs nothing. The store holds
// only released values, never data; it is keyed by an opaque string (the
// engine's canonical batch key) and stores opaque bytes (the engine's
// encoding of its result sets).
//
// # Single flight across processes
//
// Before measuring a batch, a process claims its key ([Store.Claim]): a
// row in the pending table names the owner (one per open Store) and a
// lease expiry. Other processes that want the same key wait while the
// owner is alive and its lease current, then read the answer the owner
// stored. The owner renews its lease while it works, stores the answer
// with [Store.Put] — durably (synchronous=FULL) and before anything is
// released — and Put returns the answer stored under the key, which is the
// one to release: if two owners ever both measured (a lease that expired
// under a live owner), the first answer stored is the only one anybody
// releases. A crashed owner's claim is taken over at once where flock(2)
// shows the owner gone (each Store holds a lock on its own file under
// "<path>-owners/"), otherwise when the lease expires.
//
// Crash cases: a crash before Put releases nothing (its charge, if made,
// stays: conservative) and the next claimant measures anew; a crash after
// Put leaves the stored answer, which every later request re-releases.
// So no answer leaves without its charge, and no key ever has two
// different answers released.
//
// # On PostgreSQL
//
// In a shared PostgreSQL database a claim is a session-level advisory
// lock, pg_try_advisory_lock on a 64-bit hash of the key, taken on a
// connection the claim pins for itself (pg.go); there is no pending table,
// lease or owner file. The engine claims before it charges the ledger and
// Put unlocks only after the answer row has committed, so the lock covers
// charge and store: among live proxies a batch is charged once, and the
// others, polling Claim, find the answer stored when the lock comes free.
// Put stores with INSERT … ON CONFLICT (key) DO NOTHING and reads the row
// back, so the first answer stored is the one every proxy releases.
//
// A proxy that dies, or whose connection to PostgreSQL breaks, loses its
// connection, and PostgreSQL drops its locks at once (within about half a
// minute when its host vanishes without closing the connection: the claim
// connection's TCP keepalives). A server's idle_session_timeout, if set,
// must outlast the longest measurement, or it drops live claims too. Killed between its
// charge and its Put, it leaves its charge (whole: the ledger has no half
// charge; conservative) and no answer, and the next claimant measures and
// charges anew. If only the connection broke and the proxy lived on to
// Put, two answers were measured and both charged, but the first stored is
// the only one released, as with an expired lease on SQLite.
//
// Claims may pin at most half of the pool's connections, because their
// holders need connections to measure and charge; when none is free Claim
// reports the key as not yet claimed and the engine polls, as for a key
// another proxy answers. Two keys whose hashes collide only take turns.
package answers
