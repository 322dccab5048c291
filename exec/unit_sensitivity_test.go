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

// unitChanges lists every change one unit can make to a histogram of n
// cells under bound c: non-negative integer vectors (as cell → rows) with
// at most Groups non-zero cells, each at most PerGroup, summing to at most
// Rows — all of them, by brute force.
func unitChanges(n int, c planner.Contribution) [][][2]int {
	g, r := int(c.Rows), int(c.Rows)
	if c.Groups > 0 {
		g = int(c.Groups)
	}
	if c.PerGroup > 0 {
		r = int(c.PerGroup)
	}
	var out [][][2]int
	var rec func(from, left int, cur [][2]int)
	rec = func(from, left int, cur [][2]int) {
		if len(cur) > 0 {
			out = append(out, append([][2]int(nil), cur...))
		}
		if len(cur) == g {
			return
		}
		for cell := from; cell < n; cell++ {
			for v := 1; v <= min(r, left); v++ {
				rec(cell+1, left-v, append(cur, [2]int{cell, v}))
			}
		}
	}
	rec(0, int(c.Rows), nil)
	return out
}

// Every strategy kind under a privacy unit: brute force over every change
// one unit can make (unitChanges) finds a privacy loss — Σ over the plan's
// noises of ‖B v‖₁/t (Laplace) or ‖B v‖₂²/(2σ²) (Gaussian) — at most the
// batch's ε or ρ, and a row-bounded unit attains its bound on a direct
// plan: the noise is k × the row-level noise, no less and no more.
func TestUnitSensitivityWorstUnit(t *testing.T) {
	batches := [][]string{
		{"SELECT COUNT(*) FROM t", "SELECT COUNT(b) FROM t WHERE a > 3"},
		{"SELECT b, SUM(CASE WHEN b = 'x' THEN a ELSE 0 END) FROM t GROUP BY b", "SELECT COUNT(*) FROM t WHERE c >= 1.5"},
		{"SELECT b, COUNT(*), AVG(a) FROM t GROUP BY b", "SELECT COUNT(*) FROM t WHERE b IS NOT NULL"},
		{"SELECT a, COUNT(*) FROM t GROUP BY a", "SELECT b, COUNT(*) FROM t GROUP BY b", "SELECT c, COUNT(*) FROM t GROUP BY c"},
		{"SELECT COUNT(*) FROM t WHERE a BETWEEN 2 AND 7", "SELECT COUNT(*) FROM t WHERE a < 5", "SELECT COUNT(*) FROM t WHERE a >= 3", "SELECT a, COUNT(*) FROM t GROUP BY a"},
	}
	bounds := []planner.Contribution{{Rows: 2}, {Rows: 3, Groups: 2, PerGroup: 2}}
	protected := func(_, table string) bool { return table == "t" }
	kinds := map[planner.Kind]bool{}
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
		sizes := w.Sizes()
		for _, bound := range bounds {
			changes := unitChanges(w.Cells(), bound)
			for _, opt := range []planner.Options{{Noise: catalog.Laplace, Epsilon: 0.7, Unit: bound}, {Noise: catalog.Gaussian, Rho: 0.3, Unit: bound}} {
				gauss := opt.Noise == catalog.Gaussian
				p, err := planner.Choose(context.Background(), w, opt)
				if err != nil {
					t.Fatal(err)
				}
				if p.Options.Unit != bound {
					t.Fatalf("plan options %+v", p.Options)
				}
				// loss is one noise's privacy loss for the change Bv.
				loss := func(bv []float64, num, den uint64) float64 {
					scale := float64(num) / float64(den)
					d := 0.0
					for _, x := range bv {
						if gauss {
							d += x * x
						} else {
							d += math.Abs(x)
						}
					}
					if gauss {
						return d / (2 * scale)
					}
					return d / scale
				}
				// worst is the largest loss of one noise over all unit
				// changes, from the measured columns B e_c.
				worst := func(cols [][]float64, num, den uint64) float64 {
					m := 0.0
					bv := make([]float64, len(cols[0]))
					for _, v := range changes {
						clear(bv)
						for _, cv := range v {
							for i, x := range cols[cv[0]] {
								bv[i] += float64(cv[1]) * x
							}
						}
						m = math.Max(m, loss(bv, num, den))
					}
					return m
				}
				columns := func(f func(c int) []float64) [][]float64 {
					cols := make([][]float64, w.Cells())
					for c := range cols {
						cols[c] = f(c)
					}
					return cols
				}
				total := 0.0
				switch {
				case p.Kind == planner.Marginal:
					// Each block counts its own table, truncated on its own
					// cells: its worst unit is its own.
					for _, b := range p.Marginals.Blocks {
						total += worst(columns(func(c int) []float64 { return blockVector(sizes, b, c) }), b.NoiseNum, b.NoiseDen)
					}
				case p.AggNoise != nil:
					for q, qu := range w.Queries {
						for a, agg := range qu.Aggregates {
							n := p.AggNoise[q][a]
							total += worst(columns(func(c int) []float64 {
								e := make([]float64, w.Cells())
								e[c] = 1
								out := Contract(agg, e, sizes, qu.GroupCols)
								for i := range out {
									out[i] *= p.Scale[q][a]
								}
								return out
							}), n.NoiseNum, n.NoiseDen)
						}
					}
				default:
					cols := columns(func(c int) []float64 {
						e := make([]float64, w.Cells())
						e[c] = 1
						return measuredVector(t, p, e)
					})
					total = worst(cols, p.NoiseNum, p.NoiseDen)
					// Attained: k rows in the cell of the largest column.
					if p.Kind == planner.Direct && bound.Groups == 0 {
						row := p.Options.Calibration()
						budget := row.Epsilon * bound.L1()
						if gauss {
							budget = row.Rho * bound.L1() * bound.L1()
						}
						if total < budget*(1-1e-3) {
							t.Errorf("%q %s %v: worst unit loss %v, below the calibrated %v", texts, opt.Noise, bound, total, budget)
						}
					}
				}
				want := opt.Epsilon
				if gauss {
					want = opt.Rho
				}
				if total > want*(1+1e-9) {
					t.Fatalf("%q %s %v %s: the worst unit's privacy loss is %v > %v", texts, opt.Noise, bound, p.Name, total, want)
				}
				kinds[p.Kind] = true
				t.Logf("%q %s %v: %s, worst unit loss %.6g of %g, unit sensitivity %g", texts, opt.Noise, bound, p.Name, total, want, p.UnitSensitivity())
			}
		}
	}
	if len(kinds) != 3 {
		t.Errorf("plan kinds checked: %v, want direct, Kronecker and marginal", kinds)
	}
}
