package planner

import (
	"context"
	"fmt"
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/parser"
)

func strategies(t *testing.T, n int) []*ColumnStrategy {
	t.Helper()
	var out []*ColumnStrategy
	add := func(cs *ColumnStrategy, err error) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, cs)
	}
	add(Identity(n))
	for _, b := range []int{2, 3, 4, 16} {
		add(Hierarchical(n, b))
	}
	add(Wavelet(n))
	return out
}

// Without noise, least squares returns the histogram exactly.
func TestReconstructionIsExactWithoutNoise(t *testing.T) {
	for _, n := range []int{1, 2, 5, 16, 37, 100} {
		for _, cs := range strategies(t, n) {
			t.Run(fmt.Sprintf("%s/n=%d", cs.Name, n), func(t *testing.T) {
				if !cs.FullRank {
					t.Fatal("expected full rank")
				}
				x := mat.NewVecDense(n, nil)
				for i := 0; i < n; i++ {
					x.SetVec(i, float64((i*7919)%101))
				}
				m, _ := cs.A.Dims()
				y := mat.NewVecDense(m, nil)
				y.MulVec(cs.A, x)
				xh := mat.NewVecDense(n, nil)
				xh.MulVec(cs.Pinv, y)
				for i := 0; i < n; i++ {
					if math.Abs(xh.AtVec(i)-x.AtVec(i)) > 1e-8 {
						t.Fatalf("cell %d: %v != %v", i, xh.AtVec(i), x.AtVec(i))
					}
				}
			})
		}
	}
}

// Sensitivity is the largest column norm, and entries are integers.
func TestSensitivityIsMaxColumnNorm(t *testing.T) {
	for _, n := range []int{1, 7, 64} {
		for _, cs := range strategies(t, n) {
			m, _ := cs.A.Dims()
			var l1, l2 float64
			for j := 0; j < n; j++ {
				var a, b float64
				for i := 0; i < m; i++ {
					v := cs.A.At(i, j)
					if v != math.Round(v) {
						t.Fatalf("%s n=%d: non-integer entry %v", cs.Name, n, v)
					}
					a += math.Abs(v)
					b += v * v
				}
				l1, l2 = math.Max(l1, a), math.Max(l2, math.Sqrt(b))
			}
			if l1 != cs.L1 || math.Abs(l2-cs.L2) > 1e-12 {
				t.Fatalf("%s n=%d: L1 %v/%v L2 %v/%v", cs.Name, n, cs.L1, l1, cs.L2, l2)
			}
		}
	}
	// A binary hierarchy over 64 cells has 7 levels: each cell is in 7 intervals.
	h, _ := Hierarchical(64, 2)
	if h.L1 != 7 {
		t.Fatalf("H2(64) L1 = %v, want 7", h.L1)
	}
}

func smallTable() *catalog.Table {
	return &catalog.Table{Name: "t", Noise: catalog.Laplace, Columns: []*catalog.Column{
		{Name: "a", Kind: catalog.IntegerRange, Min: 0, Max: 4, Width: 1, Null: catalog.PolicyDrop, OutOfDomain: catalog.PolicyClamp},
		{Name: "b", Kind: catalog.Categorical, Values: []string{"x", "y", "z"}, Null: catalog.PolicyDrop, OutOfDomain: catalog.PolicyDrop},
		{Name: "c", Kind: catalog.IntegerRange, Min: 0, Max: 5, Width: 1, Null: catalog.PolicyDrop, OutOfDomain: catalog.PolicyClamp},
	}}
}

func lit(s string) parser.Literal { return parser.Literal{Text: s} }

