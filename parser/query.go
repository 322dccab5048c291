package parser

import (
	"reflect"
	"strconv"
	"strings"

	"github.com/dolthub/vitess/go/vt/sqlparser"
)

// rowsRefusal is the answer to anything that would return rows.
const rowsRefusal = "dpproxy answers aggregate queries only: SELECT COUNT(*) ... [GROUP BY ...]; raw rows are never returned"

// selectHelp says what a select list may hold.
const selectHelp = "the select list takes GROUP BY keys (columns or expressions of columns), the aggregates COUNT(*), COUNT(x), SUM(x), AVG(x), VARIANCE(x), VAR_POP, VAR_SAMP, STD, STDDEV, STDDEV_POP, STDDEV_SAMP of columns or expressions x, each optionally wrapped in DP_STDERR(), DP_CI_LOW() or DP_CI_HIGH(), and numeric functions of aggregates and constants (POWER(AVG(x), 2), COUNT(*) / 2, 3)"

type itemKind int

const (
	itemColumn itemKind = iota // a plain column
	itemAgg                    // a supported aggregate (maybe with an error bar), or post-processing over aggregates
	itemStar                   // * or t.*
	itemOther                  // anything else: refused aggregates and functions
	itemKey                    // an expression of columns without aggregates: a group key, or a function of the keys
	itemConst                  // a constant (3, 'x', NULL, 2 * PI()): post-processing in an aggregate query
)

// item is one parsed select expression.
type item struct {
	SelectItem
	kind     itemKind
	explicit bool   // the alias was written (AS x)
	err      error  // why the item cannot be part of an answered query
	text     string // the expression as written, for messages
}

type selectBuilder struct {
	c      *classifier
	sel    *sqlparser.Select
	table  sqlparser.TableName
	alias  string    // table alias as written, "" if none
	joins  []*joined // public tables joined to the table, in order
	items  []item
	clause string // the clause being converted, for 1054 messages and name resolution ("where clause", "having clause")
}

func unparen(e sqlparser.Expr) sqlparser.Expr {
	for {
		p, ok := e.(*sqlparser.ParenExpr)
		if !ok {
			return e
		}
		e = p.Expr
	}
}

// selectStatement classifies a SELECT, UNION... and builds its Query.
func (c *classifier) selectStatement(s sqlparser.SelectStatement) (StatementKind, *Query, error) {
	_, prot := c.references(s)
	if len(prot) == 0 {
		return KindPassthrough, nil, nil
	}
	s = unwrapSelect(s)
	sel, ok := s.(*sqlparser.Select)
	if !ok {
		if _, isSetOp := s.(*sqlparser.SetOp); isSetOp {
			return 0, nil, Errorf(CodeDPRefused, "UNION, INTERSECT and EXCEPT over protected tables are not supported: send each SELECT as its own statement (the statements of one request share one measurement)")
		}
		return 0, nil, refuseSubquery(prot[0])
	}
	if sel.With != nil || hasSubquery(sel) {
		return 0, nil, refuseSubquery(prot[0])
	}
	uj, err := c.unitJoin(sel, prot[0])
	if err != nil {
		return 0, nil, err
	}
	var tn sqlparser.TableName
	var ate *sqlparser.AliasedTableExpr
	var steps []joinStep
	if len(sel.From) == 1 {
		switch a := sel.From[0].(type) {
		case *sqlparser.AliasedTableExpr:
			if t, ok := a.Expr.(sqlparser.TableName); ok && c.isProtected(t) {
				tn, ate = t, a
			}
		case *sqlparser.JoinTableExpr:
			base, js, err := c.fromJoins(a, prot[0])
			if err != nil {
				return 0, nil, err
			}
			tn, ate, steps = base.name, base.ate, js
		}
	}
	if ate == nil {
		p := strings.ToLower(prot[0].Name.String())
		if len(prot) > 1 {
			return 0, nil, Errorf(CodeDPRefused, "joins between protected tables are not supported: a joined row would mix the rows of two tables, so no per-row privacy bound holds; query each protected table on its own, or join it to a public table (%s)", joinHelp)
		}
		return 0, nil, Errorf(CodeDPRefused, "this FROM clause is not supported with a protected table: dpproxy answers aggregate queries over one protected table, e.g. SELECT a, COUNT(*) FROM %s WHERE ... GROUP BY a, optionally joined to public tables with JOIN ... ON (%s); a list of tables (FROM a, b) is written as a JOIN", p, joinHelp)
	}
	b := &selectBuilder{c: c, sel: sel, table: tn, alias: ate.As.String(), clause: "where clause"}
	if err := b.resolveJoins(steps); err != nil {
		return 0, nil, err
	}
	// MySQL resolves names before it judges anything else.
	if err := b.checkNames(); err != nil {
		return 0, nil, err
	}
	if sel.Into != nil {
		return 0, nil, Errorf(CodeDPRefused, "SELECT ... INTO is not supported over protected tables; %s", rowsRefusal)
	}
	if len(ate.Partitions) > 0 {
		return 0, nil, Errorf(CodeNotSupported, "PARTITION selection is not supported over protected tables: select rows with WHERE over domain columns")
	}
	if ate.AsOf != nil {
		return 0, nil, Errorf(CodeNotSupported, "AS OF is not supported over protected tables; query the table as it is")
	}
	if len(sel.Window) > 0 {
		return 0, nil, Errorf(CodeNotSupported, "window functions are not supported; %s", selectHelp)
	}
	kind, q, err := b.build()
	if err != nil {
		return 0, nil, err
	}
	if kind == KindDomainList && len(b.joins) > 0 {
		return 0, nil, Errorf(CodeNotSupported, "a domain list over a join is not supported: the public table's values are public, read them directly (SELECT DISTINCT d.region FROM countries d), or count per value with SELECT d.region, COUNT(*) ... GROUP BY d.region")
	}
	b.rewriteJoins(q)
	if uj != nil {
		q.Table, q.UnitJoin = uj.Name(), uj
	}
	return kind, q, nil
}

