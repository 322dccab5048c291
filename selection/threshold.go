package selection

import (
	"fmt"
	"math"

	"github.com/dpproxy/dpproxy/noise"
)

// threshold releases a key when its count plus integer noise Z reaches
// tau: discrete Laplace noise of scale t = tNum/tDen, or discrete Gaussian
// noise of variance σ² = s2Num/s2Den.
type threshold struct {
	gauss        bool
	num, den     uint64 // t, or σ²
	tau          int64
	scaleFloat   float64 // t or σ² as a float, for planning
	gaussTailTab []float64
}

// LaplaceThreshold calibrates a Laplace threshold for units that hold at
// most maxGroups keys: a key held by n units is released iff n + Z ≥ τ,
// with Z discrete Laplace of scale t ≥ Δ₀/ε (noise.RationalAtLeast) and
// τ = ⌈t·ln(Δ₀/δ)⌉ + 2.
//
// Privacy: (ε, δ)-DP for adding or removing one unit (Korolova,
// Kenthapadi, Mishra, Ntoulas, "Releasing search queries and clicks
// privately", WWW 2009; Google's differential-privacy library,
// LaplacePartitionSelection). The counts are distinct units after
// contribution bounding, so the unit moves at most Δ₀ = maxGroups counts
// by one each: on the keys both neighbours hold, the noisy counts have L1
// sensitivity Δ₀ and scale t ≥ Δ₀/ε makes them ε-DP
// (noise.Rand.DiscreteLaplace); a key only one neighbour holds has count 1
// there and is released with probability P(Z ≥ τ−1) = q^(τ−1)/(1+q) ≤
// e^(−(τ−1)/t) ≤ δ/Δ₀ (q = e^(−1/t); the +2 in τ covers the rounding of
// the logarithm), so at most δ for the unit's at most Δ₀ keys. Releasing
// only the set of keys is post-processing. Cost: ε and δ.
func LaplaceThreshold(eps, delta float64, maxGroups int) (*Mechanism, error) {
	if err := checkEpsilon(eps); err != nil {
		return nil, fmt.Errorf("selection: Laplace threshold: %w", err)
	}
	if err := checkCommon(delta, maxGroups); err != nil {
		return nil, fmt.Errorf("selection: Laplace threshold: %w", err)
	}
	scale := float64(maxGroups) / eps
	if !(scale < noise.MaxScale/4) {
		return nil, fmt.Errorf("selection: Laplace threshold: scale %g is too large", scale)
	}
	num, den := noise.RationalAtLeast(scale)
	t := float64(num) / float64(den) // exact: den ≤ 2²⁰, num < 2⁵³ here
	tau := math.Ceil(t*math.Log(float64(maxGroups)/delta)) + 2
	if !(tau < 1<<52) {
		return nil, fmt.Errorf("selection: Laplace threshold: τ=%g is too large", tau)
	}
	thr := &threshold{num: num, den: den, tau: int64(tau), scaleFloat: t}
	return &Mechanism{Kind: KindLaplace, MaxGroups: maxGroups, Epsilon: eps, Delta: delta, thr: thr}, nil
}

