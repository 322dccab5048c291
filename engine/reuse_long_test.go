package engine

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/reuse"
)

// yearHourly and yearDaily are an hourly and a daily panel over timeCatalog's
// year of hourly bins (8,760 cells), each with SQLite's exact query.
const (
	yearHourly     = "SELECT ts, COUNT(*) FROM visits GROUP BY ts ORDER BY ts"
	yearDaily      = "SELECT DATE(ts) AS d, COUNT(*) FROM visits GROUP BY 1 ORDER BY 1"
	yearDailyExact = "SELECT DATE(ts) AS d, COUNT(*) FROM visits GROUP BY 1 ORDER BY 1"
	yearSinceJune  = "SELECT COUNT(*) FROM visits WHERE ts >= '2025-06-01'"
)

// TestYearOfHoursReuse: over a year of hourly bins (8,760 cells, past
// the 1,024 of a dense system), an hourly panel is stored; a daily panel
// under a loose target is then derived from it, free, and without one is
// measured combined with it (the stored system solved as 365 blocks of 24
// hours), EXPLAIN saying so each time; with the noise off every answer
// equals SQLite's. A total over the year would link every hour into one
// block: EXPLAIN says it is not combined.
func TestYearOfHoursReuse(t *testing.T) {
	dir := t.TempDir()
	writeVisits(t, filepath.Join(dir, "visits.sqlite"), 5_000)
	db, err := sql.Open("sqlite", filepath.Join(dir, "visits.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	eng, done := newTimeEngine(t, dir)
	defer done()
	eng.withoutNoise()
	vars := map[string]any{"dp_epsilon": 1.0}
	s := session("analyst", vars)
	last := func() budget.Entry { return engineLastEntry(t, eng) }
	explain := func(q string) string {
		ex, err := eng.Answer(ctx, s, []string{"EXPLAIN " + q})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(ex[0].AllRows())
	}
	daily := func() {
		t.Helper()
		rs, err := eng.Answer(ctx, s, []string{yearDaily})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]any{}
		for _, row := range queryRows(t, db, yearDailyExact) {
			want[fmt.Sprint(row[0])] = row[1]
		}
		if len(rs[0].Rows) != 365 {
			t.Fatalf("%d days", len(rs[0].Rows))
		}
		for _, row := range rs[0].Rows {
			w, ok := want[fmt.Sprint(row[0])]
			if !ok {
				w = int64(0)
			}
			if !sameValue(row[1], w) {
				t.Fatalf("day %v: %v, SQLite %v", row[0], row[1], w)
			}
		}
	}
	if _, err := eng.Answer(ctx, s, []string{yearHourly}); err != nil {
		t.Fatal(err)
	}
	if e := last(); e.Kind != budget.KindCharge {
		t.Fatalf("hourly: %+v", e)
	}

	// Free: a day's count from 24 stored hours has a standard error of
	// √24 times an hour's (about 7 at ε = 1).
	vars["dp_max_stderr"] = 30.0
	if ex := explain(yearDaily); !strings.Contains(ex, "derivable from stored measurements yes") {
		t.Fatalf("EXPLAIN daily under a loose target: %s", ex)
	}
	daily()
	if e := last(); e.Kind != budget.KindDerived {
		t.Fatalf("daily under a loose target: %+v", e)
	}

	// Combined: under a target the hours alone miss (a day from them has
	// a variance of 44) and the daily plan alone meets (1.8 at ε = 1),
	// the daily counts combined with the hours meet it at a lower ε.
	vars["dp_max_stderr"] = 1.5
	ex := explain(yearDaily)
	if !strings.Contains(ex, "derivable from stored measurements no") || !strings.Contains(ex, "combined with the stored measurements") {
		t.Fatalf("EXPLAIN daily: %s", ex)
	}
	daily()
	if e := last(); e.Kind != budget.KindCharge || !strings.Contains(e.Strategy, "answered with") || e.Cost.Epsilon >= 1 {
		t.Fatalf("daily combined: %+v", e)
	}

	// A count over seven months would link their 5,136 hours into one
	// block.
	ex = explain(yearSinceJune)
	if !strings.Contains(ex, "combined with stored measurements no: the new measurement would link") {
		t.Fatalf("EXPLAIN total: %s", ex)
	}
}

// TestYearOfHoursCacheChangesNothing: over a year of hourly bins (a
// blocked system), an engine caching solved stored systems and one
// solving each anew answer the same sequence — hourly stored, daily free,
// daily combined twice (the second finding the first's combined system
// remembered), weekly and a count over seven months (not combined) —
// with the same seeded noise, and every answer, EXPLAIN and ledger entry
// agrees.
func TestYearOfHoursCacheChangesNothing(t *testing.T) {
	dir := t.TempDir()
	writeVisits(t, filepath.Join(dir, "visits.sqlite"), 5_000)
	ctx := context.Background()
	cached, done := newTimeEngine(t, dir)
	defer done()
	cached.withNoiseSeed(7)
	fresh, done2 := newTimeEngine(t, dir)
	defer done2()
	fresh.withNoiseSeed(7)
	fresh.reuse = reuse.New(fresh.planner, EpsilonRange.Min, RhoRange.Min, 0)
	steps := []struct {
		q      string
		stderr float64 // 0: none
		kind   string  // the ledger entry's kind; "combined": a charge answered with stored ones
	}{
		{yearHourly, 0, budget.KindCharge},
		{yearDaily, 30, budget.KindDerived},
		{yearDaily, 1.5, "combined"},
		{yearDaily, 1.2, "combined"},
		{"SELECT YEARWEEK(ts) AS w, COUNT(*) FROM visits GROUP BY 1 ORDER BY 1", 20, ""},
		{yearSinceJune, 0, budget.KindCharge},
	}
	for i, st := range steps {
		vars := map[string]any{"dp_epsilon": 1.0}
		if st.stderr > 0 {
			vars["dp_max_stderr"] = st.stderr
		}
		var got [2]string
		for k, eng := range []*Engine{cached, fresh} {
			s := session("analyst", vars)
			ex, err := eng.Answer(ctx, s, []string{"EXPLAIN " + st.q})
			if err != nil {
				t.Fatal(err)
			}
			rs, err := eng.Answer(ctx, s, []string{st.q})
			if err != nil {
				t.Fatal(err)
			}
			es, err := eng.ledger.Entries(ctx, budget.Filter{})
			if err != nil {
				t.Fatal(err)
			}
			e := es[len(es)-1]
			combined := e.Kind == budget.KindCharge && strings.Contains(e.Strategy, "answered with")
			if st.kind == "combined" && !combined || st.kind != "" && st.kind != "combined" && e.Kind != st.kind {
				t.Fatalf("step %d (%s): %+v, want %s", i, st.q, e, st.kind)
			}
			got[k] = fmt.Sprint(ex[0].AllRows(), "\n", rs[0].AllRows(), "\n", e.Kind, e.Cost, e.Strategy)
		}
		if got[0] != got[1] {
			t.Fatalf("step %d (%s): cached\n%s\nsolved anew\n%s", i, st.q, got[0], got[1])
		}
	}
}
