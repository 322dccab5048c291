package planner

import (
	"context"
	"math"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/parser"
)

// incomeTable has a COUNT-sized column and a SUM column whose values reach
// 500,000.
func incomeTable() *catalog.Table {
	return &catalog.Table{Name: "p", Noise: catalog.Laplace, Columns: []*catalog.Column{
		{Name: "sex", Kind: catalog.Categorical, Values: []string{"F", "M"}, Null: catalog.PolicyDrop, OutOfDomain: catalog.PolicyDrop},
		{Name: "age", Kind: catalog.IntegerRange, Min: 17, Max: 90, Width: 1, Null: catalog.PolicyDrop, OutOfDomain: catalog.PolicyClamp},
		{Name: "income", Kind: catalog.IntegerRange, Min: 0, Max: 500000, Width: 10000, Null: catalog.PolicyDrop, OutOfDomain: catalog.PolicyClamp},
	}}
}

func compileQueries(t *testing.T, tab *catalog.Table, qs ...*parser.Query) *compile.Workload {
	t.Helper()
	var sts []*parser.Statement
	for _, q := range qs {
		q.Table = tab.Name
		sts = append(sts, &parser.Statement{Kind: parser.KindAggregate, Query: q})
	}
	w, err := compile.Compile(tab, sts)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// meanVariance is the mean over groups of aggregate a of query q (the
// groups where it is not zero by construction).
func meanVariance(p *Plan, q, a int) float64 {
	w := p.Workload
	qu := w.Queries[q]
	group := make([]int, len(qu.GroupCols))
	s, n := 0.0, 0
	for g := 0; g < qu.Groups(w); g++ {
		if !qu.IsLive(a, g) {
			continue
		}
		qu.GroupCells(w, g, group)
		s += p.Variance(q, a, group)
		n++
	}
	return s / float64(n)
}

// The fair objective keeps every answer of a mixed batch near its fair
// share: with Q answers, each no worse than about Q² times its variance
// measured alone (what splitting ε equally would give), where the total
// objective lets SUM(income) take the COUNT's budget (the COUNT's variance
// grows by over 10⁷).
func TestFairObjectiveKeepsEachAnswerNearItsShare(t *testing.T) {
	tab := incomeTable()
	cases := []struct {
		name string
		qs   []*parser.Query
	}{
		{"count and sum", []*parser.Query{{Select: []parser.SelectItem{{Agg: parser.AggCount}, {Agg: parser.AggSum, Column: "income"}}}}},
		{"group by and a count", []*parser.Query{
			{GroupBy: []string{"age"}, Select: []parser.SelectItem{{Column: "age"}, {Agg: parser.AggCount}}},
			{Select: []parser.SelectItem{{Agg: parser.AggCount}}, Where: parser.Compare{Column: "sex", Value: lit("F")}}}},
		{"sum per group and counts", []*parser.Query{
			{GroupBy: []string{"sex"}, Select: []parser.SelectItem{{Column: "sex"}, {Agg: parser.AggSum, Column: "income"}}},
			{Select: []parser.SelectItem{{Agg: parser.AggCount}}, Where: parser.Between{Column: "age", Lo: lit("30"), Hi: lit("40")}}}},
	}
	for _, tc := range cases {
		for _, opt := range []Options{{Noise: catalog.Laplace, Epsilon: 1}, {Noise: catalog.Gaussian, Rho: 0.5}} {
			w := compileQueries(t, tab, tc.qs...)
			fair, err := Choose(context.Background(), w, opt)
			if err != nil {
				t.Fatal(err)
			}
			answers := 0
			for _, qu := range w.Queries {
				answers += len(qu.Aggregates)
			}
			share := float64(answers * answers)
			for q, qu := range w.Queries {
				for a := range qu.Aggregates {
					// Alone: the same aggregate as the batch's only query.
					alone := &compile.Workload{Table: w.Table, Columns: w.Columns, Queries: []*compile.Query{{
						GroupCols: qu.GroupCols, Aggregates: []compile.Linear{qu.Aggregates[a]}, Live: [][]bool{qu.Live[a]},
						Items: []compile.Item{{Kind: compile.ItemAgg, Agg: 0}}, Visible: 1}}}
					ap, err := Choose(context.Background(), alone, opt)
					if err != nil {
						t.Fatal(err)
					}
					f := meanVariance(fair, q, a) / meanVariance(ap, 0, 0)
					if f > 1.1*share {
						t.Errorf("%s %s: answer (%d,%d) is %.3g× its variance alone, fair share %v (plan %s)", tc.name, opt.Noise, q, a, f, share, fair.Name)
					}
				}
			}
		}
	}
	// The total objective's failure that the fair one fixes.
	w := compileQueries(t, tab, cases[0].qs...)
	total, err := Choose(context.Background(), w, Options{Noise: catalog.Laplace, Epsilon: 1, Objective: ObjectiveTotal})
	if err != nil {
		t.Fatal(err)
	}
	if v := meanVariance(total, 0, 0); v < 1e7 {
		t.Errorf("total objective: COUNT variance %v, expected the SUM to take its budget", v)
	}
}

// The max-variance objective's largest variance is never above the total
// and fair plans', and ForTarget meets the target at an ε no larger than
// the total-error strategy needs.
func TestMaxVarianceAndTarget(t *testing.T) {
	tab := incomeTable()
	w := compileQueries(t, tab,
		&parser.Query{GroupBy: []string{"sex"}, Select: []parser.SelectItem{{Column: "sex"}, {Agg: parser.AggCount}}},
		&parser.Query{GroupBy: []string{"age"}, Select: []parser.SelectItem{{Column: "age"}, {Agg: parser.AggCount}}},
		&parser.Query{Select: []parser.SelectItem{{Agg: parser.AggCount}}, Where: parser.Between{Column: "age", Lo: lit("30"), Hi: lit("40")}},
		&parser.Query{Select: []parser.SelectItem{{Agg: parser.AggCount}}, Where: parser.Compare{Column: "age", Op: parser.OpLt, Value: lit("25")}},
	)
	for _, fam := range []catalog.NoiseFamily{catalog.Laplace, catalog.Gaussian} {
		opt := Options{Noise: fam, Epsilon: 1}
		if fam == catalog.Gaussian {
			opt = Options{Noise: fam, Rho: 1}
		}
		pl := New()
		mx := opt
		mx.Objective = ObjectiveMaxVariance
		pm, err := pl.Choose(context.Background(), w, mx)
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range []Objective{ObjectiveTotal, ObjectiveFair} {
			o := opt
			o.Objective = obj
			p, err := pl.Choose(context.Background(), w, o)
			if err != nil {
				t.Fatal(err)
			}
			if pm.MaxVariance > p.MaxVariance*(1+1e-9) {
				t.Errorf("%s: max-variance plan %s has largest variance %v, %v plan %s %v", fam, pm.Name, pm.MaxVariance, obj, p.Name, p.MaxVariance)
			}
		}
		if got := maxVariance(pm); math.Abs(got-pm.MaxVariance) > 1e-12*got {
			t.Errorf("%s: MaxVariance %v, recomputed %v", fam, pm.MaxVariance, got)
		}
		const target = 7.5
		pt, err := pl.ForTarget(context.Background(), w, Options{Noise: fam, Objective: ObjectiveMaxVariance}, target)
		if err != nil {
			t.Fatal(err)
		}
		ptot, err := pl.ForTarget(context.Background(), w, Options{Noise: fam, Objective: ObjectiveTotal}, target)
		if err != nil {
			t.Fatal(err)
		}
		if sd := math.Sqrt(maxVariance(pt)); sd > target || sd < 0.99*target {
			t.Errorf("%s: target %v, largest stderr %v", fam, target, sd)
		}
		cost := func(p *Plan) float64 { return p.Options.Epsilon + p.Options.Rho }
		if cost(pt) > cost(ptot)*(1+1e-9) {
			t.Errorf("%s: target needs %v with the max-variance strategy, %v with the total-error one", fam, cost(pt), cost(ptot))
		}
		t.Logf("%s: target %v costs %.4g (max-variance %s) vs %.4g (total-error %s)", fam, target, cost(pt), pt.Name, cost(ptot), ptot.Name)
	}
	// A split-noise plan (COUNT beside a SUM of incomes, fair objective)
	// Recalibrated to another ε: every aggregate's share and noise follow.
	w = compileQueries(t, tab, &parser.Query{Select: []parser.SelectItem{{Agg: parser.AggCount}, {Agg: parser.AggSum, Column: "income"}}})
	// (A small ε keeps the noise far from the discrete regime, where
	// variance is not proportional to the scale squared. Gaussian noise
	// stacks as well as it splits, so only Laplace plans split.)
	for _, opt := range []Options{{Noise: catalog.Laplace, Epsilon: 0.01}} {
		p, err := Choose(context.Background(), w, opt)
		if err != nil {
			t.Fatal(err)
		}
		if p.AggNoise == nil {
			t.Fatalf("%s: plan %s has no split noise", opt.Noise, p.Name)
		}
		o := opt
		o.Epsilon, o.Rho = 4*opt.Epsilon, 16*opt.Rho // the noise scale divided by 4 either way
		r, err := p.Recalibrated(o)
		if err != nil {
			t.Fatal(err)
		}
		sum := 0.0
		for q := range r.AggNoise {
			for a, n := range r.AggNoise[q] {
				sum += n.Epsilon + n.Rho
				if ratio := r.Variance(q, a, nil) / p.Variance(q, a, nil); math.Abs(ratio-1.0/16) > 0.01/16 {
					t.Errorf("%s: aggregate %d variance ratio %v after ε×4", opt.Noise, a, ratio)
				}
			}
		}
		if sum > o.Epsilon+o.Rho {
			t.Errorf("%s: shares sum to %v > %+v", opt.Noise, sum, o)
		}
	}
}
