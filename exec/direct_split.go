package exec

import (
	"fmt"
	"math"
	"math/big"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/planner"
)

// checkDirectSplit verifies a Direct plan with split noise
// (planner.DirectNoise) before any draw: for every aggregate, Δ_a =
// Scale·max|v_a| recomputed over the query's own columns (an integer:
// Scale integerises the row), its noise against Δ_a at its share, and the
// shares' sum against the batch's ε or ρ, in exact rational arithmetic.
func checkDirectSplit(p *planner.Plan) error {
	w := p.Workload
	gauss := p.Options.Noise == catalog.Gaussian
	sizes := w.Sizes()
	sum := new(big.Rat)
	for q, qu := range w.Queries {
		cols := qu.Support(w)
		for a, agg := range qu.Aggregates {
			n := p.AggNoise[q][a]
			share := n.Epsilon
			if gauss {
				share = n.Rho
			}
			m := 0.0
			for _, v := range planner.Dense(restrict(agg, cols), subSizes(sizes, cols)) {
				m = math.Max(m, math.Abs(v))
			}
			if n == (planner.DirectNoise{}) && m == 0 {
				continue // zero by construction: 0 whatever the data, no noise needed
			}
			if !(share > 0) || math.IsInf(share, 0) || n.NoiseNum == 0 || n.NoiseDen == 0 {
				return fmt.Errorf("exec: aggregate (%d,%d) has share %v and noise %d/%d", q, a, share, n.NoiseNum, n.NoiseDen)
			}
			km := p.Scale[q][a] * m
			delta := math.Round(km)
			if math.Abs(km-delta) > 1e-6 || delta >= 1<<53 {
				return fmt.Errorf("exec: aggregate (%d,%d) scaled by %v is not integer", q, a, p.Scale[q][a])
			}
			d := new(big.Rat).SetFloat64(delta)
			if gauss {
				d.Mul(d, d)
			}
			s := new(big.Rat).SetFloat64(share)
			lhs := new(big.Rat).Mul(new(big.Rat).SetFrac(new(big.Int).SetUint64(n.NoiseNum), new(big.Int).SetUint64(n.NoiseDen)), s)
			if gauss {
				lhs.Mul(lhs, big.NewRat(2, 1))
			}
			if lhs.Cmp(d) < 0 {
				return fmt.Errorf("exec: aggregate (%d,%d) has noise %d/%d below its sensitivity %v at share %v", q, a, n.NoiseNum, n.NoiseDen, delta, share)
			}
			sum.Add(sum, s)
		}
	}
	budget := p.Options.Calibration().Epsilon
	if gauss {
		budget = p.Options.Calibration().Rho
	}
	if sum.Cmp(new(big.Rat).SetFloat64(budget)) > 0 {
		return fmt.Errorf("exec: aggregates' shares sum to %s, above the batch's %v", sum.FloatString(12), budget)
	}
	return nil
}

// restrict is l over only the columns cols (its factors elsewhere are all
// ones).
func restrict(l compile.Linear, cols []int) compile.Linear {
	rl := make(compile.Linear, len(l))
	for k, t := range l {
		rt := compile.Term{Coef: t.Coef, Factors: make([]compile.Factor, len(cols))}
		for i, j := range cols {
			rt.Factors[i] = t.Factors[j]
		}
		rl[k] = rt
	}
	return rl
}
