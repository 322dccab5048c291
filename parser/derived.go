package parser

import (
	"fmt"
	"strings"

	"github.com/dolthub/vitess/go/vt/sqlparser"
)

// Derived tables, CTEs and UNION, as BI tools wrap the queries they send:
// Superset's virtual datasets (FROM (SELECT * FROM adult) AS
// virtual_table), Metabase's nested questions and models, Tableau's Custom
// SQL, Looker's WITH derived tables, Power BI's folded native queries.
//
//   - A derived table or non-recursive CTE that selects rows of one
//     protected table (a projection, renames, SELECT *, computed columns,
//     WHERE, joins to public tables) is merged into the query that reads
//     it, at any depth: the outer query's names are replaced by the inner
//     expressions, the inner WHERE is ANDed to the outer one, and the inner
//     FROM takes the derived table's place. The merged query is then built
//     like any other, so it is answered, refused and named exactly as the
//     query written without the wrapper.
//   - One that aggregates is a DP statement of its own (a part): it is
//     measured and charged as usual, and the outer query runs on its
//     released rows (KindPostProcess). UNION of aggregate queries is the
//     same, each branch a part.
//
// Refused with 3900: a LIMIT inside a row-level derived table (it selects
// rows by their order, which depends on the data), a DISTINCT one (it
// lists the values present), and a protected table joined to an aggregate
// subquery other than on the outer query's group keys (filterjoin.go). Refused with 1235: recursive CTEs, and
// post-processing that reads another table or calls a function that
// reaches outside its rows.

// partTable names the table that holds a part's released rows in the
// post-processing SQL. The prefix cannot collide with a catalog table
// because post-processing reads no catalog table.
const partTable = "dp_result_"

// hostFuncs are functions post-processing refuses: they read the host,
// wait, or hold locks, none of which is a function of released rows.
var hostFuncs = map[string]bool{
	"load_file": true, "sleep": true, "benchmark": true, "get_lock": true, "release_lock": true,
	"release_all_locks": true, "is_free_lock": true, "is_used_lock": true, "master_pos_wait": true,
	"source_pos_wait": true, "wait_for_executed_gtid_set": true, "wait_until_sql_thread_after_gtids": true,
}

// wraps reports whether a SELECT reads a protected table through a derived
// table, a CTE or a set operation, so that wrapped must answer it.
func wraps(s sqlparser.SelectStatement) bool {
	s = unwrapSelect(s)
	switch x := s.(type) {
	case *sqlparser.SetOp:
		return true
	case *sqlparser.Select:
		if x.With != nil {
			return true
		}
		found := false
		for _, te := range x.From {
			forTables(te, func(a *sqlparser.AliasedTableExpr) {
				if _, ok := a.Expr.(*sqlparser.Subquery); ok {
					found = true
				}
			})
		}
		return found
	}
	return false
}

func unwrapSelect(s sqlparser.SelectStatement) sqlparser.SelectStatement {
	for {
		p, ok := s.(*sqlparser.ParenSelect)
		if !ok {
			return s
		}
		s = p.Select
	}
}

// forTables calls f on every table of a FROM item, through joins and
// parentheses (not into subqueries).
func forTables(te sqlparser.TableExpr, f func(*sqlparser.AliasedTableExpr)) {
	switch t := te.(type) {
	case *sqlparser.AliasedTableExpr:
		f(t)
	case *sqlparser.JoinTableExpr:
		forTables(t.LeftExpr, f)
		forTables(t.RightExpr, f)
	case *sqlparser.ParenTableExpr:
		for _, x := range t.Exprs {
			forTables(x, f)
		}
	}
}

// parts collects the DP statements of one wrapped statement.
type parts struct {
	post PostProcess
}

func (p *parts) add(st Statement) string {
	name := fmt.Sprintf("%s%d", partTable, len(p.post.Parts)+1)
	p.post.Parts = append(p.post.Parts, st)
	p.post.Tables = append(p.post.Tables, name)
	return name
}

func (p *parts) isPart(t sqlparser.TableName) bool {
	if !t.DbQualifier.IsEmpty() {
		return false
	}
	for _, n := range p.post.Tables {
		if strings.EqualFold(t.Name.String(), n) {
			return true
		}
	}
	return false
}

