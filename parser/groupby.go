package parser

import (
	"reflect"

	"github.com/dolthub/vitess/go/vt/sqlparser"
)

// GROUP BY keys, and which select items and conditions are functions of
// them.

// keyDependent reports whether e is a function of q's GROUP BY keys: every
// column it reads is a plain GROUP BY column or lies inside a subexpression
// equal to a GROUP BY expression (MySQL's rule for select-list, HAVING and
// ORDER BY expressions under ONLY_FULL_GROUP_BY). col names the first
// column that is not.
func (b *selectBuilder) keyDependent(e Expr, q *Query) (col string, ok bool) {
	for _, g := range q.GroupExprs {
		if reflect.DeepEqual(g.Expr, e) {
			return "", true
		}
	}
	if c, isCol := e.(Col); isCol {
		for _, g := range q.GroupBy {
			if g == c.Name {
				return "", true
			}
		}
		return c.Name, false
	}
	bad := ""
	forChildren(e, func(x Expr) {
		if bad == "" {
			if c, ok := b.keyDependent(x, q); !ok {
				bad = c
			}
		}
	}, func(p Pred) {
		if bad == "" {
			if c, ok := b.predKeyDependent(p, q); !ok {
				bad = c
			}
		}
	})
	return bad, bad == ""
}

func (b *selectBuilder) predKeyDependent(p Pred, q *Query) (string, bool) {
	bad := ""
	check := func(es ...Expr) {
		for _, e := range es {
			if bad == "" && e != nil {
				if c, ok := b.keyDependent(e, q); !ok {
					bad = c
				}
			}
		}
	}
	switch p := p.(type) {
	case And:
		for _, t := range p.Terms {
			check(Cond{P: t})
		}
	case Or:
		for _, t := range p.Terms {
			check(Cond{P: t})
		}
	case Not:
		check(Cond{P: p.Term})
	case Compare:
		check(Col{Name: p.Column})
	case In:
		check(Col{Name: p.Column})
	case Between:
		check(Col{Name: p.Column})
	case IsNull:
		check(Col{Name: p.Column})
	case ExprCompare:
		check(p.Left, p.Right)
	case ExprIn:
		check(p.X)
		check(p.List...)
	case ExprBetween:
		check(p.X, p.Lo, p.Hi)
	case ExprIsNull:
		check(p.X)
	case Like:
		check(p.X, p.Pattern)
	case Regexp:
		check(p.X, p.Pattern)
	case Truth:
		check(p.X)
	}
	return bad, bad == ""
}

// checkKeyConditions checks that HAVING's conditions without aggregates
// read only GROUP BY keys.
func (b *selectBuilder) checkKeyConditions(p Pred, q *Query) error {
	switch p := p.(type) {
	case nil, Const, AggCompare:
		return nil
	case And:
		for _, t := range p.Terms {
			if err := b.checkKeyConditions(t, q); err != nil {
				return err
			}
		}
		return nil
	case Or:
		for _, t := range p.Terms {
			if err := b.checkKeyConditions(t, q); err != nil {
				return err
			}
		}
		return nil
	case Not:
		return b.checkKeyConditions(p.Term, q)
	}
	if col, ok := b.predKeyDependent(p, q); !ok {
		return Errorf(CodeDPRefused, "HAVING reads column '%s', which is not a GROUP BY key: filter rows with WHERE, or group by it", col)
	}
	return nil
}

// forChildren calls fe on each direct subexpression of e and fp on each
// direct predicate.
func forChildren(e Expr, fe func(Expr), fp func(Pred)) {
	switch e := e.(type) {
	case Arith:
		fe(e.Left)
		fe(e.Right)
	case Neg:
		fe(e.X)
	case Call:
		for _, a := range e.Args {
			fe(a)
		}
	case Case:
		if e.Operand != nil {
			fe(e.Operand)
		}
		for _, w := range e.Whens {
			if w.Cond != nil {
				fp(w.Cond)
			}
			if w.Value != nil {
				fe(w.Value)
			}
			fe(w.Then)
		}
		if e.Else != nil {
			fe(e.Else)
		}
	case Cond:
		fp(e.P)
	case Lookup:
		fe(e.Key)
	}
}

// groupBy resolves the GROUP BY keys: plain columns, and expressions of
// columns. A name is a column of the table first, then a select-list alias
// (MySQL's order for GROUP BY); a position is a select item.
func (b *selectBuilder) groupBy() ([]string, []GroupExpr, error) {
	var plain []string
	var exprs []GroupExpr
	pos := 0
	add := func(e Expr) {
		if c, ok := e.(Col); ok {
			for _, g := range plain {
				if g == c.Name {
					return
				}
			}
			plain = append(plain, c.Name)
			pos++
			return
		}
		for _, g := range exprs {
			if reflect.DeepEqual(g.Expr, e) {
				return
			}
		}
		exprs = append(exprs, GroupExpr{Pos: pos, Expr: e})
		pos++
	}
	fromItem := func(it item) error {
		switch it.kind {
		case itemColumn:
			add(Col{Name: it.Column})
		case itemKey:
			add(it.Key)
		default:
			return Errorf(CodeNotSupported, "Can't group on '%s': GROUP BY takes columns of the table and expressions of them", it.Alias)
		}
		return nil
	}
	for _, g := range b.sel.GroupBy {
		x := unparen(g)
		if i, ok, err := b.position(x, "group statement"); ok {
			if err != nil {
				return nil, nil, err
			}
			if err := fromItem(b.items[i]); err != nil {
				return nil, nil, err
			}
			continue
		}
		if col, ok := x.(*sqlparser.ColName); ok && !isVariable(col) {
			if col.Qualifier.IsEmpty() && !b.isColumn(col.Name.String()) {
				if i := b.byAlias(col.Name.String()); i >= 0 {
					if err := fromItem(b.items[i]); err != nil {
						return nil, nil, err
					}
					continue
				}
			}
			c, err := b.column(col, "group statement")
			if err != nil {
				return nil, nil, err
			}
			add(Col{Name: c})
			continue
		}
		if hasAggregate(x) {
			return nil, nil, Errorf(CodeNotSupported, "Can't group on '%s': GROUP BY takes columns of the table and expressions of them, not aggregates", sqlparser.String(g))
		}
		if !hasColumn(x) {
			return nil, nil, Errorf(CodeNotSupported, "GROUP BY %s groups by a constant: remove it (a constant key does not split the groups)", sqlparser.String(g))
		}
		saved := b.clause
		b.clause = "group statement"
		e, err := b.expr(x, "group statement")
		b.clause = saved
		if err != nil {
			return nil, nil, err
		}
		add(e)
	}
	return plain, exprs, nil
}
