package parser

import (
	"strings"
	"time"

	"github.com/dolthub/vitess/go/vt/sqlparser"
)

// PublicTable is a public dimension table, as the parser sees it: a
// protected table may be joined to it, and each of its columns is then a
// function of the join key's domain cells (Lookup).
type PublicTable struct {
	Name    string   // lower-case
	Columns []string // lower-case
	// Text reports, per column, whether its values are text (compared as
	// strings, with MySQL's collation) rather than numbers.
	Text []bool
	// Rows hold one value per column; Value{Null: true} for NULL.
	Rows [][]Value
}

// PublicTables returns the public table that (schema, table) names, or
// nil. schema is the qualifier as written ("" when unqualified), table is
// lower-case.
type PublicTables func(schema, table string) *PublicTable

// PrivateColumns reports whether the protected table has a column that
// exists but may never be read (such as a user id, see catalog.Table.Private).
type PrivateColumns func(table, column string) bool

// Env is what the parser knows of the catalog. Protected is required; the
// others may be nil: Columns nil checks no column's existence, Private nil
// declares no private column, Public nil declares no public table.
type Env struct {
	Protected Protected
	Columns   Columns
	Private   PrivateColumns
	Public    PublicTables
	// Units names each protected table's privacy unit column; nil declares
	// none (a join of protected tables is then refused).
	Units Units
	// Now is the request's time (see ParseAt); the zero time is time.Now().
	Now time.Time
}

