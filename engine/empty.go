package engine

import (
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/parser"
)

// Statements answered without a measurement: empty by construction (LIMIT
// 0, WHERE 1 <> 1) and domain lists (the declared values).

// emptyResult answers a query that returns no row by construction with the
// columns it would have had.
func emptyResult(t *catalog.Table, q *parser.Query) (*Result, error) {
	res := &Result{}
	for _, it := range q.Select {
		if it.Column == "*" {
			for _, c := range t.Columns {
				res.Columns = append(res.Columns, Column{Name: c.Name, Type: columnType(c)})
			}
			continue
		}
		typ := TypeInt64
		if it.Column != "" {
			c := t.Column(it.Column)
			if c == nil {
				return nil, parser.Errorf(parser.CodeBadField, "Unknown column '%s' in 'field list'", it.Column)
			}
			if it.Agg == parser.AggNone {
				typ = columnType(c)
			} else if it.Agg != parser.AggCountCol {
				typ = TypeFloat64
			}
		}
		res.Columns = append(res.Columns, Column{Name: it.Alias, Type: typ})
	}
	// An aggregate without GROUP BY over a constant-false WHERE has one row in
	// MySQL: COUNT is 0 and SUM/AVG are NULL, whatever the data, so it is exact and free.
	if len(q.GroupBy) == 0 && len(q.GroupExprs) == 0 && (q.Limit == nil || *q.Limit > 0) {
		var row []any
		for _, it := range q.Select {
			switch it.Agg {
			case parser.AggCount, parser.AggCountCol:
				row = append(row, int64(0))
			case parser.AggNone:
				return res, nil
			default:
				row = append(row, nil)
			}
		}
		res.Rows = [][]any{row}
	}
	return res, nil
}

// domainList answers SELECT c FROM t GROUP BY c (or GROUP BY an expression
// of columns) with the declared domain, or its image under the keys:
// public, so free. Compiled like any query (the groups the domain has),
// assembled with nothing measured.
func domainList(t *catalog.Table, st *parser.Statement) (*Result, error) {
	cp := *st
	cp.Kind = parser.KindAggregate
	w, err := compile.Compile(t, []*parser.Statement{&cp})
	if err != nil {
		return nil, err
	}
	return assemble(w, w.Queries[0], nil, nil), nil
}
