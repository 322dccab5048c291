package exec

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/planner"
)

// longTable has a column of 3,000 cells, planned over the classes of
// cells a batch tells apart (planner/reduce.go), and a short one.
func longTable() *catalog.Table {
	return &catalog.Table{Name: "t", Source: "main", Columns: []*catalog.Column{
		{Name: "h", Kind: catalog.IntegerRange, Min: 0, Max: 2999, Width: 1, Null: catalog.PolicyDrop, OutOfDomain: catalog.PolicyClamp},
		{Name: "b", Kind: catalog.Categorical, Values: []string{"x", "y", "z"}, Null: catalog.PolicyCell, OutOfDomain: catalog.PolicyOther},
	}}
}

func longWorkload(t *testing.T, qs []*parser.Query) *compile.Workload {
	t.Helper()
	var sts []*parser.Statement
	for _, q := range qs {
		q.Table = "t"
		sts = append(sts, &parser.Statement{Kind: parser.KindAggregate, Query: q})
	}
	w, err := compile.Compile(longTable(), sts)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// windows are a few overlapping ranges of h (a handful of classes, most
// cells in none): the workload itself is the best plan.
func windows() []*parser.Query {
	return []*parser.Query{
		{Select: []parser.SelectItem{{Agg: parser.AggCount}}, Where: parser.Between{Column: "h", Lo: lit("100"), Hi: lit("199")}},
		{GroupBy: []string{"b"}, Select: []parser.SelectItem{{Column: "b"}, {Agg: parser.AggCount}}, Where: parser.Between{Column: "h", Lo: lit("150"), Hi: lit("420")}},
	}
}

// prefixes are ten nested ranges of h grouped by b (ten classes): a
// Kronecker product over the classes beats the workload's sensitivity 10.
func prefixes() []*parser.Query {
	var qs []*parser.Query
	for k := 1; k <= 10; k++ {
		qs = append(qs, &parser.Query{GroupBy: []string{"b"}, Select: []parser.SelectItem{{Column: "b"}, {Agg: parser.AggCount}},
			Where: parser.Compare{Column: "h", Op: parser.OpLt, Value: lit(fmt.Sprint(300 * k))}})
	}
	return qs
}

// Plans over classes of a long column's cells answer the batch as
// compiled: every answer is exact without noise, the plan's sensitivity
// is the largest column norm of what it measures over the cells
// themselves, and the empirical error matches the error the plan reports
// (what EXPLAIN shows) — see TestEmpiricalErrorMatchesPlan for the
// tolerance.
func TestReducedPlansAnswerTheCompiledBatch(t *testing.T) {
	cases := []struct {
		name string
		qs   []*parser.Query
		opt  planner.Options
		kind planner.Kind
		runs int
	}{
		{"windows direct laplace", windows(), planner.Options{Noise: catalog.Laplace, Epsilon: 0.5}, planner.Direct, 1500},
		{"windows direct gaussian", windows(), planner.Options{Noise: catalog.Gaussian, Rho: 0.5}, planner.Direct, 1500},
		{"prefixes kron laplace", prefixes(), planner.Options{Noise: catalog.Laplace, Epsilon: 1}, planner.Kronecker, 1500},
		{"prefixes kron gaussian", prefixes(), planner.Options{Noise: catalog.Gaussian, Rho: 0.5}, planner.Kronecker, 1500},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := longWorkload(t, tc.qs)
			p, err := planner.Choose(context.Background(), w, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if p.Workload != w {
				t.Fatalf("plan %s is over another workload than the batch's", p.Name)
			}
			if p.Kind != tc.kind {
				t.Fatalf("plan %s has kind %v, want %v", p.Name, p.Kind, tc.kind)
			}
			if !strings.Contains(fmt.Sprint(p.Candidates), "h[") {
				t.Fatalf("no candidate over classes of h: %v", p.Candidates)
			}
			t.Logf("plan %s, sensitivity %v", p.Name, p.Sensitivity)
			x := histogram(w.Cells())
			exactAnswers(t, p, w, x)
			gauss := tc.opt.Noise == catalog.Gaussian
			if got := measuredSensitivity(w, p, gauss); math.Abs(got-p.Sensitivity) > 1e-9*got {
				t.Fatalf("%s: sensitivity over the cells %v, plan %v", p.Name, got, p.Sensitivity)
			}
			emp, expected := empiricalError(t, p, w, x, tc.runs)
			if math.Abs(emp-expected) > 0.1*expected {
				t.Fatalf("%s: empirical total squared error %.4g, plan %.4g (%.1f%% off)", p.Name, emp, expected, 100*(emp-expected)/expected)
			}
		})
	}
}

