package reuse

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/planner"
)

// yearCatalog declares a year of hourly bins (8,760), as the engine's
// year-of-hours tests do.
const yearCatalog = `
database: demo
sources: {main: {driver: sqlite, path: visits.sqlite}}
tables:
  visits:
    budget: {total: 1000000, per_user: 1000000, default_per_query: 0.1, max_per_query: 50}
    columns:
      ts: {type: datetime, min: '2025-01-01 00:00:00', max: '2025-12-31 23:59:59', width: 1h}
users:
  analyst: {password: analyst, role: analyst}
`

func yearBatch(t *testing.T, sql string) *compile.Workload {
	t.Helper()
	cat, err := catalog.Parse("year.yaml", []byte(yearCatalog))
	if err != nil {
		t.Fatal(err)
	}
	sts, err := parser.Parse(sql, func(_, table string) bool { return table == "visits" })
	if err != nil {
		t.Fatal(err)
	}
	w, err := compile.Compile(cat.Table("visits"), []*parser.Statement{&sts[0]})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// Over a year of hours, a daily panel combined with stored hours and
// dailies is decided alike whether the least-ε search reads pencils or
// solves every step: the same plan at the same ε, and the same planned
// variances up to rounding. Each decision's new measurement is stored
// for the next, tighter target.
func TestPencilSearchDecidesAsSolving(t *testing.T) {
	ctx := context.Background()
	pl := planner.New()
	hourly := yearBatch(t, "SELECT ts, COUNT(*) FROM visits GROUP BY ts ORDER BY ts")
	daily := yearBatch(t, "SELECT DATE(ts) AS d, COUNT(*) FROM visits GROUP BY 1 ORDER BY 1")
	hp, err := pl.Choose(ctx, hourly, planner.Options{Noise: catalog.Laplace, Epsilon: 1})
	if err != nil {
		t.Fatal(err)
	}
	var id int64
	rng := rand.New(rand.NewPCG(24, 3))
	stored := measured(t, rng, hourly, hp, &id)
	withPencils, solving := New(pl, 1e-6, 1e-12, 64<<20), New(pl, 1e-6, 1e-12, 64<<20)
	solving.solveEach = true
	cheaper := 0 // decisions at less than the batch's own ε
	for i := range 4 {
		target := 1.5 * math.Pow(0.8, float64(i))
		p, err := pl.ForTarget(ctx, daily, planner.Options{Noise: catalog.Laplace, Epsilon: 1}, target)
		if err != nil {
			t.Fatal(err)
		}
		r := Request{W: daily, Plan: p, Cost: budget.Cost{Epsilon: p.Options.Epsilon}, MaxStderr: target, HasTarget: true, Version: "v", Stored: stored}
		d, d2 := withPencils.Decide(ctx, r), solving.Decide(ctx, r)
		if d.Combine != d2.Combine || d.Cost != d2.Cost || d.Plan.Name != d2.Plan.Name || (d.Free == nil) != (d2.Free == nil) {
			t.Fatalf("target %g: pencils combine %v at %+v (%s), solving %v at %+v (%s)", target, d.Combine, d.Cost, d.Plan.Name, d2.Combine, d2.Cost, d2.Plan.Name)
		}
		if !d.Combine {
			t.Fatalf("target %g: not combined", target)
		}
		if d.Cost.Epsilon < p.Options.Epsilon {
			cheaper++
		}
		for q := range d.After.Vars {
			for a := range d.After.Vars[q] {
				for g, v := range d.After.Vars[q][a] {
					if v2 := d2.After.Vars[q][a][g]; math.Abs(v-v2) > 1e-9*v2 {
						t.Fatalf("target %g: answer %d variance %g with pencils, %g solving", target, g, v, v2)
					}
				}
			}
		}
		stored = append(stored, measured(t, rng, d.Measured, d.Plan, &id)...)
	}
	if cheaper == 0 {
		t.Fatal("no decision searched below the batch's own ε")
	}
}