// checkNames resolves every column reference of the query block in MySQL's
// order — select list, WHERE, GROUP BY, HAVING, ORDER BY — and returns
// MySQL's 1054 for the first that names no column: a qualifier that is not
// the table, or (when the classifier has Columns) a column the table does
// not have. GROUP BY, HAVING and ORDER BY may also name a select-list item
// (its alias, or the expression as written), and take positions (GROUP BY
// 1). Nothing else is judged here, so an unknown column wins over any
// refusal, as in MySQL.
func (b *selectBuilder) checkNames() error {
	sel := b.sel
	var itemNames []string
	for _, se := range sel.SelectExprs {
		if _, ok := se.(*sqlparser.AliasedExpr); ok {
			itemNames = append(itemNames, b.item(se).Alias)
		}
	}
	isItem := func(name string) bool {
		for _, n := range itemNames {
			if strings.EqualFold(n, name) {
				return true
			}
		}
		return false
	}
	// check walks an expression; items says whether an unqualified name
	// may be a select-list item.
	check := func(node sqlparser.SQLNode, clause string, items bool) error {
		return sqlparser.Walk(func(n sqlparser.SQLNode) (bool, error) {
			switch x := n.(type) {
			case *sqlparser.StarExpr:
				if !x.TableName.IsEmpty() && !b.qualifierOK(x.TableName) && !b.qualifiesAJoin(x.TableName) {
					return false, Errorf(CodeBadField, "Unknown column '%s.*' in '%s'", x.TableName.Name.String(), clause)
				}
			case *sqlparser.FuncExpr:
				// COUNT(DISTINCT c) of a private column: compile answers it
				// for the table's privacy unit (the number of units) and
				// refuses it for any other column.
				if c := countDistinctColumn(x); c != nil {
					resolved, err := b.column(c, clause)
					if err != nil {
						return false, err
					}
					if b.c.private != nil && !b.dimName(resolved) && b.c.private(strings.ToLower(b.table.Name.String()), resolved) {
						return false, nil
					}
					return false, b.checkColumn(c, resolved, clause)
				}
			case *sqlparser.ColName:
				if isVariable(x) {
					return false, nil
				}
				resolved, err := b.column(x, clause)
				if err != nil {
					return false, err
				}
				name := x.Name.String()
				if items && x.Qualifier.IsEmpty() && isItem(name) && !b.isPrivate(name) {
					return false, nil
				}
				return false, b.checkColumn(x, resolved, clause)
			case *sqlparser.Subquery:
				return false, nil // refused elsewhere; its names are its own
			}
			return true, nil
		}, node)
	}
	for _, se := range sel.SelectExprs {
		if err := check(se, "field list", false); err != nil {
			return err
		}
	}
	if sel.Where != nil && sel.Where.Expr != nil {
		if err := check(sel.Where.Expr, "where clause", false); err != nil {
			return err
		}
	}
	positions := func(e sqlparser.Expr, clause string) error {
		if v, ok := unparen(e).(*sqlparser.SQLVal); ok && v.Type == sqlparser.IntVal {
			if n, err := strconv.Atoi(string(v.Val)); err != nil || n < 1 || n > len(sel.SelectExprs) {
				return Errorf(CodeBadField, "Unknown column '%s' in '%s'", v.Val, clause)
			}
		}
		return nil
	}
	for _, g := range sel.GroupBy {
		if err := positions(g, "group statement"); err != nil {
			return err
		}
		if err := check(g, "group statement", true); err != nil {
			return err
		}
	}
	if sel.Having != nil && sel.Having.Expr != nil {
		if err := check(sel.Having.Expr, "having clause", true); err != nil {
			return err
		}
	}
	for _, o := range sel.OrderBy {
		if err := positions(o.Expr, "order clause"); err != nil {
			return err
		}
		if err := check(o.Expr, "order clause", true); err != nil {
			return err
		}
	}
	return nil
}

