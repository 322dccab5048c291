// Package postproc evaluates SQL over results that have already been
// released: the outer query of a derived table or CTE that aggregates
// (SELECT AVG(n) FROM (SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex)
// t), and UNION of aggregate queries.
//
// Privacy: its only inputs are released rows, each already covered by a
// ledger charge, so whatever it computes from them is post-processing and
// costs nothing more. It cannot read anything else: each evaluation runs in
// a fresh in-memory go-mysql-server database holding only the given tables,
// and the parser has already refused outer queries that name other tables
// or call functions that reach the host (LOAD_FILE, SLEEP, locks).
package postproc
