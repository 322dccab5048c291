package sources

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/demo"
)

// The bounding benchmarks time a cold histogram of a table with a privacy
// unit against the same engine's plain GROUP BY of the same cells, in the
// same run, and report the ratio (x-plain). Each iteration opens a fresh
// source set, so nothing is cached in dpproxy; the engines' own caches are
// warm for both.
//
//	go test ./sources -run XXX -bench BoundedScale -benchtime 3x
//	DPPROXY_BENCH_ROWS=10000000 go test ./sources -run XXX -bench 'BoundedScale/sqlite' -benchtime 1x -timeout 1h
//	go test ./sources -run XXX -bench BoundedDemo -benchtime 5x

// benchScaleRows is DPPROXY_BENCH_ROWS (default 1,000,000): the scale
// table's rows, over rows/10 units.
func benchScaleRows() int {
	if v, err := strconv.Atoi(os.Getenv("DPPROXY_BENCH_ROWS")); err == nil && v > 0 {
		return v
	}
	return 1_000_000
}

// scaleSQL is the scale table's row i: 90% of rows spread over rows/10
// units (about 9 rows each), 10% over rows/10,000 heavy units (about 1,000
// rows each), kind and hour varying within a unit.
func scaleSQL(rows int, i, div string) string {
	units := rows / 10
	heavy := max(rows/10_000, 1)
	return fmt.Sprintf("CASE WHEN %[1]s %% 10 = 0 THEN (%[1]s %[4]s 10) %% %[2]d ELSE (%[1]s * 7919) %% %[3]d END, "+
		"CASE %[1]s %% 3 WHEN 0 THEN 'view' WHEN 1 THEN 'cart' ELSE 'buy' END, (%[1]s %[4]s 3) %% 24, (%[1]s * 37) %% 100",
		i, heavy, units, div)
}

// scaleCatalog declares the scale table twice over one source table:
// without a unit (rows) and with one (units, bounded by unit).
func scaleCatalog(b testing.TB, source, table, unit string) *catalog.Catalog {
	y := `database: b
sources: {main: ` + source + `}
tables:
  rows:
    source_table: ` + table + `
    budget: {total: 1, per_user: 1, default_per_query: 0.1}
    columns: &cols
      kind: {type: categorical, values: [view, cart, buy]}
      hour: {type: integer, min: 0, max: 23}
      dur: {type: integer, min: 0, max: 99, width: 10}
  units:
    source_table: ` + table + `
    budget: {total: 1, per_user: 1, default_per_query: 0.1}
    privacy_unit: ` + unit + `
    columns: *cols
`
	cat, err := catalog.Parse("b.yaml", []byte(y))
	if err != nil {
		b.Fatal(err)
	}
	return cat
}

// benchBounds are the bounds the scale benchmarks run.
var benchBounds = []struct{ name, unit string }{
	{"k10", "{column: user_id, max_rows: 10}"},
	{"k10g3r5", "{column: user_id, max_rows: 10, max_groups: 3, max_rows_per_group: 5}"},
}

