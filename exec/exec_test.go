package exec

import (
	"fmt"
	"math"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/planner"
)

func table() *catalog.Table {
	return &catalog.Table{Name: "t", Source: "main", Columns: []*catalog.Column{
		{Name: "a", Kind: catalog.IntegerRange, Min: 0, Max: 9, Width: 1, Null: catalog.PolicyCell, OutOfDomain: catalog.PolicyClamp},
		{Name: "b", Kind: catalog.Categorical, Values: []string{"x", "y", "z"}, Null: catalog.PolicyDrop, OutOfDomain: catalog.PolicyOther},
		{Name: "c", Kind: catalog.Binned, Edges: []float64{0, 1.5, 3, 10}, Null: catalog.PolicyDrop, OutOfDomain: catalog.PolicyDrop},
	}}
}

func lit(s string) parser.Literal { return parser.Literal{Text: s} }

func workload(t *testing.T, qs ...*parser.Query) *compile.Workload {
	t.Helper()
	var sts []*parser.Statement
	for _, q := range qs {
		q.Table = "t"
		sts = append(sts, &parser.Statement{Kind: parser.KindAggregate, Query: q})
	}
	w, err := compile.Compile(table(), sts)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func histogram(n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = float64((i*37 + 11) % 23)
	}
	return x
}

var rangesAndGroups = []*parser.Query{
	{Select: []parser.SelectItem{{Agg: parser.AggCount}}, Where: parser.Between{Column: "a", Lo: lit("2"), Hi: lit("7")}},
	{Select: []parser.SelectItem{{Agg: parser.AggCount}}, Where: parser.Compare{Column: "a", Op: parser.OpLt, Value: lit("5")}},
	{Select: []parser.SelectItem{{Agg: parser.AggCount}}, Where: parser.Compare{Column: "a", Op: parser.OpGe, Value: lit("3")}},
	{GroupBy: []string{"b", "a"}, Select: []parser.SelectItem{{Column: "b"}, {Column: "a"}, {Agg: parser.AggCount}}},
	{GroupBy: []string{"c"}, Select: []parser.SelectItem{{Column: "c"}, {Agg: parser.AggSum, Column: "a"}},
		Where: parser.Or{Terms: []parser.Pred{parser.Compare{Column: "b", Value: lit("y")}, parser.Compare{Column: "a", Op: parser.OpGt, Value: lit("6")}}}},
}

// oneWayGroups is a dashboard-style batch: one-way GROUP BYs over different
// columns and a range count, best measured as a union of marginals.
var oneWayGroups = []*parser.Query{
	{GroupBy: []string{"a"}, Select: []parser.SelectItem{{Column: "a"}, {Agg: parser.AggCount}}},
	{GroupBy: []string{"b"}, Select: []parser.SelectItem{{Column: "b"}, {Agg: parser.AggCount}}},
	{GroupBy: []string{"c"}, Select: []parser.SelectItem{{Column: "c"}, {Agg: parser.AggCount}}},
	{Select: []parser.SelectItem{{Agg: parser.AggCount}}, Where: parser.Between{Column: "a", Lo: lit("2"), Hi: lit("7")}},
}

// bruteContract is Σ_cells agg(cell)·x(cell) per group, by enumeration.
func bruteContract(w *compile.Workload, q *compile.Query, agg compile.Linear, x []float64) []float64 {
	sizes := w.Sizes()
	out := make([]float64, q.Groups(w))
	cell := make([]int, len(sizes))
	for i := range x {
		rem := i
		for j := len(sizes) - 1; j >= 0; j-- {
			cell[j] = rem % sizes[j]
			rem /= sizes[j]
		}
		g := 0
		for _, j := range q.GroupCols {
			g = g*sizes[j] + cell[j]
		}
		out[g] += agg.Eval(cell) * x[i]
	}
	return out
}

func TestContractMatchesBruteForce(t *testing.T) {
	w := workload(t, rangesAndGroups...)
	x := histogram(w.Cells())
	for qi, q := range w.Queries {
		for a, agg := range q.Aggregates {
			got := Contract(agg, x, w.Sizes(), q.GroupCols)
			want := bruteContract(w, q, agg, x)
			for g := range want {
				if math.Abs(got[g]-want[g]) > 1e-9 {
					t.Fatalf("query %d agg %d group %d: %v != %v", qi, a, g, got[g], want[g])
				}
			}
		}
	}
}

