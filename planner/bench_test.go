package planner

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/parser"
)

// cubeTable has three 100-cell columns: a 10⁶-cell product domain.
func cubeTable() *catalog.Table {
	col := func(name string) *catalog.Column {
		return &catalog.Column{Name: name, Kind: catalog.IntegerRange, Min: 0, Max: 99, Width: 1, Null: catalog.PolicyDrop, OutOfDomain: catalog.PolicyClamp}
	}
	return &catalog.Table{Name: "t", Noise: catalog.Laplace, Columns: []*catalog.Column{col("a"), col("b"), col("c")}}
}

// cubeWorkload is a 3-column GROUP BY with WHERE ranges over 10⁶ cells, plus
// two range counts — the shape of the end-to-end target.
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

// Planning the 10⁶-cell GROUP BY from scratch (no cache).
func BenchmarkChooseCube(b *testing.B) {
	w := cubeWorkload(b)
	for i := 0; i < b.N; i++ {
		if _, err := Choose(context.Background(), w, Options{Noise: catalog.Laplace, Epsilon: 1}); err != nil {
			b.Fatal(err)
		}
	}
}

// Per-answer variances of the 10⁶ groups (what exec and EXPLAIN evaluate).
func BenchmarkVarianceCube(b *testing.B) {
	w := cubeWorkload(b)
	p, err := Choose(context.Background(), w, Options{Noise: catalog.Laplace, Epsilon: 1})
	if err != nil {
		b.Fatal(err)
	}
	q := w.Queries[0]
	group := make([]int, len(q.GroupCols))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := 0.0
		for g := 0; g < q.Groups(w); g++ {
			q.GroupCells(w, g, group)
			s += p.Variance(0, 0, group)
		}
		_ = s
	}
}

// A repeated dashboard query: the plan comes from the Planner's cache.
func BenchmarkChooseCached(b *testing.B) {
	w := cubeWorkload(b)
	pl := New()
	if _, err := pl.Choose(context.Background(), w, Options{Noise: catalog.Laplace, Epsilon: 1}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := pl.Choose(context.Background(), w, Options{Noise: catalog.Laplace, Epsilon: 1}); err != nil {
			b.Fatal(err)
		}
	}
}

// The separable Kronecker error of one candidate.
func BenchmarkKronError(b *testing.B) {
	w := cubeWorkload(b)
	s := newSpace(w)
	c := make([]int, len(s.cols))
	for j := range c {
		c[j] = len(s.cols[j].options) - 1
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.kronError(c, catalog.Laplace)
	}
}

func benchOptimizeLaplace(b *testing.B, g Gram, work float64) {
	for i := 0; i < b.N; i++ {
		r, err := optimizeLaplace(context.Background(), g, work)
		if err != nil || r == nil {
			b.Fatal(err)
		}
		b.ReportMetric(2*r.strategy.L1*r.strategy.L1*traceProduct(g, r.strategy.Gram), "error(ε=1)")
	}
}

func BenchmarkOptimizeLaplaceAllRange1024(b *testing.B) {
	benchOptimizeLaplace(b, AllRangeGram{Size: 1024}, columnWork(1024))
}

func BenchmarkOptimizeLaplacePrefix1024(b *testing.B) {
	benchOptimizeLaplace(b, PrefixGram{Size: 1024}, columnWork(1024))
}

func BenchmarkOptimizeLaplaceAllRange4096(b *testing.B) {
	benchOptimizeLaplace(b, AllRangeGram{Size: 4096}, workOf(9.6))
}

func benchOptimizeGauss(b *testing.B, g Gram) {
	for i := 0; i < b.N; i++ {
		r, err := optimizeGauss(context.Background(), g, workOf(60)) // to its tolerance
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(r.cert.Gap, "gap")
	}
}

func BenchmarkOptimizeGaussAllRange1024(b *testing.B) {
	benchOptimizeGauss(b, AllRangeGram{Size: 1024})
}
func BenchmarkOptimizeGaussPrefix1024(b *testing.B) { benchOptimizeGauss(b, PrefixGram{Size: 1024}) }

// One objective and gradient evaluation of the p-Identity optimiser.
func BenchmarkPIdentityEval1024(b *testing.B) {
	c := laplaceConfigs(1024)[0]
	lo, hi, dense, p := c.start(1024)
	o := newPIdentity(AllRangeGram{Size: 1024}, p, lo, hi)
	th := o.pack(dense)
	gr := make([]float64, len(th))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		o.eval(th, gr)
	}
}

// BenchmarkLongPrefix plans the prefix workload over a long column
// (DPPROXY_BENCH_LONG_PREFIX cells, 8,760 by default) with structured
// strategies, against the dense path's plan at 1,024 cells in the same
// run: #24's targets are planning in ≤ 2 s at 8,760 cells (≤ 20 s at 10⁶)
// at an error no worse, relative to the SVD bound, than the plan at 1,024.
// x-svd is the best strategy's total squared error over the SVD bound (the
// bench planner command's figure), x-svd-1024 the plan at 1,024's.
func BenchmarkLongPrefix(b *testing.B) {
	n := 8760
	if s := os.Getenv("DPPROXY_BENCH_LONG_PREFIX"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= longColumn {
			b.Fatalf("DPPROXY_BENCH_LONG_PREFIX=%q: want a size above %d", s, longColumn)
		}
		n = v
	}
	ratio := func(fam catalog.NoiseFamily, size int) (float64, float64) {
		t0 := time.Now()
		plan, err := New().ChooseKronecker(context.Background(), []Gram{PrefixGram{Size: size}}, Options{Noise: fam, Epsilon: 1, Rho: 0.5})
		if err != nil {
			b.Fatal(err)
		}
		secs := time.Since(t0).Seconds()
		best := plan.Best()
		if fam == catalog.Gaussian {
			return best.Unit / plan.SVDBound, secs
		}
		return best.TotalSquaredError / (2 * plan.SVDBound), secs
	}
	for _, fam := range []catalog.NoiseFamily{catalog.Laplace, catalog.Gaussian} {
		b.Run(fmt.Sprintf("%s/%d", fam, n), func(b *testing.B) {
			b.StopTimer()
			ref, refSecs := ratio(fam, 1024)
			var r, secs float64
			for i := 0; i < b.N; i++ {
				b.StartTimer()
				r, secs = ratio(fam, n)
				b.StopTimer()
			}
			b.ReportMetric(r, "x-svd")
			b.ReportMetric(ref, "x-svd-1024")
			b.ReportMetric(secs*1e3, "plan-ms")
			b.ReportMetric(refSecs*1e3, "plan-ms-1024")
		})
	}
}
