package exec

import (
	"context"
	"math"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/planner"
)

// measuredVector is what a plan measures before noise, A·x: the scaled
// workload rows (direct), the Kronecker product (kron), or the weighted
// marginals.
func measuredVector(t *testing.T, p *planner.Plan, x []float64) []float64 {
	t.Helper()
	w := p.Workload
	sizes := w.Sizes()
	var y []float64
	switch p.Kind {
	case planner.Direct:
		for q, qu := range w.Queries {
			for a, agg := range qu.Aggregates {
				for _, v := range Contract(agg, x, sizes, qu.GroupCols) {
					y = append(y, math.Round(p.Scale[q][a]*v))
				}
			}
		}
	case planner.Kronecker:
		var err error
		if y, err = exactKronecker(x, sizes, p.Factors, func([]float64, []int64) {}); err != nil {
			t.Fatal(err)
		}
	}
	return y
}

// blockVector is what marginal block b measures before noise on the
// histogram e_c: the cell's projection onto the block's columns, centred
// and scaled per axis for a residual block.
func blockVector(sizes []int, b planner.MarginalBlock, c int) []float64 {
	cell := make([]int, len(sizes))
	for j := len(sizes) - 1; j >= 0; j-- {
		cell[j] = c % sizes[j]
		c /= sizes[j]
	}
	bs := subSizes(sizes, b.Cols)
	m := make([]int64, cellsOf(sizes, b.Cols))
	idx := 0
	for k, j := range b.Cols {
		idx = idx*bs[k] + cell[j]
	}
	m[idx] = 1
	if b.Residual {
		for j := range bs {
			centreScaleInt(m, bs, j)
		}
	}
	out := make([]float64, len(m))
	for i, v := range m {
		out[i] = float64(v)
	}
	return out
}

// Every strategy's sensitivity stays exact with dropped cells, aggregates
// of expressions and expression groups: brute force over every neighbour
// x + e_c (c any cell, dropped cells included — a row lies in exactly one
// cell) finds no change larger than the plan's calibrated sensitivity, and
// a direct plan's bound is attained.
func TestSensitivityWorstNeighbour(t *testing.T) {
	batches := [][]string{
		{"SELECT COUNT(*) FROM t", "SELECT COUNT(b) FROM t WHERE a > 3"},
		{"SELECT b, SUM(CASE WHEN b = 'x' THEN a ELSE 0 END) FROM t GROUP BY b", "SELECT COUNT(*) FROM t WHERE c >= 1.5"},
		{"SELECT FLOOR(a / 3) AS k, COUNT(*), AVG(a) FROM t GROUP BY k", "SELECT COUNT(*) FROM t WHERE b IS NOT NULL"},
		{"SELECT SUM(a - 5), VARIANCE(a) FROM t WHERE b <> 'y'", "SELECT c, COUNT(*) FROM t GROUP BY c", "SELECT COUNT(*) FROM t"},
		{"SELECT a, COUNT(*) FROM t GROUP BY a", "SELECT b, COUNT(*) FROM t GROUP BY b", "SELECT c, COUNT(*) FROM t GROUP BY c"},
		{"SELECT COUNT(*) FROM t WHERE a BETWEEN 2 AND 7", "SELECT COUNT(*) FROM t WHERE a < 5", "SELECT COUNT(*) FROM t WHERE a >= 3", "SELECT b, a, COUNT(*) FROM t GROUP BY b, a"},
	}
	kinds := map[planner.Kind]bool{}
	protected := func(_, table string) bool { return table == "t" }
	for _, texts := range batches {
		var sts []*parser.Statement
		for _, text := range texts {
			st, err := parser.Parse(text, protected)
			if err != nil {
				t.Fatalf("%s: %v", text, err)
			}
			sts = append(sts, &st[0])
		}
		w, err := compile.Compile(table(), sts)
		if err != nil {
			t.Fatalf("%q: %v", texts, err)
		}
		for _, opt := range []planner.Options{{Noise: catalog.Laplace, Epsilon: 1}, {Noise: catalog.Gaussian, Rho: 0.5}} {
			p, err := planner.Choose(context.Background(), w, opt)
			if err != nil {
				t.Fatal(err)
			}
			norm := func(vs []float64) float64 {
				d := 0.0
				for _, v := range vs {
					if opt.Noise == catalog.Gaussian {
						d += v * v
					} else {
						d += math.Abs(v)
					}
				}
				if opt.Noise == catalog.Gaussian {
					d = math.Sqrt(d)
				}
				return d
			}
			if p.Kind == planner.Marginal {
				// Each block has its own noise and share: each must hold
				// its own sensitivity.
				for _, b := range p.Marginals.Blocks {
					sens := planner.BlockSensitivity(b.Residual, subSizes(w.Sizes(), b.Cols), opt.Noise == catalog.Gaussian)
					worst := 0.0
					for c := 0; c < w.Cells(); c++ {
						worst = math.Max(worst, norm(blockVector(w.Sizes(), b, c)))
					}
					if worst > sens*(1+1e-9) || worst < sens*(1-1e-9) {
						t.Fatalf("%q %s: block %v (residual %v): worst neighbour %v, sensitivity %v", texts, opt.Noise, b.Cols, b.Residual, worst, sens)
					}
				}
				kinds[p.Kind] = true
				t.Logf("%q %s: %s, %d blocks", texts, opt.Noise, p.Name, len(p.Marginals.Blocks))
				continue
			}
			if p.AggNoise != nil {
				// Split noise: each aggregate has its own noise and share,
				// and must hold its own sensitivity.
				for q, qu := range w.Queries {
					for a, agg := range qu.Aggregates {
						worst := 0.0
						e := make([]float64, w.Cells())
						for c := range e {
							e[c] = 1
							worst = math.Max(worst, norm(Contract(agg, e, w.Sizes(), qu.GroupCols))*p.Scale[q][a])
							e[c] = 0
						}
						if n := p.AggNoise[q][a]; worst > n.Sensitivity*(1+1e-9) || (worst > 0 && n.NoiseNum == 0) {
							t.Fatalf("%q %s: aggregate (%d,%d): worst neighbour %v, sensitivity %v", texts, opt.Noise, q, a, worst, n.Sensitivity)
						}
					}
				}
				kinds[p.Kind] = true
				t.Logf("%q %s: %s, per-aggregate noise", texts, opt.Noise, p.Name)
				continue
			}
			worst := 0.0
			e := make([]float64, w.Cells())
			for c := range e {
				e[c] = 1
				worst = math.Max(worst, norm(measuredVector(t, p, e)))
				e[c] = 0
			}
			if worst > p.Sensitivity*(1+1e-9) {
				t.Fatalf("%q %s %s: a neighbour changes the measurement by %v > sensitivity %v", texts, opt.Noise, p.Name, worst, p.Sensitivity)
			}
			if p.Kind == planner.Direct && worst < p.Sensitivity*(1-1e-9) {
				t.Fatalf("%q %s: direct sensitivity %v is not attained (worst %v)", texts, opt.Noise, p.Sensitivity, worst)
			}
			kinds[p.Kind] = true
			t.Logf("%q %s: %s, sensitivity %v, worst neighbour %v", texts, opt.Noise, p.Name, p.Sensitivity, worst)
		}
	}
	if len(kinds) != 3 {
		t.Fatalf("plan kinds checked: %v, want direct, Kronecker and marginal", kinds)
	}
}
