package noise

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"testing"
)

// emProbs returns exp(ε·uᵢ/Δ)/Z computed in floating point (test only).
func emProbs(u []int64, eps float64, sens int64) []float64 {
	umax := slices.Max(u)
	p := make([]float64, len(u))
	z := 0.0
	for i, v := range u {
		// u_max − uᵢ in float64 from its exact uint64 value.
		d := float64(uint64(umax) - uint64(v))
		p[i] = math.Exp(-eps * d / float64(sens))
		z += p[i]
	}
	for i := range p {
		p[i] /= z
	}
	return p
}

// chiSquareMerged is chiSquareCategorical after merging every outcome
// expected fewer than 5 times into one bucket (dropped if that bucket is
// still below 5; then the test asserts it was never, or almost never, hit).
func chiSquareMerged(t *testing.T, counts []int, probs []float64) float64 {
	t.Helper()
	n := 0
	for _, c := range counts {
		n += c
	}
	var mc []int
	var mp []float64
	rc, rp := 0, 0.0
	for i, p := range probs {
		if float64(n)*p >= 5 {
			mc = append(mc, counts[i])
			mp = append(mp, p)
		} else {
			rc += counts[i]
			rp += p
		}
	}
	if float64(n)*rp >= 5 {
		mc = append(mc, rc)
		mp = append(mp, rp)
	} else if float64(rc) > 5+10*float64(n)*rp {
		// Expected below 5, seen more than 5 + 10× that: P < 1e-5 by
		// Poisson tails for any expectation below 5.
		t.Fatalf("rare outcomes seen %d times, expected %.3g", rc, float64(n)*rp)
	}
	if len(mc) < 2 {
		return 1
	}
	return chiSquareCategorical(t, mc, mp)
}

// The selection probabilities are exp(ε·u/Δ) normalised (the monotone
// exponential mechanism; no factor 2). Seeded; each case fails falsely
// with probability minP = 1e-4 (chi-square p-value), so the whole table
// with probability below 2e-3.
func TestExponentialMechanismDistribution(t *testing.T) {
	base := []int64{10, 12, 15, 9, 14}
	tests := []struct {
		name           string
		u              []int64
		epsNum, epsDen uint64
		sens           int64
	}{
		{"ε=1/2 Δ=1", base, 1, 2, 1},
		{"ε=2/3 Δ=3", base, 2, 3, 3},
		{"ε=1 Δ=1 negative", []int64{-5, 0, -3, -1}, 1, 1, 1},
		{"ε=0 uniform", base, 0, 1, 1},
		{"ties at the max", []int64{15, 3, 15, 14, 15}, 1, 1, 1},
		{"all equal", []int64{7, 7, 7, 7, 7, 7, 7}, 1, 1, 1},
		{"ε=1/2 huge offset", []int64{1e15 + 10, 1e15 + 12, 1e15 + 15, 1e15 + 9, 1e15 + 14}, 1, 2, 1},
		{"fine ε, counts in thousands", []int64{5000, 9000, 12000, 11500, 3000, 11900}, 1, 1 << 10, 1},
		{"large ε, gaps of one", []int64{100, 101, 99, 101, 100}, 5, 2, 1},
		{"huge gaps and ties", []int64{math.MinInt64, 40, math.MaxInt64 - 1, math.MaxInt64, 0, math.MaxInt64}, 1, 1, 1},
		{"ε with a 64-bit denominator", base, 1 << 62, 1<<63 + 1, 1},
		{"many candidates", seq(24, func(i int) int64 { return int64(i * 7 % 23) }), 1, 4, 1},
	}
	n := sampleCount(20000)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := seeded(byte(50 + i))
			counts := make([]int, len(tc.u))
			for range n {
				counts[r.ExponentialMechanism(tc.u, tc.epsNum, tc.epsDen, tc.sens)]++
			}
			probs := emProbs(tc.u, float64(tc.epsNum)/float64(tc.epsDen), tc.sens)
			if p := chiSquareMerged(t, counts, probs); p < minP {
				t.Errorf("chi-square p = %.3g < %g; counts %v, probs %.4f", p, minP, counts, probs)
			}
		})
	}
}

