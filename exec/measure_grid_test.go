package exec

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/planner"
)

func cubeTable() *catalog.Table {
	col := func(name string) *catalog.Column {
		return &catalog.Column{Name: name, Kind: catalog.IntegerRange, Min: 0, Max: 99, Width: 1, Null: catalog.PolicyDrop, OutOfDomain: catalog.PolicyClamp}
	}
	return &catalog.Table{Name: "t", Source: "main", Columns: []*catalog.Column{col("a"), col("b"), col("c")}}
}

// cubeWorkload: a 3-column GROUP BY with WHERE ranges over 10⁶ cells.
func cubeWorkload(tb testing.TB) *compile.Workload {
	tb.Helper()
	qs := []*parser.Query{
		{Table: "t", GroupBy: []string{"a", "b", "c"},
			Select: []parser.SelectItem{{Column: "a"}, {Column: "b"}, {Column: "c"}, {Agg: parser.AggCount}},
			Where: parser.And{Terms: []parser.Pred{
				parser.Between{Column: "a", Lo: lit("10"), Hi: lit("80")},
				parser.Compare{Column: "b", Op: parser.OpGe, Value: lit("20")},
			}}},
		{Table: "t", Select: []parser.SelectItem{{Agg: parser.AggCount}},
			Where: parser.Between{Column: "c", Lo: lit("5"), Hi: lit("50")}},
		{Table: "t", GroupBy: []string{"a"}, Select: []parser.SelectItem{{Column: "a"}, {Agg: parser.AggCount}},
			Where: parser.Compare{Column: "b", Op: parser.OpLt, Value: lit("60")}},
	}
	var sts []*parser.Statement
	for _, q := range qs {
		sts = append(sts, &parser.Statement{Kind: parser.KindAggregate, Query: q})
	}
	w, err := compile.Compile(cubeTable(), sts)
	if err != nil {
		tb.Fatal(err)
	}
	return w
}

// Plan, measure and answer the 10⁶-cell GROUP BY.
func BenchmarkPlanMeasureCube(b *testing.B) {
	w := cubeWorkload(b)
	x := histogram(w.Cells())
	r := noise.NewRand()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		p, err := planner.Choose(context.Background(), w, planner.Options{Noise: catalog.Laplace, Epsilon: 1})
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := Measure(p, x, r); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(t1.Sub(t0).Seconds(), "plan-s")
		b.ReportMetric(time.Since(t1).Seconds(), "measure-s")
	}
}

// dashTable/dashQueries: many range counts on a 24-cell column and a
// GROUP BY filtered by it, whose best plan uses an optimised (real-valued,
// grid-rounded) strategy on that column.
func dashTable() *catalog.Table {
	return &catalog.Table{Name: "t", Source: "main", Columns: []*catalog.Column{
		{Name: "a", Kind: catalog.IntegerRange, Min: 0, Max: 23, Width: 1, Null: catalog.PolicyDrop, OutOfDomain: catalog.PolicyClamp},
		{Name: "b", Kind: catalog.Categorical, Values: []string{"x", "y", "z"}, Null: catalog.PolicyDrop, OutOfDomain: catalog.PolicyDrop},
	}}
}