// Measuring A·x and reconstructing with A⁺, noise aside, returns x exactly,
// so every answer is exact.
func TestKroneckerRoundTripWithoutNoise(t *testing.T) {
	w := workload(t, rangesAndGroups...)
	x := histogram(w.Cells())
	sizes := w.Sizes()
	for _, names := range [][]string{{"identity", "identity", "identity"}, {"H2", "wavelet", "identity"}, {"wavelet", "H4", "H2"}} {
		t.Run(fmt.Sprint(names), func(t *testing.T) {
			y, shape := append([]float64(nil), x...), sizes
			var fs []*planner.ColumnStrategy
			for j, name := range names {
				var cs *planner.ColumnStrategy
				var err error
				switch name {
				case "identity":
					cs, err = planner.Identity(sizes[j])
				case "wavelet":
					cs, err = planner.Wavelet(sizes[j])
				case "H2":
					cs, err = planner.Hierarchical(sizes[j], 2)
				case "H4":
					cs, err = planner.Hierarchical(sizes[j], 4)
				}
				if err != nil {
					t.Fatal(err)
				}
				fs = append(fs, cs)
				y, shape = modeProduct(y, shape, j, cs.A)
			}
			for j, cs := range fs {
				y, shape = modeProduct(y, shape, j, cs.Pinv)
			}
			for i := range x {
				if math.Abs(y[i]-x[i]) > 1e-8 {
					t.Fatalf("cell %d: %v != %v", i, y[i], x[i])
				}
			}
		})
	}
}

// A marginal plan measured without noise answers every query exactly: the
// workload lies in the strategy's row space and least squares is exact.
func TestMarginalRoundTripWithoutNoise(t *testing.T) {
	withSum := append([]*parser.Query{{GroupBy: []string{"c"}, Select: []parser.SelectItem{{Column: "c"}, {Agg: parser.AggSum, Column: "a"}}}}, oneWayGroups...)
	for _, tc := range []struct {
		qs  []*parser.Query
		opt planner.Options
	}{
		{oneWayGroups, planner.Options{Noise: catalog.Laplace, Epsilon: 1}},
		{oneWayGroups, planner.Options{Noise: catalog.Gaussian, Rho: 0.5}},
		{withSum, planner.Options{Noise: catalog.Laplace, Epsilon: 1}},
	} {
		w, opt := workload(t, tc.qs...), tc.opt
		p, err := planner.Choose(w, opt)
		if err != nil {
			t.Fatal(err)
		}
		if p.Kind != planner.Marginal {
			t.Fatalf("%s: chose %s, want a marginal plan", opt.Noise, p.Name)
		}
		x := histogram(w.Cells())
		xhat, err := measureMarginal(p, x, w.Sizes(), func() int64 { return 0 })
		if err != nil {
			t.Fatal(err)
		}
		for qi, q := range w.Queries {
			for a, agg := range q.Aggregates {
				got := Contract(agg, xhat, w.Sizes(), q.GroupCols)
				want := bruteContract(w, q, agg, x)
				for g := range want {
					if math.Abs(got[g]-want[g]) > 1e-8*math.Max(1, math.Abs(want[g])) {
						t.Fatalf("%s %s: query %d agg %d group %d: %v != %v", opt.Noise, p.Name, qi, a, g, got[g], want[g])
					}
				}
			}
		}
	}
}

