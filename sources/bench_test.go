package sources

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/demo"
)

// BenchmarkSQLiteHistogram times a cold histogram of the demo table's
// age × education × hours_per_week (117,216 cells) over DPPROXY_BENCH_ROWS
// rows (default 1,000,000), generated once into DPPROXY_BENCH_DIR (default
// a temporary directory): each iteration opens a fresh source set, so
// nothing is cached in dpproxy. `dpproxy-bench source` compares the same
// build with the engines' own GROUP BY.
func BenchmarkSQLiteHistogram(b *testing.B) {
	rows := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("DPPROXY_BENCH_ROWS")); err == nil && v > 0 {
		rows = v
	}
	dir := os.Getenv("DPPROXY_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	path := filepath.Join(dir, fmt.Sprintf("adult-%d.sqlite", rows))
	ctx := context.Background()
	if err := demo.Generate(ctx, path, rows); err != nil {
		b.Fatal(err)
	}
	cat := catalog.Demo()
	cat.Sources["main"].Path = path
	t := cat.Table("adult")
	cols := []*catalog.Column{t.Column("age"), t.Column("education"), t.Column("hours_per_week")}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		set, err := Open(ctx, cat, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := set.Histogram(ctx, t, cols); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		set.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(rows), "rows")
}

// BenchmarkUnitHistogram times a cold histogram of kind × hour over
// DPPROXY_BENCH_ROWS rows (default 200,000) of an event table on SQLite,
// without a privacy unit (the file scan: one pass, no sort) and with one
// (max_rows 5: the same scan, bounding per unit, sqlite_bound.go). Compare
// the two sub-benchmarks' ns/op:
//
//	go test ./sources -run XXX -bench UnitHistogram -benchtime 3x
func BenchmarkUnitHistogram(b *testing.B) {
	rows := 200_000
	if v, err := strconv.Atoi(os.Getenv("DPPROXY_BENCH_ROWS")); err == nil && v > 0 {
		rows = v
	}
	dir := b.TempDir()
	path := filepath.Join(dir, "events.sqlite")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		b.Fatal(err)
	}
	stmts := []string{"CREATE TABLE events (user_id INTEGER, kind TEXT, hour INTEGER)",
		fmt.Sprintf(`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < %d)
		INSERT INTO events SELECT (i * 7919) %% %d, CASE i %% 3 WHEN 0 THEN 'view' WHEN 1 THEN 'cart' ELSE 'buy' END, i %% 24 FROM n`, rows, rows/5)}
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			b.Fatal(err)
		}
	}
	db.Close()
	y := `database: b
sources: {main: {driver: sqlite, path: ` + path + `}}
tables:
  rows:
    source_table: events
    budget: {total: 1, per_user: 1, default_per_query: 0.1}
    columns: &cols
      kind: {type: categorical, values: [view, cart, buy]}
      hour: {type: integer, min: 0, max: 23}
  units:
    source_table: events
    budget: {total: 1, per_user: 1, default_per_query: 0.1}
    privacy_unit: {column: user_id, max_rows: 5}
    columns: *cols
`
	cat, err := catalog.Parse("b.yaml", []byte(y))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, name := range []string{"rows", "units"} {
		b.Run(name, func(b *testing.B) {
			t := cat.Table(name)
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				set, err := Open(ctx, cat, Options{DataDir: dir})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if _, err := set.Histogram(ctx, t, t.Columns); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				set.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(rows), "rows")
		})
	}
}
