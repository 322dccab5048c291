package exec

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/planner"
	"github.com/dpproxy/dpproxy/sources"
)

func table() *catalog.Table {
	return &catalog.Table{Name: "t", Source: "main", Columns: []*catalog.Column{
		{Name: "a", Kind: catalog.IntegerRange, Min: 0, Max: 9, Width: 1, Null: catalog.PolicyCell, OutOfDomain: catalog.PolicyClamp},
		{Name: "b", Kind: catalog.Categorical, Values: []string{"x", "y", "z"}, Null: catalog.PolicyDrop, OutOfDomain: catalog.PolicyOther},
		{Name: "c", Kind: catalog.Binned, Edges: []float64{0, 1.5, 3, 10}, Null: catalog.PolicyDrop, OutOfDomain: catalog.PolicyDrop},
	}}
}

// keepTable is table() with policies that drop nothing (NULLs and
// out-of-domain values go to cells of their own), so that a batch's
// columns carry no dropped cell and the plans the tests expect keep their
// shape; table() itself, with drops, is the pushdown's and the
// sensitivity tests'.
func keepTable() *catalog.Table {
	tab := table()
	tab.Columns[1].Null = catalog.PolicyOther // x, y, z, other: 4 cells as in table()
	c := tab.Columns[2]                       // 3 cells as in table(): two bins and NULL
	c.Edges, c.Null, c.OutOfDomain = []float64{0, 3, 10}, catalog.PolicyCell, catalog.PolicyClamp
	return tab
}

func lit(s string) parser.Literal { return parser.Literal{Text: s} }

