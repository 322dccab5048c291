package exec

import (
	"context"
	"fmt"
	"math"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/planner"
)

// UnitCounter streams each unit's cells after contribution bounding
// (sources.Set.UnitCells): the internal cells (each column's dropped cell
// last) its kept rows lie in.
type UnitCounter interface {
	UnitCells(ctx context.Context, t *catalog.Table, cols []*catalog.Column, fn func(cells []int) error) error
}

// DistinctNoise is the calibration of a COUNT(DISTINCT <unit>) batch.
//
// Privacy: every answer is the number of units with a kept row in the
// cells its group and WHERE admit. A unit's kept rows lie in at most
// G = min(k, g) cells of the batch's domain (truncation, package sources),
// so for one base aggregate it adds 1 to at most min(G, n) of its n
// answers (one per plain and expression group it touches) and changes no
// other unit's: the batch's change has L1 norm at most
// Δ₁ = Σ_(query, base aggregate) min(G, n), and, every change being 0 or
// 1, L2 norm at most √Δ₁. Laplace noise of scale Δ₁/ε on every answer is
// ε-DP per unit; Gaussian noise of variance Δ₁/(2ρ) is ρ-zCDP (discrete
// samplers of package noise, exact). Rounding and clamping at zero are
// post-processing. The engine charges the ledger before it measures.
type DistinctNoise struct {
	Gaussian bool
	// Sensitivity is Δ₁ (Laplace) or √Δ₁ (Gaussian).
	Sensitivity        float64
	NoiseNum, NoiseDen uint64 // the Laplace scale, or the Gaussian σ²
	Variance           float64
}

// PlanDistinct calibrates a COUNT(DISTINCT <unit>) batch's noise for opt
// (ε or ρ per unit, opt.Unit the bounds).
func PlanDistinct(w *compile.Workload, opt planner.Options) (DistinctNoise, error) {
	g := float64(opt.Unit.CellsPerUnit())
	d1 := 0.0
	for _, q := range w.Queries {
		n := float64(q.Groups(w) * q.ExprCount())
		d1 += float64(q.Bases) * math.Min(g, n)
	}
	out := DistinctNoise{Gaussian: opt.Noise == catalog.Gaussian}
	var x float64
	if out.Gaussian {
		out.Sensitivity = math.Sqrt(d1)
		x = d1 / (2 * opt.Rho)
	} else {
		out.Sensitivity = d1
		x = d1 / opt.Epsilon
	}
	if !(x > 0) || x >= noise.MaxScale {
		return out, fmt.Errorf("%w (COUNT(DISTINCT): sensitivity %g)", planner.ErrScale, d1)
	}
	out.NoiseNum, out.NoiseDen = noise.RationalAtLeast(x)
	v := float64(out.NoiseNum) / float64(out.NoiseDen)
	if out.Gaussian {
		out.Variance = noise.DiscreteGaussianVariance(v)
	} else {
		out.Variance = noise.DiscreteLaplaceVariance(v)
	}
	return out, nil
}

// HalfWidth95 is the half-width of a 95% interval around one answer: the
// Laplace tail t·ln 20, or 1.96 standard deviations of the Gaussian.
func (n DistinctNoise) HalfWidth95() float64 {
	if n.Gaussian {
		return 1.96 * math.Sqrt(n.Variance)
	}
	return float64(n.NoiseNum) / float64(n.NoiseDen) * math.Log(20)
}

// CountDistinct counts, exactly, the units behind every answer of a
// COUNT(DISTINCT <unit>) batch: Values[q][a][g] is the number of units
// with a kept row in a cell where aggregate a of query q is non-zero and
// whose plain group is g. It holds one unit's cells at a time.
func CountDistinct(ctx context.Context, w *compile.Workload, src UnitCounter) ([][][]float64, error) {
	sizes := w.Sizes()
	out := make([][][]float64, len(w.Queries))
	for q, qu := range w.Queries {
		out[q] = make([][]float64, len(qu.Aggregates))
		for a := range out[q] {
			out[q][a] = make([]float64, qu.Groups(w))
		}
	}
	coords := make([][]int, 0, 8)
	type hit struct{ q, a, g int }
	seen := map[hit]bool{}
	err := src.UnitCells(ctx, w.Table, w.Columns, func(cells []int) error {
		coords = coords[:0]
		for _, c := range cells {
			x := make([]int, len(sizes))
			dropped := false
			for j := len(sizes) - 1; j >= 0; j-- {
				x[j] = c % (sizes[j] + 1)
				c /= sizes[j] + 1
				dropped = dropped || x[j] == sizes[j]
			}
			if !dropped { // a value some column drops: in no answer
				coords = append(coords, x)
			}
		}
		clear(seen)
		for q, qu := range w.Queries {
			for a, agg := range qu.Aggregates {
				for _, x := range coords {
					if valueAt(agg, x) == 0 {
						continue
					}
					g := 0
					for _, j := range qu.GroupCols {
						g = g*sizes[j] + x[j]
					}
					if h := (hit{q, a, g}); !seen[h] {
						seen[h] = true
						out[q][a][g]++
					}
				}
			}
		}
		return nil
	})
	return out, err
}

// valueAt is a linear query's weight at one cell.
func valueAt(l compile.Linear, x []int) float64 {
	v := 0.0
	for _, t := range l {
		p := t.Coef
		for j, f := range t.Factors {
			if f != nil {
				p *= f[x[j]]
			}
		}
		v += p
	}
	return v
}

// MeasureDistinct adds n's noise to every exact count.
func MeasureDistinct(exact [][][]float64, n DistinctNoise, r Sampler) *Answers {
	ans := &Answers{Values: make([][][]float64, len(exact)), Variance: make([][][]float64, len(exact))}
	for q, aggs := range exact {
		ans.Values[q] = make([][]float64, len(aggs))
		ans.Variance[q] = make([][]float64, len(aggs))
		for a, gs := range aggs {
			vals, vars := make([]float64, len(gs)), make([]float64, len(gs))
			for g, x := range gs {
				var z int64
				if n.Gaussian {
					z = r.DiscreteGaussian(n.NoiseNum, n.NoiseDen)
				} else {
					z = r.DiscreteLaplace(n.NoiseNum, n.NoiseDen)
				}
				vals[g], vars[g] = x+float64(z), n.Variance
			}
			ans.Values[q][a], ans.Variance[q][a] = vals, vars
		}
	}
	return ans
}
