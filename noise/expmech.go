package noise

import (
	"math/big"
	"math/bits"
)

// ExponentialMechanism returns an index i into utilities, chosen with
// probability exactly
//
//	exp(ε·uᵢ/Δ) / Σⱼ exp(ε·uⱼ/Δ),   ε = epsNum/epsDen, Δ = sensitivity.
//
// Privacy: if, between neighbouring databases, every utility changes by at
// most Δ and all of them move in the same direction (monotone utilities,
// such as group counts when one row is added or removed: one count grows,
// or shrinks, by at most 1 and none moves the other way), releasing the
// index is ε-differentially private. That is McSherry and Talwar's
// exponential mechanism (FOCS 2007) with their refinement for monotone
// utilities: in Dwork and Roth's proof of their Theorem 3.10 the factor
// exp(ε/2) that the normalising sum Σⱼ exp(ε·uⱼ/(2Δ)) may contribute
// vanishes when every uⱼ moves the same way, so ε·u/Δ suffices (McKenna
// and Sheldon, "Permute-and-Flip", NeurIPS 2020, §2, use the same remark).
// For utilities that may move in opposite directions, pass 2Δ as the
// sensitivity. The candidate set, len(utilities), is public. The cost is ε.
//
// Sampling is exact, and its cost does not depend on the utilities (see
// [Rand.emSelect]): the number of random bits read depends only on the
// randomness itself and len(utilities), and the arithmetic is a fixed
// sequence of operations on fixed-width integers whose count depends only
// on len(utilities), ε/Δ and those random bits — except, with probability
// below 2⁻⁶⁰ per selection, when a longer computation is needed to decide
// an outcome (see emSelect). Utilities of any int64 size are fine.
//
// It panics if utilities is empty, epsDen is zero or sensitivity < 1.
// epsNum = 0 (ε = 0) selects uniformly.
func (r *Rand) ExponentialMechanism(utilities []int64, epsNum, epsDen uint64, sensitivity int64) int {
	if len(utilities) == 0 {
		panic("noise: ExponentialMechanism with no candidates")
	}
	checkEM(epsDen, sensitivity)
	return r.expMech(utilities, emRate(epsNum, epsDen, 1, sensitivity))
}

// TopK runs the exponential mechanism k times without replacement ("peeling"),
// each round over the candidates not yet chosen with privacy parameter ε/k
// (ε = epsNum/epsDen), and returns the chosen indices in selection order.
//
// Privacy: each round is (ε/k)-DP for monotone utilities of sensitivity Δ
// (see [Rand.ExponentialMechanism]), so the whole selection is ε-DP by
// basic (adaptive) composition. If k > len(utilities), k is lowered to
// len(utilities) (the candidate count is public) and each round uses ε/k
// for that lowered k, still ε in total. k = 0 returns an empty slice. The
// cost of every round depends only on public quantities and the
// randomness, as in ExponentialMechanism.
//
// It panics if k < 0, epsDen is zero or sensitivity < 1.
func (r *Rand) TopK(utilities []int64, k int, epsNum, epsDen uint64, sensitivity int64) []int {
	if k < 0 {
		panic("noise: TopK with negative k")
	}
	checkEM(epsDen, sensitivity)
	k = min(k, len(utilities))
	out := make([]int, 0, k)
	if k == 0 {
		return out
	}
	rate := emRate(epsNum, epsDen, uint64(k), sensitivity)
	cand := make([]int, len(utilities))
	util := make([]int64, len(utilities))
	for i := range cand {
		cand[i] = i
	}
	copy(util, utilities)
	for range k {
		j := r.expMech(util, rate)
		out = append(out, cand[j])
		// Remove j, keeping the order of the others (the mechanism is
		// symmetric in candidate order; keeping it keeps the work
		// independent of which candidate was chosen).
		cand = append(cand[:j], cand[j+1:]...)
		util = append(util[:j], util[j+1:]...)
	}
	return out
}

func checkEM(epsDen uint64, sensitivity int64) {
	if epsDen == 0 {
		panic("noise: exponential mechanism with zero ε denominator")
	}
	if sensitivity < 1 {
		panic("noise: exponential mechanism sensitivity must be ≥ 1")
	}
}

// emRate is c = ε/(split·Δ) = epsNum/(epsDen·split·Δ) as an exact fraction:
// candidate i's weight is exp(c·uᵢ).
type emRateFrac struct{ num, den big.Int }

func emRate(epsNum, epsDen, split uint64, sens int64) *emRateFrac {
	c := &emRateFrac{}
	c.num.SetUint64(epsNum)
	c.den.SetUint64(epsDen)
	var t big.Int
	c.den.Mul(&c.den, t.SetUint64(split))
	c.den.Mul(&c.den, t.SetUint64(uint64(sens)))
	return c
}

// maxEMPrecision bounds the precision expMech retries with.
const maxEMPrecision = 1 << 20

// expMech samples index i of u with probability ∝ exp(c·uᵢ).
//
// Method (exact, data-independent randomness). Put the first maximal
// candidate last and the others in index order: o₀, …, o_{m−1}. With
// weights wᵢ = exp(−c·(u_max − uᵢ)) ∈ (0, 1] (w of the last is 1) and
// suffix sums Sⱼ = Σ_{l≥j} w_{o_l}, choose o_j for the first j with
// Bⱼ = 1, where Bⱼ are independent Bernoulli(rⱼ), rⱼ = w_{o_j}/Sⱼ, and o_{m−1}
// if none: P(o_j) = rⱼ·Π_{l<j}(1 − r_l) = w_{o_j}/S₀, since 1 − r_l =
// S_{l+1}/S_l — the exponential mechanism's law.
//
// Each Bⱼ is sampled as the Nⱼ-th binary digit of rⱼ, where Nⱼ ≥ 1 is the
// position of the first 1 in a stream of fair random bits:
// P(Nⱼ = k) = 2⁻ᵏ, so P(Bⱼ = 1) = Σₖ 2⁻ᵏ·digitₖ(rⱼ) = rⱼ exactly. All m−1
// indices Nⱼ are drawn first, whatever the outcome: the random bits read
// depend on the randomness alone, never on the utilities. The digits are
// then computed exactly by emSelect.
func (r *Rand) expMech(u []int64, c *emRateFrac) int {
	m := len(u)
	if m == 1 {
		return 0
	}
	ns := r.emNs[:0]
	if cap(ns) < m-1 {
		ns = make([]int, 0, m-1)
	}
	ns = ns[:m-1]
	r.emNs = ns
	maxN := 0
	for j := range ns {
		n := 1
		for r.bit() == 0 {
			n++
		}
		ns[j] = n
		maxN = max(maxN, n)
	}
	// Enough precision that a digit is left undecided with probability
	// below about 2⁻⁶⁰; doubled in the (rare) event that one is.
	// (Rounded up to a multiple of 32, so that consecutive selections
	// mostly share one precision, and emSelect's table.)
	prec := (maxN + 64 + bits.Len(uint(m)) + 8 + 31) / 32 * 32
	for {
		if i, ok := r.emSelect(u, c, ns, prec); ok {
			return i
		}
		if prec *= 2; prec > maxEMPrecision {
			// Unreachable in practice (see emSelect); failing loudly
			// releases nothing, where looping on would hang the caller.
			panic("noise: exponential mechanism: a digit stayed undecided at 2^20 bits")
		}
	}
}