// colText is a column reference as written, with its qualifiers.
func colText(c *sqlparser.ColName) string {
	full := c.Name.String()
	if !c.Qualifier.IsEmpty() {
		full = c.Qualifier.Name.String() + "." + full
		if !c.Qualifier.DbQualifier.IsEmpty() {
			full = c.Qualifier.DbQualifier.String() + "." + full
		}
	}
	return full
}

func (b *selectBuilder) build() (StatementKind, *Query, error) {
	sel := b.sel
	q := &Query{
		Schema: b.table.DbQualifier.String(),
		Table:  strings.ToLower(b.table.Name.String()),
	}

	limit, zero, limitErr := b.limit()
	q.Limit = limit

	for _, se := range sel.SelectExprs {
		it := b.item(se)
		if isBadField(it.err) {
			return 0, nil, it.err
		}
		b.items = append(b.items, it)
	}

	var where Pred
	var whereErr error
	if sel.Where != nil && sel.Where.Expr != nil {
		where, whereErr = b.pred(sel.Where.Expr)
	}
	if isBadField(whereErr) {
		return 0, nil, whereErr
	}
	empty := zero || (whereErr == nil && where == Const{Value: false})

	if empty {
		for _, it := range b.items {
			si := it.SelectItem
			if it.err != nil || it.kind == itemOther || it.kind == itemConst || it.kind == itemKey {
				si = SelectItem{Alias: it.Alias}
			}
			q.Select = append(q.Select, si)
		}
		if whereErr == nil {
			q.Where = where
		}
		if g, ge, err := b.groupBy(); err == nil {
			q.GroupBy, q.GroupExprs = g, ge
		}
		if h, _, err := b.having(); err == nil {
			q.Having = h
		}
		if o, err := b.orderBy(); err == nil {
			q.OrderBy = o
		}
		return KindEmpty, q, nil
	}

	q.Where = where
	hasAgg, hasStar := false, false
	for _, it := range b.items {
		switch it.kind {
		case itemAgg:
			hasAgg = true
		case itemStar:
			hasStar = true
		}
	}
	for _, it := range b.items {
		if it.err != nil && it.kind == itemAgg {
			return 0, nil, it.err
		}
	}
	if hasStar {
		return 0, nil, Errorf(CodeDPRefused, "SELECT * is refused: %s", rowsRefusal)
	}
	for _, it := range b.items {
		if it.err != nil {
			return 0, nil, it.err
		}
	}
	if limitErr != nil {
		return 0, nil, limitErr
	}
	if whereErr != nil {
		return 0, nil, whereErr
	}
	groupBy, groupExprs, err := b.groupBy()
	if err != nil {
		return 0, nil, err
	}
	q.GroupBy, q.GroupExprs = groupBy, groupExprs
	having, havingAgg, err := b.having()
	if err != nil {
		return 0, nil, err
	}
	q.Having = having
	orderBy, err := b.orderBy()
	if err != nil {
		return 0, nil, err
	}
	q.OrderBy = orderBy
	for _, o := range orderBy {
		if o.SelectIndex < 0 && (o.Agg != AggNone || o.Expr != nil) {
			hasAgg = true
		}
	}
	hasAgg = hasAgg || havingAgg
	for _, it := range b.items {
		q.Select = append(q.Select, it.SelectItem)
	}
	inGroup := func(col string) bool {
		for _, g := range q.GroupBy {
			if g == col {
				return true
			}
		}
		return false
	}

	if hasAgg {
		for _, it := range b.items {
			switch it.kind {
			case itemOther:
				return 0, nil, Errorf(CodeNotSupported, "%s is not supported in the select list: %s", it.text, selectHelp)
			case itemColumn:
				if !inGroup(it.Column) {
					return 0, nil, Errorf(CodeDPRefused, "column '%s' must appear in GROUP BY: dpproxy returns aggregates per group, never row values; write SELECT %s, COUNT(*) FROM %s GROUP BY %s", it.Column, it.Column, q.Table, it.Column)
				}
			case itemKey:
				if col, ok := b.keyDependent(it.Key, q); !ok {
					return 0, nil, Errorf(CodeDPRefused, "%s is not a GROUP BY key (column '%s' is not grouped): dpproxy returns aggregates per group, never row values; add it to GROUP BY (GROUP BY %s) or aggregate it (SUM(%s))", it.text, col, it.text, it.text)
				}
			}
		}
		if err := b.checkKeyConditions(q.Having, q); err != nil {
			return 0, nil, err
		}
		for _, o := range q.OrderBy {
			if o.Key != nil {
				if col, ok := b.keyDependent(o.Key, q); !ok {
					return 0, nil, Errorf(CodeDPRefused, "ORDER BY %s: column '%s' is not grouped; order by GROUP BY keys, aliases, positions or aggregates", sqlparser.String(b.sel.OrderBy[0].Expr), col)
				}
			}
		}
		return KindAggregate, q, nil
	}

	// No aggregate anywhere: a domain list, or row access.
	if len(q.GroupBy) == 0 && len(q.GroupExprs) == 0 && !sel.QueryOpts.Distinct {
		return 0, nil, Errorf(CodeDPRefused, "%s", rowsRefusal)
	}
	for _, it := range b.items {
		if it.kind == itemOther || it.kind == itemConst {
			return 0, nil, Errorf(CodeNotSupported, "%s is not supported here: a domain list selects its GROUP BY keys only (SELECT c FROM %s GROUP BY c); to count, write SELECT c, COUNT(*) FROM %s GROUP BY c", it.text, q.Table, q.Table)
		}
	}
	if len(q.GroupBy) == 0 && len(q.GroupExprs) == 0 {
		for _, it := range b.items {
			if it.kind == itemKey {
				q.GroupExprs = append(q.GroupExprs, GroupExpr{Pos: len(q.GroupBy) + len(q.GroupExprs), Expr: it.Key})
			} else if !inGroup(it.Column) {
				q.GroupBy = append(q.GroupBy, it.Column)
			}
		}
	}
	selectedKey := func(e Expr) bool {
		for _, it := range b.items {
			if it.kind == itemKey && reflect.DeepEqual(it.Key, e) {
				return true
			}
		}
		return false
	}
	for _, it := range b.items {
		if it.kind == itemColumn && !inGroup(it.Column) {
			return 0, nil, Errorf(CodeDPRefused, "column '%s' must appear in GROUP BY: dpproxy returns the declared values of grouped columns, never row values; write SELECT %s FROM %s GROUP BY %s", it.Column, it.Column, q.Table, it.Column)
		}
		if it.kind == itemKey {
			if col, ok := b.keyDependent(it.Key, q); !ok {
				return 0, nil, Errorf(CodeDPRefused, "%s is not a GROUP BY key (column '%s' is not grouped): dpproxy returns the declared domain of its GROUP BY keys, never row values", it.text, col)
			}
		}
	}
	for _, g := range q.GroupBy {
		found := false
		for _, it := range b.items {
			found = found || (it.kind == itemColumn && it.Column == g)
		}
		if !found {
			return 0, nil, Errorf(CodeNotSupported, "a domain list selects its GROUP BY columns: add %s to the select list, or count rows with SELECT %s, COUNT(*) FROM %s GROUP BY %s", g, g, q.Table, g)
		}
	}
	for _, g := range q.GroupExprs {
		if !selectedKey(g.Expr) {
			return 0, nil, Errorf(CodeNotSupported, "a domain list selects its GROUP BY keys: add the GROUP BY expression to the select list, or count rows with SELECT ..., COUNT(*) FROM %s GROUP BY ...", q.Table)
		}
	}
	if c, ok := q.Where.(Const); q.Where != nil && !(ok && c.Value) {
		return 0, nil, Errorf(CodeDPRefused, "a domain list (SELECT c FROM %s GROUP BY c) returns the declared domain, which does not depend on the data, and takes no WHERE; to see which values occur, count them: SELECT c, COUNT(*) FROM %s WHERE ... GROUP BY c", q.Table, q.Table)
	}
	q.Where = nil
	if q.Having != nil {
		return 0, nil, Errorf(CodeDPRefused, "a domain list (SELECT c FROM %s GROUP BY c) returns the declared domain and takes no HAVING; filter on counts with SELECT c, COUNT(*) FROM %s GROUP BY c HAVING COUNT(*) > n", q.Table, q.Table)
	}
	for _, o := range q.OrderBy {
		if o.SelectIndex < 0 {
			return 0, nil, Errorf(CodeNotSupported, "ORDER BY %s: a domain list is ordered by its selected columns (ORDER BY c ASC|DESC), or by COUNT(*) for the top values", o.Column)
		}
	}
	return KindDomainList, q, nil
}

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

