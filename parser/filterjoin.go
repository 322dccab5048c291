package parser

import (
	"fmt"
	"strings"

	"github.com/dolthub/vitess/go/vt/sqlparser"
)

// filterJoin answers an aggregate query over a protected table that is
// inner-joined to an aggregate subquery on its group keys — Superset's
// "series limit", which restricts a time series to the top n series:
//
//	SELECT __timestamp, device, COUNT(*) AS count FROM events
//	JOIN (SELECT device AS device__, COUNT(*) AS mme_inner__ FROM events
//	      GROUP BY device ORDER BY mme_inner__ DESC LIMIT 5) AS series_limit
//	  ON device = device__
//	GROUP BY device, __timestamp ORDER BY count DESC LIMIT 10000
//
// Because every joined key is a group key of the outer query, the join
// only keeps or drops whole groups. So the outer query without the join
// is a part of its own (all its groups, measured like any GROUP BY), and
// the join, ORDER BY and LIMIT run as post-processing over the two parts'
// released rows: the groups whose keys the subquery released. sel is the
// outer query, whose subquery ps has already made a part. It returns the
// post-processing query, or a refusal that says what to write instead.
func (c *classifier) filterJoin(sel *sqlparser.Select, ps *parts) (sqlparser.SelectStatement, error) {
	_, prot := c.references(sel.From)
	refuse := Errorf(CodeDPRefused, "a join of the protected table '%s' to an aggregate subquery is supported only as a filter on groups: an inner JOIN ... ON equalities between the outer query's GROUP BY keys and the subquery's columns, with the subquery's columns read nowhere else (e.g. Superset's series limit); otherwise run the subquery first and filter by its keys (WHERE c IN (...))", strings.ToLower(prot[0].Name.String()))
	if len(sel.From) != 1 || len(sel.GroupBy) == 0 {
		return nil, refuse
	}
	j, ok := sel.From[0].(*sqlparser.JoinTableExpr)
	if !ok || (j.Join != sqlparser.JoinStr && j.Join != "inner join") || j.Condition.On == nil {
		return nil, refuse
	}
	side, part := j.LeftExpr, j.RightExpr
	pa, ok := c.partOf(part, ps)
	if !ok {
		side, part = j.RightExpr, j.LeftExpr
		if pa, ok = c.partOf(part, ps); !ok {
			return nil, refuse
		}
	}
	partAlias := pa.As.String()
	if partAlias == "" {
		partAlias = pa.Expr.(sqlparser.TableName).Name.String()
	}
	partCols := map[string]bool{}
	for i, name := range ps.post.Tables {
		if q := ps.post.Parts[i].Query; q != nil && strings.EqualFold(name, pa.Expr.(sqlparser.TableName).Name.String()) {
			for _, it := range q.Select {
				partCols[strings.ToLower(it.Alias)] = true
			}
		}
	}
	isPartCol := func(col *sqlparser.ColName) bool {
		if !col.Qualifier.IsEmpty() {
			return strings.EqualFold(col.Qualifier.Name.String(), partAlias)
		}
		return partCols[strings.ToLower(col.Name.String())] && (c.columns == nil || !c.columns(strings.ToLower(prot[0].Name.String()), strings.ToLower(col.Name.String())))
	}
	pairs, ok := c.joinPairs(sel, j.Condition.On, isPartCol)
	if !ok || readsColumns(sel, isPartCol) {
		return nil, refuse
	}
	// The outer query without the join, ORDER BY and LIMIT: a part.
	names := make([]string, len(sel.SelectExprs))
	for i, se := range sel.SelectExprs {
		ae, ok := se.(*sqlparser.AliasedExpr)
		if !ok {
			return nil, refuse
		}
		names[i] = c.writtenName(ae)
	}
	order, err := c.outputOrder(sel, names)
	if err != nil {
		return nil, err
	}
	outer := *sel
	outer.From = sqlparser.TableExprs{side}
	outer.OrderBy, outer.Limit = nil, nil
	kind, q, err := c.selectStatement(&outer)
	if err != nil {
		return nil, err
	}
	if kind != KindAggregate && kind != KindEmpty {
		return nil, refuse
	}
	table := ps.add(Statement{Kind: kind, Text: sqlparser.String(&outer), Query: q})
	// Post-processing: the groups whose keys the subquery released.
	var limit string
	if sel.Limit != nil {
		limit = sqlparser.String(sel.Limit)
	}
	out, err := sqlparser.Parse(filterSQL(table, pa.Expr.(sqlparser.TableName).Name.String(), partAlias, names, pairs, order, limit))
	if err != nil {
		return nil, Errorf(CodeNotSupported, "this series-limit query could not be rewritten: %v", err)
	}
	return out.(sqlparser.SelectStatement), nil
}

// partOf reports whether te is the table of a part, and returns it.
func (c *classifier) partOf(te sqlparser.TableExpr, ps *parts) (*sqlparser.AliasedTableExpr, bool) {
	a, ok := te.(*sqlparser.AliasedTableExpr)
	if !ok {
		return nil, false
	}
	t, ok := a.Expr.(sqlparser.TableName)
	return a, ok && ps.isPart(t)
}

// keyItem finds the select item that the join expression e is: the same
// expression, or its alias; -1 when none is, or it is an aggregate.
func (c *classifier) keyItem(sel *sqlparser.Select, e sqlparser.Expr) int {
	want := strings.ToLower(sqlparser.String(e))
	for i, se := range sel.SelectExprs {
		ae, ok := se.(*sqlparser.AliasedExpr)
		if !ok || hasAggregate(ae.Expr) {
			continue
		}
		if strings.ToLower(sqlparser.String(unparen(ae.Expr))) == want {
			return i
		}
		if col, ok := e.(*sqlparser.ColName); ok && col.Qualifier.IsEmpty() && strings.EqualFold(ae.As.String(), col.Name.String()) {
			return i
		}
	}
	return -1
}