// The empirical mean squared error over many noisy runs matches the plan's
// exact expected error. With R runs the relative standard error of the
// estimate is about sqrt(2/R)·(kurtosis factor); 1500 runs and many answers
// make 10% a > 5σ tolerance.
func TestEmpiricalErrorMatchesPlan(t *testing.T) {
	cases := []struct {
		name    string
		qs      []*parser.Query
		opt     planner.Options
		kind    planner.Kind
		runs    int
		relTol  float64
		summary string
	}{
		{"direct laplace", rangesAndGroups[:1], planner.Options{Noise: catalog.Laplace, Epsilon: 0.5}, planner.Direct, 4000, 0.1, ""},
		{"direct scaled laplace", rangesAndGroups, planner.Options{Noise: catalog.Laplace, Epsilon: 1}, planner.Direct, 1500, 0.1, ""},
		{"direct scaled gaussian", rangesAndGroups, planner.Options{Noise: catalog.Gaussian, Rho: 0.5}, planner.Direct, 1500, 0.1, ""},
		{"kron laplace", rangesAndGroups[:4], planner.Options{Noise: catalog.Laplace, Epsilon: 1}, planner.Kronecker, 1500, 0.1, ""},
		{"kron gaussian", rangesAndGroups[:4], planner.Options{Noise: catalog.Gaussian, Rho: 0.5}, planner.Kronecker, 1500, 0.1, ""},
		{"marginal laplace", oneWayGroups, planner.Options{Noise: catalog.Laplace, Epsilon: 1}, planner.Marginal, 1500, 0.1, ""},
		{"marginal gaussian", oneWayGroups, planner.Options{Noise: catalog.Gaussian, Rho: 0.5}, planner.Marginal, 1500, 0.1, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := workload(t, tc.qs...)
			p, err := planner.Choose(w, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if p.Kind != tc.kind {
				t.Fatalf("plan %s has kind %v, want %v", p.Name, p.Kind, tc.kind)
			}
			x := histogram(w.Cells())
			emp, expected := empiricalError(t, p, w, x, tc.runs)
			if math.Abs(emp-expected) > tc.relTol*expected {
				t.Fatalf("%s: empirical total squared error %.4g, plan %.4g (%.1f%% off)", p.Name, emp, expected, 100*(emp-expected)/expected)
			}
			if tot := p.TotalSquaredError(); math.Abs(tot-expected) > 1e-9*tot {
				t.Fatalf("per-answer variances sum to %v, plan total %v", expected, tot)
			}
		})
	}
}

// empiricalError measures plan p on x runs times and returns the mean
// total squared error of the answers against the exact ones, and the
// plan's expected total (the sum of the per-answer variances it reports).
func empiricalError(t *testing.T, p *planner.Plan, w *compile.Workload, x []float64, runs int) (emp, expected float64) {
	t.Helper()
	var exact [][][]float64
	for _, qu := range w.Queries {
		var qa [][]float64
		for _, agg := range qu.Aggregates {
			qa = append(qa, Contract(agg, x, w.Sizes(), qu.GroupCols))
		}
		exact = append(exact, qa)
	}
	r := noise.NewRand()
	var sq float64
	for run := 0; run < runs; run++ {
		ans, err := Measure(p, x, r)
		if err != nil {
			t.Fatal(err)
		}
		for q := range exact {
			for a := range exact[q] {
				for g, e := range exact[q][a] {
					d := ans.Values[q][a][g] - e
					sq += d * d
					if run == 0 {
						expected += ans.Variance[q][a][g]
					}
				}
			}
		}
	}
	return sq / float64(runs), expected
}

// The exact interval of a direct Laplace answer covers the truth at least
// 95% of the time, and not much more.
func TestHalfWidth95CoversDirectLaplace(t *testing.T) {
	w := workload(t, rangesAndGroups[0])
	p, err := planner.Choose(w, planner.Options{Noise: catalog.Laplace, Epsilon: 0.3})
	if err != nil || p.Kind != planner.Direct {
		t.Fatalf("plan %v %v", p, err)
	}
	x := histogram(w.Cells())
	exact := Contract(w.Queries[0].Aggregates[0], x, w.Sizes(), nil)[0]
	r := noise.NewRand()
	const runs = 20000
	covered := 0
	for i := 0; i < runs; i++ {
		ans, err := Measure(p, x, r)
		if err != nil {
			t.Fatal(err)
		}
		hw := HalfWidth95(p, 0, 0, ans.Variance[0][0][0])
		if math.Abs(ans.Values[0][0][0]-exact) <= hw {
			covered++
		}
	}
	// Binomial(20000, ≥0.95): 5σ below 0.95 is 0.9423; the discrete quantile overshoots by at most one step.
	if rate := float64(covered) / runs; rate < 0.9423 || rate > 0.99 {
		t.Fatalf("coverage %.4f, want ≥ 0.95", rate)
	}
}

// A marginal plan whose calibrated sensitivity is below its weights' column
// norm is refused before any noise is drawn.
func TestMarginalRefusesUndercalibratedPlan(t *testing.T) {
	w := workload(t, oneWayGroups...)
	p, err := planner.Choose(w, planner.Options{Noise: catalog.Laplace, Epsilon: 1})
	if err != nil || p.Kind != planner.Marginal {
		t.Fatalf("plan %v %v", p, err)
	}
	bad := *p
	bad.Sensitivity = p.Sensitivity / 2
	if _, err := Measure(&bad, histogram(w.Cells()), noise.NewRand()); err == nil {
		t.Fatal("an under-calibrated marginal plan was measured")
	}
}