func isBadField(err error) bool {
	e, ok := err.(*Error)
	return ok && e.Code == CodeBadField
}

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

// item parses one select expression.
func (b *selectBuilder) item(se sqlparser.SelectExpr) item {
	switch e := se.(type) {
	case *sqlparser.StarExpr:
		it := item{SelectItem: SelectItem{Column: "*", Alias: "*"}, kind: itemStar, text: "*"}
		if !e.TableName.IsEmpty() {
			it.text = e.TableName.Name.String() + ".*"
			if !b.qualifierOK(e.TableName) && !b.qualifiesAJoin(e.TableName) {
				it.err = Errorf(CodeBadField, "Unknown column '%s' in 'field list'", it.text)
			}
		}
		return it
	case *sqlparser.AliasedExpr:
		var it item
		x := unparen(e.Expr)
		it.text = b.c.exprName(e)
		it.Alias = it.text
		if !e.As.IsEmpty() {
			it.Alias, it.explicit = e.As.String(), true
		}
		if col, ok := x.(*sqlparser.ColName); ok && !isVariable(col) {
			it.kind = itemColumn
			it.Column, it.err = b.column(col, "field list")
			return it
		}
		if agg, ok, err := b.aggregate(x); ok {
			it.kind, it.err = itemAgg, err
			if err == nil {
				it.Agg, it.Column, it.Arg, it.Bar, it.Quantile = agg.Agg, agg.Column, agg.Arg, agg.Bar, agg.Quantile
			}
			return it
		}
		if hasAggregate(x) {
			expr, err := b.aggExpr(x)
			if err == nil {
				it.kind, it.Expr = itemAgg, expr
				return it
			}
			it.kind, it.err = itemOther, err
			return it
		}
		if !hasColumn(x) {
			// A constant: post-processing in an aggregate query.
			expr, err := b.aggExpr(x)
			if err == nil {
				it.kind, it.Expr = itemConst, expr
				return it
			}
			if _, isVar := x.(*sqlparser.ColName); isVar {
				it.kind, it.err = itemOther, Errorf(CodeNotSupported, "variables (%s) are not supported in the select list of a DP query: %s", sqlparser.String(x), selectHelp)
				return it
			}
			it.kind, it.err = itemOther, err
			return it
		}
		key, err := b.expr(x, "field list")
		if err != nil {
			it.kind, it.err = itemOther, err
			return it
		}
		if c, ok := key.(Col); ok {
			it.kind, it.Column = itemColumn, c.Name
			return it
		}
		it.kind, it.Key = itemKey, key
		return it
	default:
		return item{kind: itemOther, text: sqlparser.String(se), SelectItem: SelectItem{Alias: sqlparser.String(se)},
			err: Errorf(CodeNotSupported, "'%s' is not supported: %s", sqlparser.String(se), selectHelp)}
	}
}

