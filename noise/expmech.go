package noise

import "math/bits"

// ExponentialMechanism returns an index i into utilities, chosen with
// probability proportional to exp(ε·uᵢ/(2Δ)), where ε = epsNum/epsDen and
// Δ = sensitivity.
//
// Privacy: if every utility uᵢ changes by at most Δ between neighbouring
// databases (for example group counts, Δ = 1, when one individual affects
// one count by at most 1), releasing the index is ε-differentially private
// (pure ε-DP). The candidate set, i.e. len(utilities), is treated as public.
//
// Sampling is exact and uses no floating point: it proposes i uniformly
// and accepts with probability exp(−ε(u_max − uᵢ)/(2Δ)) by
// [Rand.BernoulliExp], which selects i with the target probability. Every
// proposal of a maximal index is accepted, so the expected number of
// proposals is at most len(utilities). γ is formed exactly in 128-bit
// arithmetic (math/big if 2·epsDen·Δ overflows 64 bits), so utilities of
// any int64 size are fine; large gaps make γ huge and are rejected after
// about 1.6 Bernoulli(e⁻¹) trials.
//
// It panics if utilities is empty, epsDen is zero or sensitivity < 1.
// epsNum = 0 (ε = 0) selects uniformly.
func (r *Rand) ExponentialMechanism(utilities []int64, epsNum, epsDen uint64, sensitivity int64) int {
	if len(utilities) == 0 {
		panic("noise: ExponentialMechanism with no candidates")
	}
	checkEM(epsDen, sensitivity)
	return r.expMech(utilities, epsNum, epsDen, 1, sensitivity)
}

// TopK runs the exponential mechanism k times without replacement, each
// round over the candidates not yet chosen with privacy parameter ε/k
// (ε = epsNum/epsDen), and returns the chosen indices in selection order.
//
// Privacy: each round is (ε/k)-DP for utilities of sensitivity Δ (see
// [Rand.ExponentialMechanism]), so the whole selection is ε-DP by basic
// (adaptive) composition. If k > len(utilities), k is lowered to
// len(utilities) (the candidate count is public) and each round uses ε/k
// for that lowered k, still ε in total. k = 0 returns an empty slice.
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
	cand := make([]int, len(utilities))
	util := make([]int64, len(utilities))
	for i := range cand {
		cand[i] = i
	}
	copy(util, utilities)
	for range k {
		j := r.expMech(util, epsNum, epsDen, uint64(k), sensitivity)
		out = append(out, cand[j])
		// Swap-remove: the mechanism is symmetric in candidate order.
		last := len(cand) - 1
		cand[j], util[j] = cand[last], util[last]
		cand, util = cand[:last], util[:last]
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

// expMech samples index i of u with probability ∝ exp(ε·uᵢ/(2Δ)), where
// ε = epsNum/(epsDen·split): acceptance probability exp(−γᵢ) with
// γᵢ = epsNum·(u_max − uᵢ) / (2·epsDen·split·Δ).
func (r *Rand) expMech(u []int64, epsNum, epsDen, split uint64, sens int64) int {
	n := uint64(len(u))
	if n == 1 {
		return 0
	}
	umax := u[0]
	for _, v := range u[1:] {
		umax = max(umax, v)
	}
	den, fast := mulChecked(2, epsDen, split, uint64(sens))
	for {
		i := r.Uint64n(n)
		// u_max − uᵢ ∈ [0, 2⁶⁴−1]: exact in uint64 by wrap-around.
		diff := uint64(umax) - uint64(u[i])
		if diff == 0 || epsNum == 0 {
			return int(i)
		}
		if fast {
			hi, lo := bits.Mul64(epsNum, diff)
			qhi, qlo, rem := divMod128(hi, lo, den)
			if r.bernExpCount(qhi, qlo) && r.bernExpFrac(rem, den) {
				return int(i)
			}
			continue
		}
		s := &r.big
		s.num.SetUint64(epsNum)
		s.tmp.SetUint64(diff)
		s.num.Mul(&s.num, &s.tmp)
		s.den.SetUint64(epsDen)
		s.tmp.SetUint64(split)
		s.den.Mul(&s.den, &s.tmp)
		s.tmp.SetUint64(uint64(sens))
		s.den.Mul(&s.den, &s.tmp)
		s.den.Lsh(&s.den, 1)
		if r.bernoulliExpBig(&s.num, &s.den) {
			return int(i)
		}
	}
}