// wrapped classifies a statement that wraps a protected table: either the
// merged query (KindAggregate, KindEmpty, ... exactly as if written
// without the wrapper) or KindPostProcess over its parts.
func (c *classifier) wrapped(s sqlparser.SelectStatement) (Statement, error) {
	var ps parts
	s = unwrapSelect(s)
	if err := c.resolveWith(s, nil); err != nil {
		return Statement{}, err
	}
	switch x := s.(type) {
	case *sqlparser.SetOp:
		if err := c.setOperation(x, &ps); err != nil {
			return Statement{}, err
		}
	case *sqlparser.Select:
		if err := c.inlineFrom(x, &ps); err != nil {
			return Statement{}, err
		}
		if len(ps.post.Parts) == 0 {
			kind, q, err := c.selectStatement(x)
			return Statement{Kind: kind, Query: q}, err
		}
		if c.readsProtected(x) {
			out, err := c.filterJoin(x, &ps)
			if err != nil {
				return Statement{}, err
			}
			s = out
			break
		}
		c.nameItems(x)
	default:
		return Statement{}, Errorf(CodeNotSupported, "this statement form is not supported over protected tables: %s", selectHelp)
	}
	if err := c.checkPostProcessing(s, &ps); err != nil {
		return Statement{}, err
	}
	ps.post.SQL = sqlparser.String(s)
	switch x := s.(type) {
	case *sqlparser.Select:
		ps.post.Limited = x.Limit != nil
	case *sqlparser.SetOp:
		ps.post.Limited = x.Limit != nil
	}
	return Statement{Kind: KindPostProcess, Post: &ps.post}, nil
}

// resolveWith replaces every reference to a CTE in s (and in the derived
// tables and CTEs inside it) by a derived table holding a copy of the
// CTE's query, so that CTEs and derived tables take one path. scope holds
// the CTEs of enclosing queries; a CTE may read those defined before it.
func (c *classifier) resolveWith(s sqlparser.SelectStatement, scope map[string]*sqlparser.CommonTableExpr) error {
	s = unwrapSelect(s)
	var with **sqlparser.With
	switch x := s.(type) {
	case *sqlparser.Select:
		with = &x.With
	case *sqlparser.SetOp:
		with = &x.With
		if err := c.resolveWith(x.Left, c.withScope(scope, x.With)); err != nil {
			return err
		}
		if err := c.resolveWith(x.Right, c.withScope(scope, x.With)); err != nil {
			return err
		}
	default:
		return nil
	}
	if w := *with; w != nil {
		if w.Recursive {
			return Errorf(CodeNotSupported, "recursive CTEs (WITH RECURSIVE) are not supported over protected tables: write the CTE without RECURSIVE, or as a derived table")
		}
		inner := map[string]*sqlparser.CommonTableExpr{}
		for k, v := range scope {
			inner[k] = v
		}
		for _, cte := range w.Ctes {
			sq, ok := cte.AliasedTableExpr.Expr.(*sqlparser.Subquery)
			if !ok {
				return Errorf(CodeNotSupported, "this WITH clause is not supported over protected tables")
			}
			if err := c.resolveWith(sq.Select, inner); err != nil {
				return err
			}
			inner[strings.ToLower(cte.AliasedTableExpr.As.String())] = cte
		}
		scope = inner
		*with = nil
	}
	sel, ok := s.(*sqlparser.Select)
	if !ok {
		return nil
	}
	var err error
	for _, te := range sel.From {
		forTables(te, func(a *sqlparser.AliasedTableExpr) {
			if err != nil {
				return
			}
			switch t := a.Expr.(type) {
			case sqlparser.TableName:
				if cte := scope[strings.ToLower(t.Name.String())]; cte != nil && t.DbQualifier.IsEmpty() {
					sq := cte.AliasedTableExpr.Expr.(*sqlparser.Subquery)
					a.Expr = &sqlparser.Subquery{Select: cloneAST(sq.Select), Columns: cte.Columns}
					if a.As.IsEmpty() {
						a.As = cte.AliasedTableExpr.As
					}
				}
			case *sqlparser.Subquery:
				err = c.resolveWith(t.Select, scope)
			}
		})
	}
	return err
}

