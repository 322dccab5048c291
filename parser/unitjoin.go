package parser

import (
	"strings"

	"github.com/dolthub/vitess/go/vt/sqlparser"

	"github.com/dpproxy/dpproxy/internal/unitjoin"
)

// Units reports the privacy unit column of a protected table (lower-case
// name), "" when it declares none (row privacy).
type Units func(table string) string

// UnitJoin is a join of protected tables on their privacy unit, as the
// query wrote it (see ParseEnv, Joins on the unit). Query.Table is then the
// joined table's name (UnitJoin.Name), whose columns are the joined
// tables' columns named table.column ("users.plan"); the engine builds that
// table from the catalog (catalog.JoinTables), which checks spaces and
// sources.
type UnitJoin struct {
	Tables []UnitJoinTable // in FROM order
}

// UnitJoinTable is one protected table of a UnitJoin: its name, unit
// column, join kind and the earlier table its ON names. It is the type the
// join's name is written from (unitjoin.Name), so that the parser and the
// catalog name a join alike.
type UnitJoinTable = unitjoin.Table

// Name is the joined table's name: "events JOIN users ON users.user_id =
// events.user_id", as catalog.UnitJoin.String writes it (unitjoin.Name).
func (j *UnitJoin) Name() string { return unitjoin.Name(j.Tables) }

const unitJoinHelp = "protected tables of one privacy unit space are joined on their unit: FROM events e [LEFT] JOIN users u ON e.user_id = u.user_id [AND ...]"

// protJoin is one protected table of a join, as written.
type protJoin struct {
	step  joinStep
	table string // lower-case
	qual  string // the qualifier as written: the alias, else the table name (lower-case)
	unit  string
}

