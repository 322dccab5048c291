package noise

import (
	"fmt"
	"math"
	"testing"
)

func TestDiscreteLaplaceDistribution(t *testing.T) {
	tests := []struct{ tNum, tDen uint64 }{
		{1, 1},
		{2, 3},
		{10, 1},
		{7, 2},
		{1, 5},              // small scale: mostly 0
		{699051, 1 << 20},   // RationalAtLeast(2/3)
		{10 << 40, 1 << 40}, // large numerator and denominator
	}
	n := sampleCount(100000)
	for i, tc := range tests {
		t.Run(fmt.Sprintf("t=%d/%d", tc.tNum, tc.tDen), func(t *testing.T) {
			t.Parallel()
			r := seeded(byte(10 + i))
			scale := float64(tc.tNum) / float64(tc.tDen)
			samples := make([]int64, n)
			for j := range samples {
				samples[j] = r.DiscreteLaplace(tc.tNum, tc.tDen)
			}
			f := laplacePMF(scale)
			p, buckets := chiSquareSymmetric(t, samples, f)
			if p < minP {
				t.Errorf("chi-square p = %.3g < %g (%d buckets)", p, minP, buckets)
			}
			t.Logf("chi-square p = %.3g over %d buckets", p, buckets)
			_, m4 := f.moments()
			checkMoments(t, samples, DiscreteLaplaceVariance(scale), m4)
		})
	}
}

func TestDiscreteLaplaceExtremeScales(t *testing.T) {
	r := seeded(20)
	// Tiny scale: P(Z ≠ 0) = 2q/(1+q), q = e^{-2^64}: always 0.
	for range 1000 {
		if z := r.DiscreteLaplace(1, math.MaxUint64); z != 0 {
			t.Fatalf("scale 2^-64 gave %d", z)
		}
	}
	// Huge scales: X = U + t·V needs 128 bits; results may clamp.
	for _, tc := range []struct{ tNum, tDen uint64 }{
		{math.MaxUint64, 1}, {1 << 62, 1}, {math.MaxUint64, 1 << 20}, {math.MaxUint64, math.MaxUint64 - 1},
	} {
		for range 1000 {
			z := r.DiscreteLaplace(tc.tNum, tc.tDen)
			if z == math.MinInt64 {
				t.Fatalf("t=%d/%d gave MinInt64", tc.tNum, tc.tDen)
			}
		}
	}
}
