package noise

import (
	"math"
	"math/bits"
)

// DiscreteGaussian returns a sample Z from the discrete Gaussian
// distribution on the integers, P(Z = z) ∝ exp(−z²/(2σ²)), with
// σ² = s2Num/s2Den. It panics if s2Num or s2Den is zero.
//
// Privacy: adding Z with σ² = Δ₂²/(2ρ) to an integer-valued query (or
// vector of queries) of L2 sensitivity Δ₂ gives ρ-zero-concentrated
// differential privacy (ρ-zCDP). Its variance is
// [DiscreteGaussianVariance](σ²), which is slightly below σ².
//
// This is Canonne–Kamath–Steinke Algorithm 3: with t = ⌊σ⌋+1 it draws
// Y from the discrete Laplace distribution of scale t and accepts it with
// probability exp(−(|Y| − σ²/t)²/(2σ²)), decided exactly by
// [Rand.BernoulliExp]. γ is computed in 128-bit integer arithmetic when
// 2·s2Num·s2Den·t² fits in 64 bits after reducing s2Num/s2Den (all
// parameters from [RationalAtLeast] with σ² up to about 3·10⁹), and with
// math/big otherwise.
func (r *Rand) DiscreteGaussian(s2Num, s2Den uint64) int64 {
	if s2Num == 0 || s2Den == 0 {
		panic("noise: DiscreteGaussian variance must be a positive rational")
	}
	g := gcd(s2Num, s2Den)
	n, d := s2Num/g, s2Den/g
	t := isqrt(n/d) + 1 // ⌊σ⌋ + 1, since ⌊√(n/d)⌋ = ⌊√⌊n/d⌋⌋
	den, fast := mulChecked(2, n, d, t, t)
	for {
		y := r.DiscreteLaplace(t, 1)
		ay := uint64(y)
		if y < 0 {
			ay = uint64(-y) // y ≥ −MaxInt64, so no overflow
		}
		if fast {
			if accept, ok := r.gaussAcceptFast(ay, n, d, t, den); ok {
				if accept {
					return y
				}
				continue
			}
		}
		if r.gaussAcceptBig(ay, n, d, t) {
			return y
		}
	}
}

// gaussAcceptFast decides acceptance of |Y| = ay with probability
// exp(−γ), γ = (ay − σ²/t)²/(2σ²) = a²/den where a = ay·t·d − n and
// den = 2·n·d·t². ok is false if a does not fit in 64 bits.
func (r *Rand) gaussAcceptFast(ay, n, d, t, den uint64) (accept, ok bool) {
	hi, p := bits.Mul64(ay, t)
	if hi != 0 {
		return false, false
	}
	hi, p = bits.Mul64(p, d)
	var a uint64
	switch {
	case hi == 0 && p >= n:
		a = p - n
	case hi == 0:
		a = n - p
	case hi == 1 && p < n:
		a = p - n // 2⁶⁴ + p − n < 2⁶⁴, wraps correctly
	default:
		return false, false
	}
	ahi, alo := bits.Mul64(a, a)
	qhi, qlo, rem := divMod128(ahi, alo, den)
	return r.bernExpCount(qhi, qlo) && r.bernExpFrac(rem, den), true
}

// gaussAcceptBig is gaussAcceptFast in math/big, for any sizes.
func (r *Rand) gaussAcceptBig(ay, n, d, t uint64) bool {
	s := &r.big
	// a = ay·t·d − n
	s.num.SetUint64(ay)
	s.tmp.SetUint64(t)
	s.num.Mul(&s.num, &s.tmp)
	s.tmp.SetUint64(d)
	s.num.Mul(&s.num, &s.tmp)
	s.tmp.SetUint64(n)
	s.num.Sub(&s.num, &s.tmp)
	s.num.Mul(&s.num, &s.num) // a²
	// den = 2·n·d·t²
	s.den.SetUint64(n)
	s.tmp.SetUint64(d)
	s.den.Mul(&s.den, &s.tmp)
	s.tmp.SetUint64(t)
	s.den.Mul(&s.den, &s.tmp)
	s.den.Mul(&s.den, &s.tmp)
	s.den.Lsh(&s.den, 1)
	return r.bernoulliExpBig(&s.num, &s.den)
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// isqrt returns ⌊√x⌋ exactly: a floating-point estimate corrected with
// integer comparisons.
func isqrt(x uint64) uint64 {
	s := uint64(math.Sqrt(float64(x)))
	if s > math.MaxUint32 {
		s = math.MaxUint32
	}
	for s*s > x {
		s--
	}
	for s < math.MaxUint32 && (s+1)*(s+1) <= x {
		s++
	}
	return s
}
