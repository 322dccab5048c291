package parser

import (
	"reflect"
	"strconv"

	"github.com/dolthub/vitess/go/vt/sqlparser"
)

// ORDER BY and LIMIT.

// limit parses LIMIT k, LIMIT 0, k and LIMIT k OFFSET 0. zero reports LIMIT 0.
func (b *selectBuilder) limit() (limit *int64, zero bool, err error) {
	l := b.sel.Limit
	if l == nil || l.Rowcount == nil {
		return nil, false, nil
	}
	n, ok := intLiteral(l.Rowcount)
	if !ok {
		return nil, false, Errorf(CodeNotSupported, "LIMIT takes a number of rows: LIMIT k")
	}
	if n == 0 {
		return &n, true, nil
	}
	if l.Offset != nil {
		if off, ok := intLiteral(l.Offset); !ok || off != 0 {
			return nil, false, Errorf(CodeNotSupported, "LIMIT with an offset is not supported: dpproxy returns the first k rows of the answer, write LIMIT %d (and raise k to see more)", n)
		}
	}
	return &n, false, nil
}

func intLiteral(e sqlparser.Expr) (int64, bool) {
	v, ok := unparen(e).(*sqlparser.SQLVal)
	if !ok || v.Type != sqlparser.IntVal {
		return 0, false
	}
	n, err := strconv.ParseInt(string(v.Val), 10, 64)
	return n, err == nil && n >= 0
}

func (b *selectBuilder) orderBy() ([]OrderItem, error) {
	var out []OrderItem
	for _, o := range b.sel.OrderBy {
		desc := o.Direction == sqlparser.DescScr
		x := unparen(o.Expr)
		if _, isNull := x.(*sqlparser.NullVal); isNull {
			continue // ORDER BY NULL: no ordering
		}
		if i, ok, err := b.position(x, "order clause"); ok {
			if err != nil {
				return nil, err
			}
			out = append(out, OrderItem{SelectIndex: i, Desc: desc})
			continue
		}
		if col, ok := x.(*sqlparser.ColName); ok && !isVariable(col) {
			if col.Qualifier.IsEmpty() {
				if i := b.byAlias(col.Name.String()); i >= 0 {
					out = append(out, OrderItem{SelectIndex: i, Desc: desc})
					continue
				}
			}
			c, err := b.column(col, "order clause")
			if err != nil {
				return nil, err
			}
			idx := -1
			for i, it := range b.items {
				if it.kind == itemColumn && it.Column == c {
					idx = i
					break
				}
			}
			if idx < 0 && col.Qualifier.IsEmpty() {
				// `COUNT(*)` in backquotes names an unaliased item.
				for i, it := range b.items {
					if it.kind != itemColumn && it.Alias == col.Name.String() {
						idx = i
						break
					}
				}
			}
			if idx >= 0 {
				out = append(out, OrderItem{SelectIndex: idx, Desc: desc})
			} else {
				out = append(out, OrderItem{SelectIndex: -1, Column: c, Desc: desc})
			}
			continue
		}
		agg, ok, err := b.aggregate(x)
		if ok {
			if err != nil {
				return nil, err
			}
			idx := -1
			for i, it := range b.items {
				if it.kind == itemAgg && it.err == nil && it.Expr == nil && sameAgg(it.SelectItem, agg) && it.Bar == agg.Bar {
					idx = i
					break
				}
			}
			if idx < 0 && agg.Agg == AggQuantile {
				return nil, Errorf(CodeNotSupported, "ORDER BY %s: to order by a quantile, select it and order by its alias or position", sqlparser.String(o.Expr))
			}
			if idx < 0 && agg.Bar != BarNone {
				return nil, Errorf(CodeNotSupported, "ORDER BY %s: to order by an error bar, select it and order by its alias or position", sqlparser.String(o.Expr))
			}
			if idx >= 0 {
				out = append(out, OrderItem{SelectIndex: idx, Desc: desc})
			} else {
				out = append(out, OrderItem{SelectIndex: -1, Agg: agg.Agg, Column: agg.Column, Arg: agg.Arg, Desc: desc})
			}
			continue
		}
		if hasAggregate(x) {
			ex, err := b.aggExpr(x)
			if err != nil {
				return nil, err
			}
			idx := -1
			for i, it := range b.items {
				if it.kind == itemAgg && it.Expr != nil && reflect.DeepEqual(it.Expr, ex) {
					idx = i
					break
				}
			}
			if idx >= 0 {
				out = append(out, OrderItem{SelectIndex: idx, Desc: desc})
			} else {
				out = append(out, OrderItem{SelectIndex: -1, Expr: ex, Desc: desc})
			}
			continue
		}
		if !hasColumn(x) {
			continue // a constant: no ordering
		}
		saved := b.clause
		b.clause = "order clause"
		key, err := b.expr(x, "order clause")
		b.clause = saved
		if err != nil {
			return nil, err
		}
		idx := -1
		for i, it := range b.items {
			if it.kind == itemKey && reflect.DeepEqual(it.Key, key) {
				idx = i
				break
			}
		}
		if idx >= 0 {
			out = append(out, OrderItem{SelectIndex: idx, Desc: desc})
		} else {
			out = append(out, OrderItem{SelectIndex: -1, Key: key, Desc: desc})
		}
	}
	return out, nil
}
