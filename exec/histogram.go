// Package exec runs plans against data: it builds a table's histogram over
// the batch's product domain with one GROUP BY pushed down to the source
// database, measures the plan's strategy with exact discrete noise,
// reconstructs by least squares and returns noisy answers. It never decides
// budgets: the caller charges the ledger before calling Measure.
package exec

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/dpproxy/dpproxy/catalog"

	_ "modernc.org/sqlite" // the embedded default source driver
)

// Histograms builds and caches histograms. A cached histogram is reused
// until the source database reports a change (SQLite's data_version).
type Histograms struct {
	mu      sync.Mutex
	sources map[string]*source
	cache   map[string]cached
}

type source struct {
	mu   sync.Mutex
	db   *sql.DB
	conn *sql.Conn // pinned: data_version is per connection
}

type cached struct {
	version int64
	counts  []float64
}

// Open connects to every source of the catalog, read-only. dataDir resolves
// relative source paths.
func Open(ctx context.Context, cat *catalog.Catalog, dataDir string) (*Histograms, error) {
	h := &Histograms{sources: map[string]*source{}, cache: map[string]cached{}}
	for name, s := range cat.Sources {
		if s.Driver != "sqlite" {
			h.Close()
			return nil, fmt.Errorf("source %s: unsupported driver %q (sqlite is supported)", name, s.Driver)
		}
		path := s.Path
		if !filepath.IsAbs(path) {
			path = filepath.Join(dataDir, path)
		}
		db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
		if err != nil {
			h.Close()
			return nil, fmt.Errorf("source %s: open %s: %w", name, path, err)
		}
		conn, err := db.Conn(ctx)
		if err == nil {
			err = conn.PingContext(ctx)
		}
		if err != nil {
			db.Close()
			h.Close()
			return nil, fmt.Errorf("source %s: connect %s: %w", name, path, err)
		}
		h.sources[name] = &source{db: db, conn: conn}
	}
	return h, nil
}

// Close releases the source connections.
func (h *Histograms) Close() error {
	for _, s := range h.sources {
		s.conn.Close()
		s.db.Close()
	}
	return nil
}

