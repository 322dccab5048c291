// Package budget owns privacy accounting (pure ε-DP and ρ-zCDP), the ledger
// storage, its hash chain and its verification. It knows no SQL of the
// analysts: callers hand it costs, user and table names, and a digest of
// the query texts.
//
// # Accounting
//
// accountant.go is the one place where privacy units are converted. A spend
// is a [Cost]: a pure-ε part (Laplace, exponential mechanism) and a ρ-zCDP
// part (Gaussian), each composed by addition. Only when a total is compared
// with a limit is it converted to ε at the limit's δ, by [EpsilonFor].
// Converting the composed total once is tighter than adding per-release
// (ε, δ) values. Two δ's are kept apart: the δ at which ρ is converted
// belongs to the limit (Limit.Delta) and is never spent, while the δ that
// (ε, δ) mechanisms spend (DP partition selection) is part of the Cost,
// recorded in each entry, composed by addition and bounded by the limit's
// δ budget (Limit.MaxDelta); [DeltaFor] states the resulting guarantee.
//
// # Ledger
//
// The [Ledger] is an append-only table in its own SQLite file (WAL,
// synchronous=FULL), or in a PostgreSQL database that several proxies
// share (see PostgreSQL below). Every entry carries the SHA-256 of a canonical encoding
// of its fields and of the previous entry's hash, so that editing, deleting,
// reordering or inserting entries breaks the chain; a one-row head table,
// written in the same transaction as each entry, records the number of
// entries and the last hash, so that a truncated tail is detected too. A
// spent table, also written in that transaction, keeps each scope's total so
// that [Ledger.Charge] costs the same however long the ledger grows;
// [Ledger.Verify] and [Ledger.Budgets] recompute everything from the entries.
// See [Ledger.Verify] for what is and is not detected, and [Ledger.SignHead]
// for anchoring the chain outside the file.
//
// # Privacy unit spaces
//
// Budgets belong to privacy unit spaces (space.go): tables whose rows are
// about the same people declare one space, and each charge records the
// spaces it spends in (Charge.Spaces), so one person's loss adds up across
// the tables of a space. The spent aggregate keeps each space's total and
// each user's in it (ScopeSpace, ScopeUserSpace) beside the per-table and
// per-user totals. Entries written before spaces name none; each of their
// tables counts in a space of its own name until [Ledger.MapSpaces]
// records, on the chain, the space the catalog gives it. Their hashes are
// unchanged.
//
// # Limits and signed heads
//
// The limits a charge is checked against are the caller's (the catalog's).
// [Ledger.RecordLimits] puts each scope's first value and every change on
// the same chain, as zero-cost KindLimits entries naming the new and the
// previous value (equal for a first value), so that the
// history of the limits is in the ledger with the charges made under them
// ([ParseLimitEntry] reads them back). [Ledger.AppendSignedHead] keeps
// Ed25519-signed heads in a separate file, one per line; [ReadSignedHeads],
// [VerifyHeadSignature] and [Ledger.CheckHead] let an auditor holding only
// the public key check that the ledger still holds every signed head.
//
// # Reading a long ledger
//
// query.go serves viewers (the web console): [Ledger.Page] pages entries
// newest first by sequence number with filters, [Ledger.Spending] sums
// charges per user and time bucket in the database, [Ledger.SpentRows] reads the
// spent aggregate, and [Ledger.Report] runs every check of `audit verify`
// into a [Report]. [OpenReadOnly] opens an existing ledger so that nothing
// can be written through it, an older schema included: readonly.go
// presents it as the current one through TEMP views, without upgrading it.
//
// # Files and concurrency (SQLite)
//
// Beside the ledger file SQLite keeps "-wal" and "-shm" files, and the
// package an empty "-lock" file, flock(2)ed around each write so that
// waiting writers sleep in the kernel instead of polling (an optimisation;
// see writerLock). Any number of Ledgers, in one process or several, may
// share the file: each charge is one BEGIN IMMEDIATE transaction, which
// reads the spends and appends the entry under the database write lock, so
// two charges can never both pass a check that only one of them fits. A
// charge is committed, and with synchronous=FULL on disk, before Charge
// returns; a crash afterwards can lose an answer, never the accounting.
// Zero-cost reuse entries are the exception to one-transaction-per-entry:
// [Ledger.RecordReuse] queues them and a background committer writes them
// in batches (reuse.go), or the next charge carries them ahead of itself;
// a crash can lose the last few, which cost nothing.
//
// # PostgreSQL
//
// [OpenDB] keeps the ledger in a PostgreSQL database (a statedb.DB, whose
// pool the other state stores share), so that every proxy pointed at it,
// on any host, charges one budget; [OpenDBReadOnly] is its [OpenReadOnly]
// and [Migrate] copies a SQLite ledger into it, hashes intact. The tables
// are those of the SQLite file under the same names (entries, spent,
// spent_spaces, head), plus ledger_schema, which holds the schema version
// that a file keeps in PRAGMA user_version; text columns compare by bytes
// (COLLATE "C"), numbers are DOUBLE PRECISION and BIGINT, so an entry reads
// back bit for bit as written and its hash verifies. The SQL and the Go
// code are the same as for SQLite; postgres.go holds what differs.
//
// Writers serialise on the head row, not on a file lock. Every write
// transaction (a charge, a batch of reuse entries, RecordLimits,
// MapSpaces) is READ COMMITTED and begins with SELECT … FROM head WHERE
// id = 1 FOR UPDATE; only then does it read the spends of the charge's
// scopes (locking their rows FOR UPDATE, in key order), check the limits,
// append its entries, update the spent aggregates and move the head, and
// commit. Why this cannot overspend, whatever the number of proxies and
// hosts: the head row is one row in one database, and PostgreSQL lets one
// transaction at a time hold its lock, until it commits or rolls back.
// Every writer takes it before reading anything it decides on, and under
// READ COMMITTED each later statement sees every transaction committed
// before it (a waiter wakes only once the holder's commit is visible:
// PostgreSQL releases a transaction's locks after it has committed), so
// the spends a charge is checked against include every charge ever
// committed, and no other charge can commit until this one has; two
// charges can never both pass a check that only one fits. Clocks do not
// matter: sequence numbers come from the head, and an entry's time is
// never earlier than the previous entry's, whichever host wrote it. Why the
// chain cannot fork: the entry's sequence number and prev_hash are read
// from the head under the same lock and the head is moved in the same
// transaction, so entries are appended one after the other as in a single
// file (seq is also the primary key). Why nothing is half-charged: the
// entry, the spends and the head are one transaction; a proxy that dies,
// or loses its connection, before COMMIT leaves nothing, since PostgreSQL
// rolls its transaction back and frees the lock. (A proxy that loses its
// connection during COMMIT cannot know whether the charge was recorded:
// Charge returns an error, and the budget may have been spent without an
// answer, never the other way round.) A writer waits for the lock at most
// busyTimeout (lock_timeout), and a transaction that PostgreSQL aborts as a
// deadlock or serialization failure is run again. A write transaction
// turns synchronous_commit on where it is off, so that a charge is on disk
// before Charge returns, as with synchronous=FULL (the server's fsync must
// be on too; OpenDB warns when it is not). Reads (Verify, Entries, Report,
// …) are REPEATABLE READ, READ ONLY transactions: one snapshot, which
// never blocks a writer.
//
// The price of one lock for every host is that charges are serialised
// across all proxies, and each holds the lock for about ten statements
// (head, spends, recorded limits, entry, aggregates, commit), one network
// round trip each: the round-trip time to the database bounds the
// charges per second of all proxies together (BenchmarkChargeStates
// measures it). Text values cannot hold NUL bytes in PostgreSQL; a charge
// naming one fails there, where SQLite would record it.
//
// A stored answer must not be computed twice by two proxies that receive
// the same batch at once. That is for the answers store, not the ledger:
// it claims the batch's answer key with a PostgreSQL advisory lock, held
// from before the charge until the answer is stored, so that exactly one
// proxy charges for a distinct batch and the others wait and reuse its
// answer (a reuse entry, which costs nothing).
package budget