func (c *classifier) withScope(scope map[string]*sqlparser.CommonTableExpr, w *sqlparser.With) map[string]*sqlparser.CommonTableExpr {
	if w == nil {
		return scope
	}
	out := map[string]*sqlparser.CommonTableExpr{}
	for k, v := range scope {
		out[k] = v
	}
	for _, cte := range w.Ctes {
		out[strings.ToLower(cte.AliasedTableExpr.As.String())] = cte
	}
	return out
}

// inlineFrom merges the row-level derived tables in sel's FROM into sel
// and replaces the aggregate ones by the tables of their parts, innermost
// first.
func (c *classifier) inlineFrom(sel *sqlparser.Select, ps *parts) error {
	for i := range sel.From {
		te, err := c.inlineTable(sel, sel.From[i], ps)
		if err != nil {
			return err
		}
		sel.From[i] = te
	}
	return nil
}

func (c *classifier) inlineTable(outer *sqlparser.Select, te sqlparser.TableExpr, ps *parts) (sqlparser.TableExpr, error) {
	switch t := te.(type) {
	case *sqlparser.JoinTableExpr:
		var err error
		if t.LeftExpr, err = c.inlineTable(outer, t.LeftExpr, ps); err != nil {
			return nil, err
		}
		t.RightExpr, err = c.inlineTable(outer, t.RightExpr, ps)
		return t, err
	case *sqlparser.ParenTableExpr:
		for i := range t.Exprs {
			x, err := c.inlineTable(outer, t.Exprs[i], ps)
			if err != nil {
				return nil, err
			}
			t.Exprs[i] = x
		}
		return t, nil
	case *sqlparser.AliasedTableExpr:
		sq, ok := t.Expr.(*sqlparser.Subquery)
		if !ok {
			return te, nil
		}
		if t.Lateral {
			return nil, Errorf(CodeNotSupported, "LATERAL derived tables are not supported over protected tables")
		}
		switch in := unwrapSelect(sq.Select).(type) {
		case *sqlparser.SetOp:
			if err := c.setOperation(in, ps); err != nil {
				return nil, err
			}
			return te, nil
		case *sqlparser.Select:
			if err := c.inlineFrom(in, ps); err != nil {
				return nil, err
			}
			if !c.readsProtected(in) {
				// Over parts (or no table at all): post-processing SQL,
				// kept as written.
				return te, nil
			}
			if rowLevel(in) {
				return c.merge(outer, t, in, sq.Columns)
			}
			if err := c.refuseMixed(in, ps); err != nil {
				return nil, err
			}
			for i, name := range sq.Columns {
				if i < len(in.SelectExprs) {
					if ae, ok := in.SelectExprs[i].(*sqlparser.AliasedExpr); ok {
						ae.As = name
					}
				}
			}
			kind, q, err := c.selectStatement(in)
			if err != nil {
				return nil, err
			}
			if err := partKind(kind); err != nil {
				return nil, err
			}
			name := ps.add(Statement{Kind: kind, Text: sqlparser.String(in), Query: q})
			as := t.As
			if as.IsEmpty() {
				as = sqlparser.NewTableIdent(name)
			}
			return &sqlparser.AliasedTableExpr{Expr: sqlparser.TableName{Name: sqlparser.NewTableIdent(name)}, As: as}, nil
		}
	}
	return te, nil
}

// readsProtected reports whether sel's FROM names a protected table itself
// (not through a part).
func (c *classifier) readsProtected(sel *sqlparser.Select) bool {
	_, prot := c.references(sel.From)
	return len(prot) > 0
}

// refuseMixed refuses a query that reads a protected table and a part: a
// join of the table to an aggregate subquery of itself (Superset's series
// limit) would need the part released before the outer query is planned.
func (c *classifier) refuseMixed(sel *sqlparser.Select, ps *parts) error {
	if !c.readsProtected(sel) {
		return nil
	}
	mixed := false
	for _, te := range sel.From {
		forTables(te, func(a *sqlparser.AliasedTableExpr) {
			if t, ok := a.Expr.(sqlparser.TableName); ok && ps.isPart(t) {
				mixed = true
			}
		})
	}
	if !mixed {
		return nil
	}
	_, prot := c.references(sel.From)
	return Errorf(CodeDPRefused, "a join of the protected table '%s' to an aggregate subquery is not supported: run the aggregate subquery first, then filter the outer query by its keys (WHERE c IN (...)), or aggregate over the subquery's rows only", strings.ToLower(prot[0].Name.String()))
}