// exactAnswers checks that p without noise answers every query exactly.
func exactAnswers(t *testing.T, p *planner.Plan, w *compile.Workload, x []float64) {
	t.Helper()
	ans, err := Measure(p, x, noNoiseSampler{})
	if err != nil {
		t.Fatal(err)
	}
	for q, qu := range w.Queries {
		for a, agg := range qu.Aggregates {
			want := Contract(agg, x, w.Sizes(), qu.GroupCols)
			for g, v := range want {
				if got := ans.Values[q][a][g]; math.Abs(got-v) > 1e-9*math.Max(1, math.Abs(v)) {
					t.Fatalf("%s: query %d aggregate %d group %d without noise %v, exact %v", p.Name, q, a, g, got, v)
				}
			}
		}
	}
}

// measuredSensitivity is the largest column norm (L1, or L2 when gauss)
// over the batch's own cells of the matrix p measures: the scaled
// workload rows (Direct) or the factors' Kronecker product.
func measuredSensitivity(w *compile.Workload, p *planner.Plan, gauss bool) float64 {
	norm := func(col []float64) float64 {
		s := 0.0
		for _, v := range col {
			if gauss {
				s += v * v
			} else {
				s += math.Abs(v)
			}
		}
		if gauss {
			return math.Sqrt(s)
		}
		return s
	}
	switch p.Kind {
	case planner.Direct:
		var rows [][]float64
		sizes := w.Sizes()
		for q, qu := range w.Queries {
			for a, agg := range qu.Aggregates {
				k := p.Scale[q][a]
				for g := 0; g < qu.Groups(w); g++ {
					cells := make([]int, len(qu.GroupCols))
					qu.GroupCells(w, g, cells)
					row := planner.Dense(agg, sizes)
					for i := range row {
						if !inGroup(i, sizes, qu.GroupCols, cells) {
							row[i] = 0
						}
						row[i] *= k
					}
					rows = append(rows, row)
				}
			}
		}
		best := 0.0
		for i := 0; i < w.Cells(); i++ {
			col := make([]float64, len(rows))
			for r := range rows {
				col[r] = rows[r][i]
			}
			best = math.Max(best, norm(col))
		}
		return best
	case planner.Kronecker:
		s := 1.0
		for _, f := range p.Factors {
			a, _ := f.CellMatrices() // over the column's cells
			m, n := a.Dims()
			best := 0.0
			for i := 0; i < n; i++ {
				col := make([]float64, m)
				for r := range col {
					col[r] = a.At(r, i)
				}
				best = math.Max(best, norm(col))
			}
			s *= best
		}
		return s
	}
	return math.NaN()
}

// inGroup reports whether cell i of the product domain lies in the group
// whose cells on groupCols are cells.
func inGroup(i int, sizes, groupCols, cells []int) bool {
	idx := make([]int, len(sizes))
	for j := len(sizes) - 1; j >= 0; j-- {
		idx[j] = i % sizes[j]
		i /= sizes[j]
	}
	for k, j := range groupCols {
		if idx[j] != cells[k] {
			return false
		}
	}
	return true
}
