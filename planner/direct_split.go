package planner

import (
	"math"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/noise"
)

// DirectNoise is the noise of one aggregate of a Direct plan measured with
// split noise (Plan.AggNoise): its share of the batch's ε (Laplace) or ρ
// (Gaussian) and its calibration.
//
// Privacy: aggregate (q, a) releases Scale[q][a]·(v_a·x restricted to each
// group) + Z, one draw per group. The groups of one query partition the
// cells, so one row of the table changes one group's value by at most
// Δ_a = Scale[q][a]·max_cell |v_a(cell)|: with t = NoiseNum/NoiseDen ≥
// Δ_a/Epsilon (σ² ≥ Δ_a²/(2·Rho)) the aggregate is Epsilon-DP (Rho-zCDP),
// and the plan, by composition, Σ Epsilon-DP (Σ Rho-zCDP), which the
// planner keeps at most the batch's ε (ρ). exec recomputes Δ_a over the
// query's own columns and checks every calibration and the sum before
// drawing.
type DirectNoise struct {
	Epsilon, Rho       float64
	NoiseNum, NoiseDen uint64
	Variance           float64
	// Sensitivity is Δ_a, the planner's bound on the scaled row's largest
	// absolute value (exact up to maxDenseCells cells).
	Sensitivity float64
}

// calibrate sets n's noise for its share and sensitivity.
func (n *DirectNoise) calibrate(gauss bool) bool {
	v := n.Sensitivity / n.Epsilon
	if gauss {
		v = n.Sensitivity * n.Sensitivity / (2 * n.Rho)
	}
	if !(v > 0) || v >= 0x1p63 {
		return false
	}
	n.NoiseNum, n.NoiseDen = noise.RationalAtLeast(v)
	t := float64(n.NoiseNum) / float64(n.NoiseDen)
	if gauss {
		n.Variance = noise.DiscreteGaussianVariance(t)
	} else {
		n.Variance = noise.DiscreteLaplaceVariance(t)
	}
	return true
}

// directSplit measures every aggregate with its own noise, its least
// integerising scale g_a, and the share of ε (ρ) that minimises the
// weighted total Σ_a W_a·Var_a, W_a = weight·groups: continuous noise has
// Var_a ∝ (Δ_a/ε_a)² (Laplace), so ε_a ∝ (W_a·Δ_a²)^⅓, or Δ_a²/ρ_a
// (Gaussian), so ρ_a ∝ √W_a·Δ_a. Where one aggregate's scale dwarfs
// another's (a COUNT beside a SUM of incomes) this reaches the balance
// that integer scales on one stacked noise cannot; the stacked plan keeps
// the advantage where queries are disjoint (one row moves only one of
// them), and the planner compares both.
func (s *space) directSplit(opt Options) (noises [][]DirectNoise, scale [][]float64, unit, weighted float64, ok bool) {
	base, maxAbs, ok := s.directBase()
	if !ok {
		return nil, nil, 0, 0, false
	}
	gauss := opt.Noise == catalog.Gaussian
	type agg struct{ q, a int }
	var aggs []agg
	var raw []float64
	total := 0.0
	for q, qu := range s.w.Queries {
		g := float64(qu.Groups(s.w))
		for a := range qu.Aggregates {
			d := base[q][a] * maxAbs[q][a]
			if !(d > 0) {
				return nil, nil, 0, 0, false // a row that is identically zero needs no noise; leave it to the stacked plan
			}
			// The weighted continuous variance per group is W·d²/share², so
			// the optimal share is ∝ (W·d²)^⅓ (L1) or √W·d (L2, share = ρ).
			wv := s.wt(q, a) * g / (base[q][a] * base[q][a])
			r := math.Cbrt(wv * d * d)
			if gauss {
				r = math.Sqrt(wv) * d
			}
			aggs, raw = append(aggs, agg{q, a}), append(raw, r)
			total += r
		}
	}
	noises = make([][]DirectNoise, len(s.w.Queries))
	for q, qu := range s.w.Queries {
		noises[q] = make([]DirectNoise, len(qu.Aggregates))
	}
	for i, x := range aggs {
		q, a := x.q, x.a
		n := &noises[q][a]
		n.Sensitivity = base[q][a] * maxAbs[q][a]
		if gauss {
			n.Rho = opt.Rho * raw[i] / total * shareMargin
		} else {
			n.Epsilon = opt.Epsilon * raw[i] / total * shareMargin
		}
		if !n.calibrate(gauss) {
			return nil, nil, 0, 0, false
		}
		e := float64(s.w.Queries[q].Groups(s.w)) * n.Variance / (base[q][a] * base[q][a])
		unit += e
		weighted += s.wt(q, a) * e
	}
	return noises, base, unit, weighted, true
}