// partKind refuses a part that is not an aggregate query (or empty by
// construction). A domain list (SELECT DISTINCT c, or GROUP BY without an
// aggregate) lists the declared values, not the values in the data, so a
// query over it would not mean what it means in MySQL.
func partKind(kind StatementKind) error {
	switch kind {
	case KindAggregate, KindEmpty:
		return nil
	case KindDomainList:
		return Errorf(CodeDPRefused, "a DISTINCT (or a GROUP BY without an aggregate) inside a derived table, CTE or UNION lists the values present in the rows, which depends on the data: select the declared values on their own (SELECT DISTINCT c FROM t), or count per value (SELECT c, COUNT(*) ... GROUP BY c)")
	}
	return Errorf(CodeNotSupported, "this derived table is not supported: %s", selectHelp)
}

// rowLevel reports whether sel selects rows (no aggregate, GROUP BY,
// HAVING or DISTINCT), so that it can be merged into the query reading it.
func rowLevel(sel *sqlparser.Select) bool {
	if len(sel.GroupBy) > 0 || sel.Having != nil || sel.QueryOpts.Distinct {
		return false
	}
	for _, se := range sel.SelectExprs {
		if ae, ok := se.(*sqlparser.AliasedExpr); ok && hasAggregate(ae.Expr) {
			return false
		}
	}
	return true
}

// merge replaces the derived table t (whose query is the row-level in)
// in outer: outer's names of in's columns become in's expressions, in's
// WHERE is ANDed to outer's, and in's FROM is returned to take t's place.
func (c *classifier) merge(outer *sqlparser.Select, t *sqlparser.AliasedTableExpr, in *sqlparser.Select, rename sqlparser.Columns) (sqlparser.TableExpr, error) {
	alias := t.As.String()
	switch {
	case in.Limit != nil:
		return nil, Errorf(CodeDPRefused, "a LIMIT inside the derived table or CTE '%s' selects rows by their order, which depends on the data: put the LIMIT on the outer query, or select rows with WHERE over domain columns", alias)
	case len(in.Window) > 0:
		return nil, Errorf(CodeNotSupported, "window functions are not supported; %s", selectHelp)
	case in.Into != nil:
		return nil, Errorf(CodeDPRefused, "SELECT ... INTO is not supported over protected tables; %s", rowsRefusal)
	case len(in.From) != 1:
		return nil, Errorf(CodeDPRefused, "the derived table or CTE '%s' lists several tables (FROM a, b): write the join as JOIN ... ON (%s)", alias, joinHelp)
	}
	names := map[string]sqlparser.Expr{}
	var star *sqlparser.StarExpr
	for i, se := range in.SelectExprs {
		switch x := se.(type) {
		case *sqlparser.StarExpr:
			if len(rename) > 0 {
				return nil, Errorf(CodeNotSupported, "a column list on the derived table or CTE '%s' needs its select list written out, not *", alias)
			}
			star = x
		case *sqlparser.AliasedExpr:
			name := c.writtenName(x)
			if i < len(rename) {
				name = rename[i].String()
			}
			if _, dup := names[strings.ToLower(name)]; dup {
				return nil, Errorf(CodeDupField, "Duplicate column name '%s'", name)
			}
			names[strings.ToLower(name)] = x.Expr
		default:
			return nil, Errorf(CodeNotSupported, "'%s' is not supported: %s", sqlparser.String(se), selectHelp)
		}
	}
	var bad error
	ours := func(col *sqlparser.ColName) bool {
		q := col.Qualifier
		return q.IsEmpty() || (q.DbQualifier.IsEmpty() && strings.EqualFold(q.Name.String(), alias))
	}
	subst := func(col *sqlparser.ColName) (sqlparser.Expr, bool) {
		if isVariable(col) || !ours(col) {
			return nil, false
		}
		if e, ok := names[strings.ToLower(col.Name.String())]; ok {
			return cloneAST(e), true
		}
		if col.Qualifier.IsEmpty() {
			return nil, false // an outer alias, or a column of a table joined outside
		}
		if star != nil {
			return &sqlparser.ColName{Name: col.Name, Qualifier: star.TableName}, true
		}
		if bad == nil {
			bad = Errorf(CodeBadField, "Unknown column '%s.%s' in 'field list'", col.Qualifier.Name.String(), col.Name.String())
		}
		return nil, false
	}
	// A selected column keeps the name it had (MySQL names a column
	// after the name written, not after what it stands for).
	aliases := map[string]bool{}
	for _, se := range outer.SelectExprs {
		ae, ok := se.(*sqlparser.AliasedExpr)
		if !ok {
			continue
		}
		if col, isCol := unparen(ae.Expr).(*sqlparser.ColName); isCol && ae.As.IsEmpty() {
			if _, mapped := subst(col); mapped {
				ae.As = col.Name
			}
		}
		if !ae.As.IsEmpty() {
			aliases[strings.ToLower(ae.As.String())] = true
		}
	}
	rewriteColumns(&outer.SelectExprs, subst)
	rewriteColumns(outer.Where, subst)
	rewriteColumns(&outer.GroupBy, subst)
	rewriteColumns(outer.Having, subst)
	for _, te := range outer.From {
		rewriteColumns(te, subst)
	}
	// ORDER BY names a select-list alias before a column (MySQL's order).
	rewriteColumns(&outer.OrderBy, func(col *sqlparser.ColName) (sqlparser.Expr, bool) {
		if col.Qualifier.IsEmpty() && aliases[strings.ToLower(col.Name.String())] {
			return nil, false
		}
		return subst(col)
	})
	if bad != nil {
		return nil, bad
	}
	if in.Where != nil && in.Where.Expr != nil {
		if outer.Where == nil || outer.Where.Expr == nil {
			outer.Where = &sqlparser.Where{Type: sqlparser.WhereStr, Expr: in.Where.Expr}
		} else {
			outer.Where.Expr = &sqlparser.AndExpr{Left: &sqlparser.ParenExpr{Expr: in.Where.Expr}, Right: &sqlparser.ParenExpr{Expr: outer.Where.Expr}}
		}
	}
	return in.From[0], nil
}