// outputOrder is sel's ORDER BY over its output columns (names): each term
// an output name, a position, or a selected expression.
func (c *classifier) outputOrder(sel *sqlparser.Select, names []string) (string, error) {
	if len(sel.OrderBy) == 0 {
		return "", nil
	}
	var terms []string
	for _, o := range sel.OrderBy {
		x := unparen(o.Expr)
		k := -1
		if v, ok := x.(*sqlparser.SQLVal); ok && v.Type == sqlparser.IntVal {
			var n int
			if _, err := fmt.Sscan(string(v.Val), &n); err == nil && n >= 1 && n <= len(names) {
				k = n - 1
			}
		}
		if col, ok := x.(*sqlparser.ColName); ok && k < 0 && col.Qualifier.IsEmpty() {
			for i, n := range names {
				if strings.EqualFold(n, col.Name.String()) {
					k = i
					break
				}
			}
		}
		if k < 0 {
			want := strings.ToLower(sqlparser.String(x))
			for i, se := range sel.SelectExprs {
				if ae, ok := se.(*sqlparser.AliasedExpr); ok && strings.ToLower(sqlparser.String(unparen(ae.Expr))) == want {
					k = i
					break
				}
			}
		}
		if k < 0 {
			return "", Errorf(CodeNotSupported, "ORDER BY %s: with a series limit, order by the selected columns (their aliases or positions)", sqlparser.String(o.Expr))
		}
		dir := ""
		if o.Direction == sqlparser.DescScr {
			dir = " DESC"
		}
		terms = append(terms, "dp_groups."+quoteName(names[k])+dir)
	}
	return " ORDER BY " + strings.Join(terms, ", "), nil
}

// quoteName backquotes an identifier for MySQL.
func quoteName(s string) string {
	return "`" + strings.ReplaceAll(s, "`", "``") + "`"
}

// keyPair is one equality of a filter join's ON condition.
type keyPair struct {
	item    int    // the outer select item that is the key
	partCol string // the subquery's column
	op      string // = or <=> (Tableau's null-safe join)
}

// joinPairs reads a filter join's ON condition: a conjunction of
// equalities, each between an outer GROUP BY key (a select item) and a
// column of the subquery. ok is false for anything else.
func (c *classifier) joinPairs(sel *sqlparser.Select, on sqlparser.Expr, isPartCol func(*sqlparser.ColName) bool) (pairs []keyPair, ok bool) {
	var terms []sqlparser.Expr
	var split func(e sqlparser.Expr)
	split = func(e sqlparser.Expr) {
		if a, ok := unparen(e).(*sqlparser.AndExpr); ok {
			split(a.Left)
			split(a.Right)
			return
		}
		terms = append(terms, unparen(e))
	}
	split(on)
	for _, term := range terms {
		cmp, ok := term.(*sqlparser.ComparisonExpr)
		if !ok || (cmp.Operator != sqlparser.EqualStr && cmp.Operator != sqlparser.NullSafeEqualStr) {
			return nil, false
		}
		l, r := unparen(cmp.Left), unparen(cmp.Right)
		pc, isPart := r.(*sqlparser.ColName)
		if !isPart || !isPartCol(pc) {
			l, r = r, l
			if pc, isPart = r.(*sqlparser.ColName); !isPart || !isPartCol(pc) {
				return nil, false
			}
		}
		item := c.keyItem(sel, l)
		if item < 0 {
			return nil, false
		}
		pairs = append(pairs, keyPair{item: item, partCol: pc.Name.String(), op: cmp.Operator})
	}
	return pairs, true
}

// readsColumns reports whether any clause of sel but its FROM reads a
// column col picks (a filter join's subquery columns may appear only in ON).
func readsColumns(sel *sqlparser.Select, col func(*sqlparser.ColName) bool) bool {
	reads := false
	check := func(n sqlparser.SQLNode) {
		_ = sqlparser.Walk(func(x sqlparser.SQLNode) (bool, error) {
			if c, ok := x.(*sqlparser.ColName); ok && col(c) {
				reads = true
			}
			_, sub := x.(*sqlparser.Subquery)
			return !sub, nil
		}, n)
	}
	check(sel.SelectExprs)
	if sel.Where != nil {
		check(sel.Where)
	}
	check(sel.GroupBy)
	if sel.Having != nil {
		check(sel.Having)
	}
	check(sel.OrderBy)
	return reads
}

// filterSQL is a filter join's post-processing: the outer query's groups
// (table, output columns names) whose keys the subquery's part released.
func filterSQL(table, part, partAlias string, names []string, pairs []keyPair, order, limit string) string {
	var b strings.Builder
	b.WriteString("SELECT ")
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "dp_groups.%s", quoteName(n))
	}
	fmt.Fprintf(&b, " FROM %s AS dp_groups JOIN %s AS %s ON ", table, part, quoteName(partAlias))
	for i, p := range pairs {
		if i > 0 {
			b.WriteString(" AND ")
		}
		fmt.Fprintf(&b, "dp_groups.%s %s %s.%s", quoteName(names[p.item]), p.op, quoteName(partAlias), quoteName(p.partCol))
	}
	b.WriteString(order)
	b.WriteString(limit)
	return b.String()
}