// hasColumn reports whether e reads a column of the table.
func hasColumn(e sqlparser.Expr) bool {
	found := false
	_ = sqlparser.Walk(func(n sqlparser.SQLNode) (bool, error) {
		if c, ok := n.(*sqlparser.ColName); ok && !isVariable(c) {
			found = true
		}
		return !found, nil
	}, e)
	return found
}

// aggExpr parses post-processing over aggregates and constants: + - * /
// DIV %, unary minus, parentheses, numeric functions, numbers, strings and
// NULL.
func (b *selectBuilder) aggExpr(e sqlparser.Expr) (*AggExpr, error) {
	e = unparen(e)
	unsupported := Errorf(CodeNotSupported, "'%s': expressions over aggregates take + - * / DIV %% of aggregates (COUNT, SUM, AVG, VARIANCE, STDDEV ...), numbers and the functions %s; %s", sqlparser.String(e), funcNames(postFuncs), selectHelp)
	switch x := e.(type) {
	case *sqlparser.BinaryExpr:
		var op byte
		switch x.Operator {
		case sqlparser.PlusStr, sqlparser.MinusStr, sqlparser.MultStr, sqlparser.DivStr, sqlparser.ModStr:
			op = x.Operator[0]
		case sqlparser.IntDivStr:
			op = 'd'
		default:
			return nil, unsupported
		}
		l, err := b.aggExpr(x.Left)
		if err != nil {
			return nil, err
		}
		r, err := b.aggExpr(x.Right)
		if err != nil {
			return nil, err
		}
		return &AggExpr{Op: op, Left: l, Right: r}, nil
	case *sqlparser.UnaryExpr:
		switch x.Operator {
		case sqlparser.UMinusStr:
			inner, err := b.aggExpr(x.Expr)
			if err != nil {
				return nil, err
			}
			return &AggExpr{Op: '-', Left: &AggExpr{Number: 0}, Right: inner}, nil
		case sqlparser.UPlusStr:
			return b.aggExpr(x.Expr)
		}
		if lit, kind, err := literal(x); err == nil && kind == litValue && lit.Quoted {
			return &AggExpr{Str: lit.Text, IsStr: true}, nil
		}
		return nil, unsupported
	case *sqlparser.SQLVal:
		switch x.Type {
		case sqlparser.IntVal, sqlparser.FloatVal:
			f, err := strconv.ParseFloat(string(x.Val), 64)
			if err != nil {
				return nil, unsupported
			}
			return &AggExpr{Number: f}, nil
		case sqlparser.StrVal:
			return &AggExpr{Str: string(x.Val), IsStr: true}, nil
		}
		return nil, unsupported
	case sqlparser.BoolVal:
		if x {
			return &AggExpr{Number: 1}, nil
		}
		return &AggExpr{Number: 0}, nil
	case *sqlparser.NullVal:
		return &AggExpr{Null: true}, nil
	case *sqlparser.FuncExpr:
		name := x.Name.Lowered()
		if spec, ok := postFuncs[name]; ok && x.Qualifier.IsEmpty() && !x.Distinct && x.Over == nil {
			if len(x.Exprs) < spec.min || (spec.max >= 0 && len(x.Exprs) > spec.max) {
				return nil, Errorf(CodeNotSupported, "Incorrect parameter count in the call to native function '%s'", strings.ToUpper(name))
			}
			out := &AggExpr{Func: spec.name}
			for _, se := range x.Exprs {
				a, ok := se.(*sqlparser.AliasedExpr)
				if !ok {
					return nil, unsupported
				}
				arg, err := b.aggExpr(a.Expr)
				if err != nil {
					return nil, err
				}
				out.Args = append(out.Args, arg)
			}
			return out, nil
		}
		if _, scalar := scalarFuncs[name]; scalar && !sqlparser.Aggregates[name] {
			return nil, Errorf(CodeNotSupported, "%s in the select list of a DP query: only aggregates, GROUP BY keys and numeric functions of them are computed there; group by it if it reads columns, or write its value as a literal", sqlparser.String(x))
		}
		if !sqlparser.Aggregates[name] && barOf(name) == BarNone && name != "any_value" {
			return nil, refuseFunc(name, sqlparser.String(x))
		}
	case *sqlparser.ColName:
		if isVariable(x) {
			return nil, Errorf(CodeNotSupported, "variables (%s) are not supported in the select list of a DP query: %s", sqlparser.String(x), selectHelp)
		}
		return nil, Errorf(CodeNotSupported, "'%s': a column inside an expression over aggregates is not supported; select the GROUP BY key on its own, or aggregate an expression of it (SUM(%s * 2))", sqlparser.String(e), sqlparser.String(x))
	}
	agg, ok, err := b.aggregate(e)
	if !ok {
		return nil, unsupported
	}
	if err != nil {
		return nil, err
	}
	if agg.Bar != BarNone {
		return nil, Errorf(CodeNotSupported, "error bars of expressions are not supported: select DP_STDERR of each aggregate")
	}
	return &AggExpr{Leaf: &SelectItem{Agg: agg.Agg, Column: agg.Column, Arg: agg.Arg, Quantile: agg.Quantile}}, nil
}