// timeHistogram times one cold histogram of table name over cols.
func timeHistogram(b *testing.B, cat *catalog.Catalog, dir, name string, cols []string) time.Duration {
	ctx := context.Background()
	set, err := Open(ctx, cat, Options{DataDir: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer set.Close()
	t := cat.Table(name)
	var cs []*catalog.Column
	for _, c := range cols {
		cs = append(cs, t.Column(c))
	}
	start := time.Now()
	if _, err := set.Histogram(ctx, t, cs); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// openBench opens a server for the floor queries.
func openBench(b *testing.B, driver, dsn string) *sql.DB {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		b.Fatal(err)
	}
	return db
}

// timeBoundedSQL times one query, read to the end, in a read-only
// transaction with the settings a bounded histogram of t runs under.
func timeBoundedSQL(b *testing.B, db *sql.DB, d dialect, t *catalog.Table, q string) time.Duration {
	ctx := context.Background()
	start := time.Now()
	err := inReadOnlyTx(ctx, db, nil, func(tx *sql.Tx) error {
		if err := beginBounded(ctx, tx, d, t); err != nil {
			return err
		}
		r, err := tx.QueryContext(ctx, q)
		if err != nil {
			return err
		}
		defer r.Close()
		for r.Next() {
		}
		return r.Err()
	})
	if err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// compare runs plain (the engine's own GROUP BY) and bounded alternately
// and reports their mean times and ratio.
func compare(b *testing.B, plain, bounded func() time.Duration) {
	b.ResetTimer()
	var p, q time.Duration
	for i := 0; i < b.N; i++ {
		p += plain()
		q += bounded()
	}
	b.ReportMetric(float64(p.Milliseconds())/float64(b.N), "plain-ms")
	b.ReportMetric(float64(q.Milliseconds())/float64(b.N), "bounded-ms")
	b.ReportMetric(float64(q)/float64(p), "x-plain")
}

func BenchmarkBoundedScale(b *testing.B) {
	rows := benchScaleRows()
	b.Run("sqlite", func(b *testing.B) {
		dir := os.Getenv("DPPROXY_BENCH_DIR")
		if dir == "" {
			dir = b.TempDir()
		}
		path := filepath.Join(dir, fmt.Sprintf("scale-%d.sqlite", rows))
		if _, err := os.Stat(path); err != nil {
			db, err := sql.Open("sqlite", path+".tmp")
			if err != nil {
				b.Fatal(err)
			}
			for _, s := range []string{"DROP TABLE IF EXISTS scale", "CREATE TABLE scale (user_id INTEGER, kind TEXT, hour INTEGER, dur INTEGER)",
				fmt.Sprintf("WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < %d) INSERT INTO scale SELECT %s FROM n", rows, scaleSQL(rows, "i", "/"))} {
				if _, err := db.Exec(s); err != nil {
					b.Fatal(err)
				}
			}
			db.Close()
			if err := os.Rename(path+".tmp", path); err != nil {
				b.Fatal(err)
			}
		}
		for _, bound := range benchBounds {
			b.Run(bound.name, func(b *testing.B) {
				cat := scaleCatalog(b, "{driver: sqlite, path: "+path+"}", "scale", bound.unit)
				b.Run("vs-sql-groupby", func(b *testing.B) {
					db, err := sql.Open("sqlite", path+"?mode=ro")
					if err != nil {
						b.Fatal(err)
					}
					defer db.Close()
					compare(b, func() time.Duration {
						start := time.Now()
						r, err := db.Query("SELECT kind, hour, COUNT(*) FROM scale GROUP BY kind, hour")
						if err != nil {
							b.Fatal(err)
						}
						for r.Next() {
						}
						r.Close()
						return time.Since(start)
					}, func() time.Duration { return timeHistogram(b, cat, dir, "units", []string{"kind", "hour"}) })
				})
				b.Run("vs-file-scan", func(b *testing.B) {
					compare(b, func() time.Duration { return timeHistogram(b, cat, dir, "rows", []string{"kind", "hour"}) },
						func() time.Duration { return timeHistogram(b, cat, dir, "units", []string{"kind", "hour"}) })
				})
			})
		}
		b.ReportMetric(float64(rows), "rows")
	})
	server := func(b *testing.B, d dialect, srv func(b *testing.B) (string, string, func(string) error, string, *sql.DB)) {
		source, table, exec, gen, db := srv(b)
		defer db.Close()
		for _, s := range strings.Split(gen, ";\n") {
			if err := exec(s); err != nil {
				b.Fatal(err)
			}
		}
		dir := b.TempDir()
		for _, bound := range benchBounds {
			b.Run(bound.name, func(b *testing.B) {
				cat := scaleCatalog(b, source, table, bound.unit)
				compare(b, func() time.Duration { return timeHistogram(b, cat, dir, "rows", []string{"kind", "hour"}) },
					func() time.Duration { return timeHistogram(b, cat, dir, "units", []string{"kind", "hour"}) })
			})
		}
		// The floors: the least SQL any exact bounding must run, timed
		// against the same plain histogram. Finding the units over k rows
		// groups every row by unit; g/r bounding needs every (unit, cell)
		// pair's rows. Both are counted in the server, so that what
		// is timed is the grouping, not the transfer of its groups. A
		// bounded histogram cannot beat its floor's ratio.
		cat := scaleCatalog(b, source, table, benchBounds[0].unit)
		for _, f := range []struct{ name, sql string }{
			{"floor-units", "SELECT COUNT(*) FROM (SELECT user_id FROM " + table + " GROUP BY user_id HAVING COUNT(*) > 10) f"},
			{"floor-pairs", "SELECT COUNT(*) FROM (SELECT user_id, kind, hour, COUNT(*) AS n FROM " + table + " GROUP BY user_id, kind, hour) f"},
		} {
			b.Run(f.name, func(b *testing.B) {
				compare(b, func() time.Duration { return timeHistogram(b, cat, dir, "rows", []string{"kind", "hour"}) },
					func() time.Duration { return timeBoundedSQL(b, db, d, cat.Table("units"), f.sql) })
			})
		}
	}
	b.Run("postgres", func(b *testing.B) {
		server(b, postgres{}, func(b *testing.B) (string, string, func(string) error, string, *sql.DB) {
			srv := pgServer.Get(b)
			exec := func(s string) error { return srv.Exec(context.Background(), s) }
			gen := fmt.Sprintf("DROP TABLE IF EXISTS scale; CREATE TABLE scale (user_id BIGINT, kind TEXT, hour BIGINT, dur BIGINT); "+
				"INSERT INTO scale SELECT %s FROM generate_series(0::bigint, %d) i", scaleSQL(rows, "i", "/"), rows-1)
			return "{driver: postgres, dsn: \"" + srv.AdminDSN + "\"}", "public.scale", exec, gen + ";\nVACUUM ANALYZE scale", openBench(b, srv.Driver, srv.AdminDSN)
		})
	})
	b.Run("mariadb", func(b *testing.B) {
		server(b, mysqlDialect{}, func(b *testing.B) (string, string, func(string) error, string, *sql.DB) {
			srv := mariaServer.Get(b)
			exec := func(s string) error { return srv.Exec(context.Background(), s) }
			gen := fmt.Sprintf("CREATE DATABASE IF NOT EXISTS bench CHARACTER SET utf8mb4; DROP TABLE IF EXISTS bench.scale; "+
				"CREATE TABLE bench.scale (user_id BIGINT, kind VARCHAR(8), hour BIGINT, dur BIGINT); "+
				"INSERT INTO bench.scale SELECT %s FROM bench.seq_0_to_%d", scaleSQL(rows, "seq", "DIV"), rows-1)
			dsn := fmt.Sprintf("root@unix(%s)/bench", strings.TrimSuffix(strings.TrimPrefix(srv.AdminDSN, "root@unix("), ")/?multiStatements=true"))
			return "{driver: mysql, dsn: \"" + dsn + "\"}", "bench.scale", exec, gen, openBench(b, srv.Driver, dsn)
		})
	})
}

// BenchmarkBoundedDemo times a fresh histogram of the demo's events (200,000
// rows, max_rows 10, as the demo catalog declares) over country × device,
// against the same histogram of the same rows declared without a unit.
func BenchmarkBoundedDemo(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "demo.sqlite")
	if err := demo.Generate(context.Background(), path, demo.DefaultRows); err != nil {
		b.Fatal(err)
	}
	cat := catalog.Demo()
	cat.Sources["main"].Path = path
	plain := *cat.Table("events")
	plain.Unit = nil
	plain.Name = "events_rows"
	cat.Tables = append(cat.Tables, &plain)
	compare(b, func() time.Duration { return timeHistogram(b, cat, dir, "events_rows", []string{"country", "device"}) },
		func() time.Duration { return timeHistogram(b, cat, dir, "events", []string{"country", "device"}) })
}
