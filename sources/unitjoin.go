package sources

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/dpproxy/dpproxy/catalog"
)

// Joins on the unit. A table built by catalog.JoinTables reads the join of
// protected tables on their unit, not a table of the source: its histogram
// is the usual bounded query (units.go) over the joined rows, which a
// common table expression names, so the whole join, its contribution
// bounding and the count are one pushed-down statement:
//
//	WITH dpproxy_joined AS (
//	  SELECT t0.user_id AS "events.user_id", t0.country AS "events.country", t1.plan AS "users.plan"
//	  FROM events t0 JOIN users t1 ON t1.id = t0.user_id)
//	<the bounded query over dpproxy_joined>
//
// The joined rows are bounded, not the tables': each unit (the first
// table's unit column) keeps its max_rows joined rows of least keyed hash
// of the unit and every joined column, and with max_groups and
// max_rows_per_group its cells and rows per cell likewise, so one unit
// changes the histogram by at most min(k, g·r) whatever the fan-out of the
// join. Every row of the join holds rows of one unit only (the ON clause
// equates the units), so adding or removing a unit's rows in any of the
// tables changes only that unit's joined rows.

// joinedName is the common table expression holding the joined rows.
const joinedName = "dpproxy_joined"

// joinedRows is the SELECT of t's joined rows, quoting identifiers with
// ident and source tables with table.
func joinedRows(t *catalog.Table, ident func(string) string, table func(string) string) string {
	j := t.Join
	alias := func(i int) string { return fmt.Sprintf("dpproxy_t%d", i) }
	var sel []string
	first := j.Tables[0]
	sel = append(sel, alias(0)+"."+ident(first.Unit)+" AS "+ident(t.Unit.Column))
	for _, c := range t.Columns {
		name, col, _ := strings.Cut(c.Name, ".")
		for i, jt := range j.Tables {
			if jt.Table == name {
				sel = append(sel, alias(i)+"."+ident(col)+" AS "+ident(c.Name))
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "SELECT %s FROM %s %s", strings.Join(sel, ", "), table(first.SourceTable), alias(0))
	for i, jt := range j.Tables[1:] {
		kind := "JOIN"
		if jt.Left {
			kind = "LEFT JOIN"
		}
		on := j.Tables[jt.On]
		fmt.Fprintf(&b, " %s %s %s ON %s.%s = %s.%s", kind, table(jt.SourceTable), alias(i+1), alias(i+1), ident(jt.Unit), alias(jt.On), ident(on.Unit))
	}
	return b.String()
}

// withJoined prefixes q (a bounded query over joinedName) with the common
// table expression of t's joined rows; q unchanged for other tables.
func withJoined(t *catalog.Table, ident func(string) string, table func(string) string, q string) string {
	if t.Join == nil {
		return q
	}
	cte := ident(joinedName) + " AS (" + joinedRows(t, ident, table) + ")"
	if rest, ok := strings.CutPrefix(q, "WITH "); ok {
		return "WITH " + cte + ", " + rest
	}
	return "WITH " + cte + " " + q
}

// joined is withJoined for a server's pushdown.
func (q *pushdown) joined(sql string) string {
	return withJoined(q.t, q.d.ident, func(s string) string { return table(q.d, s) }, sql)
}

// UnitTypeError refuses a join on units whose columns have different
// types in the source: the join's equality would then convert one of them
// (7 = '007' in MySQL), so a joined row could hold rows of two units.
type UnitTypeError struct{ msg string }

func (e *UnitTypeError) Error() string { return e.msg }

// CheckUnitJoin checks that the unit columns of a joined table's tables
// have one type (and, where the engine has them, one collation) in the
// source; a *UnitTypeError says which differ. It reads the source's schema
// only, never its rows, and does nothing for other tables.
func (s *Set) CheckUnitJoin(ctx context.Context, t *catalog.Table) error {
	if t.Join == nil {
		return nil
	}
	src := s.sources[t.Source]
	if src == nil {
		return fmt.Errorf("table %s: unknown source %q", t.Name, t.Source)
	}
	db, _ := src.be.rowReader()
	var kind string
	switch src.be.(type) {
	case *sqliteSource:
		kind = "sqlite"
	case *server:
		kind = src.cfg.Driver
	}
	var first string
	for i, jt := range t.Join.Tables {
		typ, err := unitColumnType(ctx, db, kind, jt.SourceTable, jt.Unit)
		if err != nil {
			return fmt.Errorf("table %s: the type of %s.%s: %w", t.Name, jt.Table, jt.Unit, err)
		}
		if i == 0 {
			first = typ
			continue
		}
		if !strings.EqualFold(typ, first) {
			f := t.Join.Tables[0]
			return &UnitTypeError{msg: fmt.Sprintf("the unit columns %s.%s (%s) and %s.%s (%s) have different types in the source: the join would convert one to compare them, and rows of different units could match; give both columns one type (and collation) in the database, or query each table on its own", f.Table, f.Unit, first, jt.Table, jt.Unit, typ)}
		}
	}
	return nil
}

// unitColumnType is a column's declared type (with its collation, where
// the engine has one) as the source's catalog shows it.
func unitColumnType(ctx context.Context, db *sql.DB, kind, sourceTable, col string) (string, error) {
	schema, name := splitTable(sourceTable)
	var q string
	var args []any
	switch kind {
	case "sqlite":
		if schema == "" {
			schema = "main"
		}
		q, args = "SELECT upper(type) FROM pragma_table_info(?, ?) WHERE lower(name) = lower(?)", []any{name, schema, col}
	case catalog.DriverPostgres:
		q = "SELECT data_type || coalesce(' collate ' || collation_name, '') FROM information_schema.columns WHERE table_schema = coalesce($1, current_schema()) AND table_name = $2 AND column_name = $3"
		args = []any{sql.NullString{String: schema, Valid: schema != ""}, name, col}
	case catalog.DriverMySQL:
		q = "SELECT CONCAT(COLUMN_TYPE, COALESCE(CONCAT(' collate ', COLLATION_NAME), '')) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? AND COLUMN_NAME = ?"
		args = []any{sql.NullString{String: schema, Valid: schema != ""}, name, col}
	default:
		return "", fmt.Errorf("unknown engine %q", kind)
	}
	var typ string
	err := db.QueryRowContext(ctx, q, args...).Scan(&typ)
	if err == sql.ErrNoRows {
		return "", fmt.Errorf("no such column")
	}
	return typ, err
}

// Refused marks the error as a refusal of the query (3900), not a failure.
func (e *UnitTypeError) Refused() bool { return true }
