package exec

import (
	"math"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/planner"
)

// z95 is the two-sided 95% quantile of the standard normal distribution.
const z95 = 1.959963984540054

// HalfWidth95 is the half-width of a 95% confidence interval for aggregate a
// of query q, computed from the plan alone (never from data).
//
// For a Direct Laplace plan the answer's error is one discrete Laplace draw
// Z/k, so the interval is exact: the smallest integer q with
// P(|Z| > q) = 2a^(q+1)/(1+a) ≤ 0.05, a = e^(-1/t), divided by k. Otherwise
// the error is a linear combination of many draws (or a discrete Gaussian)
// and the normal approximation ±1.96·stderr is used.
func HalfWidth95(p *planner.Plan, q, a int, variance float64) float64 {
	if p.Kind == planner.Direct && p.Options.Noise == catalog.Laplace {
		t := float64(p.NoiseNum) / float64(p.NoiseDen)
		if p.AggNoise != nil {
			t = float64(p.AggNoise[q][a].NoiseNum) / float64(p.AggNoise[q][a].NoiseDen)
		}
		alpha := math.Exp(-1 / t)
		quant := math.Max(0, math.Ceil(math.Log(0.025*(1+alpha))/math.Log(alpha))-1)
		return quant / p.Scale[q][a]
	}
	return z95 * math.Sqrt(variance)
}