func dashWorkload(t testing.TB) *compile.Workload {
	t.Helper()
	var sts []*parser.Statement
	for i := 0; i < 12; i++ {
		lo := (i * 5) % 20
		hi := min(lo+2+(i*3)%12, 23)
		sts = append(sts, &parser.Statement{Kind: parser.KindAggregate, Query: &parser.Query{Table: "t",
			Select: []parser.SelectItem{{Agg: parser.AggCount}},
			Where:  parser.Between{Column: "a", Lo: lit(fmt.Sprint(lo)), Hi: lit(fmt.Sprint(hi))}}})
	}
	sts = append(sts, &parser.Statement{Kind: parser.KindAggregate, Query: &parser.Query{Table: "t", GroupBy: []string{"b"},
		Select: []parser.SelectItem{{Column: "b"}, {Agg: parser.AggCount}},
		Where:  parser.Compare{Column: "a", Op: parser.OpLt, Value: lit("12")}}})
	w, err := compile.Compile(dashTable(), sts)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// Optimised strategies are real-valued; the planner rounds them to an
// integer grid (planner.Plan.Grid < 1) and accounts for it exactly. The
// empirical mean squared error over repeated noisy runs matches the plan's
// expected error, and without noise the answers are exact.
func TestEmpiricalErrorMatchesPlanOnGrid(t *testing.T) {
	for _, opt := range []planner.Options{
		{Noise: catalog.Laplace, Epsilon: 0.7},
		{Noise: catalog.Gaussian, Rho: 0.3},
	} {
		t.Run(string(opt.Noise), func(t *testing.T) {
			w := dashWorkload(t)
			p, err := planner.New().Choose(context.Background(), w, opt)
			if err != nil {
				t.Fatal(err)
			}
			if p.Kind != planner.Kronecker || !(p.Grid < 1) {
				t.Fatalf("plan %s (grid %v) does not measure an optimised strategy", p.Name, p.Grid)
			}
			x := histogram(w.Cells())
			// No noise: exact answers.
			y, err := exactKronecker(x, w.Sizes(), p.Factors, func([]float64, []int64) {})
			if err != nil {
				t.Fatal(err)
			}
			shape := make([]int, len(p.Factors))
			for j, f := range p.Factors {
				shape[j], _ = f.A.Dims()
			}
			for j, f := range p.Factors {
				y, shape = modeProduct(y, shape, j, f.Pinv)
			}
			for i := range x {
				if math.Abs(y[i]-x[i]) > 1e-6 {
					t.Fatalf("cell %d reconstructed %v, want %v", i, y[i], x[i])
				}
			}
			emp, expected := empiricalError(t, p, w, x, 1500)
			if math.Abs(emp-expected) > 0.1*expected {
				t.Fatalf("%s: empirical %.4g, plan %.4g", p.Name, emp, expected)
			}
			if tot := p.TotalSquaredError(); math.Abs(tot-expected) > 1e-9*tot {
				t.Fatalf("variances sum to %v, plan total %v", expected, tot)
			}
		})
	}
}

// The exact measurement agrees across its float64, int64 and big-integer
// paths (chosen by the magnitude bound) with a big-integer reference.
func TestExactKroneckerPaths(t *testing.T) {
	sizes := []int{3, 4}
	x := []float64{5, 0, 7, 1, 2, 9, 4, 4, 0, 3, 8, 6}
	for _, mag := range []float64{3, 1 << 20, 1 << 31} {
		a := mat.NewDense(4, 3, []float64{1, -2, 3, mag, 0, -mag, 2, 2, 2, -1, mag - 1, 5})
		b := mat.NewDense(2, 4, []float64{mag, 1, -1, 0, 3, -mag, mag, 1})
		fs := []*planner.ColumnStrategy{{Name: "a", A: a}, {Name: "b", A: b}}
		got, err := exactKronecker(x, sizes, fs, func([]float64, []int64) {})
		if err != nil {
			t.Fatal(err)
		}
		// Reference: (A ⊗ B)x in big integers.
		for r1 := 0; r1 < 4; r1++ {
			for r2 := 0; r2 < 2; r2++ {
				ref := new(big.Int)
				for c1 := 0; c1 < 3; c1++ {
					for c2 := 0; c2 < 4; c2++ {
						p := new(big.Int).Mul(big.NewInt(int64(a.At(r1, c1))), big.NewInt(int64(b.At(r2, c2))))
						p.Mul(p, big.NewInt(int64(x[c1*4+c2])))
						ref.Add(ref, p)
					}
				}
				want, _ := new(big.Float).SetInt(ref).Float64()
				if got[r1*2+r2] != want {
					t.Fatalf("mag %v: y[%d,%d] = %v, want %v", mag, r1, r2, got[r1*2+r2], want)
				}
			}
		}
	}
}

// Measuring and reconstructing the 10⁶-cell GROUP BY with its plan:
// exact integer mode products, noise, least-squares reconstruction and
// contraction to answers.
func BenchmarkMeasureCube(b *testing.B) {
	w := cubeWorkload(b)
	x := histogram(w.Cells())
	p, err := planner.New().Choose(context.Background(), w, planner.Options{Noise: catalog.Laplace, Epsilon: 1})
	if err != nil {
		b.Fatal(err)
	}
	r := noise.NewRand()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Measure(p, x, r); err != nil {
			b.Fatal(err)
		}
	}
}

// Reconstruction alone: x̂ = (⊗A_j⁺)y over 10⁶ cells.
func BenchmarkReconstructCube(b *testing.B) {
	w := cubeWorkload(b)
	p, err := planner.New().Choose(context.Background(), w, planner.Options{Noise: catalog.Laplace, Epsilon: 1})
	if err != nil {
		b.Fatal(err)
	}
	shape := make([]int, len(p.Factors))
	m := 1
	for j, f := range p.Factors {
		shape[j], _ = f.A.Dims()
		m *= shape[j]
	}
	y := histogram(m)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t, s := y, shape
		for j, f := range p.Factors {
			t, s = modeProduct(t, s, j, f.Pinv)
		}
	}
}
