package selection

import (
	"fmt"
	"math"

	"github.com/dpproxy/dpproxy/noise"
)

// Mechanism kinds, as the ledger and EXPLAIN name them.
const (
	KindGeometric = "truncated_geometric"
	KindLaplace   = "laplace_threshold"
	KindGaussian  = "gaussian_threshold"
)

// MaxGeometricGroups is the largest MaxGroups for which [Choose] uses the
// truncated geometric mechanism: it is optimal for one key per unit and,
// with ε and δ split evenly over the keys, still better than a threshold
// for a few (Google's differential-privacy library switches at the same
// point).
const MaxGeometricGroups = 3

// Limits on the parameters: ε and δ outside them are refused, not clamped.
const (
	MinEpsilon = 1e-6 // below it the noise scale leaves noise.MaxScale's fast paths
	MaxEpsilon = 50.0 // above it exp(ε/MaxGroups) is computed to little purpose
	MinDelta   = 1e-15
	MaxDelta   = 0.5
	MaxGroups  = 1 << 16
)

// Mechanism is one calibrated partition selection, safe for concurrent
// use (each Keep draws from the caller's noise.Rand). Its zero value is not
// usable; build it with [Choose], [TruncatedGeometric], [LaplaceThreshold]
// or [GaussianThreshold].
type Mechanism struct {
	Kind      string
	MaxGroups int // Δ₀: keys one unit may hold after contribution bounding
	// Cost: Epsilon (ε-DP or (ε, δ) part), Rho (ρ-zCDP part of the
	// Gaussian threshold) and Delta, the δ spent.
	Epsilon, Rho, Delta float64

	geo *geometric // KindGeometric
	thr *threshold // KindLaplace, KindGaussian
}

// Choose picks the mechanism for a unit bound of maxGroups keys: the
// truncated geometric mechanism at (ε, δ) up to MaxGeometricGroups keys,
// above that the Gaussian threshold at (ρ, δ) when rho > 0 (tables with
// Gaussian noise, accounted in zCDP) and the Laplace threshold at (ε, δ)
// otherwise. eps is used unless the Gaussian threshold is chosen; rho only
// then (the caller converts: ρ is the zCDP budget whose conversion at the
// table's δ is the selection's ε, budget.RhoForEpsilon).
func Choose(eps, rho, delta float64, maxGroups int) (*Mechanism, error) {
	switch {
	case maxGroups <= MaxGeometricGroups:
		return TruncatedGeometric(eps, delta, maxGroups)
	case rho > 0:
		return GaussianThreshold(rho, delta, maxGroups)
	default:
		return LaplaceThreshold(eps, delta, maxGroups)
	}
}

func checkCommon(delta float64, maxGroups int) error {
	if !(delta >= MinDelta && delta <= MaxDelta) {
		return fmt.Errorf("δ=%g is outside [%g, %g]", delta, MinDelta, MaxDelta)
	}
	if maxGroups < 1 || maxGroups > MaxGroups {
		return fmt.Errorf("max_groups=%d is outside [1, %d]", maxGroups, MaxGroups)
	}
	return nil
}

func checkEpsilon(eps float64) error {
	if !(eps >= MinEpsilon && eps <= MaxEpsilon) {
		return fmt.Errorf("ε=%g is outside [%g, %g]", eps, MinEpsilon, MaxEpsilon)
	}
	return nil
}

// Keep decides whether a key held by n distinct units (after contribution
// bounding) is released. Each call is an independent draw from r.
//
// Privacy: see the constructor of m's kind; a key with n ≤ 0 is never
// released (it is not in the data).
func (m *Mechanism) Keep(r *noise.Rand, n int64) bool {
	if n <= 0 {
		return false
	}
	if m.geo != nil {
		return m.geo.keep(r, n)
	}
	return m.thr.keep(r, n)
}

// ReleaseProbability is the probability that a key held by n units is
// released, in floating point: for planning and EXPLAIN only, never for a
// decision.
func (m *Mechanism) ReleaseProbability(n int64) float64 {
	if n <= 0 {
		return 0
	}
	if m.geo != nil {
		return m.geo.prob(n)
	}
	return m.thr.prob(n)
}

// UnitsFor is the smallest number of units at which a key is released
// with probability at least p (0 < p < 1), or -1 if none up to 2⁴⁰.
func (m *Mechanism) UnitsFor(p float64) int64 {
	lo, hi := int64(1), int64(1)
	for m.ReleaseProbability(hi) < p {
		if hi >= 1<<40 {
			return -1
		}
		lo, hi = hi+1, 2*hi
	}
	for lo < hi { // the probability does not decrease in n
		mid := lo + (hi-lo)/2
		if m.ReleaseProbability(mid) >= p {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// Threshold is the number of units the mechanism is centred on: for the
// thresholds, the τ a noisy count must reach (a key at τ units is released
// with probability about 1/2); for the truncated geometric mechanism, the
// smallest count released with certainty (-1 if none is).
func (m *Mechanism) Threshold() int64 {
	if m.geo != nil {
		return m.geo.certain()
	}
	return m.thr.tau
}

// String describes the mechanism for EXPLAIN and the ledger's strategy.
func (m *Mechanism) String() string {
	s := fmt.Sprintf("%s max_groups=%d threshold=%d", m.Kind, m.MaxGroups, m.Threshold())
	if m.thr != nil {
		s += fmt.Sprintf(" scale=%s", m.thr.scale())
	}
	return s
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
