package main

import (
	"database/sql"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The time dashboards BI tools draw, replayed against a real proxy: a
// visits table with a datetime column ts (SQLite storing half its values
// as ISO 8601 text, half as Unix seconds), its Unix seconds ts_unix as an
// integer (what Grafana's $__unixEpoch macros take) and a device.

const timeCatalog = `
database: demo
sources:
  main: {driver: sqlite, path: "{{VISITS}}"}
tables:
  visits:
    budget: {total: 1000, per_user: 200, default_per_query: 0.1, max_per_query: 50}
    columns:
      ts: {type: datetime, min: '2025-01-01 00:00:00', max: '2025-01-21 23:59:59', width: 1h}
      ts_unix: {type: integer, min: 1735689600, max: 1737503999, width: 3600}
      device: {type: categorical, values: [desktop, mobile]}
users:
  analyst: {password: analyst, role: analyst}
`

const visitsRows = 6000

type visit struct {
	ts     time.Time
	device string
}

// visitsData writes the visits table once per test binary: rows spread
// over the first three weeks of 2025, more by day than by night.
var visitsData = sync.OnceValues(func() (string, []visit) {
	r := rand.New(rand.NewPCG(7, 12))
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var vs []visit
	for len(vs) < visitsRows {
		sec := r.Int64N(21 * 86400)
		t := start.Add(time.Duration(sec) * time.Second)
		if h := t.Hour(); (h < 7 || h > 22) && r.IntN(3) > 0 {
			continue
		}
		dev := "desktop"
		if r.IntN(5) < 2 {
			dev = "mobile"
		}
		vs = append(vs, visit{t, dev})
	}
	dir, err := os.MkdirTemp("", "dpproxy-visits-")
	if err != nil {
		panic(err)
	}
	path := filepath.Join(dir, "visits.sqlite")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		panic(err)
	}
	defer db.Close()
	tx, err := db.Begin()
	if err == nil {
		_, err = tx.Exec("CREATE TABLE visits (ts DATETIME, ts_unix INTEGER, device TEXT)")
	}
	for i, v := range vs {
		if err != nil {
			break
		}
		var ts any = v.ts.Format(time.DateTime)
		if i%2 == 1 {
			ts = v.ts.Unix()
		}
		_, err = tx.Exec("INSERT INTO visits VALUES (?, ?, ?)", ts, v.ts.Unix(), v.device)
	}
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		panic(err)
	}
	return path, vs
})

// visitsTruth counts the visits with from ≤ ts < to.
func visitsTruth(from, to time.Time) int64 {
	_, vs := visitsData()
	var n int64
	for _, v := range vs {
		if !v.ts.Before(from) && v.ts.Before(to) {
			n++
		}
	}
	return n
}

func startTimeProxy(t *testing.T) *clientProxy {
	t.Helper()
	path, _ := visitsData()
	p, addr := startProxy(t, strings.ReplaceAll(timeCatalog, "{{VISITS}}", path))
	cp := &clientProxy{proxy: p, addr: addr}
	cp.host, cp.port = splitHostPort(addr)
	return cp
}

func day(d int) time.Time { return time.Date(2025, 1, d, 0, 0, 0, 0, time.UTC) }

// Grafana's dashboard range: 2025-01-06 00:00:00 to 2025-01-12 23:59:59
// (a week, "now-7d/d" to "now/d" on 2025-01-12), as its MySQL macros
// expand it.
const grafanaFrom, grafanaTo = 1736121600, 1736726399

