package catalog

import (
	"fmt"
	"math"

	"github.com/dpproxy/dpproxy/internal/unitjoin"
)

// UnitJoin is a row source that joins protected tables of one privacy unit
// space on their unit (FROM events e JOIN users u ON e.user_id =
// u.user_id): the joined table that JoinTables builds reads it instead of a
// source table. Each joined row belongs to one unit, the first table's (an
// inner join's units are equal; a LEFT JOIN's unmatched rows carry the
// first table's unit and NULLs), so bounding the joined rows per unit
// bounds what one unit contributes, whatever the fan-out of the join.
type UnitJoin struct {
	Tables []JoinedTable // in FROM order; Tables[0] is the first table
}

// JoinedTable is one table of a UnitJoin.
type JoinedTable struct {
	Table       string // the catalog table, lower-case
	SourceTable string // its table in the source
	Unit        string // its unit column
	Left        bool   // LEFT JOIN (false for the first table: inner)
	// On is the index of the earlier table whose unit ON equates with this
	// table's (0 for the first table).
	On int
}

// String is the join as the joined table's name and EXPLAIN show it:
// "events JOIN users ON users.user_id = events.user_id", the name the
// parser gives the table a joined query reads (unitjoin.Name).
func (j *UnitJoin) String() string {
	if j == nil {
		return ""
	}
	ts := make([]unitjoin.Table, len(j.Tables))
	for i, t := range j.Tables {
		ts[i] = unitjoin.Table{Table: t.Table, Unit: t.Unit, Left: t.Left, On: t.On}
	}
	return unitjoin.Name(ts)
}

// JoinedColumn is the name of table's column col in a joined table:
// "users.plan".
func JoinedColumn(table, col string) string { return table + "." + col }

// JoinError is a join of protected tables that JoinTables refuses; its
// message says what to write instead.
type JoinError struct{ msg string }

func (e *JoinError) Error() string { return e.msg }

func joinErrorf(format string, args ...any) error {
	return &JoinError{msg: fmt.Sprintf(format, args...)}
}

