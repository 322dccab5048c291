package noise

import (
	"math"
	"slices"
	"testing"
	"time"
)

// emProbs returns exp(ε·uᵢ/(2Δ))/Z computed in floating point (test only).
func emProbs(u []int64, eps float64, sens int64) []float64 {
	umax := slices.Max(u)
	p := make([]float64, len(u))
	z := 0.0
	for i, v := range u {
		p[i] = math.Exp(eps * float64(v-umax) / (2 * float64(sens)))
		z += p[i]
	}
	for i := range p {
		p[i] /= z
	}
	return p
}

func TestExponentialMechanismDistribution(t *testing.T) {
	base := []int64{10, 12, 15, 9, 14}
	times4 := []int64{40, 48, 60, 36, 56}
	tests := []struct {
		name           string
		u              []int64
		epsNum, epsDen uint64
		sens           int64
	}{
		{"ε=1 Δ=1", base, 1, 1, 1},
		{"ε=2/3 Δ=3", base, 2, 3, 3},
		{"ε=1 Δ=1 negative", []int64{-5, 0, -3, -1}, 1, 1, 1},
		{"ε=0 uniform", base, 0, 1, 1},
		// ε = 2⁶²/2⁶², Δ = 4: 2·epsDen·Δ = 2⁶⁵ overflows, so the math/big
		// path runs; the law equals the ε=1 Δ=1 row.
		{"big path", times4, 1 << 62, 1 << 62, 4},
		{"ε=1 Δ=1 huge offset", []int64{1e15 + 10, 1e15 + 12, 1e15 + 15, 1e15 + 9, 1e15 + 14}, 1, 1, 1},
	}
	n := sampleCount(50000)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := seeded(byte(50 + i))
			counts := make([]int, len(tc.u))
			for range n {
				counts[r.ExponentialMechanism(tc.u, tc.epsNum, tc.epsDen, tc.sens)]++
			}
			probs := emProbs(tc.u, float64(tc.epsNum)/float64(tc.epsDen), tc.sens)
			if p := chiSquareCategorical(t, counts, probs); p < minP {
				t.Errorf("chi-square p = %.3g < %g; counts %v, probs %.4f", p, minP, counts, probs)
			}
		})
	}
}

func TestExponentialMechanismLargeUtilities(t *testing.T) {
	r := seeded(60)
	tests := []struct {
		name           string
		u              []int64
		epsNum, epsDen uint64
		sens           int64
		want           int
	}{
		{"1e9", []int64{0, 1e9, 5e8, -1e9, 1e9 - 100}, 1, 1, 1, 1},
		{"1e9 fine ε", []int64{0, 5e8, 1e9, 1e9 - 1000}, 1<<20 + 7, 1 << 20, 1, 2},
		{"1e12", []int64{1e12, 0, 1e12 - 1e4, 7}, 1, 10, 1, 0},
		{"int64 extremes", []int64{math.MinInt64, math.MaxInt64, 0}, math.MaxUint64, 1, 1, 1},
		{"int64 extremes big path", []int64{math.MinInt64, 0, math.MaxInt64}, math.MaxUint64, math.MaxUint64, math.MaxInt64, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			wins := 0
			const n = 2000
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
			if d := time.Since(start); d > time.Second {
				t.Errorf("%d selections took %v", n, d)
			}
		})
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

// TestTopKFirstRound checks that round one uses ε/k: with k = 2 and ε = 2
// the first pick follows the exponential mechanism with ε = 1.
func TestTopKFirstRound(t *testing.T) {
	r := seeded(71)
	u := []int64{10, 12, 15, 9, 14}
	n := sampleCount(40000)
	counts := make([]int, len(u))
	for range n {
		counts[r.TopK(u, 2, 2, 1, 1)[0]]++
	}
	if p := chiSquareCategorical(t, counts, emProbs(u, 1, 1)); p < minP {
		t.Errorf("chi-square p = %.3g; counts %v", p, counts)
	}
}