// unitJoin rewrites a SELECT whose FROM joins two protected tables or more
// into a SELECT over one joined table: the protected tables become the
// joined table (c.virtual), followed by the public tables in their order,
// every column of a protected table is renamed table.column (unqualified),
// and the conditions of inner joins' ON clauses besides the unit equality
// are added to WHERE (they are conditions on the joined rows, applied, as
// WHERE is, after contribution bounding). It returns nil and changes
// nothing when fewer than two protected tables are joined.
func (c *classifier) unitJoin(sel *sqlparser.Select, prot sqlparser.TableName) (*UnitJoin, error) {
	if len(sel.From) != 1 {
		return nil, nil
	}
	jte, ok := sel.From[0].(*sqlparser.JoinTableExpr)
	if !ok {
		return nil, nil
	}
	base, steps, err := c.flattenJoins(jte, prot)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, s := range append([]joinStep{base}, steps...) {
		if c.isProtected(s.name) {
			n++
		}
	}
	if n < 2 {
		return nil, nil
	}
	if !c.isProtected(base.name) {
		return nil, Errorf(CodeDPRefused, "a join of protected tables starts with a protected table: %s", unitJoinHelp)
	}
	var ps []protJoin
	var public []joinStep
	add := func(s joinStep) error {
		p := protJoin{step: s, table: strings.ToLower(s.name.Name.String())}
		p.qual = strings.ToLower(s.ate.As.String())
		if p.qual == "" {
			p.qual = p.table
		}
		if c.units != nil {
			p.unit = c.units(p.table)
		}
		if p.unit == "" {
			return Errorf(CodeDPRefused, "table '%s' declares no privacy unit: protected tables are joined only on their privacy unit (%s); query each table on its own, or join it to public tables (%s)", p.table, unitJoinHelp, joinHelp)
		}
		for _, o := range ps {
			if o.table == p.table {
				return Errorf(CodeDPRefused, "table '%s' is joined to itself: %s, each table once", p.table, unitJoinHelp)
			}
			if o.qual == p.qual {
				return Errorf(CodeNonUniqTable, "Not unique table/alias: '%s'", p.qual)
			}
		}
		ps = append(ps, p)
		return nil
	}
	if err := add(base); err != nil {
		return nil, err
	}
	uj := &UnitJoin{Tables: []UnitJoinTable{{Table: ps[0].table, Unit: ps[0].unit}}}
	var extra []sqlparser.Expr
	for _, s := range steps {
		if !c.isProtected(s.name) {
			public = append(public, s)
			continue
		}
		if err := add(s); err != nil {
			return nil, err
		}
		p := ps[len(ps)-1]
		jt := UnitJoinTable{Table: p.table, Unit: p.unit}
		switch s.kind {
		case sqlparser.JoinStr, sqlparser.StraightJoinStr:
		case sqlparser.LeftJoinStr:
			jt.Left = true
		case sqlparser.RightJoinStr:
			return nil, Errorf(CodeDPRefused, "RIGHT JOIN of protected tables is not supported: write it as a LEFT JOIN from the table whose rows are kept (%s)", unitJoinHelp)
		default:
			return nil, Errorf(CodeDPRefused, "%s of protected tables is not supported: %s", strings.ToUpper(s.kind), unitJoinHelp)
		}
		on, rest, err := c.unitTerm(s, ps)
		if err != nil {
			return nil, err
		}
		if len(rest) > 0 && jt.Left {
			return nil, Errorf(CodeDPRefused, "a LEFT JOIN of protected tables takes only the unit equality in ON (ON %s.%s = ...): conditions on the joined table would decide which of its rows a unit keeps; put them in WHERE, or use an inner join", p.qual, p.unit)
		}
		extra = append(extra, rest...)
		jt.On = on
		uj.Tables = append(uj.Tables, jt)
	}
	name := uj.Name()
	if c.virtual == nil {
		c.virtual = map[string]*UnitJoin{}
	}
	c.virtual[strings.ToLower(name)] = uj
	// The FROM clause: the joined table, then the public tables.
	var from sqlparser.TableExpr = &sqlparser.AliasedTableExpr{Expr: sqlparser.TableName{Name: sqlparser.NewTableIdent(name)}}
	for _, s := range public {
		for _, p := range ps {
			q := strings.ToLower(s.ate.As.String())
			if q == "" {
				q = strings.ToLower(s.name.Name.String())
			}
			if q == p.qual || q == p.table {
				return nil, Errorf(CodeNonUniqTable, "Not unique table/alias: '%s'", q)
			}
		}
		from = &sqlparser.JoinTableExpr{LeftExpr: from, Join: s.kind, RightExpr: s.ate, Condition: s.cond}
	}
	sel.From = sqlparser.TableExprs{from}
	for _, e := range extra {
		if sel.Where == nil {
			sel.Where = &sqlparser.Where{Type: sqlparser.WhereStr, Expr: e}
		} else {
			sel.Where.Expr = &sqlparser.AndExpr{Left: sel.Where.Expr, Right: e}
		}
	}
	return uj, c.renameJoined(sel, ps, public)
}

