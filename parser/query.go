package parser

import (
	"reflect"
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
