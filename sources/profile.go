package sources

import (
	"context"
	"database/sql"
	"fmt"
	"sort"

	"github.com/dpproxy/dpproxy/catalog"
)

// UnitProfile is the exact distribution of rows per unit of a table: for
// the data owner choosing max_rows, never for analysts (it is computed from
// exact data and released without noise). Only `dpproxy profile-units`
// calls it; nothing reachable over the MySQL protocol does.
type UnitProfile struct {
	Units     int64 // distinct non-NULL units
	Rows      int64 // rows with a non-NULL unit
	NullRows  int64 // rows whose unit is NULL (never counted)
	RowsUnits []RowsUnits
}

// RowsUnits is how many units have exactly Rows rows.
type RowsUnits struct{ Rows, Units int64 }

// Kept is how many rows truncation to k rows per unit keeps.
func (p *UnitProfile) Kept(k int64) int64 {
	n := int64(0)
	for _, ru := range p.RowsUnits {
		n += min(ru.Rows, k) * ru.Units
	}
	return n
}

// Quantile is the least row count r such that at least q of the units
// have at most r rows.
func (p *UnitProfile) Quantile(q float64) int64 {
	seen := int64(0)
	for _, ru := range p.RowsUnits {
		seen += ru.Units
		if float64(seen) >= q*float64(p.Units) {
			return ru.Rows
		}
	}
	return 0
}

// ProfileUnits counts t's rows per value of column (t's privacy unit
// column when column is "") with one GROUP BY in the source.
func (s *Set) ProfileUnits(ctx context.Context, t *catalog.Table, column string) (*UnitProfile, error) {
	src := s.sources[t.Source]
	if src == nil {
		return nil, fmt.Errorf("table %s: unknown source %q", t.Name, t.Source)
	}
	if column == "" {
		if t.Unit == nil {
			return nil, fmt.Errorf("table %s declares no privacy_unit: name the column", t.Name)
		}
		column = t.Unit.Column
	}
	var db *sql.DB
	var ident func(string) string
	var tbl string
	switch be := src.be.(type) {
	case *sqliteSource:
		db, ident, tbl = be.db, sqliteIdent, sqliteTable(sourceTable(t))
	case *server:
		db, ident, tbl = be.db, be.d.ident, table(be.d, sourceTable(t))
	default:
		return nil, fmt.Errorf("table %s: no profile for this source", t.Name)
	}
	u := ident(column)
	q := fmt.Sprintf("SELECT dpproxy_n, COUNT(*) FROM (SELECT COUNT(*) AS dpproxy_n FROM %s WHERE %s IS NOT NULL GROUP BY %s) dpproxy_units GROUP BY dpproxy_n", tbl, u, u)
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("table %s: profile: %w", t.Name, err)
	}
	defer rows.Close()
	p := &UnitProfile{}
	for rows.Next() {
		var ru RowsUnits
		if err := rows.Scan(&ru.Rows, &ru.Units); err != nil {
			return nil, err
		}
		p.RowsUnits = append(p.RowsUnits, ru)
		p.Units += ru.Units
		p.Rows += ru.Rows * ru.Units
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	sort.Slice(p.RowsUnits, func(i, j int) bool { return p.RowsUnits[i].Rows < p.RowsUnits[j].Rows })
	if err := db.QueryRowContext(ctx, fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE %s IS NULL", tbl, u)).Scan(&p.NullRows); err != nil {
		return nil, fmt.Errorf("table %s: profile: %w", t.Name, err)
	}
	return p, nil
}
