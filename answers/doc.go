// Package answers persists released noisy answers in their own SQLite
// file, so that a repeated batch is re-released for free across proxy
// restarts and across processes sharing a data directory, and arbitrates
// between those processes so that a batch is measured (and charged) once.
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
package answers