// unitTerm finds, in a protected join's ON (or USING) clause, the equality
// of its unit with the unit of an earlier protected table: the index of
// that table, and the other terms of the conjunction.
func (c *classifier) unitTerm(s joinStep, ps []protJoin) (int, []sqlparser.Expr, error) {
	me := ps[len(ps)-1]
	notOnUnit := func(what string) error {
		return Errorf(CodeDPRefused, "the join of '%s' is not on the privacy unit (%s): two protected tables are joined only on their unit, so that each joined row is about one unit; %s", me.table, what, unitJoinHelp)
	}
	if len(s.cond.Using) > 0 {
		if len(s.cond.Using) == 1 {
			col := strings.ToLower(s.cond.Using[0].String())
			for i, p := range ps[:len(ps)-1] {
				if col == me.unit && col == p.unit {
					return i, nil, nil
				}
			}
		}
		return 0, nil, notOnUnit("USING " + sqlparser.String(s.cond.Using))
	}
	if s.cond.On == nil {
		return 0, nil, notOnUnit("no condition")
	}
	var terms []sqlparser.Expr
	var split func(e sqlparser.Expr)
	split = func(e sqlparser.Expr) {
		if a, ok := unparen(e).(*sqlparser.AndExpr); ok {
			split(a.Left)
			split(a.Right)
			return
		}
		terms = append(terms, e)
	}
	split(s.cond.On)
	// unitOf is the index of the protected table whose unit col names
	// (qualified, or unqualified and the unit of one table only), or -1.
	unitOf := func(e sqlparser.Expr) int {
		col, ok := unparen(e).(*sqlparser.ColName)
		if !ok || isVariable(col) {
			return -1
		}
		name := strings.ToLower(col.Name.String())
		found := -1
		for i, p := range ps {
			if name != p.unit {
				continue
			}
			if !col.Qualifier.IsEmpty() {
				if c.qualifies(col.Qualifier, p) {
					return i
				}
				continue
			}
			if found >= 0 {
				return -1 // ambiguous
			}
			found = i
		}
		return found
	}
	on := -1
	var rest []sqlparser.Expr
	for _, e := range terms {
		if cmp, ok := unparen(e).(*sqlparser.ComparisonExpr); ok && cmp.Operator == sqlparser.EqualStr && on < 0 {
			l, r := unitOf(cmp.Left), unitOf(cmp.Right)
			me := len(ps) - 1
			switch {
			case l == me && r >= 0 && r < me:
				on = r
				continue
			case r == me && l >= 0 && l < me:
				on = l
				continue
			}
		}
		rest = append(rest, e)
	}
	if on < 0 {
		return 0, nil, notOnUnit("ON " + sqlparser.String(s.cond.On))
	}
	return on, rest, nil
}

// hasColumn reports whether a protected table has the column (a domain,
// private or unit column); without Columns, whether unit says so.
func (c *classifier) hasColumn(table, col string, unit bool) bool {
	if c.columns == nil {
		return unit
	}
	return c.columns(table, col) || (c.private != nil && c.private(table, col))
}

// qualifies reports whether a qualifier as written names the protected
// table p of a join: its alias, or (without one) its name, possibly
// schema-qualified.
func (c *classifier) qualifies(q sqlparser.TableName, p protJoin) bool {
	if p.step.ate.As.String() != "" {
		return q.DbQualifier.IsEmpty() && strings.EqualFold(q.Name.String(), p.step.ate.As.String())
	}
	if !strings.EqualFold(q.Name.String(), p.table) {
		return false
	}
	return q.DbQualifier.IsEmpty() || c.isProtected(q)
}