// biTimeFlow is what Grafana, Metabase and Superset write for time charts
// against MySQL, expanded as their MySQL dialects expand them (Grafana's
// macros, Metabase's date truncations and relative filters, Superset's time
// grains and time-range filter). Each is one DP query at ε = 1.
func biTimeFlow() []flowStep {
	gf := fmt.Sprintf("ts BETWEEN FROM_UNIXTIME(%d) AND FROM_UNIXTIME(%d)", grafanaFrom, grafanaTo)          // $__timeFilter(ts)
	gfDay := fmt.Sprintf("ts BETWEEN FROM_UNIXTIME(%d) AND FROM_UNIXTIME(%d)", grafanaTo+1-86400, grafanaTo) // the last day
	return []flowStep{
		{Step: "bi_eps", SQL: "SET @dp_epsilon = 1", Exec: true},
		// Grafana, time-series format: $__timeGroupAlias(ts, '1h') as
		// Grafana 5 expands it, $__timeFilter(ts) over "now-1d/d".
		{Step: "grafana_timeseries", SQL: "SELECT UNIX_TIMESTAMP(ts) DIV 3600 * 3600 AS \"time\", count(*) AS \"visits\" FROM visits WHERE " + gfDay + " GROUP BY 1 ORDER BY 1", DP: true},
		// $__timeGroupAlias(ts, '1d') as later Grafanas expand it: it
		// rounds to the nearest day (CAST(... AS SIGNED) rounds a DECIMAL).
		{Step: "grafana_rounded", SQL: "SELECT cast(cast(UNIX_TIMESTAMP(ts)/(86400) as signed)*86400 as signed) AS \"time\", count(*) AS \"visits\" FROM visits WHERE " + gf + " GROUP BY 1 ORDER BY 1", DP: true},
		// $__timeGroup(ts, '1d') by device: a metric column.
		{Step: "grafana_metric", SQL: "SELECT UNIX_TIMESTAMP(ts) DIV 86400 * 86400 AS time_sec, count(*) AS value, device AS metric FROM visits WHERE " + gf + " GROUP BY 1, device ORDER BY 1", DP: true},
		// Grafana, table format.
		{Step: "grafana_table", SQL: "SELECT device AS 'Device', count(*) AS 'Visits' FROM visits WHERE " + gf + " GROUP BY device", DP: true},
		// Grafana's $__unixEpochGroupAlias(ts_unix, '1d') and $__unixEpochFilter(ts_unix).
		{Step: "grafana_epoch", SQL: fmt.Sprintf("SELECT ts_unix DIV 86400 * 86400 AS \"time\", count(*) AS n FROM visits WHERE ts_unix >= %d AND ts_unix <= %d GROUP BY 1 ORDER BY 1", grafanaFrom, grafanaTo), DP: true},
		// Grafana at 5 minutes: finer than the 30-minute bins.
		{Step: "grafana_5m", SQL: "SELECT cast(cast(UNIX_TIMESTAMP(ts)/(300) as signed)*300 as signed) AS \"time\", count(*) AS n FROM visits WHERE " + gf + " GROUP BY 1 ORDER BY 1"},
		// Metabase: day, week, month, quarter, year, hour of day; a relative filter.
		{Step: "metabase_day", SQL: "SELECT date(`visits`.`ts`) AS `ts`, count(*) AS `count` FROM `visits` GROUP BY date(`visits`.`ts`) ORDER BY date(`visits`.`ts`) ASC", DP: true},
		{Step: "metabase_week", SQL: "SELECT str_to_date(concat(yearweek(`visits`.`ts`), ' Sunday'), '%X%V %W') AS `ts`, count(*) AS `count` FROM `visits` GROUP BY str_to_date(concat(yearweek(`visits`.`ts`), ' Sunday'), '%X%V %W') ORDER BY str_to_date(concat(yearweek(`visits`.`ts`), ' Sunday'), '%X%V %W') ASC", DP: true},
		{Step: "metabase_month", SQL: "SELECT str_to_date(concat(date_format(`visits`.`ts`, '%Y-%m'), '-01'), '%Y-%m-%d') AS `ts`, count(*) AS `count` FROM `visits` WHERE (`visits`.`ts` >= date(date_add(now(6), INTERVAL -10 year)) AND `visits`.`ts` < date(now(6))) GROUP BY str_to_date(concat(date_format(`visits`.`ts`, '%Y-%m'), '-01'), '%Y-%m-%d') ORDER BY str_to_date(concat(date_format(`visits`.`ts`, '%Y-%m'), '-01'), '%Y-%m-%d') ASC", DP: true},
		{Step: "metabase_quarter_year", SQL: "SELECT str_to_date(concat(year(`visits`.`ts`), '-', ((quarter(`visits`.`ts`) * 3) - 2), '-01'), '%Y-%m-%d') AS `q`, makedate(year(`visits`.`ts`), 1) AS `y`, count(*) AS `count` FROM `visits` GROUP BY 1, 2 ORDER BY 1 ASC", DP: true},
		{Step: "metabase_hour_of_day", SQL: "SELECT hour(`visits`.`ts`) AS `ts`, count(*) AS `count` FROM `visits` GROUP BY hour(`visits`.`ts`) ORDER BY hour(`visits`.`ts`) ASC", DP: true},
		{Step: "metabase_recent", SQL: "SELECT count(*) AS `count` FROM `visits` WHERE `visits`.`ts` >= date(date_add(now(6), INTERVAL -30 day))"},
		// Superset: time grains PT1H, P1D, P1W, P1M over its time-range filter.
		{Step: "superset_hour", SQL: "SELECT DATE_ADD(DATE(ts), INTERVAL HOUR(ts) HOUR) AS __timestamp, COUNT(*) AS count FROM visits WHERE ts >= STR_TO_DATE('2025-01-01 00:00:00.000000', '%Y-%m-%d %H:%i:%s.%f') AND ts < STR_TO_DATE('2025-01-02 00:00:00.000000', '%Y-%m-%d %H:%i:%s.%f') GROUP BY DATE_ADD(DATE(ts), INTERVAL HOUR(ts) HOUR) ORDER BY count DESC LIMIT 10000", DP: true},
		{Step: "superset_day", SQL: "SELECT DATE(ts) AS __timestamp, COUNT(*) AS count FROM visits WHERE ts >= STR_TO_DATE('2025-01-01 00:00:00', '%Y-%m-%d %H:%i:%s') AND ts < STR_TO_DATE('2025-01-15 00:00:00', '%Y-%m-%d %H:%i:%s') GROUP BY DATE(ts) LIMIT 50000", DP: true},
		{Step: "superset_week", SQL: "SELECT DATE(DATE_SUB(ts, INTERVAL DAYOFWEEK(ts) - 1 DAY)) AS __timestamp, device AS device, COUNT(*) AS count FROM visits GROUP BY DATE(DATE_SUB(ts, INTERVAL DAYOFWEEK(ts) - 1 DAY)), device ORDER BY __timestamp", DP: true},
		{Step: "superset_month", SQL: "SELECT DATE(DATE_SUB(ts, INTERVAL DAYOFMONTH(ts) - 1 DAY)) AS __timestamp, COUNT(*) AS count FROM visits GROUP BY DATE(DATE_SUB(ts, INTERVAL DAYOFMONTH(ts) - 1 DAY)) ORDER BY count DESC LIMIT 10", DP: true},
		// NOW() is one constant per request: the last week is after the domain.
		{Step: "now_filter", SQL: "SELECT COUNT(*) AS n FROM visits WHERE ts >= NOW() - INTERVAL 7 DAY"},
		{Step: "bi_reset", SQL: "SET @dp_epsilon = NULL", Exec: true},
	}
}