func seq(n int, f func(int) int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

// The cost of a selection does not depend on the utilities: with the same
// seed, vectors of the same length consume exactly the same random words
// and perform exactly the same number of fixed-point operations — the
// deterministic proxies for running time. (Only a retry at doubled
// precision could differ, which has probability below 2⁻⁶⁰ per selection
// and does not occur for these seeds.)
func TestExponentialMechanismCostIsDataIndependent(t *testing.T) {
	const m = 64
	vectors := map[string][]int64{
		"all equal":       seq(m, func(int) int64 { return 100 }),
		"one dominant":    seq(m, func(i int) int64 { return int64(i/63) * 1e9 }),
		"spread":          seq(m, func(i int) int64 { return int64(i * 37 % 101) }),
		"ties at the max": seq(m, func(i int) int64 { return int64(min(i, 10)) }),
		"int64 extremes":  seq(m, func(i int) int64 { return []int64{math.MinInt64, math.MaxInt64, 0}[i%3] }),
		"descending":      seq(m, func(i int) int64 { return int64(m - i) }),
	}
	for _, eps := range []struct{ num, den uint64 }{{1, 10}, {1, 1}, {7, 1 << 30}, {0, 1}} {
		for seed := byte(0); seed < 4; seed++ {
			type cost struct{ words, ops uint64 }
			costs := map[string]cost{}
			topk := map[string]cost{}
			for name, u := range vectors {
				r := seeded(90 + seed)
				r.ExponentialMechanism(u, eps.num, eps.den, 1)
				costs[name] = cost{r.words, r.emOps}
				r = seeded(90 + seed)
				r.TopK(u, 5, eps.num, eps.den, 1)
				topk[name] = cost{r.words, r.emOps}
			}
			for name := range vectors {
				if costs[name] != costs["all equal"] {
					t.Errorf("ε=%d/%d seed %d: %s costs %+v, all equal %+v", eps.num, eps.den, seed, name, costs[name], costs["all equal"])
				}
				if topk[name] != topk["all equal"] {
					t.Errorf("ε=%d/%d seed %d: TopK on %s costs %+v, all equal %+v", eps.num, eps.den, seed, name, topk[name], topk["all equal"])
				}
			}
		}
	}
}

// Large gaps: the maximum wins every time (the others have probability
// below e^-100).
func TestExponentialMechanismLargeUtilities(t *testing.T) {
	r := seeded(60)
	tests := []struct {
		name           string
		u              []int64
		epsNum, epsDen uint64
		sens           int64
		want           int
	}{
		{"1e9", []int64{0, 1e9, 5e8, -1e9, 1e9 - 1000}, 1, 1, 1, 1},
		{"1e9 fine ε", []int64{0, 5e8, 1e9, 1e9 - 1000}, 1<<20 + 7, 1 << 20, 1, 2},
		{"1e12", []int64{1e12, 0, 1e12 - 1e4, 7}, 1, 10, 1, 0},
		{"int64 extremes", []int64{math.MinInt64, math.MaxInt64, 0}, math.MaxUint64, 1, 1, 1},
		{"int64 extremes, huge Δ", []int64{math.MinInt64, 0, math.MaxInt64}, math.MaxUint64, math.MaxUint64, math.MaxInt64, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wins := 0
			const n = 500
			for range n {
				i := r.ExponentialMechanism(tc.u, tc.epsNum, tc.epsDen, tc.sens)
				if i < 0 || i >= len(tc.u) {
					t.Fatalf("index %d out of range", i)
				}
				if i == tc.want {
					wins++
				}
			}
			if tc.want >= 0 && wins != n {
				t.Errorf("max chosen %d/%d times", wins, n)
			}
		})
	}
}

