package parser

import (
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/dolthub/vitess/go/vt/sqlparser"
)

// havingHelp says what a HAVING clause may hold.
const havingHelp = "HAVING compares aggregates with numbers (HAVING COUNT(*) > 100, or HAVING n > 100 for an alias n) and tests group keys (HAVING sex = 'Male', HAVING decade >= 30), combined with AND, OR, NOT"

// having converts a HAVING clause; hasAgg reports that it names an
// aggregate. Conditions without aggregates are conditions on the group
// keys: their names resolve to the table's columns first, then to
// select-list aliases, as MySQL resolves names in HAVING.
func (b *selectBuilder) having() (p Pred, hasAgg bool, err error) {
	if b.sel.Having == nil || b.sel.Having.Expr == nil {
		return nil, false, nil
	}
	saved := b.clause
	b.clause = "having clause"
	defer func() { b.clause = saved }()
	p, err = b.havingPred(b.sel.Having.Expr, &hasAgg)
	return p, hasAgg, err
}

func (b *selectBuilder) havingPred(e sqlparser.Expr, hasAgg *bool) (Pred, error) {
	switch x := e.(type) {
	case *sqlparser.ParenExpr:
		return b.havingPred(x.Expr, hasAgg)
	case *sqlparser.AndExpr:
		l, err := b.havingPred(x.Left, hasAgg)
		if err != nil {
			return nil, err
		}
		r, err := b.havingPred(x.Right, hasAgg)
		if err != nil {
			return nil, err
		}
		return and(l, r), nil
	case *sqlparser.OrExpr:
		l, err := b.havingPred(x.Left, hasAgg)
		if err != nil {
			return nil, err
		}
		r, err := b.havingPred(x.Right, hasAgg)
		if err != nil {
			return nil, err
		}
		return or(l, r), nil
	case *sqlparser.NotExpr:
		p, err := b.havingPred(x.Expr, hasAgg)
		if err != nil {
			return nil, err
		}
		return not(p), nil
	case sqlparser.BoolVal:
		return Const{Value: bool(x)}, nil
	}
	if !b.aggish(e) {
		return b.pred(e)
	}
	*hasAgg = true
	switch x := e.(type) {
	case *sqlparser.ComparisonExpr:
		op, ok := compareOp(x.Operator)
		if !ok {
			return nil, Errorf(CodeNotSupported, "%s in HAVING is not supported: %s", strings.ToUpper(x.Operator), havingHelp)
		}
		if item, ok, err := b.aggRef(x.Left); ok || err != nil {
			if err != nil {
				return nil, err
			}
			v, err := number(x.Right)
			if err != nil {
				return nil, err
			}
			return AggCompare{Item: item, Op: op, Value: v}, nil
		}
		if item, ok, err := b.aggRef(x.Right); ok || err != nil {
			if err != nil {
				return nil, err
			}
			v, err := number(x.Left)
			if err != nil {
				return nil, err
			}
			return AggCompare{Item: item, Op: flip(op), Value: v}, nil
		}
	case *sqlparser.RangeCond:
		item, ok, err := b.aggRef(x.Left)
		if err != nil {
			return nil, err
		}
		if ok {
			lo, err := number(x.From)
			if err != nil {
				return nil, err
			}
			hi, err := number(x.To)
			if err != nil {
				return nil, err
			}
			p := and(AggCompare{Item: item, Op: OpGe, Value: lo}, AggCompare{Item: item, Op: OpLe, Value: hi})
			if x.Operator == sqlparser.NotBetweenStr {
				return not(p), nil
			}
			return p, nil
		}
	}
	return nil, Errorf(CodeNotSupported, "HAVING %s is not supported: %s", sqlparser.String(e), havingHelp)
}

// aggish reports whether a HAVING expression involves an aggregate: an
// aggregate call, or the alias (or written text) of a select item that is
// one.
func (b *selectBuilder) aggish(e sqlparser.Expr) bool {
	if hasAggregate(e) {
		return true
	}
	found := false
	_ = sqlparser.Walk(func(n sqlparser.SQLNode) (bool, error) {
		if c, ok := n.(*sqlparser.ColName); ok && c.Qualifier.IsEmpty() && !isVariable(c) {
			if _, ok := b.aggItem(c.Name.String()); ok {
				found = true
			}
		}
		return !found, nil
	}, e)
	return found
}

// aggItem finds the aggregate select item a name in HAVING refers to: its
// alias, or (`COUNT(*)` in backquotes) its text; a column of the table
// wins over an alias, as in MySQL.
func (b *selectBuilder) aggItem(name string) (item, bool) {
	if i := b.byAlias(name); i >= 0 && b.items[i].kind == itemAgg {
		if b.c.columns == nil || !b.c.columns(strings.ToLower(b.table.Name.String()), strings.ToLower(name)) {
			return b.items[i], true
		}
	}
	for _, it := range b.items {
		if it.kind == itemAgg && it.err == nil && it.Alias == name {
			return it, true
		}
	}
	return item{}, false
}

// aggRef resolves an aggregate in HAVING: written out (COUNT(*),
// SUM(x) / COUNT(*)) or by the alias of an aggregate select item.
func (b *selectBuilder) aggRef(e sqlparser.Expr) (SelectItem, bool, error) {
	x := unparen(e)
	if col, ok := x.(*sqlparser.ColName); ok && col.Qualifier.IsEmpty() {
		if it, ok := b.aggItem(col.Name.String()); ok {
			return it.SelectItem, it.err == nil, it.err
		}
		return SelectItem{}, false, nil
	}
	if !hasAggregate(x) {
		return SelectItem{}, false, nil
	}
	item, ok, err := b.aggregate(x)
	if ok {
		if err != nil {
			return SelectItem{}, true, err
		}
		item.Alias = sqlparser.String(x)
		for _, it := range b.items {
			if it.kind == itemAgg && it.err == nil && it.Expr == nil && sameAgg(it.SelectItem, item) && it.Bar == item.Bar {
				item.Alias = it.Alias
				break
			}
		}
		return item, true, nil
	}
	ex, err := b.aggExpr(x)
	if err != nil {
		return SelectItem{}, true, err
	}
	item = SelectItem{Expr: ex, Alias: sqlparser.String(x)}
	for _, it := range b.items {
		if it.kind == itemAgg && it.Expr != nil && reflect.DeepEqual(it.Expr, ex) {
			item.Alias = it.Alias
			break
		}
	}
	return item, true, nil
}

// sameAgg reports whether two items are the same aggregate of the same
// argument.
func sameAgg(a, b SelectItem) bool {
	return a.Agg == b.Agg && a.Column == b.Column && reflect.DeepEqual(a.Arg, b.Arg) && a.Quantile == b.Quantile
}

// number reads a numeric constant of HAVING ('5' and 5 alike).
func number(e sqlparser.Expr) (float64, error) {
	lit, kind, err := literal(e)
	if err != nil {
		return 0, err
	}
	if kind == litValue {
		if f, err := strconv.ParseFloat(strings.TrimSpace(lit.Text), 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return f, nil
		}
	}
	return 0, Errorf(CodeNotSupported, "HAVING compares an aggregate with a number (%s is not one): %s", sqlparser.String(e), havingHelp)
}
