// Package compile turns a batch of parsed DP queries into a workload: linear
// queries over the product domain of the columns the batch touches, kept
// structured as sums of Kronecker products of per-column vectors so that a
// large product domain never needs a dense vector. It touches no data and
// no noise.
//
// Everything a query says about rows — WHERE, the arguments of COUNT, SUM,
// AVG and VARIANCE, GROUP BY expressions, HAVING on group keys — is a
// deterministic function of a row's domain values, so it is evaluated on
// each domain cell's declared values (never on the data) with MySQL's
// semantics, and becomes a vector over the histogram: a truth table, a
// weight, a group's set of cells.
//
// Files:
//   - compile.go: Workload, Query, Item; batch assembly and each query's
//     view of the batch (the dropped cells it weighs 0).
//   - drop.go: what a column's drop policy removes rows from (what reads
//     the column, never COUNT(*) beside it), and so which columns a batch
//     measures with a dropped cell.
//   - query.go: one query: keys, output groups, zero rows, labels.
//   - items.go: select items, aggregates of expressions, post-processing,
//     HAVING and ORDER BY.
//   - truth.go: truth tables of predicates (three-valued logic).
//   - eval.go, value.go, funcs.go, collate.go: the evaluator of
//     expressions on cells (ranges of a bin's values, MySQL's types,
//     functions and collation).
//   - join.go: columns of public tables reached through a join
//     (parser.Lookup), and the check that a join key matches at most one
//     public row on every cell, so that a join never multiplies a row.
//   - timefuncs.go: dates and times (Unix seconds typed DATE or
//     DATETIME, in UTC), MySQL's date functions, and the evaluation of a
//     time bin piece by piece (its days or hours) when ranges alone cannot
//     decide.
//   - dense.go: evaluating over the cells of a few columns, and writing the
//     table back as Kronecker terms.
//   - linear.go: structured linear queries; sqltext.go: SQL text for
//     messages and EXPLAIN.
//
// Empty by construction: a group the WHERE admits on no cell of the
// declared domain is not an output row, and an aggregate row that is zero
// on every cell is known exactly (COUNT 0; SUM, AVG and VARIANCE over no
// value NULL) without a measurement. These are facts about the public
// domain, never about the data.
package compile
