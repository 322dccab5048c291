package engine

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/budget"
)

// knownCatalog allows ε = 100, at which the discrete Laplace noise is
// zero but for probability about 2e^(−100): answers equal the truth.
var knownCatalog = strings.Replace(testCatalog, "max_per_query: 5", "max_per_query: 100", 1)

func num(t *testing.T, r *Result, row, col int) float64 {
	t.Helper()
	v, ok := toFloat(r.AllRows()[row][col])
	if !ok {
		t.Fatalf("row %d column %d: %v", row, col, r.AllRows()[row][col])
	}
	return v
}

// engineLastEntry is eng's ledger's newest entry.
func engineLastEntry(t *testing.T, eng *Engine) budget.Entry {
	t.Helper()
	es, err := eng.ledger.Entries(context.Background(), budget.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return es[len(es)-1]
}

func lastEntry(t *testing.T, f *fixture) budget.Entry {
	t.Helper()
	es := f.entries(t)
	return es[len(es)-1]
}

// TestDerivedRangeAfterGroupBy: a range count after the GROUP BY over its
// column is answered from the stored measurement, free, equal (with zero
// noise) to the truth; a derived ledger entry names the measurement, and
// the ledger verifies.
func TestDerivedRangeAfterGroupBy(t *testing.T) {
	f := newFixtureCatalog(t, knownCatalog)
	vars := map[string]any{"dp_epsilon": 100.0}
	s := session("analyst", vars)
	by := f.answer(t, s, "SELECT age, COUNT(*) FROM adult GROUP BY age")
	if by.Len() != 74 || lastEntry(t, f).Kind != budget.KindCharge {
		t.Fatalf("GROUP BY: %d rows, last entry %+v", by.Len(), lastEntry(t, f))
	}
	n := len(f.entries(t))
	vars["dp_max_stderr"] = 1.0
	r := f.answer(t, s, "SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 40")
	e := lastEntry(t, f)
	if len(f.entries(t)) != n+1 || e.Kind != budget.KindDerived || !e.Cost.IsZero() || !strings.Contains(e.Strategy, "measurements 1") {
		t.Fatalf("range count: entry %+v", e)
	}
	truth := float64(sqlCount(t, f.data, "SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 40"))
	if got := num(t, r, 0, 0); got != truth {
		t.Fatalf("derived range count %g, truth %g", got, truth)
	}
	// The same range under other groupings and a coarser GROUP BY.
	r = f.answer(t, s, "SELECT age >= 50 AS older, COUNT(*) FROM adult GROUP BY older")
	if lastEntry(t, f).Kind != budget.KindDerived {
		t.Fatalf("coarser GROUP BY: %+v", lastEntry(t, f))
	}
	older := float64(sqlCount(t, f.data, "SELECT COUNT(*) FROM adult WHERE age >= 50 AND age <= 90"))
	if got := num(t, r, 1, 1); got != older {
		t.Fatalf("older: %g, truth %g (%v)", got, older, r.AllRows())
	}
	// A column not measured is not derivable: measured and charged.
	f.answer(t, s, "SELECT sex, COUNT(*) FROM adult GROUP BY sex")
	if e := lastEntry(t, f); e.Kind != budget.KindCharge {
		t.Fatalf("sex: %+v", e)
	}
	if err := f.ledger.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestGroupByAndItsTotalAgree: groups from one measurement and the count
// over all of them are one estimate (before rounding each count).
func TestGroupByAndItsTotalAgree(t *testing.T) {
	f := newFixtureCatalog(t, testCatalog)
	vars := map[string]any{"dp_epsilon": 1.0}
	s := session("analyst", vars)
	by := f.answer(t, s, "SELECT education, DP_CI_LOW(COUNT(*)), DP_CI_HIGH(COUNT(*)) FROM adult GROUP BY education")
	vars["dp_max_stderr"] = 10.0
	total := f.answer(t, s, "SELECT DP_CI_LOW(COUNT(*)), DP_CI_HIGH(COUNT(*)) FROM adult WHERE education IS NOT NULL")
	if e := lastEntry(t, f); e.Kind != budget.KindDerived {
		t.Fatalf("total: %+v", e)
	}
	agree(t, total, by)
}

// agree checks that the estimate at the middle of total's interval is the
// sum of the groups' (the shown counts are each rounded and clamped at
// zero, so they may not add up; the estimates do).
func agree(t *testing.T, total, groups *Result) {
	t.Helper()
	mid := func(r *Result, row, col int) float64 { return (num(t, r, row, col) + num(t, r, row, col+1)) / 2 }
	sum := 0.0
	for i := 0; i < groups.Len(); i++ {
		sum += mid(groups, i, 1)
	}
	if got := mid(total, 0, 0); math.Abs(got-sum) > 1e-3*float64(groups.Len()) {
		t.Fatalf("total %g, groups sum to %g", got, sum)
	}
}

// wholeCatalog keeps NULL and unknown values of age and sex in cells of
// their own, so a GROUP BY over them counts every row: measurements over
// (age) then inform (age, sex), and a GROUP BY sums to the table's total.
var wholeCatalog = strings.NewReplacer(
	"age: {type: integer, min: 17, max: 90}", "age: {type: integer, min: 17, max: 90, null: cell}",
	"sex: {type: categorical, values: [Female, Male]}", "sex: {type: categorical, values: [Female, Male], null: cell, out_of_domain: other}",
).Replace(testCatalog)

var wholeKnownCatalog = strings.Replace(wholeCatalog, "max_per_query: 5", "max_per_query: 100", 1)

// TestSpendOnlyOnWhatIsNew: without a target, a batch that stored
// measurements inform is measured at a smaller ε and answered from the
// combination, at least as accurately as the plan alone at the session ε.
func TestSpendOnlyOnWhatIsNew(t *testing.T) {
	f := newFixtureCatalog(t, wholeCatalog)
	s := session("analyst", map[string]any{"dp_epsilon": 1.0})
	f.answer(t, s, "SELECT age, COUNT(*) FROM adult GROUP BY age")
	ex := fmt.Sprint(f.answer(t, s, "EXPLAIN SELECT age, sex, COUNT(*) FROM adult GROUP BY age, sex").AllRows())
	for _, want := range []string{"derivable from stored measurements no", "the cheapest candidate that meets the accuracy combined with the stored measurements", "stderr after query 1"} {
		if !strings.Contains(ex, want) {
			t.Fatalf("EXPLAIN lacks %q:\n%s", want, ex)
		}
	}
	f.answer(t, s, "SELECT age, sex, COUNT(*) FROM adult GROUP BY age, sex")
	e := lastEntry(t, f)
	if e.Kind != budget.KindCharge || e.Cost.Epsilon >= 0.95 || e.Cost.Epsilon < 0.5 || !strings.Contains(e.Strategy, "stored measurements 1") {
		t.Fatalf("age × sex: %+v", e)
	}
	// The total of a GROUP BY over columns that count every row is free
	// under a target it meets, and agrees with the groups.
	s.UserVar = func(n string) (any, bool) {
		v, ok := map[string]any{"dp_epsilon": 1.0, "dp_max_stderr": 30.0}[n]
		return v, ok
	}
	total := f.answer(t, s, "SELECT DP_CI_LOW(COUNT(*)), DP_CI_HIGH(COUNT(*)) FROM adult")
	if e := lastEntry(t, f); e.Kind != budget.KindDerived {
		t.Fatalf("total: %+v", e)
	}
	bySex := f.answer(t, s, "SELECT sex, DP_CI_LOW(COUNT(*)), DP_CI_HIGH(COUNT(*)) FROM adult GROUP BY sex")
	if e := lastEntry(t, f); e.Kind != budget.KindDerived {
		t.Fatalf("by sex: %+v", e)
	}
	agree(t, total, bySex)
	// EXPLAIN says so before anything is spent: age from the measurements
	// of (age) and (age, sex) together is more accurate than age measured
	// alone at ε = 1, so the batch is free; running it agrees.
	vars := map[string]any{"dp_epsilon": 1.0}
	const q = "SELECT age, COUNT(*) FROM adult WHERE age > 20 GROUP BY age"
	r := f.answer(t, session("analyst", vars), "EXPLAIN "+q)
	text := fmt.Sprint(r.AllRows())
	for _, want := range []string{"stored measurements 2", "stderr from stored measurements query 1", "stderr asked query 1", "derivable from stored measurements yes", "epsilon charged if run 0"} {
		if !strings.Contains(text, want) {
			t.Fatalf("EXPLAIN lacks %q:\n%s", want, text)
		}
	}
	f.answer(t, session("analyst", vars), q)
	if e := lastEntry(t, f); e.Kind != budget.KindDerived {
		t.Fatalf("%s: %+v", q, e)
	}
}

// TestMeasureOnlyWhatIsNotKnown: in a batch whose first query the stored
// measurements already answer within its accuracy, the new measurement is
// of the other query alone, at the least ε that meets its accuracy
// combined: half the session's ε here, where the batch's own plan (one
// noise over both GROUP BYs, sensitivity 2) needs all of it. Both answers
// come from one estimate, and with zero noise equal the truth.
func TestMeasureOnlyWhatIsNotKnown(t *testing.T) {
	f := newFixtureCatalog(t, wholeKnownCatalog)
	vars := map[string]any{"dp_epsilon": 1.0}
	s := session("analyst", vars)
	f.answer(t, s, "SELECT age, COUNT(*) FROM adult GROUP BY age")
	batch := []string{"SELECT age, COUNT(*) FROM adult GROUP BY age", "SELECT sex, COUNT(*) FROM adult GROUP BY sex"}
	ctx := context.Background()
	rs, err := f.eng.Answer(ctx, s, []string{"EXPLAIN " + batch[0], "EXPLAIN " + batch[1]})
	if err != nil {
		t.Fatal(err)
	}
	ex := fmt.Sprint(rs[0].AllRows())
	for _, want := range []string{"for query 2 only", "would measure", "stderr after query 2"} {
		if !strings.Contains(ex, want) {
			t.Fatalf("EXPLAIN lacks %q:\n%s", want, ex)
		}
	}
	ci := []string{
		"SELECT age, DP_CI_LOW(COUNT(*)), DP_CI_HIGH(COUNT(*)) FROM adult GROUP BY age",
		"SELECT sex, DP_CI_LOW(COUNT(*)), DP_CI_HIGH(COUNT(*)) FROM adult GROUP BY sex",
	}
	rs, err = f.eng.Answer(ctx, s, ci)
	if err != nil {
		t.Fatal(err)
	}
	e := lastEntry(t, f)
	if e.Kind != budget.KindCharge || e.Cost.Epsilon > 0.55 || e.Cost.Epsilon < 0.45 || !strings.Contains(e.Strategy, "for query 2 only; answered with generalised least squares over stored measurements 1") {
		t.Fatalf("batch: %+v", e)
	}
	// One estimate: the ages (NULL in a cell) and the sexes (NULL and
	// others in cells) both count every row, and sum to one total.
	sum := func(r *Result) float64 {
		total := 0.0
		for i := 0; i < r.Len(); i++ {
			total += (num(t, r, i, 1) + num(t, r, i, 2)) / 2
		}
		return total
	}
	if a, b := sum(rs[0]), sum(rs[1]); math.Abs(a-b) > 1e-3*float64(rs[0].Len()) {
		t.Fatalf("ages sum to %g, sexes to %g", a, b)
	}
	if err := f.ledger.Verify(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestDerivedZeroNoiseEqualsTruth: with zero noise (ε = 100), answers
// derived from direct measurements of GROUP BYs written in any column
// order, of SUMs, and from Kronecker plans equal the truth.
func TestDerivedZeroNoiseEqualsTruth(t *testing.T) {
	f := newFixtureCatalog(t, knownCatalog)
	vars := map[string]any{"dp_epsilon": 100.0}
	s := session("analyst", vars)
	f.answer(t, s, "SELECT sex, age, COUNT(*) FROM adult GROUP BY sex, age")
	f.answer(t, s, "SELECT sex, SUM(hours_per_week) FROM adult GROUP BY sex")
	f.answer(t, s, "SELECT education, COUNT(*) FROM adult WHERE education IN ('Bachelors', 'Masters') OR education = 'Doctorate' GROUP BY education")
	vars["dp_max_stderr"] = 1.0
	for _, tc := range []struct{ dp, sql string }{
		{"SELECT COUNT(*) FROM adult WHERE age = 30 AND sex = 'Male'", ""},
		{"SELECT COUNT(*) FROM adult WHERE age BETWEEN 20 AND 29 AND sex = 'Female'", ""},
		{"SELECT SUM(hours_per_week) FROM adult WHERE sex = 'Male'", "SELECT SUM(hours_per_week) FROM adult WHERE sex = 'Male' AND hours_per_week IS NOT NULL"},
		{"SELECT COUNT(*) FROM adult WHERE education = 'Masters'", ""},
	} {
		n := len(f.entries(t))
		r := f.answer(t, s, tc.dp)
		if es := f.entries(t); len(es) != n+1 || es[n].Kind != budget.KindDerived {
			t.Fatalf("%s: not derived: %+v", tc.dp, es[n:])
		}
		want := tc.sql
		if want == "" {
			want = tc.dp
		}
		if got, truth := num(t, r, 0, 0), float64(sqlCount(t, f.data, want)); got != truth {
			t.Fatalf("%s = %g, truth %g", tc.dp, got, truth)
		}
	}
}

// TestReuseMeasurementsOff: with reuse_measurements: false every batch that
// is not a repeat is measured and charged.
func TestReuseMeasurementsOff(t *testing.T) {
	f := newFixtureCatalog(t, strings.Replace(knownCatalog, "    noise: laplace\n", "    noise: laplace\n    reuse_measurements: false\n", 1))
	s := session("analyst", map[string]any{"dp_epsilon": 1.0, "dp_max_stderr": 100.0})
	f.answer(t, s, "SELECT age, COUNT(*) FROM adult GROUP BY age")
	f.answer(t, s, "SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 40")
	for _, e := range f.entries(t) {
		if e.Kind != budget.KindCharge {
			t.Fatalf("entry %+v", e)
		}
	}
	if n := len(f.entries(t)); n != 2 {
		t.Fatalf("%d entries", n)
	}
}

// TestDerivedRepeatIsStoredAnswer: a derived answer is stored like any
// other: its repeat is the same answer, with a reuse entry, even after a
// new measurement has refined the estimate.
func TestDerivedRepeatIsStoredAnswer(t *testing.T) {
	f := newFixtureCatalog(t, testCatalog)
	vars := map[string]any{"dp_epsilon": 1.0}
	s := session("analyst", vars)
	f.answer(t, s, "SELECT age, COUNT(*) FROM adult GROUP BY age")
	vars["dp_max_stderr"] = 10.0
	const q = "SELECT COUNT(*), DP_CI_LOW(COUNT(*)) FROM adult WHERE age BETWEEN 30 AND 40"
	first := fmt.Sprint(f.answer(t, s, q).AllRows())
	if e := lastEntry(t, f); e.Kind != budget.KindDerived {
		t.Fatalf("first: %+v", e)
	}
	delete(vars, "dp_max_stderr")
	vars["dp_epsilon"] = 2.0
	f.answer(t, s, "SELECT age, COUNT(*) AS n FROM adult WHERE age >= 30 GROUP BY age")
	if e := lastEntry(t, f); e.Kind != budget.KindCharge {
		t.Fatalf("another measurement of age: %+v", e)
	}
	vars["dp_epsilon"], vars["dp_max_stderr"] = 1.0, 10.0
	if again := fmt.Sprint(f.answer(t, s, "select count(*), dp_ci_low(count(*))  from adult where age between 30 and 40").AllRows()); again != first {
		t.Fatalf("repeat %s, first %s", again, first)
	}
	if err := f.ledger.FlushReuses(context.Background()); err != nil {
		t.Fatal(err)
	}
	es := f.entries(t)
	if e := es[len(es)-1]; e.Kind != budget.KindReuse {
		t.Fatalf("repeat: %+v", e)
	}
}

// TestMarginalBlocksAreStored: a batch measured as a union of marginal
// blocks stores each block; a later count over one block's column is
// derived from them, free, within five standard errors of the truth.
// (Columns that keep their NULLs in a cell, so that a block over one
// column of the batch is the same column a later batch reads.)
func TestMarginalBlocksAreStored(t *testing.T) {
	f := newFixtureCatalog(t, wholeKnownCatalog)
	vars := map[string]any{"dp_epsilon": 1.0}
	s := session("analyst", vars)
	batch := []string{
		"SELECT age, COUNT(*) FROM adult GROUP BY age",
		"SELECT sex, COUNT(*) FROM adult GROUP BY sex",
	}
	if _, err := f.eng.Answer(context.Background(), s, batch); err != nil {
		t.Fatal(err)
	}
	if e := lastEntry(t, f); e.Kind != budget.KindCharge || !strings.Contains(e.Strategy, "marginals") {
		t.Fatalf("batch: %+v", e)
	}
	vars["dp_max_stderr"] = 10.0
	const q = "SELECT COUNT(*), DP_STDERR(COUNT(*)) FROM adult WHERE age BETWEEN 30 AND 40"
	r := f.answer(t, s, q)
	if e := lastEntry(t, f); e.Kind != budget.KindDerived {
		t.Fatalf("range: %+v", e)
	}
	truth := float64(sqlCount(t, f.data, "SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 40"))
	if got, se := num(t, r, 0, 0), num(t, r, 0, 1); math.Abs(got-truth) > 5*se || se <= 0 {
		t.Fatalf("derived %g ± %g, truth %g", got, se, truth)
	}
	if err := f.ledger.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestDroppedCellColumnsJoin: a column that drops NULLs, read by only some
// queries of a batch, is measured with a cell for the dropped rows; a
// later batch that reads it everywhere (no such cell) still derives from
// that measurement — the dropped cell is a nuisance of the estimate no
// answer reads — and the other way round, a measurement without the cell
// joins a batch with it.
func TestDroppedCellColumnsJoin(t *testing.T) {
	f := newFixtureCatalog(t, knownCatalog)
	vars := map[string]any{"dp_epsilon": 1.0}
	s := session("analyst", vars)
	batch := []string{
		"SELECT sex, COUNT(*) FROM adult GROUP BY sex",
		"SELECT education, COUNT(*) FROM adult GROUP BY education",
		"SELECT occupation, sex, COUNT(*) FROM adult GROUP BY occupation, sex",
	}
	ctx := context.Background()
	if _, err := f.eng.Answer(ctx, s, batch); err != nil {
		t.Fatal(err)
	}
	vars["dp_max_stderr"] = 10.0
	const q = "SELECT COUNT(*), DP_STDERR(COUNT(*)) FROM adult WHERE education IN ('Bachelors', 'Masters')"
	r := f.answer(t, s, q)
	if e := lastEntry(t, f); e.Kind != budget.KindDerived {
		t.Fatalf("education: %+v", e)
	}
	truth := float64(sqlCount(t, f.data, "SELECT COUNT(*) FROM adult WHERE education IN ('Bachelors', 'Masters')"))
	if got, se := num(t, r, 0, 0), num(t, r, 0, 1); math.Abs(got-truth) > 5*se || se <= 0 {
		t.Fatalf("derived %g ± %g, truth %g", got, se, truth)
	}
	// Without the cell first: hours measured alone, then a batch where
	// only one query reads it.
	delete(vars, "dp_max_stderr")
	f.answer(t, s, "SELECT hours_per_week, COUNT(*) FROM adult GROUP BY hours_per_week")
	vars["dp_max_stderr"] = 30.0
	if _, err := f.eng.Answer(ctx, s, []string{
		"SELECT COUNT(*) FROM adult WHERE hours_per_week >= 40",
		"SELECT sex, COUNT(*) FROM adult GROUP BY sex",
	}); err != nil {
		t.Fatal(err)
	}
	// Free: hours from its own measurement (4), sex from the first batch's.
	if e := lastEntry(t, f); e.Kind != budget.KindDerived || !strings.HasSuffix(e.Strategy, ", 4") {
		t.Fatalf("hours and sex: %+v", e)
	}
	if err := f.ledger.Verify(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestTopKValuesAreStored: a top-k query that shows its counts measures
// every group's (charged in full, the selected ones shown); the
// measurement is stored, so a later count of a group not selected is
// derived from it, free.
func TestTopKValuesAreStored(t *testing.T) {
	f := newFixtureCatalog(t, knownCatalog)
	vars := map[string]any{"dp_epsilon": 1.0}
	s := session("analyst", vars)
	r := f.answer(t, s, "SELECT education, COUNT(*) AS n FROM adult GROUP BY education ORDER BY n DESC LIMIT 2")
	if r.Len() != 2 || lastEntry(t, f).Kind != budget.KindCharge {
		t.Fatalf("top-k: %v, %+v", r.AllRows(), lastEntry(t, f))
	}
	vars["dp_max_stderr"] = 20.0
	f.answer(t, s, "SELECT COUNT(*) FROM adult WHERE education = 'Doctorate'")
	if e := lastEntry(t, f); e.Kind != budget.KindDerived {
		t.Fatalf("count after top-k: %+v", e)
	}
}

// twoMonthsCatalog is timeCatalog over January and February 2025: 1,416
// hourly bins, more than an estimation domain holds (1,024) as cells.
var twoMonthsCatalog = strings.Replace(timeCatalog, "max: '2025-12-31 23:59:59'", "max: '2025-02-28 23:59:59'", 1)

// TestTimeDashboardReuse: over two months of hourly bins (1,416 cells), a
// daily GROUP BY is stored; a range count and a monthly GROUP BY under a
// target it meets are derived from it, free — solved over the 59 days
// every measurement and answer reads, not the hours — and a weekly GROUP
// BY is measured combined with it. A range count with a target on a fresh
// engine plans without building dense strategies over the hours (its
// max-variance finalists are compared by their error forms).
func TestTimeDashboardReuse(t *testing.T) {
	dir := t.TempDir()
	writeVisitsOver(t, filepath.Join(dir, "visits.sqlite"), 3_000, 59*24*time.Hour)
	ctx := context.Background()
	eng, done := newTimeEngineCatalog(t, dir, twoMonthsCatalog)
	defer done()
	vars := map[string]any{"dp_epsilon": 1.0}
	s := session("analyst", vars)
	last := func() budget.Entry { return engineLastEntry(t, eng) }
	if _, err := eng.Answer(ctx, s, []string{"SELECT DATE(ts) AS d, COUNT(*) FROM visits GROUP BY 1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Answer(ctx, s, []string{"SELECT YEARWEEK(ts) AS w, COUNT(*) FROM visits GROUP BY 1"}); err != nil {
		t.Fatal(err)
	}
	if e := last(); e.Kind != budget.KindCharge || !strings.Contains(e.Strategy, "answered with") || e.Cost.Epsilon >= 1 {
		t.Fatalf("weekly: %+v", e)
	}
	vars["dp_max_stderr"] = 30.0
	for _, q := range []string{
		"SELECT COUNT(*) FROM visits WHERE ts >= '2025-02-01'",
		"SELECT STR_TO_DATE(CONCAT(DATE_FORMAT(ts, '%Y-%m'), '-01'), '%Y-%m-%d') AS m, COUNT(*) FROM visits GROUP BY 1",
	} {
		if _, err := eng.Answer(ctx, s, []string{q}); err != nil {
			t.Fatal(err)
		}
		if e := last(); e.Kind != budget.KindDerived {
			t.Fatalf("%s: %+v", q, e)
		}
	}
	fresh, done2 := newTimeEngineCatalog(t, dir, twoMonthsCatalog)
	defer done2()
	if _, err := fresh.Answer(ctx, s, []string{"SELECT COUNT(*) FROM visits WHERE ts >= '2025-02-01'"}); err != nil {
		t.Fatal(err)
	}
}

// knownPool is what TestDerivedBatchesEqualTheTruth draws batches from:
// GROUP BYs over one and two columns, coarser expressions, ranges, IN
// lists and totals over columns that drop NULLs (age, education) or keep
// them (under wholeKnownCatalog: age, sex).
var knownPool = []string{
	"SELECT age, COUNT(*) FROM adult GROUP BY age",
	"SELECT sex, COUNT(*) FROM adult GROUP BY sex",
	"SELECT education, COUNT(*) FROM adult GROUP BY education",
	"SELECT age, sex, COUNT(*) FROM adult GROUP BY age, sex",
	"SELECT FLOOR(age / 10) * 10 AS decade, COUNT(*) FROM adult GROUP BY decade",
	"SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 40",
	"SELECT COUNT(*) FROM adult WHERE sex = 'Female'",
	"SELECT COUNT(*) FROM adult WHERE education IN ('Bachelors', 'Masters')",
	"SELECT sex, COUNT(*) FROM adult WHERE age < 30 GROUP BY sex",
	"SELECT COUNT(*) FROM adult",
	"SELECT education, sex, COUNT(*) FROM adult GROUP BY education, sex",
}

// TestDerivedBatchesEqualTheTruth: random batches measured without noise
// (ε = 100), then random batches under a loose target, run when EXPLAIN
// says the store answers them free: each is derived (one estimate per
// domain, over dropped cells where they apply), equals the truth — the
// same batch answered without the store — and the ledger verifies.
func TestDerivedBatchesEqualTheTruth(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	for _, cat := range []struct{ name, yaml string }{{"drop", knownCatalog}, {"nullcell", wholeKnownCatalog}} {
		f := newFixtureCatalog(t, cat.yaml)
		truth := newFixtureCatalog(t, cat.yaml)
		truth.eng.measures = nil
		ctx := context.Background()
		vars := map[string]any{"dp_epsilon": 100.0}
		s := session("analyst", vars)
		batch := func() []string {
			var b []string
			for k := 1 + rng.IntN(3); k > 0; k-- {
				b = append(b, knownPool[rng.IntN(len(knownPool))])
			}
			return b
		}
		for range 4 {
			if _, err := f.eng.Answer(ctx, s, batch()); err != nil {
				t.Fatal(err)
			}
		}
		vars["dp_max_stderr"] = 1e6
		derived := 0
		for range 12 {
			// Only what the noiseless measurements answer free is run, so
			// nothing noisier is ever stored.
			b := batch()
			var explains []string
			for _, q := range b {
				explains = append(explains, "EXPLAIN "+q)
			}
			ex, err := f.eng.Answer(ctx, s, explains)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(fmt.Sprint(ex[0].AllRows()), "derivable from stored measurements yes") {
				continue
			}
			rs, err := f.eng.Answer(ctx, s, b)
			if err != nil {
				t.Fatalf("%s: %q: %v", cat.name, b, err)
			}
			if e := lastEntry(t, f); e.Kind != budget.KindDerived && e.Kind != budget.KindReuse {
				t.Fatalf("%s: %q: EXPLAIN said derivable, ran as %+v", cat.name, b, e)
			}
			derived++
			want, err := truth.eng.Answer(ctx, session("analyst", map[string]any{"dp_epsilon": 100.0}), b)
			if err != nil {
				t.Fatal(err)
			}
			for i := range rs {
				if got, w := fmt.Sprint(rs[i].AllRows()), fmt.Sprint(want[i].AllRows()); got != w {
					t.Fatalf("%s: %q query %d derived\n%s\nwant\n%s", cat.name, b, i+1, got, w)
				}
			}
		}
		if derived < 3 {
			t.Fatalf("%s: only %d batches derived", cat.name, derived)
		}
		if err := f.ledger.Verify(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