// ParseEnv is Parse with everything the catalog declares: the columns of
// protected tables (as ParseWithColumns), their private columns (refused
// with 3900 wherever a query names them) and public tables (read freely:
// statements over public tables only are KindPassthrough; joined to a
// protected table, see Lookup).
//
// # Joins
//
// A SELECT over a protected table may join it to public tables:
//
//	FROM t [AS] a [INNER | LEFT [OUTER]] JOIN d [AS] b ON a.c = b.k ...
//
// any number of them, each on one equality between a domain column of the
// protected table (or a column of a public table joined before it) and a
// column k of the joined public table; USING (c) names a column of both.
// `FROM d JOIN t ON ...` and `FROM d RIGHT JOIN t ON ...` (the public table
// first) are the same joins. Columns of the joined tables may then be used
// wherever a domain column may: in the select list, WHERE, GROUP BY,
// HAVING, ORDER BY and inside aggregates. The parser rewrites each to a
// Lookup over the key (so compile/ evaluates it on the declared domain,
// never on data) and an inner join adds `key matches a row of d` to WHERE:
// each protected row joins at most one public row, which compile/ checks on
// every cell (a key that is not unique in the public table is refused, so
// a join never counts one protected row twice and the sensitivity is that
// of the same query without the join).
//
// Two or more protected tables of one privacy unit space may be joined on
// their unit (unitjoin.go): FROM events e [LEFT] JOIN users u ON e.user_id
// = u.user_id; the query then reads one joined table (Query.UnitJoin).
//
// Refused with 3900 and what to write instead: joins between protected
// tables that are not on their unit, a join on a private column, joins to a table that is neither
// protected nor public, a protected table that is not the preserved side
// (public LEFT JOIN protected), RIGHT joins from the protected table, FULL,
// NATURAL and CROSS joins, joins without a condition (FROM t, d), ON
// conditions other than one column equality, and domain lists over joins
// (read the public table itself instead).
func ParseEnv(sql string, env Env) ([]Statement, error) {
	if env.Protected == nil {
		env.Protected = func(string, string) bool { return false }
	}
	if env.Now.IsZero() {
		env.Now = time.Now()
	}
	env.Now = env.Now.UTC().Truncate(time.Second)
	var out []Statement
	for _, p := range split(sql) {
		st, err := parseOneEnv(p, env)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// Lookup is a column of a public table reached through a join (FROM t JOIN
// d ON t.c = d.k): on each domain cell, the value of Column in the row of
// d whose key column equals Key there (MySQL's = and collation), NULL when
// no row matches. With Column "" it is the join's match indicator: 1 when a
// row matches, 0 when none (an inner join's condition). Key is an
// expression of the protected table's domain columns: a column, or the
// Lookup of a public table joined before. More than one matching row for a
// cell is an error when the cell is evaluated (compile/): the join would
// count one protected row several times.
type Lookup struct {
	Key Expr
	// Table and Alias name the public table and its qualifier in the query
	// (lower-case); Column (may be "") and KeyColumn are its columns.
	Table, Alias, Column, KeyColumn string
	// Keys and Values are the key column's and Column's values, row by row.
	Keys, Values []Value
}

func (Lookup) isExpr() {}

// Name is the column as the query names it (alias.column), or for the
// match indicator the key column.
func (l Lookup) Name() string {
	if l.Column == "" {
		return l.Alias + "." + l.KeyColumn
	}
	return l.Alias + "." + l.Column
}

// Join is one public table joined to a query's protected table.
type Join struct {
	Left bool // LEFT JOIN; else inner
	// Match is the join's match indicator (a Lookup with Column ""): its
	// Key is the protected side of ON, its Keys the public key column.
	Match Lookup
}

// SQL describes the join for EXPLAIN: LEFT JOIN countries d ON country = d.code.
func (j Join) SQL(keySQL string) string {
	kind := "JOIN"
	if j.Left {
		kind = "LEFT JOIN"
	}
	alias := ""
	if j.Match.Alias != j.Match.Table {
		alias = " " + j.Match.Alias
	}
	return kind + " " + j.Match.Table + alias + " ON " + keySQL + " = " + j.Match.Alias + "." + j.Match.KeyColumn
}

// joined is one public table joined to the protected table.
type joined struct {
	qual    string // the qualifier in IR names: lower-case alias, else the table name
	written string // the alias as written ("" if none)
	name    sqlparser.TableName
	table   *PublicTable
	left    bool
	key     Expr // the protected side of ON; nil until the ON clause is resolved
	keyCol  int
	keys    []Value // the key column's values, shared by the join's Lookups
}

func (j *joined) lookup(col int) Lookup {
	if j.keys == nil {
		// One slice for every Lookup of the join, so compile/ indexes
		// the keys once.
		j.keys = make([]Value, len(j.table.Rows))
		for i, r := range j.table.Rows {
			j.keys[i] = r[j.keyCol]
		}
	}
	l := Lookup{Key: j.key, Table: j.table.Name, Alias: j.qual, KeyColumn: j.table.Columns[j.keyCol], Keys: j.keys}
	for _, r := range j.table.Rows {
		if col >= 0 {
			l.Values = append(l.Values, r[col])
		}
	}
	if col >= 0 {
		l.Column = j.table.Columns[col]
	}
	return l
}

// joinStep is one JOIN of a FROM clause, flattened.
type joinStep struct {
	ate  *sqlparser.AliasedTableExpr
	name sqlparser.TableName
	kind string
	cond sqlparser.JoinCondition
}

const joinHelp = "dpproxy joins a protected table to public tables on a domain column: FROM events e [LEFT] JOIN countries d ON e.country = d.code"

// flattenJoins turns a left-deep join tree into its first table and the
// joins that follow it.
func (c *classifier) flattenJoins(t sqlparser.TableExpr, prot sqlparser.TableName) (joinStep, []joinStep, error) {
	switch x := t.(type) {
	case *sqlparser.ParenTableExpr:
		if len(x.Exprs) == 1 {
			return c.flattenJoins(x.Exprs[0], prot)
		}
	case *sqlparser.AliasedTableExpr:
		if tn, ok := x.Expr.(sqlparser.TableName); ok {
			return joinStep{ate: x, name: tn}, nil, nil
		}
		return joinStep{}, nil, refuseSubquery(prot)
	case *sqlparser.JoinTableExpr:
		base, steps, err := c.flattenJoins(x.LeftExpr, prot)
		if err != nil {
			return base, nil, err
		}
		right, more, err := c.flattenJoins(x.RightExpr, prot)
		if err != nil {
			return base, nil, err
		}
		if len(more) > 0 {
			return base, nil, Errorf(CodeDPRefused, "nested joins (a JOIN (b JOIN c)) are not supported: %s, one JOIN after the other", joinHelp)
		}
		right.kind, right.cond = x.Join, x.Condition
		return base, append(steps, right), nil
	}
	return joinStep{}, nil, Errorf(CodeDPRefused, "this FROM clause is not supported with a protected table: %s", joinHelp)
}

// fromJoins reads a FROM clause that joins the protected table to public
// tables: the protected table's entry, and the public tables in join order
// (their ON clauses are resolved later, by resolveJoins).
func (c *classifier) fromJoins(j *sqlparser.JoinTableExpr, prot sqlparser.TableName) (joinStep, []joinStep, error) {
	base, steps, err := c.flattenJoins(j, prot)
	if err != nil {
		return base, nil, err
	}
	protName := strings.ToLower(prot.Name.String())
	// The public table first: an inner join commutes, and a RIGHT JOIN
	// that preserves the protected table is its LEFT JOIN.
	if !c.isProtected(base.name) && len(steps) > 0 && c.isProtected(steps[0].name) {
		switch steps[0].kind {
		case sqlparser.JoinStr, sqlparser.StraightJoinStr:
			base, steps[0] = steps[0], joinStep{ate: base.ate, name: base.name, kind: sqlparser.JoinStr, cond: steps[0].cond}
		case sqlparser.RightJoinStr:
			base, steps[0] = steps[0], joinStep{ate: base.ate, name: base.name, kind: sqlparser.LeftJoinStr, cond: steps[0].cond}
		case sqlparser.LeftJoinStr:
			return base, nil, Errorf(CodeDPRefused, "%s LEFT JOIN %s keeps the rows of the public table that match no protected row, which would reveal whether any row matches: join from the protected table, FROM %s LEFT JOIN %s ON ...", base.name.Name.String(), protName, protName, base.name.Name.String())
		}
	}
	if !c.isProtected(base.name) {
		return base, nil, Errorf(CodeDPRefused, "the protected table '%s' must be the first table of the join: %s", protName, joinHelp)
	}
	for _, s := range steps {
		name := strings.ToLower(s.name.Name.String())
		switch {
		case c.isProtected(s.name):
			return base, nil, Errorf(CodeDPRefused, "joins between two protected tables (%s and %s) are not supported: a joined row would mix the rows of two tables, so no per-row privacy bound holds; query each protected table on its own, or join it to a public table (%s)", protName, name, joinHelp)
		case c.publicTable(s.name) == nil:
			return base, nil, Errorf(CodeDPRefused, "table '%s' is not a public table: %s, where countries is a table declared under public_tables in the catalog", name, joinHelp)
		}
		switch s.kind {
		case sqlparser.JoinStr, sqlparser.StraightJoinStr, sqlparser.LeftJoinStr:
		case sqlparser.RightJoinStr, sqlparser.FullOuterJoinStr:
			return base, nil, Errorf(CodeDPRefused, "%s %s keeps the rows of the public table that match no protected row, which would reveal whether any row matches: use an inner join or a LEFT JOIN from the protected table (%s)", strings.ToUpper(s.kind), name, joinHelp)
		default:
			return base, nil, Errorf(CodeDPRefused, "%s is not supported: name the key, %s", strings.ToUpper(s.kind), joinHelp)
		}
		if s.cond.On == nil && len(s.cond.Using) == 0 {
			return base, nil, Errorf(CodeDPRefused, "a join without a condition (CROSS JOIN) would count every protected row once per row of '%s': %s", name, joinHelp)
		}
	}
	return base, steps, nil
}

func (c *classifier) publicTable(t sqlparser.TableName) *PublicTable {
	if c.public == nil || t.IsEmpty() {
		return nil
	}
	return c.public(t.DbQualifier.String(), strings.ToLower(t.Name.String()))
}

// resolveJoins resolves each join's ON or USING clause, in order: a join
// sees the tables before it.
func (b *selectBuilder) resolveJoins(steps []joinStep) error {
	for _, s := range steps {
		j := &joined{name: s.name, written: s.ate.As.String(), table: b.c.publicTable(s.name), left: s.kind == sqlparser.LeftJoinStr}
		j.qual = strings.ToLower(j.written)
		if j.qual == "" {
			j.qual = strings.ToLower(s.name.Name.String())
		}
		for _, o := range b.joins {
			if o.qual == j.qual {
				return Errorf(CodeNonUniqTable, "Not unique table/alias: '%s'", j.qual)
			}
		}
		if j.qual == strings.ToLower(b.table.Name.String()) || (b.alias != "" && strings.EqualFold(b.alias, j.qual)) {
			return Errorf(CodeNonUniqTable, "Not unique table/alias: '%s'", j.qual)
		}
		b.joins = append(b.joins, j)
		onHelp := "ON takes one equality between a domain column of the protected table (or a column of a public table joined before) and a column of the joined public table: ON e.country = d.code; put other conditions in WHERE"
		var keySide, otherSide string
		var keyErr error
		switch {
		case len(s.cond.Using) == 1:
			col := strings.ToLower(s.cond.Using[0].String())
			if j.keyCol = j.table.column(col); j.keyCol < 0 {
				return Errorf(CodeBadField, "Unknown column '%s' in 'from clause'", col)
			}
			// USING (c): c of the tables before, unqualified.
			saved := b.joins
			b.joins = b.joins[:len(b.joins)-1]
			otherSide, keyErr = b.column(&sqlparser.ColName{Name: sqlparser.NewColIdent(col)}, "from clause")
			b.joins = saved
			if keyErr != nil {
				return keyErr
			}
		case len(s.cond.Using) > 1:
			return Errorf(CodeDPRefused, "USING with several columns is not supported: %s", onHelp)
		default:
			cmp, ok := unparen(s.cond.On).(*sqlparser.ComparisonExpr)
			if !ok || cmp.Operator != sqlparser.EqualStr {
				return Errorf(CodeDPRefused, "ON %s is not supported: %s", sqlparser.String(s.cond.On), onHelp)
			}
			l, lok := unparen(cmp.Left).(*sqlparser.ColName)
			r, rok := unparen(cmp.Right).(*sqlparser.ColName)
			if !lok || !rok || isVariable(l) || isVariable(r) {
				return Errorf(CodeDPRefused, "ON %s is not supported: %s", sqlparser.String(s.cond.On), onHelp)
			}
			ln, err := b.column(l, "on clause")
			if err != nil {
				return err
			}
			rn, err := b.column(r, "on clause")
			if err != nil {
				return err
			}
			if err := b.checkColumn(l, ln, "on clause"); err != nil {
				return err
			}
			if err := b.checkColumn(r, rn, "on clause"); err != nil {
				return err
			}
			mine := func(n string) bool { return strings.HasPrefix(n, j.qual+".") }
			switch {
			case mine(ln) && !mine(rn):
				keySide, otherSide = ln, rn
			case mine(rn) && !mine(ln):
				keySide, otherSide = rn, ln
			default:
				return Errorf(CodeDPRefused, "ON %s does not join '%s' to the tables before it: %s", sqlparser.String(s.cond.On), j.qual, onHelp)
			}
			j.keyCol = j.table.column(strings.TrimPrefix(keySide, j.qual+"."))
		}
		if err := b.checkColumnName(otherSide, "on clause"); err != nil {
			return err
		}
		j.key = b.joinExpr(otherSide)
	}
	return nil
}

func (t *PublicTable) column(name string) int {
	for i, c := range t.Columns {
		if c == name {
			return i
		}
	}
	return -1
}

// joinExpr is the expression a resolved column name stands for: a domain
// column, or a Lookup for a column of a joined public table (alias.col).
func (b *selectBuilder) joinExpr(name string) Expr {
	if q, col, ok := strings.Cut(name, "."); ok {
		for _, j := range b.joins {
			if j.qual == q && j.key != nil {
				return j.lookup(j.table.column(col))
			}
		}
	}
	return Col{Name: name}
}

// joinColumn resolves a column reference when public tables are joined:
// alias.col for a column of a joined public table (qualified by it, or
// unqualified and found in exactly one table), the plain name for the
// protected table's. found is false when c belongs to no joined table (the
// caller then resolves it against the protected table).
func (b *selectBuilder) joinColumn(c *sqlparser.ColName, clause string) (name string, found bool, err error) {
	col := strings.ToLower(c.Name.String())
	if !c.Qualifier.IsEmpty() {
		for _, j := range b.joins {
			if b.qualifiesJoin(c.Qualifier, j) {
				if j.table.column(col) < 0 {
					return "", true, Errorf(CodeBadField, "Unknown column '%s' in '%s'", colText(c), clause)
				}
				return j.qual + "." + col, true, nil
			}
		}
		return "", false, nil
	}
	var hits []string
	for _, j := range b.joins {
		if j.table.column(col) >= 0 {
			hits = append(hits, j.qual+"."+col)
		}
	}
	inProtected := (b.c.columns != nil && b.c.columns(strings.ToLower(b.table.Name.String()), col)) || b.isPrivate(col)
	switch {
	case len(hits) == 0:
		return "", false, nil
	case len(hits) > 1 || inProtected:
		return "", true, Errorf(CodeNonUniqField, "Column '%s' in %s is ambiguous", c.Name.String(), clause)
	}
	return hits[0], true, nil
}

func (b *selectBuilder) qualifiesJoin(q sqlparser.TableName, j *joined) bool {
	name := q.Name.String()
	if !q.DbQualifier.IsEmpty() {
		return j.written == "" && strings.EqualFold(name, j.name.Name.String()) && b.c.publicTable(q) != nil
	}
	if j.written != "" {
		return strings.EqualFold(name, j.written)
	}
	return strings.EqualFold(name, j.name.Name.String())
}

// checkColumn checks a resolved column of the protected table: it must be a
// domain column, not a private one.
func (b *selectBuilder) checkColumn(c *sqlparser.ColName, name, clause string) error {
	if b.dimName(name) {
		return nil
	}
	table := strings.ToLower(b.table.Name.String())
	if b.c.private != nil && b.c.private(table, name) {
		return refusePrivate(table, name)
	}
	if b.c.columns != nil && !b.c.columns(table, name) {
		return Errorf(CodeBadField, "Unknown column '%s' in '%s'", colText(c), clause)
	}
	return nil
}

func (b *selectBuilder) checkColumnName(name, clause string) error {
	if b.dimName(name) {
		return nil
	}
	return b.checkColumn(&sqlparser.ColName{Name: sqlparser.NewColIdent(name)}, name, clause)
}

func refusePrivate(table, col string) *Error {
	return Errorf(CodeDPRefused, "column '%s' of '%s' is private: it identifies who a row belongs to and is never read, selected, grouped, filtered or joined on; query the declared domain columns (SHOW COLUMNS FROM %s lists them)", col, table, table)
}

// rewriteJoins replaces every column of a joined public table in q by its
// Lookup, and adds each inner join's match condition to WHERE, so that
// compile/ sees expressions over the protected table's domain only.
func (b *selectBuilder) rewriteJoins(q *Query) {
	if len(b.joins) == 0 {
		return
	}
	f := func(e Expr) (Expr, bool) {
		if c, ok := e.(Col); ok && b.dimName(c.Name) {
			return b.joinExpr(c.Name), true
		}
		return nil, false
	}
	var match []Pred
	for _, j := range b.joins {
		q.Joins = append(q.Joins, Join{Left: j.left, Match: j.lookup(-1)})
		if !j.left {
			match = append(match, Truth{X: j.lookup(-1)})
		}
	}
	dim := b.dimName
	item := func(it *SelectItem) {
		if dim(it.Column) {
			if it.Agg == AggNone {
				it.Key = b.joinExpr(it.Column)
			} else {
				it.Arg = b.joinExpr(it.Column)
			}
			it.Column = ""
		}
		it.Arg = RewriteExpr(it.Arg, f)
		it.Key = RewriteExpr(it.Key, f)
		rewriteAggExpr(it.Expr, f)
	}
	for i := range q.Select {
		item(&q.Select[i])
	}
	if q.Where != nil {
		q.Where = RewritePred(q.Where, f)
	}
	if len(match) > 0 {
		if q.Where != nil {
			match = append([]Pred{q.Where}, match...)
		}
		if len(match) == 1 {
			q.Where = match[0]
		} else {
			q.Where = And{Terms: match}
		}
	}
	if q.Having != nil {
		q.Having = RewritePred(q.Having, f)
	}
	// GROUP BY: the joined columns become expressions, keeping the
	// written order of keys.
	n := len(q.GroupBy) + len(q.GroupExprs)
	keys := make([]Expr, n)
	for _, g := range q.GroupExprs {
		keys[g.Pos] = RewriteExpr(g.Expr, f)
	}
	i := 0
	var plain []string
	for p := range keys {
		if keys[p] == nil && i < len(q.GroupBy) {
			name := q.GroupBy[i]
			i++
			if dim(name) {
				keys[p] = b.joinExpr(name)
			} else {
				plain = append(plain, name)
				keys[p] = Col{Name: "\x00plain"}
			}
		}
	}
	q.GroupBy, q.GroupExprs = plain, nil
	for p, k := range keys {
		if c, ok := k.(Col); !ok || c.Name != "\x00plain" {
			q.GroupExprs = append(q.GroupExprs, GroupExpr{Pos: p, Expr: k})
		}
	}
	for i := range q.OrderBy {
		o := &q.OrderBy[i]
		if dim(o.Column) {
			if o.Agg == AggNone {
				o.Key = b.joinExpr(o.Column)
			} else {
				o.Arg = b.joinExpr(o.Column)
			}
			o.Column = ""
		}
		o.Arg = RewriteExpr(o.Arg, f)
		o.Key = RewriteExpr(o.Key, f)
		rewriteAggExpr(o.Expr, f)
	}
}

func rewriteAggExpr(e *AggExpr, f func(Expr) (Expr, bool)) {
	if e == nil {
		return
	}
	if e.Leaf != nil {
		if strings.Contains(e.Leaf.Column, ".") {
			if y, ok := f(Col{Name: e.Leaf.Column}); ok {
				e.Leaf.Arg, e.Leaf.Column = y, ""
			}
		}
		e.Leaf.Arg = RewriteExpr(e.Leaf.Arg, f)
	}
	rewriteAggExpr(e.Left, f)
	rewriteAggExpr(e.Right, f)
	for _, a := range e.Args {
		rewriteAggExpr(a, f)
	}
}

// dimName reports whether a resolved name is a column of a joined public
// table (alias.column); a column of a join of protected tables
// (table.column, unitjoin.go) is not.
func (b *selectBuilder) dimName(name string) bool {
	q, _, ok := strings.Cut(name, ".")
	if !ok {
		return false
	}
	for _, j := range b.joins {
		if j.qual == q {
			return true
		}
	}
	return false
}

// qualifiesAJoin reports whether q names a joined public table.
func (b *selectBuilder) qualifiesAJoin(q sqlparser.TableName) bool {
	for _, j := range b.joins {
		if b.qualifiesJoin(q, j) {
			return true
		}
	}
	return false
}

// isPrivate reports whether an unqualified name is a private column of the
// protected table.
func (b *selectBuilder) isPrivate(name string) bool {
	return b.c.private != nil && b.c.private(strings.ToLower(b.table.Name.String()), strings.ToLower(name))
}
