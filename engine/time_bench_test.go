package engine

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/sources"
)

// timeDashboard is what Grafana, Metabase and Superset send for a year of
// hourly bins: daily, weekly, monthly and hourly-over-a-week buckets and a
// range count. Each is paired with SQLite's own exact GROUP BY of the same
// buckets, the baseline.
var timeDashboard = []struct{ name, dp, exact string }{
	{"daily", "SELECT DATE(ts) AS d, COUNT(*) FROM visits GROUP BY 1 ORDER BY 1",
		"SELECT DATE(ts) AS d, COUNT(*) FROM visits GROUP BY 1 ORDER BY 1"},
	{"weekly", "SELECT YEARWEEK(ts) AS w, COUNT(*) FROM visits GROUP BY 1 ORDER BY 1",
		"SELECT strftime('%Y%W', ts) AS w, COUNT(*) FROM visits GROUP BY 1 ORDER BY 1"},
	{"monthly", "SELECT STR_TO_DATE(CONCAT(DATE_FORMAT(ts, '%Y-%m'), '-01'), '%Y-%m-%d') AS m, COUNT(*) FROM visits GROUP BY 1 ORDER BY 1",
		"SELECT strftime('%Y-%m-01', ts) AS m, COUNT(*) FROM visits GROUP BY 1 ORDER BY 1"},
	{"hourly_week", "SELECT UNIX_TIMESTAMP(ts) DIV 3600 * 3600 AS time, COUNT(*) FROM visits WHERE ts BETWEEN '2025-12-01 00:00:00' AND '2025-12-07 23:59:59' GROUP BY 1 ORDER BY 1",
		"SELECT CAST(strftime('%s', ts) AS INTEGER) / 3600 * 3600 AS time, COUNT(*) FROM visits WHERE ts BETWEEN '2025-12-01 00:00:00' AND '2025-12-07 23:59:59' GROUP BY 1 ORDER BY 1"},
	{"range", "SELECT COUNT(*) FROM visits WHERE ts >= '2025-06-01'",
		"SELECT COUNT(*) FROM visits WHERE ts >= '2025-06-01'"},
}

// timeCatalog declares a year of hourly bins (8,760) and a device.
const timeCatalog = `
database: demo
sources: {main: {driver: sqlite, path: visits.sqlite}}
tables:
  visits:
    budget: {total: 1000000, per_user: 1000000, default_per_query: 0.1, max_per_query: 50}
    columns:
      ts: {type: datetime, min: '2025-01-01 00:00:00', max: '2025-12-31 23:59:59', width: 1h}
      device: {type: categorical, values: [desktop, mobile]}
users:
  analyst: {password: analyst, role: analyst}
`

// writeVisits writes n visits spread over 2025 into a SQLite file.
func writeVisits(tb testing.TB, path string, n int) {
	tb.Helper()
	writeVisitsOver(tb, path, n, 365*24*time.Hour)
}

// writeVisitsOver writes n visits spread over span from 2025-01-01.
func writeVisitsOver(tb testing.TB, path string, n int, span time.Duration) {
	tb.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE visits (ts DATETIME, device TEXT)"); err != nil {
		tb.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		tb.Fatal(err)
	}
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < n; i++ {
		ts := start.Add(time.Duration(uint64(i)*2654435761%uint64(span/time.Second)) * time.Second)
		dev := [2]string{"desktop", "mobile"}[i%3%2]
		if _, err := tx.Exec("INSERT INTO visits VALUES (?, ?)", ts.Format("2006-01-02 15:04:05"), dev); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
}

// newTimeEngine is an engine over 50,000 visits with its own ledger and
// stores; each call is cold (no cached plans or measurements).
func newTimeEngine(tb testing.TB, dir string) (*Engine, func()) {
	tb.Helper()
	return newTimeEngineCatalog(tb, dir, timeCatalog)
}

// newTimeEngineCatalog is newTimeEngine with catalog yaml.
func newTimeEngineCatalog(tb testing.TB, dir, yaml string) (*Engine, func()) {
	tb.Helper()
	ctx := context.Background()
	cat, err := catalog.Parse("time.yaml", []byte(yaml))
	if err != nil {
		tb.Fatal(err)
	}
	l, err := budget.Open(ctx, filepath.Join(tb.TempDir(), "ledger.sqlite"))
	if err != nil {
		tb.Fatal(err)
	}
	h, err := sources.Open(ctx, cat, sources.Options{DataDir: dir})
	if err != nil {
		tb.Fatal(err)
	}
	eng := New(Config{Catalog: cat, Ledger: l, Histograms: h, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return eng, func() { h.Close(); l.Close() }
}

// BenchmarkTimeDashboard answers each query of timeDashboard cold (a fresh
// engine: no cached plan, no stored measurement) over a year of hourly
// bins, and SQLite's exact GROUP BY of the same buckets in the same run;
// it reports the ratio.
//
//	go test ./engine/ -run '^$' -bench TimeDashboard -benchtime 3x
func BenchmarkTimeDashboard(b *testing.B) {
	dir := b.TempDir()
	writeVisits(b, filepath.Join(dir, "visits.sqlite"), 50_000)
	db, err := sql.Open("sqlite", filepath.Join(dir, "visits.sqlite"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for _, q := range timeDashboard {
		b.Run(q.name, func(b *testing.B) {
			var dp, exact time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				eng, done := newTimeEngine(b, dir)
				b.StartTimer()
				d, e := timePanel(b, eng, db, q.dp, q.exact)
				dp, exact = dp+d, exact+e
				b.StopTimer()
				done()
				b.StartTimer()
			}
			b.ReportMetric(float64(dp.Milliseconds())/float64(b.N), "dp-ms/op")
			b.ReportMetric(float64(exact.Milliseconds())/float64(b.N), "sqlite-ms/op")
			b.ReportMetric(dp.Seconds()/exact.Seconds(), "ratio")
		})
	}
	// The whole dashboard on one engine, as a panel refresh sends it: later
	// queries first try the measurements the earlier ones stored.
	b.Run("all", func(b *testing.B) {
		var dp, exact time.Duration
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			eng, done := newTimeEngine(b, dir)
			b.StartTimer()
			for _, q := range timeDashboard {
				d, e := timePanel(b, eng, db, q.dp, q.exact)
				dp, exact = dp+d, exact+e
			}
			b.StopTimer()
			done()
			b.StartTimer()
		}
		b.ReportMetric(float64(dp.Milliseconds())/float64(b.N), "dp-ms/op")
		b.ReportMetric(float64(exact.Milliseconds())/float64(b.N), "sqlite-ms/op")
		b.ReportMetric(dp.Seconds()/exact.Seconds(), "ratio")
	})
}

// timePanel answers dp on eng and runs exact, SQLite's own GROUP BY of the
// same buckets, reading every row; it returns how long each took.
func timePanel(b *testing.B, eng *Engine, db *sql.DB, dp, exact string) (dpTime, exactTime time.Duration) {
	b.Helper()
	ctx := context.Background()
	t0 := time.Now()
	if _, err := eng.Answer(ctx, session("analyst", nil), []string{dp}); err != nil {
		b.Fatalf("%s: %v", dp, err)
	}
	dpTime = time.Since(t0)
	t0 = time.Now()
	rows, err := db.QueryContext(ctx, exact)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
	}
	rows.Close()
	return dpTime, time.Since(t0)
}
