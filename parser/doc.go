// Package parser turns MySQL SQL text into dpproxy's query IR, refusing
// (with a precise MySQL error) anything that would expose rows.
//
// The IR is deliberately small: a statement names one protected table, a
// select list of group columns and aggregates, a structured predicate, group
// columns, ordering and a limit. It carries no matrices; compile/ turns it
// into workload rows over the declared domain.
//
// The parser owns SQL text for the whole proxy: one lexer, one grammar
// (vitess's MySQL grammar), one rewriter, one number reader. The files:
//
//   - parse.go: Parse and its kin, statement classification, refusals
//   - lex.go, text.go: the lexer, and the text services the MySQL front uses
//     (tokens, first word, syntax errors, sql_mode quoting)
//   - keywords.go: MySQL's non-reserved keywords used as identifiers
//   - query.go: one SELECT over a protected table, built clause by clause
//     from names.go (resolution), aggregate.go (the select list's
//     aggregates), groupby.go, having.go, orderby.go (ORDER BY, LIMIT)
//   - expr.go, convert.go, pred.go: expressions and predicates over columns
//   - join.go: joins to public tables; unitjoin.go: joins of protected
//     tables on their privacy unit
//   - derived.go, filterjoin.go, astcopy.go: derived tables, CTEs and
//     UNION as BI tools wrap their queries (merged, or post-processing)
//   - rewrite.go: rewriting IR expressions; ir.go: the IR; errors.go: MySQL
//     error codes
package parser