// expNeg brackets exp(−c) tightly, for c from tiny to beyond the clamp.
func TestExpNegBrackets(t *testing.T) {
	r := seeded(61)
	for _, c := range [][2]int64{{1, 1}, {1, 3}, {7, 1 << 20}, {1, 1 << 40}, {93, 2}, {12345, 100}} {
		f := &emRateFrac{}
		f.num.SetInt64(c[0])
		f.den.SetInt64(c[1])
		const Q = 120
		var lo, hi big.Int
		r.expNeg(&lo, &hi, f, Q)
		want := new(big.Float).SetPrec(200).SetFloat64(math.Exp(-float64(c[0]) / float64(c[1])))
		scale := new(big.Float).SetMantExp(big.NewFloat(1), Q)
		flo := new(big.Float).Quo(new(big.Float).SetInt(&lo), scale)
		fhi := new(big.Float).Quo(new(big.Float).SetInt(&hi), scale)
		// float64 exp is within 1 ulp: the bracket must contain want
		// up to that, and be far narrower than float64 precision.
		w, _ := want.Float64()
		l, _ := flo.Float64()
		h, _ := fhi.Float64()
		if l > w*(1+1e-15) || h < w*(1-1e-15) {
			t.Errorf("c=%d/%d: [%g, %g] does not contain exp(−c) = %g", c[0], c[1], l, h, w)
		}
		width := new(big.Int).Sub(&hi, &lo)
		if width.BitLen() > 12 {
			t.Errorf("c=%d/%d: bracket %d ulps wide at 2^-%d", c[0], c[1], width, Q)
		}
	}
}

func TestTopK(t *testing.T) {
	r := seeded(70)
	u := []int64{10, 12, 15, 9, 14, 3, 15, 0}
	tests := []struct {
		k, wantLen int
	}{
		{0, 0}, {1, 1}, {3, 3}, {8, 8}, {20, 8},
	}
	for _, tc := range tests {
		for range 200 {
			got := r.TopK(u, tc.k, 1, 1, 1)
			if len(got) != tc.wantLen {
				t.Fatalf("TopK(k=%d) returned %d indices", tc.k, len(got))
			}
			seen := map[int]bool{}
			for _, i := range got {
				if i < 0 || i >= len(u) || seen[i] {
					t.Fatalf("TopK(k=%d) = %v: invalid or repeated index", tc.k, got)
				}
				seen[i] = true
			}
		}
	}
	if got := r.TopK(nil, 3, 1, 1, 1); len(got) != 0 {
		t.Errorf("TopK on no candidates = %v", got)
	}
	// Utilities far apart: the order is the true top-k.
	big := []int64{5e9, 1e9, 9e9, 0, 7e9}
	if got := r.TopK(big, 3, 1, 1, 1); !slices.Equal(got, []int{2, 4, 0}) {
		t.Errorf("TopK(large gaps) = %v, want [2 4 0]", got)
	}
}

// Each round of TopK uses ε/k: with k = 2 and ε = 2 the first pick follows
// the exponential mechanism with ε = 1, and the second, given the first,
// the mechanism on the rest. Seeded; false failure ≤ 2·minP.
func TestTopKRounds(t *testing.T) {
	r := seeded(71)
	u := []int64{10, 12, 15, 9, 14}
	n := sampleCount(40000)
	first := make([]int, len(u))
	second := make([]int, len(u)) // second pick when the first was index 2
	for range n {
		got := r.TopK(u, 2, 2, 1, 1)
		first[got[0]]++
		if got[0] == 2 {
			second[got[1]]++
		}
	}
	if p := chiSquareCategorical(t, first, emProbs(u, 1, 1)); p < minP {
		t.Errorf("first round: chi-square p = %.3g; counts %v", p, first)
	}
	rest := []int64{10, 12, 9, 14}
	want := emProbs(rest, 1, 1)
	if p := chiSquareCategorical(t, []int{second[0], second[1], second[3], second[4]}, want); p < minP {
		t.Errorf("second round: chi-square p = %.3g; counts %v", p, second)
	}
}

func ExampleRand_ExponentialMechanism() {
	r := NewRand()
	counts := []int64{120, 4500, 4480, 30}
	// ε = 1/10, sensitivity 1: index 1 or 2 almost always.
	i := r.ExponentialMechanism(counts, 1, 10, 1)
	fmt.Println(i == 1 || i == 2)
	// Output: true
}