// setOperation replaces each branch of a UNION (INTERSECT, EXCEPT) that
// reads a protected table by a SELECT * over its part.
func (c *classifier) setOperation(s *sqlparser.SetOp, ps *parts) error {
	branch := func(b sqlparser.SelectStatement) (sqlparser.SelectStatement, error) {
		switch x := unwrapSelect(b).(type) {
		case *sqlparser.SetOp:
			return b, c.setOperation(x, ps)
		case *sqlparser.Select:
			if err := c.inlineFrom(x, ps); err != nil {
				return nil, err
			}
			if !c.readsProtected(x) {
				return b, nil
			}
			if err := c.refuseMixed(x, ps); err != nil {
				return nil, err
			}
			kind, q, err := c.selectStatement(x)
			if err != nil {
				return nil, err
			}
			if err := partKind(kind); err != nil {
				return nil, err
			}
			name := ps.add(Statement{Kind: kind, Text: sqlparser.String(x), Query: q})
			return &sqlparser.Select{
				SelectExprs: sqlparser.SelectExprs{&sqlparser.StarExpr{}},
				From:        sqlparser.TableExprs{&sqlparser.AliasedTableExpr{Expr: sqlparser.TableName{Name: sqlparser.NewTableIdent(name)}}},
			}, nil
		}
		return b, nil
	}
	var err error
	if s.Left, err = branch(s.Left); err != nil {
		return err
	}
	s.Right, err = branch(s.Right)
	return err
}

// nameItems gives every unnamed select expression of a post-processing
// query the name MySQL would give it (the text as written), so that the
// SQL formatted for post-processing returns the columns the client asked
// for.
func (c *classifier) nameItems(sel *sqlparser.Select) {
	for _, se := range sel.SelectExprs {
		if ae, ok := se.(*sqlparser.AliasedExpr); ok && ae.As.IsEmpty() {
			ae.As = sqlparser.NewColIdent(c.writtenName(ae))
		}
	}
}