// JoinTables builds the protected table a join of protected tables on
// their unit reads (see UnitJoin): its columns are every joined table's
// domain columns, named table.column (JoinedColumn), so the domain of a
// query over it is the product of the joined columns it reads. It is
// refused (a *JoinError) unless every table declares a privacy unit, all
// are in one space (Table.Space), read from one source (the join is one
// pushed-down statement) and use one noise family, and no table is joined
// twice.
//
// Which bounds and budget govern the joined query:
//
//   - the contribution bounds (max_rows k, max_groups g, max_rows_per_group
//     r) are the first table's, applied to the joined rows: each unit
//     keeps at most k joined rows, in at most g cells, at most r per cell,
//     so the sensitivity is min(k, g·r) per unit whatever the fan-out. The
//     first table is the one the analyst counts (FROM events JOIN users
//     counts events, and events' bounds say how many events one person
//     may have); the bounds of a dimension-like table (one row per user)
//     would truncate the count to nothing;
//   - the charge goes to every joined table (the ledger entry names them
//     all, and each table's budgets must hold it), which is the space's
//     budget once budgets belong to spaces: all joined tables are of one
//     space;
//   - per query, the strictest of the tables' settings holds: the least
//     default and maximum ε per query, δ, δ per query and cell limit; stored
//     measurements are reused only if every table allows it.
//
// The unit of the joined table is the first table's unit column (named
// JoinedColumn(first, unit)); the other tables' units and private columns
// are private columns of the joined table.
func JoinTables(cat *Catalog, j *UnitJoin) (*Table, error) {
	if j == nil || len(j.Tables) < 2 {
		return nil, joinErrorf("a join of protected tables needs two tables or more")
	}
	var ts []*Table
	seen := map[string]bool{}
	for i := range j.Tables {
		jt := &j.Tables[i]
		t := cat.Table(jt.Table)
		if t == nil {
			return nil, joinErrorf("table '%s' is not a protected table", jt.Table)
		}
		if seen[t.Name] {
			return nil, joinErrorf("table '%s' is joined to itself: a join on the unit joins different tables of one space; query the table once", t.Name)
		}
		seen[t.Name] = true
		if t.Unit == nil {
			return nil, joinErrorf("table '%s' declares no privacy unit: protected tables are joined only on their privacy unit, and only tables that declare one (privacy_unit in the catalog) can be; query each table on its own, or join it to public tables", t.Name)
		}
		if i > 0 {
			f := ts[0]
			if t.Space() != f.Space() {
				return nil, joinErrorf("tables '%s' (space %s) and '%s' (space %s) are in different privacy unit spaces: their units are different people, so a joined row would mix two units; only tables of one space are joined", f.Name, f.Space(), t.Name, t.Space())
			}
			if t.Source != f.Source {
				return nil, joinErrorf("tables '%s' and '%s' are in different sources (%s, %s): a join of protected tables runs as one statement in one database; query each on its own", f.Name, t.Name, f.Source, t.Source)
			}
			if t.Noise != f.Noise {
				return nil, joinErrorf("tables '%s' (%s noise) and '%s' (%s noise) declare different noise families: a joined query is measured and charged once, under one; query each on its own", f.Name, f.Noise, t.Name, t.Noise)
			}
		}
		jt.Table, jt.Unit = t.Name, t.Unit.Column
		jt.SourceTable = t.SourceTable
		if jt.SourceTable == "" {
			jt.SourceTable = t.Name
		}
		ts = append(ts, t)
	}
	first := ts[0]
	u := *first.Unit
	u.Column = JoinedColumn(first.Name, first.Unit.Column)
	out := &Table{
		Name:               j.String(),
		Source:             first.Source,
		Noise:              first.Noise,
		Budget:             first.Budget,
		MaxCells:           first.MaxCells,
		NoMeasurementReuse: first.NoMeasurementReuse,
		Unit:               &u,
		Join:               j,
	}
	// SourceTable stays "": the joined table is no table of the source.
	least := func(a, b float64) float64 {
		switch {
		case a == 0:
			return b
		case b == 0:
			return a
		}
		return math.Min(a, b)
	}
	for i, t := range ts {
		for _, c := range t.Columns {
			cc := *c
			cc.Name = JoinedColumn(t.Name, c.Name)
			out.Columns = append(out.Columns, &cc)
		}
		for _, p := range t.Private {
			out.Private = append(out.Private, JoinedColumn(t.Name, p))
		}
		if i == 0 {
			continue
		}
		out.Private = append(out.Private, JoinedColumn(t.Name, t.Unit.Column))
		b := &out.Budget
		b.DefaultPerQuery = least(b.DefaultPerQuery, t.Budget.DefaultPerQuery)
		b.MaxPerQuery = least(b.MaxPerQuery, t.Budget.MaxPerQuery)
		b.Total = least(b.Total, t.Budget.Total)
		b.PerUser = least(b.PerUser, t.Budget.PerUser)
		b.Delta = least(b.Delta, t.Budget.Delta)
		b.DeltaPerQuery = least(b.DeltaPerQuery, t.Budget.DeltaPerQuery)
		out.MaxCells = min(out.MaxCells, t.MaxCells)
		out.NoMeasurementReuse = out.NoMeasurementReuse || t.NoMeasurementReuse
	}
	return out, nil
}

// JoinedTables are the catalog tables a table reads: the joined tables of
// a UnitJoin, else t itself. A charge on t is a charge on each of them.
func (t *Table) JoinedTables() []string {
	if t.Join == nil {
		return []string{t.Name}
	}
	out := make([]string, len(t.Join.Tables))
	for i, jt := range t.Join.Tables {
		out[i] = jt.Table
	}
	return out
}
