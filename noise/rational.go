package noise

import (
	"math"
	"math/bits"
)

// maxDenLog2 is log₂ of the largest denominator [RationalAtLeast] returns.
const maxDenLog2 = 20

// MaxScale is the exclusive upper bound of the noise scales (a discrete
// Laplace t, a discrete Gaussian σ²) that [RationalAtLeast] converts, and
// so of every calibration the samplers are given: callers check
// scale < MaxScale and refuse otherwise (a Laplace ε below Δ₁/MaxScale, a
// Gaussian ρ below Δ₂²/(2·MaxScale)).
const MaxScale = 0x1p64

// RationalAtLeast converts a positive noise scale x (a discrete Laplace
// scale t or a discrete Gaussian σ²) into an exact rational num/den ≥ x
// with den a power of two, den ≤ 2²⁰, reduced to lowest terms.
//
// It always rounds UP, never down: more noise is always safe, so the
// privacy guarantee computed for x holds for num/den. The excess is small:
//
//	x ≤ num/den < x + max(2⁻²⁰, x·2⁻²⁹)
//
// (den is 2²⁰ for x < 2¹⁰, then shrinks so num stays below about 2³⁰,
// which keeps the samplers on their 64/128-bit fast paths). The
// conversion is exact: x·den is computed without rounding.
//
// It panics unless 0 < x < [MaxScale] (NaN and ±Inf panic too).
func RationalAtLeast(x float64) (num, den uint64) {
	if !(x > 0) || !(x < MaxScale) {
		panic("noise: RationalAtLeast needs 0 < x < 2^64")
	}
	_, e := math.Frexp(x) // x < 2^e
	k := min(max(30-e, 0), maxDenLog2)
	v := math.Ceil(math.Ldexp(x, k)) // exact: scaling by 2^k, then ceil
	num, den = uint64(v), uint64(1)<<k
	tz := min(bits.TrailingZeros64(num), k)
	return num >> tz, den >> tz
}