// renameJoined renames every column of a joined protected table in sel
// to its column of the joined table (table.column, unqualified), clause by
// clause; the name as written stays the output name of a selected column.
// An unqualified name that more than one joined table has (a protected
// or a public one) is 1052, as in MySQL; in ORDER BY, a select-list alias
// wins over a column, as in MySQL.
func (c *classifier) renameJoined(sel *sqlparser.Select, ps []protJoin, public []joinStep) error {
	publicHas := func(col string) bool {
		for _, s := range public {
			if pt := c.publicTable(s.name); pt != nil && pt.column(col) >= 0 {
				return true
			}
		}
		return false
	}
	var aliases []string
	for _, se := range sel.SelectExprs {
		if ae, ok := se.(*sqlparser.AliasedExpr); ok && !ae.As.IsEmpty() {
			aliases = append(aliases, ae.As.String())
		}
	}
	rename := func(node sqlparser.SQLNode, clause string, aliasFirst bool) error {
		if node == nil {
			return nil
		}
		return sqlparser.Walk(func(n sqlparser.SQLNode) (bool, error) {
			switch x := n.(type) {
			case *sqlparser.StarExpr:
				for _, p := range ps {
					if !x.TableName.IsEmpty() && c.qualifies(x.TableName, p) {
						x.TableName = sqlparser.TableName{}
					}
				}
			case *sqlparser.ColName:
				if isVariable(x) {
					return false, nil
				}
				col := strings.ToLower(x.Name.String())
				if !x.Qualifier.IsEmpty() {
					for _, p := range ps {
						if c.qualifies(x.Qualifier, p) {
							c.renamed(x, p.table+"."+col)
							return false, nil
						}
					}
					return false, nil
				}
				if aliasFirst {
					for _, a := range aliases {
						if strings.EqualFold(a, col) {
							return false, nil
						}
					}
				}
				hit := -1
				for i, p := range ps {
					if c.hasColumn(p.table, col, col == p.unit) {
						if hit >= 0 {
							return false, Errorf(CodeNonUniqField, "Column '%s' in %s is ambiguous", x.Name.String(), clause)
						}
						hit = i
					}
				}
				if hit < 0 {
					return false, nil
				}
				if publicHas(col) {
					return false, Errorf(CodeNonUniqField, "Column '%s' in %s is ambiguous", x.Name.String(), clause)
				}
				c.renamed(x, ps[hit].table+"."+col)
				return false, nil
			case *sqlparser.Subquery:
				return false, nil
			}
			return true, nil
		}, node)
	}
	for _, se := range sel.SelectExprs {
		if err := rename(se, "field list", false); err != nil {
			return err
		}
	}
	for _, f := range sel.From {
		if j, ok := f.(*sqlparser.JoinTableExpr); ok {
			for j != nil {
				if j.Condition.On != nil {
					if err := rename(j.Condition.On, "on clause", false); err != nil {
						return err
					}
				}
				j, _ = j.LeftExpr.(*sqlparser.JoinTableExpr)
			}
		}
	}
	if sel.Where != nil {
		if err := rename(sel.Where.Expr, "where clause", false); err != nil {
			return err
		}
	}
	if err := rename(sel.GroupBy, "group statement", false); err != nil {
		return err
	}
	if sel.Having != nil {
		if err := rename(sel.Having.Expr, "having clause", false); err != nil {
			return err
		}
	}
	return rename(sel.OrderBy, "order clause", true)
}

// renamed renames x to the joined table's column name, remembering how it
// was written (for output names and messages).
func (c *classifier) renamed(x *sqlparser.ColName, name string) {
	if c.written == nil {
		c.written = map[*sqlparser.ColName]string{}
	}
	short := x.Name.String()
	*x = sqlparser.ColName{Name: sqlparser.NewColIdent(name)}
	c.written[x] = short
}

// joinedColumn splits a column of a joined table (table.column) when
// table names a join of protected tables of this statement.
func (c *classifier) joinedColumn(table, col string) (string, string, bool) {
	uj := c.virtual[table]
	if uj == nil {
		return "", "", false
	}
	t, cc, ok := strings.Cut(col, ".")
	if !ok {
		return "", "", false
	}
	for _, jt := range uj.Tables {
		if jt.Table == t {
			return t, cc, true
		}
	}
	return "", "", false
}

// withJoins makes the classifier's view of the catalog include the joined
// tables its statements build (unitJoin): a joined table is protected,
// and its column table.column is the column of that table (a domain,
// private or unit column as the table's own).
func (c *classifier) withJoins() {
	protected, columns, private := c.protected, c.columns, c.private
	c.protected = func(schema, table string) bool {
		if schema == "" && c.virtual[table] != nil {
			return true
		}
		return protected(schema, table)
	}
	if columns != nil {
		c.columns = func(table, col string) bool {
			if c.virtual[table] != nil {
				t, cc, ok := c.joinedColumn(table, col)
				return ok && columns(t, cc)
			}
			return columns(table, col)
		}
	}
	if private != nil {
		c.private = func(table, col string) bool {
			if c.virtual[table] != nil {
				t, cc, ok := c.joinedColumn(table, col)
				return ok && private(t, cc)
			}
			return private(table, col)
		}
	}
}
