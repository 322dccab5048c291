package sources

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/dpproxy/dpproxy/catalog"
)

// LoadPublicTables reads the rows of the catalog's public tables that live
// in a source (public_tables with source:) into their Rows, once, at
// startup: they are public dimensions (countries, calendars) that analysts
// read freely and the parser joins to protected tables, so the proxy holds
// them in memory. A table with more than catalog.MaxPublicRows rows, or a
// value that does not fit its declared column type, is an error. Errors
// name the table and source, never a DSN.
func (s *Set) LoadPublicTables(ctx context.Context, cat *catalog.Catalog) error {
	for _, t := range cat.PublicTables {
		if t.Source == "" {
			continue
		}
		src := s.sources[t.Source]
		if src == nil {
			return fmt.Errorf("public table %s: unknown source %s", t.Name, t.Source)
		}
		db, quote := src.be.rowReader()
		names := make([]string, len(t.Columns))
		for i, c := range t.Columns {
			names[i] = quote(c.Name)
		}
		schema, name := splitTable(t.SourceTable)
		from := quote(name)
		if schema != "" {
			from = quote(schema) + "." + from
		}
		q := fmt.Sprintf("SELECT %s FROM %s LIMIT %d", strings.Join(names, ", "), from, catalog.MaxPublicRows+1)
		rows, err := readPublic(ctx, db, q, t)
		if err != nil {
			return fmt.Errorf("public table %s (source %s, table %s): %w", t.Name, t.Source, t.SourceTable, err)
		}
		t.Rows = rows
	}
	return nil
}

func readPublic(ctx context.Context, db *sql.DB, q string, t *catalog.PublicTable) ([][]catalog.PublicValue, error) {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]catalog.PublicValue
	vals := make([]sql.NullString, len(t.Columns))
	ptrs := make([]any, len(vals))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if len(out) == catalog.MaxPublicRows {
			return nil, fmt.Errorf("more than %d rows: a public table holds at most %d", catalog.MaxPublicRows, catalog.MaxPublicRows)
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := make([]catalog.PublicValue, len(vals))
		for i, v := range vals {
			if !v.Valid {
				row[i] = catalog.PublicValue{Null: true}
				continue
			}
			pv, err := t.Columns[i].Value(v.String)
			if err != nil {
				return nil, fmt.Errorf("row %d, column %s: %w", len(out)+1, t.Columns[i].Name, err)
			}
			row[i] = pv
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

func (s *sqliteSource) rowReader() (*sql.DB, func(string) string) { return s.db, sqliteIdent }

func (s *server) rowReader() (*sql.DB, func(string) string) { return s.db, s.d.ident }
