package engine

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/dpproxy/dpproxy/budget"
)

// dashboardSequence is a sequence of batches an analyst's dashboardSequence sends, one
// after another.
var dashboardSequence = []string{
	"SELECT age, COUNT(*) FROM adult GROUP BY age",
	"SELECT sex, COUNT(*) FROM adult GROUP BY sex",
	"SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 40",
	"SELECT FLOOR(age/10)*10 AS decade, COUNT(*) FROM adult GROUP BY decade",
	"SELECT COUNT(*) FROM adult WHERE sex = 'Female'",
	"SELECT age, sex, COUNT(*) FROM adult GROUP BY age, sex",
	"SELECT COUNT(*) FROM adult WHERE age >= 65",
	"SELECT sex, COUNT(*) FROM adult WHERE age < 30 GROUP BY sex",
	"SELECT COUNT(*) FROM adult",
	"SELECT education, COUNT(*) FROM adult GROUP BY education",
	"SELECT COUNT(*) FROM adult WHERE education IN ('Bachelors', 'Masters', 'Doctorate')",
}

// runDashboard answers the dashboardSequence on a fresh engine (its own ledger, no
// stored answers; stored measurements unless alone) and returns the ε
// charged and every count of every answer (the last column).
func runDashboard(b testing.TB, f *fixture, vars map[string]any, alone bool) (float64, [][]float64) {
	batches := make([][]string, len(dashboardSequence))
	for i, q := range dashboardSequence {
		batches[i] = []string{q}
	}
	return runBatches(b, f, vars, alone, batches)
}

// runBatches answers batches in turn on a fresh engine, as runDashboard,
// and returns the ε charged and every count of every answer.
func runBatches(b testing.TB, f *fixture, vars map[string]any, alone bool, batches [][]string) (float64, [][]float64) {
	ctx := context.Background()
	l, err := budget.Open(ctx, filepath.Join(b.TempDir(), "ledger.sqlite"))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	cfg := f.cfg
	cfg.Ledger = l
	eng := New(cfg)
	if alone {
		eng.measures = nil
	}
	s := session("analyst", vars)
	var out [][]float64
	for _, batch := range batches {
		rs, err := eng.Answer(ctx, s, batch)
		if err != nil {
			b.Fatalf("%s: %v", batch, err)
		}
		for _, r := range rs {
			rows := r.AllRows()
			v := make([]float64, len(rows))
			for i, r := range rows {
				v[i], _ = toFloat(r[len(r)-1])
			}
			out = append(out, v)
		}
	}
	es, err := l.Entries(ctx, budget.Filter{})
	if err != nil {
		b.Fatal(err)
	}
	eps := 0.0
	for _, e := range es {
		eps += budget.EpsilonFor(e.Cost, 0)
	}
	return eps, out
}

// BenchmarkDashboardReuse answers the dashboardSequence twice per iteration on the
// same data: with stored measurements (each batch first answered from what
// earlier ones measured, then measured at the least ε that meets the
// accuracy) and one batch at a time as without them. It reports the ε
// each spends and the mean squared error of every count against the truth
// (the same dashboardSequence at ε = 100, where the discrete Laplace noise is zero
// but for probability 2e^(−100) per draw). Accuracy is the session's ε
// (each answer as accurate as its batch measured alone at that ε) or a
// target standard error; catalogs drop NULL ages and sexes (as the demo)
// or keep them in a cell (so GROUP BYs over them sum to the total).
//
//	go test ./engine/ -run '^$' -bench DashboardReuse -benchtime 20x
func BenchmarkDashboardReuse(b *testing.B) {
	for _, cat := range []struct{ name, yaml string }{{"drop", knownCatalog}, {"nullcell", wholeKnownCatalog}} {
		f := newFixtureCatalog(b, cat.yaml)
		_, truth := runDashboard(b, f, map[string]any{"dp_epsilon": 100.0}, true)
		for _, acc := range []struct {
			name string
			vars map[string]any
		}{{"epsilon1", map[string]any{"dp_epsilon": 1.0}}, {"stderr5", map[string]any{"dp_max_stderr": 5.0}}} {
			b.Run(cat.name+"/"+acc.name, func(b *testing.B) {
				compareReuse(b, truth, func(alone bool) (float64, [][]float64) { return runDashboard(b, f, acc.vars, alone) })
			})
		}
	}
}

// dashboardRefreshes is a dashboard of four panels sent as one batch (as
// the mysql client sends a multi-statement query), then sent again with a
// fifth panel added, then with a sixth.
var dashboardRefreshes = [][]string{
	{
		"SELECT age, COUNT(*) FROM adult GROUP BY age",
		"SELECT sex, COUNT(*) FROM adult GROUP BY sex",
		"SELECT COUNT(*) FROM adult WHERE age >= 65",
		"SELECT sex, COUNT(*) FROM adult WHERE age < 30 GROUP BY sex",
	},
	{
		"SELECT age, COUNT(*) FROM adult GROUP BY age",
		"SELECT sex, COUNT(*) FROM adult GROUP BY sex",
		"SELECT COUNT(*) FROM adult WHERE age >= 65",
		"SELECT sex, COUNT(*) FROM adult WHERE age < 30 GROUP BY sex",
		"SELECT education, COUNT(*) FROM adult GROUP BY education",
	},
	{
		"SELECT age, COUNT(*) FROM adult GROUP BY age",
		"SELECT sex, COUNT(*) FROM adult GROUP BY sex",
		"SELECT COUNT(*) FROM adult WHERE age >= 65",
		"SELECT sex, COUNT(*) FROM adult WHERE age < 30 GROUP BY sex",
		"SELECT education, COUNT(*) FROM adult GROUP BY education",
		"SELECT COUNT(*) FROM adult WHERE education IN ('Bachelors', 'Masters', 'Doctorate')",
	},
}