// hasAggregate reports whether an aggregate call occurs anywhere in e.
// trimQuotes strips the quotes of a select expression that is one quoted
// string, as MySQL does when it names the column ('abc' is named abc).
func trimQuotes(s string) string {
	if len(s) < 2 || s[0] != s[len(s)-1] || (s[0] != '\'' && s[0] != '"' && s[0] != '`') {
		return s
	}
	t := lex(s)
	if len(t) != 1 || t[0].start != 0 || t[0].end != len(s) {
		return s
	}
	return t[0].text
}

func hasAggregate(e sqlparser.Expr) bool {
	found := false
	_ = sqlparser.Walk(func(n sqlparser.SQLNode) (bool, error) {
		switch f := n.(type) {
		case *sqlparser.FuncExpr:
			name := f.Name.Lowered()
			if sqlparser.Aggregates[name] || barOf(name) != BarNone || name == "dp_quantile" || name == "dp_median" {
				found = true
			}
		case *sqlparser.GroupConcatExpr:
			found = true
		}
		return !found, nil
	}, e)
	return found
}

func isVariable(c *sqlparser.ColName) bool {
	return c.Qualifier.IsEmpty() && strings.HasPrefix(c.Name.String(), "@")
}

func barOf(name string) ErrorBar {
	switch name {
	case "dp_stderr":
		return BarStderr
	case "dp_ci_low":
		return BarCILow
	case "dp_ci_high":
		return BarCIHigh
	}
	return BarNone
}