// GaussianThreshold calibrates a Gaussian threshold for units that hold
// at most maxGroups keys: a key held by n units is released iff n + Z ≥ τ,
// with Z discrete Gaussian of variance σ² ≥ Δ₀/(2ρ)
// (noise.RationalAtLeast) and τ = ⌈σ·√(2·ln(Δ₀/δ))⌉ + 2.
//
// Privacy: δ-approximate ρ-zCDP for adding or removing one unit (Bun &
// Steinke 2016, §8), which the ledger converts to (ε, δ + δ') at the
// table's δ' (budget.EpsilonFor, budget.DeltaFor); Google's
// differential-privacy library, GaussianPartitionSelection. On the keys
// both neighbours hold the noisy counts have L2 sensitivity √Δ₀ (Δ₀ =
// maxGroups counts move by one), and σ² ≥ Δ₀/(2ρ) makes them ρ-zCDP
// (Canonne, Kamath & Steinke 2020, Thm 4, noise.Rand.DiscreteGaussian); a
// key only one neighbour holds has count 1 there and is released with
// probability P(Z ≥ τ−1) ≤ exp(−(τ−1)²/(2σ²)) ≤ δ/Δ₀, since the discrete
// Gaussian is σ²-subgaussian (Canonne, Kamath & Steinke 2020, §2), so at
// most δ for the unit's keys. Cost: ρ and δ.
func GaussianThreshold(rho, delta float64, maxGroups int) (*Mechanism, error) {
	if !(rho > 0 && finite(rho)) {
		return nil, fmt.Errorf("selection: Gaussian threshold: ρ=%g must be positive and finite", rho)
	}
	if err := checkCommon(delta, maxGroups); err != nil {
		return nil, fmt.Errorf("selection: Gaussian threshold: %w", err)
	}
	s2 := float64(maxGroups) / (2 * rho)
	if !(s2 < noise.MaxScale/4) {
		return nil, fmt.Errorf("selection: Gaussian threshold: ρ=%g is too small", rho)
	}
	num, den := noise.RationalAtLeast(s2)
	sigma2 := float64(num) / float64(den)
	tau := math.Ceil(math.Sqrt(sigma2)*math.Sqrt(2*math.Log(float64(maxGroups)/delta))) + 2
	if !(tau < 1<<52) {
		return nil, fmt.Errorf("selection: Gaussian threshold: τ=%g is too large", tau)
	}
	thr := &threshold{gauss: true, num: num, den: den, tau: int64(tau), scaleFloat: sigma2}
	thr.initTail()
	return &Mechanism{Kind: KindGaussian, MaxGroups: maxGroups, Rho: rho, Delta: delta, thr: thr}, nil
}

func (t *threshold) keep(r *noise.Rand, n int64) bool {
	var z int64
	if t.gauss {
		z = r.DiscreteGaussian(t.num, t.den)
	} else {
		z = r.DiscreteLaplace(t.num, t.den)
	}
	// n + z ≥ τ without overflow: n and τ are below 2⁶², z is clamped.
	return z >= t.tau-n
}

// prob is P(Z ≥ τ − n), in floating point (planning only).
func (t *threshold) prob(n int64) float64 {
	k := t.tau - n
	if !t.gauss {
		q := math.Exp(-1 / t.scaleFloat)
		if k >= 1 {
			return math.Exp(float64(k)*math.Log(q)) / (1 + q)
		}
		return 1 - math.Exp(float64(1-k)*math.Log(q))/(1+q)
	}
	if k <= 0 {
		return 1 - t.gaussTail(1-k)
	}
	return t.gaussTail(k)
}

// gaussTail is P(Z ≥ k) for k ≥ 1 under the discrete Gaussian: summed from
// its mass function when σ is small, else the continuous tail with a
// continuity correction (the two differ by far less than the figures
// EXPLAIN rounds to).
func (t *threshold) gaussTail(k int64) float64 {
	s2 := t.scaleFloat
	sigma := math.Sqrt(s2)
	if t.gaussTailTab == nil {
		return 0.5 * math.Erfc((float64(k)-0.5)/(sigma*math.Sqrt2))
	}
	if k >= int64(len(t.gaussTailTab)) {
		return 0
	}
	return t.gaussTailTab[k]
}

// initTail tabulates P(Z ≥ z) when σ is small enough to sum the mass
// function (σ ≤ 200); the table is written once, before any use.
func (t *threshold) initTail() {
	s2 := t.scaleFloat
	sigma := math.Sqrt(s2)
	if sigma <= 200 {
		L := int64(math.Ceil(40*sigma)) + 2
		w := make([]float64, L+1)
		total := 0.0
		for z := int64(0); z <= L; z++ {
			w[z] = math.Exp(-float64(z*z) / (2 * s2))
			if z == 0 {
				total += w[z]
			} else {
				total += 2 * w[z]
			}
		}
		// tail[z] = P(Z ≥ z) for z = 0 … L
		tail := make([]float64, L+2)
		for z := L; z >= 0; z-- {
			tail[z] = tail[z+1] + w[z]/total
		}
		t.gaussTailTab = tail
	}
}

func (t *threshold) scale() string {
	if t.gauss {
		return fmt.Sprintf("σ²=%.6g", t.scaleFloat)
	}
	return fmt.Sprintf("t=%.6g", t.scaleFloat)
}