// BenchmarkDashboardRefresh answers dashboardRefreshes with stored
// measurements (a panel the store already answers within its accuracy is
// not measured again: only the new ones are, at the least ε that meets
// their accuracy combined) and one batch at a time as without them, in
// the same run, and reports the ε each spends and the mean squared error
// of every count against the truth (ε = 100). Accuracy is the session's
// ε = 1: each answer as accurate as its batch measured alone.
//
//	go test ./engine/ -run '^$' -bench DashboardRefresh -benchtime 20x
func BenchmarkDashboardRefresh(b *testing.B) {
	for _, cat := range []struct{ name, yaml string }{{"drop", knownCatalog}, {"nullcell", wholeKnownCatalog}} {
		f := newFixtureCatalog(b, cat.yaml)
		_, truth := runBatches(b, f, map[string]any{"dp_epsilon": 100.0}, true, dashboardRefreshes)
		b.Run(cat.name, func(b *testing.B) {
			compareReuse(b, truth, func(alone bool) (float64, [][]float64) {
				return runBatches(b, f, map[string]any{"dp_epsilon": 1.0}, alone, dashboardRefreshes)
			})
		})
	}
}

// timeReuseSequence is a time dashboard's panels, one batch each, over a
// year of hourly bins.
var timeReuseSequence = []string{
	"SELECT DATE(ts) AS d, COUNT(*) FROM visits GROUP BY 1 ORDER BY 1",
	"SELECT YEARWEEK(ts) AS w, COUNT(*) FROM visits GROUP BY 1 ORDER BY 1",
	"SELECT STR_TO_DATE(CONCAT(DATE_FORMAT(ts, '%Y-%m'), '-01'), '%Y-%m-%d') AS m, COUNT(*) FROM visits GROUP BY 1 ORDER BY 1",
	"SELECT COUNT(*) FROM visits WHERE ts >= '2025-06-01'",
	"SELECT device, COUNT(*) FROM visits WHERE ts >= '2025-12-01' GROUP BY device",
}

// BenchmarkTimeDashboardReuse answers timeReuseSequence over 50,000 visits
// with stored measurements (solved over the days every panel reads, not
// the 8,760 hours) and without, in the same run, at ε = 1 per panel or
// under @dp_max_stderr = 20, and reports the ε each spends and the mean
// squared error of every count against the truth (ε = 50).
//
//	go test ./engine/ -run '^$' -bench TimeDashboardReuse -benchtime 5x
func BenchmarkTimeDashboardReuse(b *testing.B) {
	dir := b.TempDir()
	writeVisits(b, filepath.Join(dir, "visits.sqlite"), 50_000)
	ctx := context.Background()
	run := func(vars map[string]any, alone bool) (float64, [][]float64) {
		eng, done := newTimeEngine(b, dir)
		defer done()
		if alone {
			eng.measures = nil
		}
		s := session("analyst", vars)
		var out [][]float64
		for _, q := range timeReuseSequence {
			rs, err := eng.Answer(ctx, s, []string{q})
			if err != nil {
				b.Fatalf("%s: %v", q, err)
			}
			rows := rs[0].AllRows()
			v := make([]float64, len(rows))
			for i, r := range rows {
				v[i], _ = toFloat(r[len(r)-1])
			}
			out = append(out, v)
		}
		es, err := eng.ledger.Entries(ctx, budget.Filter{})
		if err != nil {
			b.Fatal(err)
		}
		eps := 0.0
		for _, e := range es {
			eps += budget.EpsilonFor(e.Cost, 0)
		}
		return eps, out
	}
	_, truth := run(map[string]any{"dp_epsilon": 50.0}, true)
	for _, acc := range []struct {
		name string
		vars map[string]any
	}{{"epsilon1", map[string]any{"dp_epsilon": 1.0}}, {"stderr20", map[string]any{"dp_max_stderr": 20.0}}} {
		b.Run(acc.name, func(b *testing.B) {
			compareReuse(b, truth, func(alone bool) (float64, [][]float64) { return run(acc.vars, alone) })
		})
	}
}

// compareReuse runs run with stored measurements and alone (without them)
// b.N times each and reports the ε each spends and the mean squared error
// of every count against truth; spending as much with them as without
// fails.
func compareReuse(b *testing.B, truth [][]float64, run func(alone bool) (eps float64, counts [][]float64)) {
	var eps, sq [2]float64
	var n [2]int
	for i := 0; i < b.N; i++ {
		for mode, alone := range []bool{false, true} {
			e, got := run(alone)
			eps[mode] += e
			for k := range got {
				for g := range got[k] {
					d := got[k][g] - truth[k][g]
					sq[mode] += d * d
					n[mode]++
				}
			}
		}
	}
	b.ReportMetric(eps[0]/float64(b.N), "eps_stored")
	b.ReportMetric(eps[1]/float64(b.N), "eps_alone")
	b.ReportMetric(sq[0]/float64(n[0]), "mse_stored")
	b.ReportMetric(sq[1]/float64(n[1]), "mse_alone")
	if eps[0] >= eps[1] || math.IsNaN(sq[0]) {
		b.Errorf("stored measurements spent ε %g, alone %g", eps[0], eps[1])
	}
}
