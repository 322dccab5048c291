package noise

import (
	"math/big"
	"math/bits"
)

// BernoulliExp returns true with probability exactly exp(−γ) for the
// rational γ = gammaNum/gammaDen ≥ 0. It panics if gammaDen == 0.
//
// This is Canonne–Kamath–Steinke Algorithm 1. For γ ≤ 1 it draws
// A_k ~ Bernoulli(γ/k) for k = 1, 2, … until the first A_k = 0 and returns
// whether that k is odd. For γ > 1 it writes γ = ⌊γ⌋ + f and returns the
// conjunction of ⌊γ⌋ independent Bernoulli(exp(−1)) trials and one
// Bernoulli(exp(−f)) trial, stopping at the first failure, so the expected
// work is O(1) however large γ is (γ = 10⁹ costs about 1.6 trials).
func (r *Rand) BernoulliExp(gammaNum, gammaDen uint64) bool {
	if gammaDen == 0 {
		panic("noise: BernoulliExp with zero denominator")
	}
	return r.bernExpCount(0, gammaNum/gammaDen) && r.bernExpFrac(gammaNum%gammaDen, gammaDen)
}

// bernExp1 returns true with probability exp(−1): Algorithm 1 with γ = 1.
// Bernoulli(1/1) always succeeds, so the loop starts at k = 2.
func (r *Rand) bernExp1() bool {
	k := uint64(2)
	for r.Bernoulli(1, k) {
		k++
	}
	return k&1 == 1
}

// bernExpCount returns true with probability exp(−m) for the 128-bit
// integer m = hi·2⁶⁴ + lo: the conjunction of m Bernoulli(exp(−1)) trials,
// stopping at the first failure.
func (r *Rand) bernExpCount(hi, lo uint64) bool {
	for hi != 0 || lo != 0 {
		if !r.bernExp1() {
			return false
		}
		if lo == 0 {
			hi--
		}
		lo--
	}
	return true
}

// bernExpFrac returns true with probability exp(−num/den) for
// 0 ≤ num ≤ den, den > 0 (Algorithm 1, case γ ∈ [0, 1]).
func (r *Rand) bernExpFrac(num, den uint64) bool {
	if num == 0 {
		return true
	}
	k := uint64(1)
	for {
		// A ~ Bernoulli(num/(den·k)).
		var a bool
		if hi, lo := bits.Mul64(den, k); hi == 0 {
			a = r.Bernoulli(num, lo)
		} else {
			// den·k overflows: the product of independent
			// Bernoulli(num/den) and Bernoulli(1/k) has the same law.
			a = r.Bernoulli(num, den) && r.Bernoulli(1, k)
		}
		if !a {
			break
		}
		k++
	}
	return k&1 == 1
}

// bigScratch holds reusable big.Int storage for the slow paths, so they
// do not allocate once warmed up.
type bigScratch struct {
	q, rem, dk, cmp big.Int // bernoulliExpBig / bernoulliBig
	num, den, tmp   big.Int // callers building γ
}

var bigOne = big.NewInt(1)

// bernoulliExpBig returns true with probability exactly exp(−num/den) for
// num ≥ 0, den > 0 of any size. num and den may be r.big.num/r.big.den but
// must not be r.big.q, rem, dk or cmp.
func (r *Rand) bernoulliExpBig(num, den *big.Int) bool {
	s := &r.big
	s.q.QuoRem(num, den, &s.rem)
	if s.q.IsUint64() {
		if !r.bernExpCount(0, s.q.Uint64()) {
			return false
		}
	} else {
		// ⌊γ⌋ ≥ 2⁶⁴: count down exactly. Each step runs only after a
		// success of probability e⁻¹, so the expected cost is still O(1).
		for s.q.Sign() > 0 {
			if !r.bernExp1() {
				return false
			}
			s.q.Sub(&s.q, bigOne)
		}
	}
	if s.rem.Sign() == 0 {
		return true
	}
	if s.rem.IsUint64() && den.IsUint64() {
		return r.bernExpFrac(s.rem.Uint64(), den.Uint64())
	}
	k := uint64(1)
	for {
		s.dk.SetUint64(k)
		s.dk.Mul(&s.dk, den)
		if !r.bernoulliBig(&s.rem, &s.dk) {
			break
		}
		k++
	}
	return k&1 == 1
}

// bernoulliBig returns true with probability exactly num/den for
// 0 < num < den, by the same lazy binary comparison as [Rand.Bernoulli].
func (r *Rand) bernoulliBig(num, den *big.Int) bool {
	rem := r.big.cmp.Set(num)
	for {
		rem.Lsh(rem, 1)
		var b uint64
		if rem.Cmp(den) >= 0 {
			b = 1
			rem.Sub(rem, den)
		}
		if u := r.bit(); u != b {
			return u < b
		}
		if rem.Sign() == 0 {
			return false
		}
	}
}

// mulChecked returns the product of xs and whether it fits in a uint64.
func mulChecked(xs ...uint64) (uint64, bool) {
	p := uint64(1)
	for _, x := range xs {
		hi, lo := bits.Mul64(p, x)
		if hi != 0 {
			return 0, false
		}
		p = lo
	}
	return p, true
}

// divMod128 divides the 128-bit hi·2⁶⁴+lo by d > 0, returning the 128-bit
// quotient and the remainder.
func divMod128(hi, lo, d uint64) (qhi, qlo, rem uint64) {
	qhi = hi / d
	qlo, rem = bits.Div64(hi%d, lo, d)
	return qhi, qlo, rem
}
