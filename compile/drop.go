package compile

import (
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/parser"
)

// Which rows a column's drop policy removes, and from what.
//
// A column that drops NULL or out-of-domain values (null: drop,
// out_of_domain: drop) removes those rows from what reads the column, and
// from nothing else, as MySQL's aggregates leave NULL out of what reads
// it: from every aggregate of a statement whose WHERE (inner joins and
// HAVING's conditions on the keys included) or GROUP BY reads it — those
// decide which rows the statement sees — and otherwise only from the
// aggregates whose argument reads it. COUNT(*) counts every row the WHERE
// and the groups admit, whatever stands beside it in its statement or
// batch: in SELECT COUNT(*), COUNT(sex) FROM t the first counts the rows
// whose sex is dropped and the second does not.
//
// So a batch measures such a column with a dropped cell
// (catalog.Column.WithDroppedCell) unless every aggregate of every
// statement drops the column's rows anyway; the statement's view (mask) is
// 0 on the dropped cell of the columns its rows read, and an aggregate's
// argument is never counted on a dropped cell (argTables, quantile).

// rowColumns lists the columns that decide which rows a statement counts:
// those its WHERE reads (with the match conditions of inner joins, which
// the parser wrote into it, and the conditions of HAVING on the group keys,
// which splitHaving moves there) and its GROUP BY keys.
func rowColumns(q *parser.Query) map[string]bool {
	out := map[string]bool{}
	where, _ := splitHaving(q.Where, q.Having)
	for _, c := range parser.PredColumns(where) {
		out[c] = true
	}
	for _, c := range q.GroupBy {
		out[c] = true
	}
	for _, g := range q.GroupExprs {
		for _, c := range parser.ExprColumns(g.Expr) {
			out[c] = true
		}
	}
	return out
}

// aggregateArgs lists, for every aggregate a statement computes (in the
// select list, inside post-processing, in HAVING and in ORDER BY), the
// columns its argument reads: none for COUNT(*) and COUNT(DISTINCT
// <privacy unit>).
func aggregateArgs(q *parser.Query) [][]string {
	var out [][]string
	var item func(si parser.SelectItem)
	var post func(e *parser.AggExpr)
	item = func(si parser.SelectItem) {
		switch {
		case si.Expr != nil:
			post(si.Expr)
		case si.Agg == parser.AggNone:
		case si.Agg == parser.AggCount, si.Agg == parser.AggCountDistinct:
			out = append(out, nil)
		default:
			out = append(out, parser.ItemColumns(parser.SelectItem{Agg: si.Agg, Column: si.Column, Arg: si.Arg}))
		}
	}
	post = func(e *parser.AggExpr) {
		if e == nil {
			return
		}
		if e.Leaf != nil {
			item(*e.Leaf)
		}
		post(e.Left)
		post(e.Right)
		for _, a := range e.Args {
			post(a)
		}
	}
	for _, si := range q.Select {
		item(si)
	}
	var pred func(p parser.Pred)
	pred = func(p parser.Pred) {
		switch p := p.(type) {
		case parser.And:
			for _, t := range p.Terms {
				pred(t)
			}
		case parser.Or:
			for _, t := range p.Terms {
				pred(t)
			}
		case parser.Not:
			pred(p.Term)
		case parser.AggCompare:
			item(p.Item)
		}
	}
	pred(q.Having)
	for _, o := range q.OrderBy {
		item(parser.SelectItem{Agg: o.Agg, Column: o.Column, Arg: o.Arg, Expr: o.Expr})
	}
	return out
}

// dropsEverywhere lists the columns whose dropped rows no aggregate of the
// statement counts: the columns its rows read, and those every one of its
// aggregates' arguments reads. A statement without aggregates counts
// nothing, so every column it references (refs) is listed.
func dropsEverywhere(q *parser.Query, refs map[string]bool) map[string]bool {
	args := aggregateArgs(q)
	if len(args) == 0 {
		return refs
	}
	out := rowColumns(q)
	for c := range refs {
		all := true
		for _, a := range args {
			found := false
			for _, x := range a {
				found = found || x == c
			}
			all = all && found
		}
		if all {
			out[c] = true
		}
	}
	return out
}

// columnNames maps names as the parser wrote them to the table's column
// names; names the table does not declare (references refused them
// already) are left out.
func columnNames(t *catalog.Table, names map[string]bool) map[string]bool {
	out := make(map[string]bool, len(names))
	for n := range names {
		if c := t.Column(n); c != nil {
			out[c.Name] = true
		}
	}
	return out
}