func smallWorkload(t *testing.T) *compile.Workload {
	t.Helper()
	qs := []*parser.Query{
		{Table: "t", Select: []parser.SelectItem{{Agg: parser.AggCount}},
			Where: parser.Or{Terms: []parser.Pred{
				parser.Between{Column: "a", Lo: lit("1"), Hi: lit("3")},
				parser.Compare{Column: "b", Op: parser.OpEq, Value: lit("y")},
			}}},
		{Table: "t", GroupBy: []string{"b"}, Select: []parser.SelectItem{{Column: "b"}, {Agg: parser.AggCount}, {Agg: parser.AggSum, Column: "c"}},
			Where: parser.Compare{Column: "c", Op: parser.OpLt, Value: lit("4")}},
		{Table: "t", GroupBy: []string{"c", "a"}, Select: []parser.SelectItem{{Column: "c"}, {Column: "a"}, {Agg: parser.AggCount}}},
	}
	var sts []*parser.Statement
	for _, q := range qs {
		sts = append(sts, &parser.Statement{Kind: parser.KindAggregate, Query: q})
	}
	w, err := compile.Compile(smallTable(), sts)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// denseRows expands every workload row (aggregate ∘ group indicator).
func denseRows(w *compile.Workload) [][]float64 {
	sizes := w.Sizes()
	var rows [][]float64
	for _, q := range w.Queries {
		for _, agg := range q.Aggregates {
			v := Dense(agg, sizes)
			for g := 0; g < q.Groups(w); g++ {
				row := make([]float64, len(v))
				cell := make([]int, len(sizes))
				for i := range v {
					rem := i
					for j := len(sizes) - 1; j >= 0; j-- {
						cell[j] = rem % sizes[j]
						rem /= sizes[j]
					}
					gi := 0
					for _, j := range q.GroupCols {
						gi = gi*sizes[j] + cell[j]
					}
					if gi == g {
						row[i] = v[i]
					}
				}
				rows = append(rows, row)
			}
		}
	}
	return rows
}

func pinv(a *mat.Dense) *mat.Dense {
	var svd mat.SVD
	svd.Factorize(a, mat.SVDFull)
	m, n := a.Dims()
	var u, v mat.Dense
	svd.UTo(&u)
	svd.VTo(&v)
	s := svd.Values(nil)
	out := mat.NewDense(n, m, nil)
	for k, sv := range s {
		if sv < 1e-10*s[0] {
			continue
		}
		var o mat.Dense
		o.Outer(1/sv, v.ColView(k), u.ColView(k))
		out.Add(out, &o)
	}
	return out
}

// The separable Kronecker error equals ‖W A⁺‖²_F computed densely, to 1e-9.
func TestKroneckerErrorMatchesDense(t *testing.T) {
	w := smallWorkload(t)
	s := newSpace(w)
	rows := denseRows(w)
	W := mat.NewDense(len(rows), len(rows[0]), nil)
	for i, r := range rows {
		W.SetRow(i, r)
	}
	checked := 0
	_, _ = s.searchKronecker(catalog.Laplace, func(c []int) {
		if checked >= 60 {
			return
		}
		checked++
		var A *mat.Dense
		for j, o := range c {
			cs, err := s.cols[j].options[o].strategy()
			if err != nil {
				t.Fatal(err)
			}
			f := cs.A
			if A == nil {
				A = mat.DenseCopyOf(f)
				continue
			}
			var k mat.Dense
			k.Kronecker(A, f)
			A = &k
		}
		sens, unit := s.kronError(c, catalog.Laplace)
		var wp mat.Dense
		wp.Mul(W, pinv(A))
		want := mat.Norm(&wp, 2) * mat.Norm(&wp, 2)
		if math.Abs(unit-want) > 1e-9*want {
			t.Errorf("%s: separable %v, dense %v", s.kronName(c), unit, want)
		}
		// Sensitivity is the dense matrix's largest column L1 norm.
		m, n := A.Dims()
		l1 := 0.0
		for j := 0; j < n; j++ {
			c := 0.0
			for i := 0; i < m; i++ {
				c += math.Abs(A.At(i, j))
			}
			l1 = math.Max(l1, c)
		}
		if l1 != sens {
			t.Errorf("%s: sensitivity %v, dense %v", s.kronName(c), sens, l1)
		}
		// Every workload row is answerable: W A⁺ A = W.
		var back mat.Dense
		back.Mul(&wp, A)
		if !mat.EqualApprox(&back, W, 1e-8) {
			t.Errorf("%s: workload not in the row space", s.kronName(c))
		}
	})
	if checked == 0 {
		t.Fatal("no candidate checked")
	}
}

// Per-answer variances of the chosen plan sum to its reported total.
func TestPlanVariancesSumToTotal(t *testing.T) {
	w := smallWorkload(t)
	for _, fam := range []catalog.NoiseFamily{catalog.Laplace, catalog.Gaussian} {
		p, err := Choose(context.Background(), w, Options{Noise: fam, Epsilon: 0.5, Rho: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		sum := 0.0
		for q, qu := range w.Queries {
			for a := range qu.Aggregates {
				for g := 0; g < qu.Groups(w); g++ {
					if !qu.IsLive(a, g) {
						continue // zero by construction: exact, never reported noisy
					}
					group := make([]int, len(qu.GroupCols))
					rem := g
					for i := len(group) - 1; i >= 0; i-- {
						size := w.Columns[qu.GroupCols[i]].Size()
						group[i] = rem % size
						rem /= size
					}
					sum += p.Variance(q, a, group)
				}
			}
		}
		if tot := p.TotalSquaredError(); math.Abs(sum-tot) > 1e-9*tot {
			t.Fatalf("%s %s: per-answer sum %v, total %v", fam, p.Name, sum, tot)
		}
	}
}

// A single COUNT is best measured directly: one query, sensitivity 1.
func TestSingleCountMeasuresTheWorkload(t *testing.T) {
	q := &parser.Query{Table: "t", Select: []parser.SelectItem{{Agg: parser.AggCount}}, Where: parser.Between{Column: "a", Lo: lit("1"), Hi: lit("3")}}
	w, err := compile.Compile(smallTable(), []*parser.Statement{{Kind: parser.KindAggregate, Query: q}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Choose(context.Background(), w, Options{Noise: catalog.Laplace, Epsilon: 1})
	if err != nil {
		t.Fatal(err)
	}
	if p.Sensitivity != 1 {
		t.Fatalf("sensitivity %v, want 1 (plan %s)", p.Sensitivity, p.Name)
	}
}

// A query that is empty by construction adds nothing to the plan: the
// batch plans as if it were not there.
func TestEmptyQueriesLeaveThePlanAlone(t *testing.T) {
	compileAll := func(qs ...*parser.Query) *compile.Workload {
		var sts []*parser.Statement
		for _, q := range qs {
			sts = append(sts, &parser.Statement{Kind: parser.KindAggregate, Query: q})
		}
		w, err := compile.Compile(smallTable(), sts)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	byB := &parser.Query{Table: "t", GroupBy: []string{"b"}, Select: []parser.SelectItem{{Column: "b"}, {Agg: parser.AggCount}}}
	// GROUP BY a, c WHERE a = 9: a's domain is 0..4, so no group exists.
	dead := &parser.Query{Table: "t", GroupBy: []string{"a", "c"}, Select: []parser.SelectItem{{Column: "a"}, {Column: "c"}, {Agg: parser.AggCount}},
		Where: parser.Compare{Column: "a", Op: parser.OpEq, Value: lit("9")}}
	w := compileAll(byB, dead)
	if w.Queries[1].Measured() || len(w.Queries[1].Rows) != 0 {
		t.Fatalf("the dead query is measured: %+v", w.Queries[1].Rows)
	}
	if len(w.Columns) != 1 || w.Columns[0].Name != "b" {
		t.Fatalf("batch columns %v: the dead query's columns widen the domain", w.Columns)
	}
	for _, fam := range []catalog.NoiseFamily{catalog.Laplace, catalog.Gaussian} {
		p, err := Choose(context.Background(), w, Options{Noise: fam, Epsilon: 1, Rho: 0.5})
		if err != nil {
			t.Fatal(err)
		}
		alone, err := Choose(context.Background(), compileAll(byB), Options{Noise: fam, Epsilon: 1, Rho: 0.5})
		if err != nil {
			t.Fatal(err)
		}
		if p.Name != alone.Name || math.Abs(p.TotalSquaredError()-alone.TotalSquaredError()) > 1e-9*alone.TotalSquaredError() {
			t.Fatalf("%s: with the dead query %s %v, alone %s %v", fam, p.Name, p.TotalSquaredError(), alone.Name, alone.TotalSquaredError())
		}
	}
}
