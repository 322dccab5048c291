package noise

import (
	"fmt"
	"testing"
)

func TestDiscreteGaussianDistribution(t *testing.T) {
	tests := []struct {
		s2Num, s2Den uint64
		n            int
	}{
		{1, 1, 100000},
		{15, 2, 100000}, // 7.5
		{100, 1, 100000},
		{30 << 20, 3 << 20, 100000}, // 10, unreduced input
		{2, 7, 100000},              // σ² < 1
		// σ² ≈ 7.5 with an irreducible 41-bit denominator: 2·n·d·t²
		// overflows 64 bits, so every acceptance test takes the math/big path.
		{8246337208328, 1099511627777, 30000},
	}
	for i, tc := range tests {
		t.Run(fmt.Sprintf("σ²=%d/%d", tc.s2Num, tc.s2Den), func(t *testing.T) {
			t.Parallel()
			r := seeded(byte(30 + i))
			sigma2 := float64(tc.s2Num) / float64(tc.s2Den)
			samples := make([]int64, sampleCount(tc.n))
			for j := range samples {
				samples[j] = r.DiscreteGaussian(tc.s2Num, tc.s2Den)
			}
			f := gaussianPMF(sigma2)
			p, buckets := chiSquareSymmetric(t, samples, f)
			if p < minP {
				t.Errorf("chi-square p = %.3g < %g (%d buckets)", p, minP, buckets)
			}
			t.Logf("chi-square p = %.3g over %d buckets", p, buckets)
			_, m4 := f.moments()
			checkMoments(t, samples, DiscreteGaussianVariance(sigma2), m4)
		})
	}
}

func TestDiscreteGaussianLargeSigma(t *testing.T) {
	// σ² beyond the 64-bit fast path still samples (math/big path) with
	// plausible spread.
	r := seeded(40)
	const s2 = 1 << 40 // σ = 2^20
	var s float64
	const n = 2000
	for range n {
		z := float64(r.DiscreteGaussian(s2, 1))
		s += z * z
	}
	if v := s / n; v < 0.8*s2 || v > 1.2*s2 {
		t.Errorf("variance %.4g, want ≈ %g", v, float64(s2))
	}
}

func TestIsqrt(t *testing.T) {
	for _, x := range []uint64{0, 1, 2, 3, 4, 15, 16, 17, 1<<52 + 1, 1<<62 - 1, 1 << 62, 1<<64 - 1, (1<<32 - 1) * (1<<32 - 1), (1<<32-1)*(1<<32-1) - 1} {
		s := isqrt(x)
		if s*s > x || (s < 1<<32-1 && (s+1)*(s+1) <= x) {
			t.Errorf("isqrt(%d) = %d", x, s)
		}
	}
}

// TestGaussianFastPathCoverage backs the doc claim that parameters from
// RationalAtLeast with σ² up to about 3·10⁹ use the 64/128-bit path.
func TestGaussianFastPathCoverage(t *testing.T) {
	for x := 1e-6; x < 3e9; x *= 1.01 {
		n, d := RationalAtLeast(x)
		g := gcd(n, d)
		n, d = n/g, d/g
		tt := isqrt(n/d) + 1
		if _, ok := mulChecked(2, n, d, tt, tt); !ok {
			t.Fatalf("σ² = %g (%d/%d) falls off the fast path", x, n, d)
		}
	}
}
