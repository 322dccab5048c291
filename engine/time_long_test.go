package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/parser"
)

// nestedWindows is a batch of ten nested windows of ts, each counted per
// device: over five years of hourly bins its ten classes of hours are
// best measured by a Kronecker product over the classes (planner/reduce.go).
func nestedWindows() (dp, exact []string) {
	for k := 2; k <= 11; k++ {
		end := fmt.Sprintf("2025-%02d-01 00:00:00", k)
		dp = append(dp, fmt.Sprintf("SELECT device, COUNT(*) FROM visits WHERE ts < '%s' GROUP BY device ORDER BY device", end))
		exact = append(exact, fmt.Sprintf("SELECT device, COUNT(*) FROM visits WHERE ts < '%s' GROUP BY device ORDER BY device", end))
	}
	return dp, exact
}

// Batches over five years of hourly bins, planned over the classes of
// hours they tell apart, answer exactly what SQLite answers when the
// noise is off, through the whole engine (compile, plan, histogram,
// measurement, stored measurements, assembly), and EXPLAIN names the
// plan over the classes. (exec's TestReducedPlansAnswerTheCompiledBatch
// checks the plans' sensitivities and their errors against the empirical
// ones.)
func TestLongTimeBatchesAreExact(t *testing.T) {
	dir, db := visitsOfAYear(t)
	nestedDP, nestedExact := nestedWindows()
	cases := []struct {
		name      string
		dp, exact []string
		strategy  string // what EXPLAIN's strategy row starts with
	}{
		{"hourly week", []string{longPanels[0].dp}, []string{longPanels[0].exact}, "workload"},
		{"a year of days", []string{longPanels[1].dp}, []string{longPanels[1].exact}, "workload"},
		{"nested windows per device", nestedDP, nestedExact, "kron(ts[10 classes]:"},
		// A dashboard in one batch: a Kronecker plan over the classes of
		// hours the panels tell apart, kept in class form through exec.
		{"hourly, monthly and daily panels in one batch",
			[]string{longDashboard[0].dp, longDashboard[2].dp, longDashboard[3].dp},
			[]string{longDashboard[0].exact, longDashboard[2].exact, longDashboard[3].exact}, "kron(ts["},
		// GROUP BY ts cell by cell under a WHERE on it: the identity over
		// the month's 744 hours, never optimised or stored as 43,824².
		{"a month of hours, cell by cell", []string{"SELECT ts, COUNT(*) FROM visits WHERE ts >= '2025-12-01' GROUP BY ts"},
			[]string{"SELECT strftime('%Y-%m-%d %H:00:00', ts) AS h, COUNT(*) FROM visits WHERE ts >= '2025-12-01' GROUP BY 1"}, "workload"},
	}
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eng, done := newTimeEngineCatalog(t, dir, longTimeCatalog)
			defer done()
			eng.withoutNoise()
			var explain []string
			for _, q := range tc.dp {
				explain = append(explain, "EXPLAIN "+q)
			}
			ex, err := eng.Answer(ctx, session("analyst", nil), explain)
			if err != nil {
				t.Fatal(err)
			}
			if got := explainValue(ex[0], "strategy"); !strings.HasPrefix(got, tc.strategy) {
				t.Fatalf("strategy %q, want %s…", got, tc.strategy)
			}
			rs, err := eng.Answer(ctx, session("analyst", nil), tc.dp)
			if err != nil {
				t.Fatal(err)
			}
			for i, q := range tc.exact {
				sameAsSQLite(t, db, q, rs[i])
			}
		})
	}
}

// sameAsSQLite checks r against SQLite's answer to exact (a key, a
// count). SQLite has no row for an empty group; the answer has every
// group the WHERE admits on the declared domain.
func sameAsSQLite(t *testing.T, db *sql.DB, exact string, r *Result) {
	t.Helper()
	want := map[string]any{}
	for _, row := range queryRows(t, db, exact) {
		want[fmt.Sprint(row[0])] = row[1]
	}
	for _, row := range r.Rows {
		key := fmt.Sprint(row[0])
		w, ok := want[key]
		if !ok {
			w = int64(0)
		}
		delete(want, key)
		if !sameValue(row[1], w) {
			t.Fatalf("%s: group %s: %v, SQLite %v", exact, key, row[1], w)
		}
	}
	if len(want) > 0 {
		t.Fatalf("%s: groups %v missing", exact, want)
	}
}