// checkBITimeFlow checks biTimeFlow's shapes, labels and types as the
// client shows them, and its answers against the truth: at ε = 1 over the
// 504 bins of ts a count's standard error is far below 60 (6 standard
// errors or more).
func checkBITimeFlow(t *testing.T, rs results) {
	t.Helper()
	const tol = 60.0
	within := func(step string, got float64, truth int64) {
		t.Helper()
		if math.Abs(got-float64(truth)) > tol {
			t.Fatalf("%s: %v, truth %d", step, got, truth)
		}
	}
	hour := func(d int, h int) time.Time { return day(d).Add(time.Duration(h) * time.Hour) }

	r := rs.get(t, "grafana_timeseries")
	wantOK(t, r)
	if len(r.Rows) != 24 || r.Columns[0] != "time" || r.cell(0, 0) != fmt.Sprint(grafanaTo+1-86400) || r.cell(23, 0) != fmt.Sprint(grafanaTo+1-3600) {
		t.Fatalf("grafana_timeseries: %d rows, %v, first %s, last %s", len(r.Rows), r.Columns, r.cell(0, 0), r.cell(len(r.Rows)-1, 0))
	}
	within("grafana_timeseries", num(t, r, 14, 1), visitsTruth(hour(12, 14), hour(12, 15)))
	// Rounded days: 6 January 00:00 holds 00:00-11:59 of the range, 7
	// January holds 6 January 12:00 to 7 January 11:59; 8 buckets.
	r = rs.get(t, "grafana_rounded")
	wantOK(t, r)
	if len(r.Rows) != 8 || r.cell(0, 0) != fmt.Sprint(grafanaFrom) || r.cell(7, 0) != fmt.Sprint(grafanaTo+1) {
		t.Fatalf("grafana_rounded: %s", r)
	}
	within("grafana_rounded", num(t, r, 1, 1), visitsTruth(hour(6, 12), hour(7, 12)))

	r = rs.get(t, "grafana_metric")
	wantOK(t, r)
	if len(r.Rows) != 14 || r.cell(0, 0) != fmt.Sprint(grafanaFrom) || r.cell(0, 2) != "desktop" || r.cell(1, 2) != "mobile" {
		t.Fatalf("grafana_metric: %s", r)
	}
	r = rs.get(t, "grafana_table")
	wantOK(t, r)
	if len(r.Rows) != 2 || r.Columns[1] != "Visits" {
		t.Fatalf("grafana_table: %s", r)
	}
	within("grafana_table", num(t, r, 0, 1)+num(t, r, 1, 1), visitsTruth(day(6), day(13)))
	r = rs.get(t, "grafana_epoch")
	wantOK(t, r)
	if len(r.Rows) != 7 || r.cell(6, 0) != "1736640000" {
		t.Fatalf("grafana_epoch: %s", r)
	}
	within("grafana_epoch", num(t, r, 6, 1), visitsTruth(day(12), day(13)))
	wantError(t, rs.get(t, "grafana_5m"), 3900, "HY000", "finer than the bins of ts (width 1h)")

	r = rs.get(t, "metabase_day")
	wantOK(t, r)
	if len(r.Rows) != 21 || r.cell(0, 0) != "2025-01-01" || r.cell(20, 0) != "2025-01-21" {
		t.Fatalf("metabase_day: %d rows, %s ... %s", len(r.Rows), r.cell(0, 0), r.cell(20, 0))
	}
	within("metabase_day", num(t, r, 13, 1), visitsTruth(day(14), day(15)))
	r = rs.get(t, "metabase_week")
	wantOK(t, r)
	// Weeks start on Sunday: 29 December 2024 holds 1-4 January.
	if len(r.Rows) != 4 || r.cell(0, 0) != "2024-12-29" || r.cell(1, 0) != "2025-01-05" {
		t.Fatalf("metabase_week: %s", r)
	}
	within("metabase_week", num(t, r, 1, 1), visitsTruth(day(5), day(12)))
	r = rs.get(t, "metabase_month")
	wantOK(t, r)
	if len(r.Rows) != 1 || r.cell(0, 0) != "2025-01-01" {
		t.Fatalf("metabase_month: %s", r)
	}
	within("metabase_month", num(t, r, 0, 1), visitsRows)
	r = rs.get(t, "metabase_quarter_year")
	wantOK(t, r)
	if len(r.Rows) != 1 || r.cell(0, 0) != "2025-01-01" || r.cell(0, 1) != "2025-01-01" {
		t.Fatalf("metabase_quarter_year: %s", r)
	}
	within("metabase_quarter_year", num(t, r, 0, 2), visitsRows)
	r = rs.get(t, "metabase_hour_of_day")
	wantOK(t, r)
	if len(r.Rows) != 24 || r.cell(23, 0) != "23" {
		t.Fatalf("metabase_hour_of_day: %s", r)
	}
	// The last 30 days are after the domain: exactly 0, by construction.
	r = rs.get(t, "metabase_recent")
	wantOK(t, r)
	if r.cell(0, 0) != "0" {
		t.Fatalf("metabase_recent: %s", r)
	}

	r = rs.get(t, "superset_hour")
	wantOK(t, r)
	if len(r.Rows) != 24 || !strings.HasPrefix(r.cell(0, 0), "2025-01-01 ") || !strings.HasSuffix(r.cell(0, 0), ":00:00") {
		t.Fatalf("superset_hour: %s", r)
	}
	r = rs.get(t, "superset_day")
	wantOK(t, r)
	if len(r.Rows) != 14 || r.cell(13, 0) != "2025-01-14" {
		t.Fatalf("superset_day: %s", r)
	}
	within("superset_day", num(t, r, 13, 1), visitsTruth(day(14), day(15)))
	r = rs.get(t, "superset_week")
	wantOK(t, r)
	if len(r.Rows) != 8 || r.cell(2, 0) != "2025-01-05" || r.cell(2, 1) != "desktop" {
		t.Fatalf("superset_week: %s", r)
	}
	r = rs.get(t, "superset_month")
	wantOK(t, r)
	if len(r.Rows) != 1 {
		t.Fatalf("superset_month: %s", r)
	}
	r = rs.get(t, "now_filter")
	wantOK(t, r)
	if r.cell(0, 0) != "0" {
		t.Fatalf("now_filter: %s", r)
	}
}
