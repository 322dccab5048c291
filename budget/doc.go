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
// synchronous=FULL). Every entry carries the SHA-256 of a canonical encoding
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
// charges per user and time bucket in SQLite, [Ledger.SpentRows] reads the
// spent aggregate, and [Ledger.Report] runs every check of `audit verify`
// into a [Report]. [OpenReadOnly] opens an existing ledger so that nothing
// can be written through it, an older schema included: readonly.go
// presents it as the current one through TEMP views, without upgrading it.
//
// # Files and concurrency
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
package budget