// aggregate recognises an aggregate call (or an error bar around one). ok
// reports that e is an aggregate call at all; err that it is one dpproxy
// does not answer.
func (b *selectBuilder) aggregate(e sqlparser.Expr) (SelectItem, bool, error) {
	switch f := e.(type) {
	case *sqlparser.GroupConcatExpr:
		return SelectItem{}, true, Errorf(CodeDPRefused, "GROUP_CONCAT is refused: it returns row values; %s", rowsRefusal)
	case *sqlparser.FuncExpr:
		if !f.Qualifier.IsEmpty() {
			return SelectItem{}, false, nil
		}
		name := f.Name.Lowered()
		upper := strings.ToUpper(name)
		if bar := barOf(name); bar != BarNone {
			usage := Errorf(CodeNotSupported, "%s takes one aggregate: %s(COUNT(*)), %s(SUM(x)), %s(AVG(x)), %s(COUNT(x)) or %s(STDDEV(x))", upper, upper, upper, upper, upper, upper)
			if len(f.Exprs) != 1 || f.Distinct || f.Over != nil {
				return SelectItem{}, true, usage
			}
			arg, ok := f.Exprs[0].(*sqlparser.AliasedExpr)
			if !ok {
				return SelectItem{}, true, usage
			}
			inner, ok, err := b.aggregate(unparen(arg.Expr))
			if !ok {
				return SelectItem{}, true, usage
			}
			if err != nil {
				return SelectItem{}, true, err
			}
			if inner.Bar != BarNone {
				return SelectItem{}, true, usage
			}
			inner.Bar = bar
			return inner, true, nil
		}
		if name == "dp_quantile" || name == "dp_median" {
			return b.quantile(f, name)
		}
		if !sqlparser.Aggregates[name] && name != "any_value" {
			return SelectItem{}, false, nil
		}
		if f.Over != nil {
			return SelectItem{}, true, Errorf(CodeNotSupported, "window functions (%s(...) OVER ...) are not supported; %s", upper, selectHelp)
		}
		arg := func(usage *Error) (string, Expr, error) {
			if len(f.Exprs) != 1 {
				return "", nil, usage
			}
			a, ok := f.Exprs[0].(*sqlparser.AliasedExpr)
			if !ok {
				return "", nil, usage
			}
			x := unparen(a.Expr)
			if col, ok := x.(*sqlparser.ColName); ok && !isVariable(col) {
				name, err := b.column(col, "field list")
				return name, nil, err
			}
			if hasAggregate(x) {
				return "", nil, Errorf(CodeNotSupported, "%s: aggregates cannot be nested (Invalid use of group function)", sqlparser.String(f))
			}
			saved := b.clause
			b.clause = "field list"
			defer func() { b.clause = saved }()
			ex, err := b.expr(x, "field list")
			if c, ok := ex.(Col); ok && err == nil {
				return c.Name, nil, nil
			}
			return "", ex, err
		}
		switch name {
		case "count":
			distinctUsage := Errorf(CodeNotSupported, "COUNT(DISTINCT ...) is not supported: count rows with COUNT(*) or COUNT(x), list the declared values with SELECT c FROM t GROUP BY c, or count people with COUNT(DISTINCT <privacy unit column>) on a table that declares one")
			if f.Distinct {
				if len(f.Exprs) != 1 {
					return SelectItem{}, true, distinctUsage
				}
				col, ex, err := arg(distinctUsage)
				if err != nil {
					return SelectItem{}, true, err
				}
				if ex != nil || col == "" {
					return SelectItem{}, true, distinctUsage
				}
				return SelectItem{Agg: AggCountDistinct, Column: col}, true, nil
			}
			usage := Errorf(CodeNotSupported, "COUNT takes *, a column or an expression: COUNT(*), COUNT(c), COUNT(CASE WHEN ... THEN 1 END)")
			if len(f.Exprs) != 1 {
				return SelectItem{}, true, usage
			}
			if a, ok := f.Exprs[0].(*sqlparser.StarExpr); ok {
				if !a.TableName.IsEmpty() && !b.qualifierOK(a.TableName) {
					return SelectItem{}, true, Errorf(CodeBadField, "Unknown column '%s.*' in 'field list'", a.TableName.Name.String())
				}
				return SelectItem{Agg: AggCount}, true, nil
			}
			if a, ok := f.Exprs[0].(*sqlparser.AliasedExpr); ok {
				if _, kind, err := literal(unparen(a.Expr)); err == nil && kind == litValue {
					return SelectItem{Agg: AggCount}, true, nil // COUNT(1), COUNT('x'): every row
				}
			}
			col, ex, err := arg(usage)
			return SelectItem{Agg: AggCountCol, Column: col, Arg: ex}, true, err
		case "sum", "avg", "variance", "var_pop", "var_samp", "std", "stddev", "stddev_pop", "stddev_samp":
			agg := map[string]AggFunc{"sum": AggSum, "avg": AggAvg, "variance": AggVarPop, "var_pop": AggVarPop,
				"var_samp": AggVarSamp, "std": AggStdPop, "stddev": AggStdPop, "stddev_pop": AggStdPop,
				"stddev_samp": AggStdSamp}[name]
			if f.Distinct {
				return SelectItem{}, true, Errorf(CodeNotSupported, "%s(DISTINCT ...) is not supported: write %s(x)", upper, upper)
			}
			col, ex, err := arg(Errorf(CodeNotSupported, "%s takes one column or expression: %s(x)", upper, upper))
			return SelectItem{Agg: agg, Column: col, Arg: ex}, true, err
		case "min", "max", "any_value", "json_arrayagg", "json_objectagg", "bit_and", "bit_or", "bit_xor":
			return SelectItem{}, true, Errorf(CodeDPRefused, "%s is refused: it would reveal values of single rows; dpproxy answers COUNT, SUM, AVG, VARIANCE and STDDEV of columns and expressions, with GROUP BY over declared columns (the declared range of a column is in its catalog domain)", upper)
		default:
			return SelectItem{}, true, Errorf(CodeNotSupported, "the aggregate %s is not supported: dpproxy answers COUNT, SUM, AVG, VARIANCE, VAR_POP, VAR_SAMP, STD, STDDEV, STDDEV_POP and STDDEV_SAMP, each optionally wrapped in DP_STDERR(), DP_CI_LOW() or DP_CI_HIGH()", upper)
		}
	}
	return SelectItem{}, false, nil
}

