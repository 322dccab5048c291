package engine

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"
)

// longTimeCatalog declares five years of hourly bins (43,824) and a device.
const longTimeCatalog = `
database: demo
sources: {main: {driver: sqlite, path: visits.sqlite}}
tables:
  visits:
    budget: {total: 1000000, per_user: 1000000, default_per_query: 0.1, max_per_query: 50}
    max_cells: 10000000
    columns:
      ts: {type: datetime, min: '2021-01-01 00:00:00', max: '2025-12-31 23:59:59', width: 1h}
      device: {type: categorical, values: [desktop, mobile]}
users:
  analyst: {password: analyst, role: analyst}
`

// longPanels are a one-week hourly panel and a year of days over five
// years of hourly bins (#24's targets: 1 s each), the median, and the days
// of all five years (1,826 groups of 24 hours).
var longPanels = []struct{ name, dp, exact string }{
	{"hourly_week", "SELECT UNIX_TIMESTAMP(ts) DIV 3600 * 3600 AS time, COUNT(*) FROM visits WHERE ts BETWEEN '2025-12-01 00:00:00' AND '2025-12-07 23:59:59' GROUP BY 1 ORDER BY 1",
		"SELECT CAST(strftime('%s', ts) AS INTEGER) / 3600 * 3600 AS time, COUNT(*) FROM visits WHERE ts BETWEEN '2025-12-01 00:00:00' AND '2025-12-07 23:59:59' GROUP BY 1 ORDER BY 1"},
	{"daily_year", "SELECT DATE(ts) AS d, COUNT(*) FROM visits WHERE ts >= '2025-01-01' GROUP BY 1 ORDER BY 1",
		"SELECT DATE(ts) AS d, COUNT(*) FROM visits WHERE ts >= '2025-01-01' GROUP BY 1 ORDER BY 1"},
	{"median", "SELECT DP_MEDIAN(ts) FROM visits", "SELECT ts FROM visits ORDER BY ts LIMIT 1 OFFSET 25000"},
	// Metabase's default time series: count by day over all the data.
	{"daily_all", "SELECT DATE(ts) AS d, COUNT(*) FROM visits GROUP BY 1 ORDER BY 1",
		"SELECT DATE(ts) AS d, COUNT(*) FROM visits GROUP BY 1 ORDER BY 1"},
}

// longDashboard is four panels in one batch over five years of hourly
// bins (hourly over a week, weekly, monthly and daily over a year),
// planned together as one Kronecker product over the classes of hours
// they tell apart; its baseline is SQLite's four exact queries.
var longDashboard = []struct{ dp, exact string }{
	{longPanels[0].dp, longPanels[0].exact},
	{"SELECT YEARWEEK(ts) AS w, COUNT(*) FROM visits WHERE ts >= '2025-01-01' GROUP BY 1 ORDER BY 1",
		"SELECT strftime('%Y%W', ts) AS w, COUNT(*) FROM visits WHERE ts >= '2025-01-01' GROUP BY 1 ORDER BY 1"},
	{"SELECT STR_TO_DATE(CONCAT(DATE_FORMAT(ts, '%Y-%m'), '-01'), '%Y-%m-%d') AS m, COUNT(*) FROM visits WHERE ts >= '2025-01-01' GROUP BY 1 ORDER BY 1",
		"SELECT strftime('%Y-%m-01', ts) AS m, COUNT(*) FROM visits WHERE ts >= '2025-01-01' GROUP BY 1 ORDER BY 1"},
	{longPanels[1].dp, longPanels[1].exact},
}

// BenchmarkLongTimePanels answers each of longPanels cold (a fresh engine)
// over five years of hourly bins, 50,000 visits, with SQLite's exact query
// in the same run, and then the four panels of longDashboard in one batch
// against SQLite's four queries; it reports milliseconds and the ratio.
//
//	go test ./engine/ -run '^$' -bench LongTimePanels -benchtime 3x
func BenchmarkLongTimePanels(b *testing.B) {
	dir := b.TempDir()
	writeVisitsOver(b, filepath.Join(dir, "visits.sqlite"), 50_000, 5*365*24*time.Hour)
	db, err := sql.Open("sqlite", filepath.Join(dir, "visits.sqlite"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for _, q := range longPanels {
		b.Run(q.name, func(b *testing.B) {
			var dp, exact time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				eng, done := newTimeEngineCatalog(b, dir, longTimeCatalog)
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
	b.Run("dashboard", func(b *testing.B) {
		var batch []string
		for _, p := range longDashboard {
			batch = append(batch, p.dp)
		}
		var dp, exact time.Duration
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			eng, done := newTimeEngineCatalog(b, dir, longTimeCatalog)
			b.StartTimer()
			t0 := time.Now()
			if _, err := eng.Answer(context.Background(), session("analyst", nil), batch); err != nil {
				b.Fatal(err)
			}
			dp += time.Since(t0)
			b.StopTimer()
			done()
			t0 = time.Now()
			for _, p := range longDashboard {
				rows, err := db.Query(p.exact)
				if err != nil {
					b.Fatal(err)
				}
				for rows.Next() {
				}
				rows.Close()
			}
			exact += time.Since(t0)
			b.StartTimer()
		}
		b.ReportMetric(float64(dp.Milliseconds())/float64(b.N), "dp-ms/op")
		b.ReportMetric(float64(exact.Milliseconds())/float64(b.N), "sqlite-ms/op")
		b.ReportMetric(dp.Seconds()/exact.Seconds(), "ratio")
	})
}