// writtenName is the name MySQL gives a select expression: its alias,
// else exprName.
func (c *classifier) writtenName(e *sqlparser.AliasedExpr) string {
	if !e.As.IsEmpty() {
		return e.As.String()
	}
	return c.exprName(e)
}

// exprName is the name MySQL gives an unaliased select expression: a
// column's name as written without its qualifier, else the expression's
// text from its first to its last token (a lone quoted string unquoted).
func (c *classifier) exprName(e *sqlparser.AliasedExpr) string {
	if col, ok := unparen(e.Expr).(*sqlparser.ColName); ok {
		if w, ok := c.written[col]; ok {
			return w
		}
		return col.Name.String()
	}
	if text := c.text; e.StartParsePos >= 0 && e.StartParsePos < e.EndParsePos && e.EndParsePos <= len(text) {
		raw := text[e.StartParsePos:e.EndParsePos]
		if toks := lex(raw); len(toks) > 0 {
			return trimQuotes(raw[toks[0].start:toks[len(toks)-1].end])
		}
	}
	if e.InputExpression != "" {
		return e.InputExpression
	}
	return sqlparser.String(e.Expr)
}

// checkPostProcessing refuses post-processing SQL that reads anything but
// the parts (another table, a protected one in a subquery) or calls a
// function that reaches outside its rows.
func (c *classifier) checkPostProcessing(s sqlparser.SelectStatement, ps *parts) error {
	all, prot := c.references(s)
	if len(prot) > 0 {
		return refuseSubquery(prot[0])
	}
	for _, t := range all {
		if !ps.isPart(t) && !(t.DbQualifier.IsEmpty() && strings.EqualFold(t.Name.String(), "dual")) {
			return Errorf(CodeNotSupported, "a query over the results of aggregate subqueries reads only those results; table '%s' cannot be read beside them", strings.ToLower(t.Name.String()))
		}
	}
	err := sqlparser.Walk(func(n sqlparser.SQLNode) (bool, error) {
		if f, ok := n.(*sqlparser.FuncExpr); ok && hostFuncs[strings.ToLower(f.Name.String())] {
			return false, Errorf(CodeNotSupported, "%s() is not supported over DP results", strings.ToUpper(f.Name.String()))
		}
		return true, nil
	}, s)
	if err == nil && len(ps.post.Parts) == 0 {
		err = Errorf(CodeNotSupported, "this statement form is not supported over protected tables: %s", selectHelp)
	}
	return err
}

// selectOrWrapped classifies a SELECT (or UNION ...) over protected
// tables: the wrapped forms here, everything else by selectStatement.
func (c *classifier) selectOrWrapped(s sqlparser.SelectStatement) (Statement, error) {
	if _, prot := c.references(s); len(prot) > 0 && wraps(s) {
		return c.wrapped(s)
	}
	kind, q, err := c.selectStatement(s)
	return Statement{Kind: kind, Query: q}, err
}

// collapseParens blanks the outer pair of every `((SELECT ...))` in p, so
// that a doubly parenthesised subquery parses as MySQL parses it. Offsets
// are unchanged: the parentheses become spaces.
func collapseParens(p piece) (piece, bool) {
	t := p.toks
	isPunct := func(i int, s string) bool { return i < len(t) && t[i].kind == tokPunct && t[i].text == s }
	// match[i] is the index of the parenthesis that closes t[i].
	match := map[int]int{}
	var open []int
	for i := range t {
		switch {
		case isPunct(i, "("):
			open = append(open, i)
		case isPunct(i, ")") && len(open) > 0:
			match[open[len(open)-1]] = i
			open = open[:len(open)-1]
		}
	}
	text := []byte(p.text)
	changed := false
	for i := range t {
		j, ok := match[i]
		if !ok || !isPunct(i+1, "(") || !isWord(t[min(i+2, len(t)-1)], "select", "with") {
			continue
		}
		if k, ok := match[i+1]; ok && k == j-1 {
			text[t[i].start], text[t[j].start] = ' ', ' '
			changed = true
		}
	}
	if !changed {
		return piece{}, false
	}
	q := piece{text: string(text)}
	for _, x := range t {
		if x.start < len(text) && (text[x.start] != ' ' || x.kind != tokPunct) {
			q.toks = append(q.toks, x)
		}
	}
	return q, true
}