func workload(t *testing.T, qs ...*parser.Query) *compile.Workload {
	t.Helper()
	var sts []*parser.Statement
	for _, q := range qs {
		q.Table = "t"
		sts = append(sts, &parser.Statement{Kind: parser.KindAggregate, Query: q})
	}
	w, err := compile.Compile(keepTable(), sts)
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

// twoCounts are two counts over different columns: with a cell limit
// below their product domain, a Direct plan counts each over its own column.
var twoCounts = []*parser.Query{
	{Select: []parser.SelectItem{{Agg: parser.AggCount}}, Where: parser.Between{Column: "a", Lo: lit("2"), Hi: lit("7")}},
	{Select: []parser.SelectItem{{Agg: parser.AggCount}}, Where: parser.Compare{Column: "b", Value: lit("y")}},
}

// withSum adds a SUM grouped by another column, so the batch's supports
// include a two-column set.
var withSum = append([]*parser.Query{{GroupBy: []string{"c"}, Select: []parser.SelectItem{{Column: "c"}, {Agg: parser.AggSum, Column: "a"}}}}, oneWayGroups...)

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
	for _, tc := range []struct {
		qs  []*parser.Query
		opt planner.Options
	}{
		{oneWayGroups, planner.Options{Noise: catalog.Laplace, Epsilon: 1}},
		{oneWayGroups, planner.Options{Noise: catalog.Gaussian, Rho: 0.5}},
		{withSum, planner.Options{Noise: catalog.Laplace, Epsilon: 1}},
		{withSum, planner.Options{Noise: catalog.Gaussian, Rho: 0.5}},
		{oneWayGroups, planner.Options{Noise: catalog.Laplace, Epsilon: 1, Objective: planner.ObjectiveMaxVariance}},
	} {
		w, opt := workload(t, tc.qs...), tc.opt
		p, err := planner.Choose(context.Background(), w, opt)
		if err != nil {
			t.Fatal(err)
		}
		if p.Kind != planner.Marginal {
			t.Fatalf("%s: chose %s, want a marginal plan", opt.Noise, p.Name)
		}
		x := histogram(w.Cells())
		est, _, err := measureMarginal(p, countsFromProduct(p, x), func(*planner.MarginalBlock) int64 { return 0 })
		if err != nil {
			t.Fatal(err)
		}
		for qi, q := range w.Queries {
			for a, agg := range q.Aggregates {
				got := contractOn(agg, q, est[qi], w.Sizes(), q.Support(w))
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
// estimate is about sqrt((κ−1)/(R·answers)), κ ≤ 6 the kurtosis of one
// error (Laplace); 1500 runs over the dozens of answers of most cases, or
// 4000 over the fewest (one and two answers), make 10% a tolerance of at
// least 4σ: a false-failure rate below 10⁻⁴ per case, paid once since the
// noise is seeded.
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
		{"kron laplace", rangesAndGroups[:4], planner.Options{Noise: catalog.Laplace, Epsilon: 1, Objective: planner.ObjectiveTotal}, planner.Kronecker, 1500, 0.1, ""},
		{"kron gaussian", rangesAndGroups[:4], planner.Options{Noise: catalog.Gaussian, Rho: 0.5, Objective: planner.ObjectiveTotal}, planner.Kronecker, 1500, 0.1, ""},
		{"marginal laplace", oneWayGroups, planner.Options{Noise: catalog.Laplace, Epsilon: 1}, planner.Marginal, 1500, 0.1, ""},
		{"marginal gaussian", oneWayGroups, planner.Options{Noise: catalog.Gaussian, Rho: 0.5}, planner.Marginal, 1500, 0.1, ""},
		{"residual gaussian with a 2-way sum", withSum, planner.Options{Noise: catalog.Gaussian, Rho: 0.5}, planner.Marginal, 1500, 0.1, ""},
		{"marginal laplace max-variance", oneWayGroups, planner.Options{Noise: catalog.Laplace, Epsilon: 1, Objective: planner.ObjectiveMaxVariance}, planner.Marginal, 1500, 0.1, ""},
		{"direct in marginal space", twoCounts, planner.Options{Noise: catalog.Laplace, Epsilon: 1, MaxCells: 20}, planner.Direct, 4000, 0.1, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := workload(t, tc.qs...)
			p, err := planner.Choose(context.Background(), w, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if p.Kind != tc.kind {
				t.Fatalf("plan %s has kind %v, want %v", p.Name, p.Kind, tc.kind)
			}
			if tc.opt.MaxCells > 0 && p.Tables == nil {
				t.Fatalf("plan %s counts the product domain beyond MaxCells", p.Name)
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

// seeded is a reproducible noise source for statistical tests: the same
// samplers as production, over a fixed ChaCha8 stream instead of
// crypto/rand, so a tolerance's false-failure rate is paid once, not on
// every run.
func seeded(seed uint64) *noise.Rand {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	s[31] = 0xd9
	return noise.NewRandFrom(rand.NewChaCha8(s))
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
	r := seeded(uint64(runs))
	var sq float64
	for run := 0; run < runs; run++ {
		ans, err := Measure(p, x, r)
		if err != nil {
			t.Fatal(err)
		}
		for q := range exact {
			for a := range exact[q] {
				for g, e := range exact[q][a] {
					if !w.Queries[q].IsLive(a, g) {
						continue // zero by construction: exact, never reported noisy
					}
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
	p, err := planner.Choose(context.Background(), w, planner.Options{Noise: catalog.Laplace, Epsilon: 0.3})
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

// A marginal plan is refused before any noise is drawn when a block's
// noise is below its recomputed sensitivity at its share, or when the
// shares sum to more than the batch's ε.
func TestMarginalRefusesUndercalibratedPlan(t *testing.T) {
	w := workload(t, oneWayGroups...)
	p, err := planner.Choose(context.Background(), w, planner.Options{Noise: catalog.Laplace, Epsilon: 1})
	if err != nil || p.Kind != planner.Marginal {
		t.Fatalf("plan %v %v", p, err)
	}
	x := histogram(w.Cells())
	if _, err := Measure(p, x, noise.NewRand()); err != nil {
		t.Fatal(err)
	}
	alter := func(f func(b []planner.MarginalBlock)) *planner.Plan {
		bad := *p
		blocks := slices.Clone(p.Marginals.Blocks)
		f(blocks)
		bad.Marginals = &planner.MarginalStrategy{Blocks: blocks}
		return &bad
	}
	for name, bad := range map[string]*planner.Plan{
		"noise halved":  alter(func(b []planner.MarginalBlock) { b[0].NoiseDen *= 2 }),
		"share doubled": alter(func(b []planner.MarginalBlock) { b[0].Epsilon *= 2; b[0].NoiseDen *= 2 }),
		"marginal measured as residual": alter(func(b []planner.MarginalBlock) {
			for i := range b {
				if !b[i].Residual && len(b[i].Cols) > 0 {
					b[i].Residual = true
					return
				}
			}
			t.Fatal("no marginal block")
		}),
	} {
		drew := false
		_, _, err := measureMarginal(bad, countsFromProduct(bad, x), func(*planner.MarginalBlock) int64 { drew = true; return 0 })
		if err == nil || drew {
			t.Errorf("%s: measured (err %v, drew %v)", name, err, drew)
		}
	}
}

// countingSource wraps the real SQLite histograms and records which column
// sets were counted.
type countingSource struct {
	h    *sources.Set
	sets []string
}

func (c *countingSource) Histogram(ctx context.Context, t *catalog.Table, cols []*catalog.Column) ([]float64, error) {
	var names []string
	for _, col := range cols {
		names = append(names, col.Name)
	}
	c.sets = append(c.sets, fmt.Sprint(names))
	return c.h.Histogram(ctx, t, cols)
}

// A plan measured in marginal space asks the source for one histogram per
// table, each over only its columns, never the product domain; measured
// without noise from those tables it answers every query exactly.
func TestFetchCountsOnlyTheMarginals(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(dir, "d.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE t (a INTEGER, b TEXT, c REAL)`); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 500; i++ { // every value inside its domain, so all tables count the same rows
		if _, err := tx.Exec(`INSERT INTO t VALUES (?, ?, ?)`, (i*7)%10, []string{"x", "y", "z"}[(i*i)%3], float64((i*13)%100)/10); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	cat := &catalog.Catalog{Sources: map[string]*catalog.Source{"main": {Name: "main", Driver: "sqlite", Path: "d.sqlite"}}}
	h, err := sources.Open(ctx, cat, sources.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for _, opt := range []planner.Options{
		{Noise: catalog.Laplace, Epsilon: 1, MaxCells: 40},
		{Noise: catalog.Gaussian, Rho: 0.5, MaxCells: 40},
	} {
		w := workload(t, withSum...)
		w.Table.Source = "main"
		p, err := planner.Choose(context.Background(), w, opt)
		if err != nil {
			t.Fatal(err)
		}
		if p.Kind != planner.Marginal || p.Tables == nil {
			t.Fatalf("%s: plan %s (kind %v) is not measured in marginal space", opt.Noise, p.Name, p.Kind)
		}
		src := &countingSource{h: h}
		c, err := Fetch(ctx, p, src)
		if err != nil {
			t.Fatal(err)
		}
		if len(src.sets) != len(p.Tables) {
			t.Fatalf("%s: counted %v for tables %v", opt.Noise, src.sets, p.Tables)
		}
		x, err := h.Histogram(ctx, w.Table, w.Columns)
		if err != nil {
			t.Fatal(err)
		}
		est, _, err := measureMarginal(p, c, func(*planner.MarginalBlock) int64 { return 0 })
		if err != nil {
			t.Fatal(err)
		}
		for qi, q := range w.Queries {
			for a, agg := range q.Aggregates {
				got := contractOn(agg, q, est[qi], w.Sizes(), q.Support(w))
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
