package selection

import (
	"fmt"
	"math"
	"math/big"

	"github.com/dpproxy/dpproxy/noise"
)

// gridBits is the precision of the release probabilities: each is an
// integer multiple of 2⁻⁶², the denominator noise.Rand.Bernoulli takes
// exactly.
const gridBits = 62

// maxTable bounds the table of release probabilities. Past it the last
// probability is used for every larger count: a constant continuation
// meets the privacy constraints below (p(n) = p(n−1) satisfies both), so
// it costs utility (counts that would be released with certainty are only
// released with the last probability), never privacy. It is reached only
// when ε/MaxGroups is below about 10⁻⁴.
const maxTable = 1 << 18

// geometric is the truncated geometric mechanism of Desfontaines, Voss,
// Gipson and Mandayam ("Differentially private partition selection",
// PoPETs 2022, Theorem 1): a key held by n units is released with
// probability p(n), where p(0) = 0 and
//
//	p(n) = min(e^ε·p(n−1) + δ,  1 − e^(−ε)·(1 − p(n−1) − δ),  1)
//
// which is the largest release probability that (ε, δ)-DP allows for one
// unit in one key. Here ε and δ are the per-key ε/Δ₀ and δ/Δ₀.
type geometric struct {
	p []uint64 // p[n]·2⁶², n = 0 … len−1; p[0] = 0, non-decreasing
}

// TruncatedGeometric calibrates the truncated geometric mechanism for
// units that hold at most maxGroups keys.
//
// Privacy: (ε, δ)-DP for adding or removing one unit. Each of the unit's
// at most Δ₀ = maxGroups keys changes its count by one and is released
// independently with probabilities that satisfy, for every n ≥ 1,
//
//	p(n) ≤ r·p(n−1) + d   and   1 − p(n−1) ≤ r·(1 − p(n)) + d
//
// (with p(n−1) ≤ p(n) the two reverse inequalities are immediate), where
// r ≤ e^(ε/Δ₀)·(1 − 2⁻⁵⁰) is a lower bound computed exactly from the
// Taylor series, on the grid of 2⁻⁶², and d = ⌊(δ/Δ₀)·2⁶²⌋/2⁶² ≤ δ/Δ₀; every probability is
// rounded down from the recurrence's bound, which keeps both inequalities.
// So each key is (ε/Δ₀, δ/Δ₀)-DP, a key that only one neighbour holds
// (n = 1 against 0) is released with probability at most δ/Δ₀, and the Δ₀
// keys together are (ε, δ)-DP by basic composition (Dwork & Roth 2014,
// Thm 3.16). Keys the unit does not hold have the same distribution on
// both neighbours. The counts are distinct units after contribution
// bounding, so the sensitivity is 1 per key and Δ₀ keys (L0 = Δ₀, L∞ = 1).
// Cost: ε and δ (ρ = 0).
func TruncatedGeometric(eps, delta float64, maxGroups int) (*Mechanism, error) {
	if err := checkEpsilon(eps); err != nil {
		return nil, fmt.Errorf("selection: truncated geometric: %w", err)
	}
	if err := checkCommon(delta, maxGroups); err != nil {
		return nil, fmt.Errorf("selection: truncated geometric: %w", err)
	}
	g := newGeometric(eps, delta, maxGroups)
	return &Mechanism{Kind: KindGeometric, MaxGroups: maxGroups, Epsilon: eps, Delta: delta, geo: g}, nil
}

func newGeometric(eps, delta float64, maxGroups int) *geometric {
	one := new(big.Int).Lsh(big.NewInt(1), gridBits)
	// ε' = ε/Δ₀ and δ' = δ/Δ₀, exactly (float64 values are dyadic rationals).
	e := new(big.Rat).SetFloat64(eps)
	e.Quo(e, new(big.Rat).SetInt64(int64(maxGroups)))
	d := new(big.Rat).SetFloat64(delta)
	d.Quo(d, new(big.Rat).SetInt64(int64(maxGroups)))
	R := floorScaled(expLower(e), gridBits)
	// A relative margin of 2⁻⁵⁰ below e^ε': invisible in utility, and it
	// keeps the constraints true against any lower bound of e^ε' within
	// 2⁻⁵⁰ (such as a float64 exp less a few ulps, as the tests use).
	R.Sub(R, new(big.Int).Rsh(R, 50))
	D := floorScaled(d, gridBits)

	p := []uint64{0}
	prev := new(big.Int)
	a, b, x, t := new(big.Int), new(big.Int), new(big.Int), new(big.Int)
	for len(p) < maxTable {
		// a = ⌊R·P/2⁶²⌋ + D  (r·p + d, rounded down)
		a.Mul(R, prev).Rsh(a, gridBits).Add(a, D)
		// b = 2⁶² − ⌈(2⁶² − P − D)·2⁶²/R⌉  (1 − (1 − p − d)/r, rounded down)
		x.Sub(one, prev).Sub(x, D)
		if x.Sign() <= 0 {
			b.Set(one)
		} else {
			t.Lsh(x, gridBits)
			ceilDiv(t, t, R)
			b.Sub(one, t)
		}
		n := a
		if b.Cmp(n) < 0 {
			n = b
		}
		if one.Cmp(n) < 0 {
			n = one
		}
		if n.Cmp(prev) < 0 { // only by rounding; p(n−1) itself meets both constraints
			n = prev
		}
		prev = new(big.Int).Set(n)
		p = append(p, prev.Uint64())
		if prev.Cmp(one) == 0 {
			break
		}
	}
	return &geometric{p: p}
}

// expLower returns a rational lower bound of e^x for x ≥ 0: a partial sum
// of the Taylor series (all terms positive), stopped once the terms left
// add up to less than 2⁻⁷⁰.
func expLower(x *big.Rat) *big.Rat {
	sum := new(big.Rat).SetInt64(1)
	term := new(big.Rat).SetInt64(1)
	tiny := new(big.Rat).SetFrac(big.NewInt(1), new(big.Int).Lsh(big.NewInt(1), 72))
	xf, _ := x.Float64()
	for k := int64(1); ; k++ {
		term.Mul(term, x)
		term.Quo(term, new(big.Rat).SetInt64(k))
		sum.Add(sum, term)
		// Past k > 2x every next term is at most half the previous one,
		// so the tail is below 2·term.
		if float64(k) > 2*xf && term.Cmp(tiny) < 0 {
			return sum
		}
	}
}

// floorScaled is ⌊x·2^bits⌋ for x ≥ 0.
func floorScaled(x *big.Rat, bits uint) *big.Int {
	n := new(big.Int).Lsh(x.Num(), bits)
	return n.Quo(n, x.Denom())
}

// ceilDiv sets z = ⌈x/y⌉ for x ≥ 0, y > 0.
func ceilDiv(z, x, y *big.Int) *big.Int {
	m := new(big.Int)
	z.QuoRem(x, y, m)
	if m.Sign() > 0 {
		z.Add(z, big.NewInt(1))
	}
	return z
}

func (g *geometric) at(n int64) uint64 {
	if n >= int64(len(g.p)) {
		return g.p[len(g.p)-1]
	}
	return g.p[n]
}

func (g *geometric) keep(r *noise.Rand, n int64) bool {
	return r.Bernoulli(g.at(n), 1<<gridBits)
}

func (g *geometric) prob(n int64) float64 {
	return math.Ldexp(float64(g.at(n)), -gridBits)
}

// certain is the smallest count released with probability 1, or -1.
func (g *geometric) certain() int64 {
	if g.p[len(g.p)-1] == 1<<gridBits {
		return int64(len(g.p) - 1)
	}
	return -1
}