// A year of DATE(ts) over five years of hours is stored in class form (a
// day's 24 hours one class: 365 × 365 entries, not 365 × 43,824), and
// what is stored serves later batches as the factor over cells would:
// the same query again is derivable (free), a monthly panel combines the
// stored days with a new measurement, and a batch over another column
// (which cannot use a long column's class form) is answered as before.
// With the noise off every answer is SQLite's.
func TestLongTimeStoredDaysServeLaterBatches(t *testing.T) {
	dir, db := visitsOfAYear(t)
	eng, done := newTimeEngineCatalog(t, dir, longTimeCatalog)
	defer done()
	eng.withoutNoise()
	ctx := context.Background()
	answer := func(dp, exact string) {
		t.Helper()
		rs, err := eng.Answer(ctx, session("analyst", nil), []string{dp})
		if err != nil {
			t.Fatalf("%s: %v", dp, err)
		}
		sameAsSQLite(t, db, exact, rs[0])
	}
	days := longPanels[1]
	answer(days.dp, days.exact)

	ex, err := eng.Answer(ctx, session("analyst", nil), []string{"EXPLAIN " + days.dp})
	if err != nil {
		t.Fatal(err)
	}
	if got := explainValue(ex[0], "derivable from stored measurements"); !strings.HasPrefix(got, "yes") {
		t.Fatalf("the same year of days again: derivable %q (stored: %q)", got, explainValue(ex[0], "stored measurements"))
	}
	answer(days.dp, days.exact)
	answer("SELECT MONTH(ts) AS m, COUNT(*) FROM visits WHERE ts >= '2025-01-01' GROUP BY 1 ORDER BY 1",
		"SELECT CAST(strftime('%m', ts) AS INTEGER) AS m, COUNT(*) FROM visits WHERE ts >= '2025-01-01' GROUP BY 1 ORDER BY 1")
	answer("SELECT device, COUNT(*) FROM visits GROUP BY device ORDER BY device",
		"SELECT device, COUNT(*) FROM visits GROUP BY device ORDER BY device")
}

// explainValue is the value of EXPLAIN's row named key ("" if none).
func explainValue(r *Result, key string) string {
	for _, row := range r.Rows {
		if len(row) == 2 && fmt.Sprint(row[0]) == key {
			return fmt.Sprint(row[1])
		}
	}
	return ""
}

// sameValue compares an answer's value with SQLite's: numbers up to
// floating-point rounding, labels as text.
func sameValue(got, want any) bool {
	if w, ok := toFloat(want); ok {
		g, ok := toFloat(got)
		return ok && math.Abs(g-w) <= 1e-6*math.Max(1, math.Abs(w))
	}
	return fmt.Sprint(got) == fmt.Sprint(want)
}

// visitsOfAYear writes 5,000 visits over 2025 into a temporary directory
// and opens them for the exact answers; the directory is the catalog's.
func visitsOfAYear(t *testing.T) (string, *sql.DB) {
	t.Helper()
	dir := t.TempDir()
	writeVisitsOver(t, filepath.Join(dir, "visits.sqlite"), 5_000, 365*24*time.Hour)
	db, err := sql.Open("sqlite", filepath.Join(dir, "visits.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return dir, db
}

// A GROUP BY expression whose groups over the declared domain would need
// more factor entries than a batch may compile (DATE(ts) over a year of
// minutes: 365 × 525,600) is refused with error 3900 and what to do,
// before any histogram or charge; the proxy goes on answering.
func TestIndicatorLimitThroughTheEngine(t *testing.T) {
	dir := t.TempDir()
	writeVisits(t, filepath.Join(dir, "visits.sqlite"), 1_000)
	eng, done := newTimeEngineCatalog(t, dir, strings.Replace(longTimeCatalog, "min: '2021-01-01 00:00:00', max: '2025-12-31 23:59:59', width: 1h", "min: '2025-01-01 00:00:00', max: '2025-12-31 23:59:59', width: 1m", 1))
	defer done()
	ctx := context.Background()
	_, err := eng.Answer(ctx, session("analyst", nil), []string{"SELECT DATE(ts) AS d, COUNT(*) FROM visits GROUP BY 1 ORDER BY 1"})
	var pe *parser.Error
	if !errors.As(err, &pe) || pe.Code != parser.CodeDPRefused || !strings.Contains(err.Error(), "coarser width") {
		t.Fatalf("err %v, want 3900 and the indicator limit", err)
	}
	es, err := eng.ledger.Entries(ctx, budget.Filter{})
	if err != nil || len(es) != 0 {
		t.Fatalf("ledger after a refusal: %d entries, %v", len(es), err)
	}
	if _, err := eng.Answer(ctx, session("analyst", nil), []string{"SELECT MONTH(ts) AS m, COUNT(*) FROM visits GROUP BY 1"}); err != nil {
		t.Fatalf("months after the refusal: %v", err)
	}
}