// quantile parses DP_QUANTILE(c, q) (q a number in [0, 1]) and
// DP_MEDIAN(c) = DP_QUANTILE(c, 0.5), c a column.
func (b *selectBuilder) quantile(f *sqlparser.FuncExpr, name string) (SelectItem, bool, error) {
	usage := Errorf(CodeNotSupported, "DP_QUANTILE takes a numeric column and a number in [0, 1], DP_MEDIAN a numeric column: DP_QUANTILE(age, 0.9), DP_MEDIAN(age)")
	want := 2
	if name == "dp_median" {
		want = 1
	}
	if len(f.Exprs) != want || f.Distinct || f.Over != nil {
		return SelectItem{}, true, usage
	}
	var args []sqlparser.Expr
	for _, e := range f.Exprs {
		a, ok := e.(*sqlparser.AliasedExpr)
		if !ok {
			return SelectItem{}, true, usage
		}
		args = append(args, unparen(a.Expr))
	}
	col, ok := args[0].(*sqlparser.ColName)
	if !ok || isVariable(col) {
		return SelectItem{}, true, usage
	}
	c, err := b.column(col, "field list")
	if err != nil {
		return SelectItem{}, true, err
	}
	q := 0.5
	if want == 2 {
		text, kind, err := literal(args[1])
		if err != nil || kind != litValue {
			return SelectItem{}, true, usage
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(text.Text), 64)
		if err != nil || !(v >= 0 && v <= 1) {
			return SelectItem{}, true, usage
		}
		q = v
	}
	return SelectItem{Agg: AggQuantile, Column: c, Quantile: q}, true, nil
}

// qualifierOK reports whether q names the query's table: its name, its
// alias, or schema.table.
func (b *selectBuilder) qualifierOK(q sqlparser.TableName) bool {
	name := q.Name.String()
	if q.DbQualifier.IsEmpty() {
		return strings.EqualFold(name, b.table.Name.String()) || (b.alias != "" && strings.EqualFold(name, b.alias))
	}
	if !strings.EqualFold(name, b.table.Name.String()) {
		return false
	}
	if !b.table.DbQualifier.IsEmpty() {
		return strings.EqualFold(q.DbQualifier.String(), b.table.DbQualifier.String())
	}
	return b.c.protected(q.DbQualifier.String(), strings.ToLower(name))
}

// column resolves a column reference to its lower-case name: alias.col
// for a column of a joined public table.
func (b *selectBuilder) column(c *sqlparser.ColName, clause string) (string, error) {
	if len(b.joins) > 0 {
		if name, found, err := b.joinColumn(c, clause); found || err != nil {
			return name, err
		}
	}
	if !c.Qualifier.IsEmpty() && !b.qualifierOK(c.Qualifier) {
		return "", Errorf(CodeBadField, "Unknown column '%s' in '%s'", colText(c), clause)
	}
	return strings.ToLower(c.Name.String()), nil
}

// byAlias finds the select item whose written alias is name.
func (b *selectBuilder) byAlias(name string) int {
	for i, it := range b.items {
		if it.explicit && strings.EqualFold(it.Alias, name) {
			return i
		}
	}
	return -1
}

// position resolves GROUP BY 1 / ORDER BY 2.
func (b *selectBuilder) position(e sqlparser.Expr, clause string) (int, bool, error) {
	v, ok := e.(*sqlparser.SQLVal)
	if !ok || v.Type != sqlparser.IntVal {
		return 0, false, nil
	}
	n, err := strconv.Atoi(string(v.Val))
	if err != nil || n < 1 || n > len(b.items) {
		return 0, true, Errorf(CodeBadField, "Unknown column '%s' in '%s'", v.Val, clause)
	}
	return n - 1, true, nil
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

// countDistinctColumn is c of COUNT(DISTINCT c) for one plain column c, or
// nil.
func countDistinctColumn(f *sqlparser.FuncExpr) *sqlparser.ColName {
	if !f.Distinct || !strings.EqualFold(f.Name.String(), "count") || len(f.Exprs) != 1 {
		return nil
	}
	ae, ok := f.Exprs[0].(*sqlparser.AliasedExpr)
	if !ok {
		return nil
	}
	c, _ := unparen(ae.Expr).(*sqlparser.ColName)
	return c
}
