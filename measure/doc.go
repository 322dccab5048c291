// Package measure stores every noisy measurement dpproxy has released, per
// table definition and data version, so that later batches can be answered
// from them (post-processing, free) and new measurements spent only on
// what they do not already answer (planner.GLS).
//
// A Measurement is the release itself in structured form: the strategy as
// one integer matrix per column (a Kronecker product; a direct row is a
// product of one-row factors), the noisy answers (⊗A_j)·x + Z, and the
// noise's family, scale and exact variance. A long column's factor that is
// constant on runs of cells is kept in class form (classform.go): the
// cells' classes and the factor per class, 1 MB where a year of days over
// five years of hours is 128 MB over cells. Nothing here is released by
// this package: it holds what was already released and paid for, keyed by
// the ledger entry that paid (Measurement.LedgerSeq).
//
// The Store (store.go) is a SQLite file beside the ledger, or tables in the
// PostgreSQL state database that several proxies share (OpenDB; Migrate
// copies a SQLite file's into it), bounded in bytes: past the bound the oldest measurements are forgotten (later
// answers then rely on the rest, or measure anew). A changed table
// definition or data version starts afresh: Load returns only the
// measurements of the key asked for.
//
// Beside them, keys.go stores the key sets DP partition selection released
// for open columns, per table, column and data version.
package measure