// Histogram returns the counts of t's rows over the product domain of cols
// (row-major, last column fastest). Rows whose value in some column is
// dropped by that column's policy are not counted, unless the column is a
// batch's copy with a dropped cell (catalog.Column.WithDroppedCell), which
// counts them.
func (h *Histograms) Histogram(ctx context.Context, t *catalog.Table, cols []*catalog.Column) ([]float64, error) {
	h.mu.Lock()
	src := h.sources[t.Source]
	h.mu.Unlock()
	if src == nil {
		return nil, fmt.Errorf("table %s: unknown source %q", t.Name, t.Source)
	}
	src.mu.Lock()
	defer src.mu.Unlock()
	var version int64
	if err := src.conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&version); err != nil {
		return nil, fmt.Errorf("table %s: data version: %w", t.Name, err)
	}
	// The key holds each column's whole definition (domain, bins,
	// policies), not just its name: a histogram binned for another
	// definition of the column is another histogram.
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = fmt.Sprintf("%+v", *c)
	}
	key := t.Name + "\x00" + t.Source + "\x00" + strings.Join(names, "\x00")
	h.mu.Lock()
	if c, ok := h.cache[key]; ok && c.version == version {
		h.mu.Unlock()
		return c.counts, nil
	}
	h.mu.Unlock()

	query, args := histogramSQL(t, cols)
	rows, err := src.conn.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("table %s: histogram query: %w", t.Name, err)
	}
	defer rows.Close()
	sizes := make([]int, len(cols))
	n := 1
	for j, c := range cols {
		sizes[j] = c.Size()
		n *= sizes[j]
	}
	counts := make([]float64, n)
	dest := make([]any, len(cols)+1)
	cell := make([]int64, len(cols))
	var cnt int64
	for j := range cols {
		dest[j] = &cell[j]
	}
	dest[len(cols)] = &cnt
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("table %s: histogram row: %w", t.Name, err)
		}
		idx := 0
		for j := range cols {
			if cell[j] < 0 || cell[j] >= int64(sizes[j]) {
				return nil, fmt.Errorf("table %s: histogram cell %d out of range for column %s", t.Name, cell[j], cols[j].Name)
			}
			idx = idx*sizes[j] + int(cell[j])
		}
		counts[idx] += float64(cnt)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("table %s: histogram rows: %w", t.Name, err)
	}
	h.mu.Lock()
	h.cache[key] = cached{version: version, counts: counts}
	h.mu.Unlock()
	return counts, nil
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// histogramSQL bins every column in SQL so only domain-sized counts leave
// the database: SELECT b0, b1, COUNT(*) FROM (SELECT CASE … END AS b0, …)
// WHERE b0 >= 0 AND … GROUP BY b0, b1.
func histogramSQL(t *catalog.Table, cols []*catalog.Column) (string, []any) {
	table := t.SourceTable
	if table == "" {
		table = t.Name
	}
	if len(cols) == 0 {
		return "SELECT COUNT(*) FROM " + quoteIdent(table), nil
	}
	var args []any
	var sel, where, group []string
	for j, c := range cols {
		expr, a := binExpr(c)
		args = append(args, a...)
		b := fmt.Sprintf("b%d", j)
		sel = append(sel, expr+" AS "+b)
		where = append(where, b+" >= 0")
		group = append(group, b)
	}
	q := fmt.Sprintf("SELECT %s, COUNT(*) FROM (SELECT %s FROM %s) WHERE %s GROUP BY %s",
		strings.Join(group, ", "), strings.Join(sel, ", "), quoteIdent(table), strings.Join(where, " AND "), strings.Join(group, ", "))
	return q, args
}

// binExpr maps a column value to its cell index, or -1 when the column's
// policy drops it and the batch has no dropped cell for it.
func binExpr(c *catalog.Column) (string, []any) {
	col := quoteIdent(c.Name)
	cells := c.Cells()
	declared := 0
	for _, cell := range cells {
		if cell.Kind == catalog.CellValue || cell.Kind == catalog.CellBin {
			declared++
		}
	}
	// The catalog says where NULLs and out-of-domain values go: their
	// cell, the batch's dropped cell, or -1 (the row is left out).
	other, nullCell := c.OtherCell(), c.NullCell()
	var b strings.Builder
	var args []any
	fmt.Fprintf(&b, "CASE WHEN %s IS NULL THEN %d", col, nullCell)
	switch c.Kind {
	case catalog.Categorical:
		for i, v := range c.Values {
			fmt.Fprintf(&b, " WHEN %s = ? COLLATE NOCASE THEN %d", col, i)
			args = append(args, v)
		}
		fmt.Fprintf(&b, " ELSE %d END", other)
	default:
		low, high := other, other
		if c.OutOfDomain == catalog.PolicyClamp {
			low, high = 0, declared-1
		}
		if c.Kind == catalog.IntegerRange {
			fmt.Fprintf(&b, " WHEN %s < ? THEN %d WHEN %s > ? THEN %d ELSE CAST((%s - ?) / ? AS INTEGER) END",
				col, low, col, high, col)
			args = append(args, c.Min, c.Max, c.Min, c.Width)
			break
		}
		fmt.Fprintf(&b, " WHEN %s < ? THEN %d WHEN %s > ? THEN %d", col, low, col, high)
		args = append(args, cells[0].Lo, cells[declared-1].Hi)
		for i := 0; i < declared-1; i++ {
			fmt.Fprintf(&b, " WHEN %s < ? THEN %d", col, i)
			args = append(args, cells[i].Hi)
		}
		fmt.Fprintf(&b, " ELSE %d END", declared-1)
	}
	return b.String(), args
}
