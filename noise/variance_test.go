package noise

import (
	"math"
	"math/big"
	"testing"
)

func TestDiscreteLaplaceVariance(t *testing.T) {
	for _, scale := range []float64{0.05, 0.3, 2.0 / 3, 1, 3.5, 10, 1000} {
		m2, _ := laplacePMF(scale).moments()
		got := DiscreteLaplaceVariance(scale)
		if math.Abs(got-m2) > 1e-9*math.Max(m2, 1e-300) {
			t.Errorf("DiscreteLaplaceVariance(%g) = %.15g, pmf sum %.15g", scale, got, m2)
		}
	}
	// Large t: ≈ 2t² − 1/6.
	if got, want := DiscreteLaplaceVariance(1e6), 2e12-1.0/6; math.Abs(got-want) > 1e-9*want {
		t.Errorf("DiscreteLaplaceVariance(1e6) = %.15g, want %.15g", got, want)
	}
	checkEdgeCases(t, "DiscreteLaplaceVariance", DiscreteLaplaceVariance)
}

func TestDiscreteGaussianVariance(t *testing.T) {
	for _, s2 := range []float64{0.01, 0.1, 0.5, 0.99, 1, 2.0 / 7, 7.5, 100, 1e4} {
		want := gaussVarDirect(s2)
		m2, _ := gaussianPMF(s2).moments()
		got := DiscreteGaussianVariance(s2)
		if math.Abs(got-want) > 1e-12*want || math.Abs(got-m2) > 1e-9*m2 {
			t.Errorf("DiscreteGaussianVariance(%g) = %.15g, direct sum %.15g, pmf %.15g", s2, got, want, m2)
		}
		if got > s2 {
			t.Errorf("DiscreteGaussianVariance(%g) = %.15g exceeds σ²", s2, got)
		}
	}
	// Both series agree where either could be used.
	for s2 := 0.2; s2 < 6; s2 += 0.1 {
		if d, f := gaussVarDirect(s2), gaussVarDual(s2); math.Abs(d-f) > 1e-13*d {
			t.Errorf("σ²=%g: direct %.16g vs dual %.16g", s2, d, f)
		}
	}
	// σ² = 1e12: equal to σ² at double precision.
	if got := DiscreteGaussianVariance(1e12); got != 1e12 {
		t.Errorf("DiscreteGaussianVariance(1e12) = %.17g", got)
	}
	checkEdgeCases(t, "DiscreteGaussianVariance", DiscreteGaussianVariance)
}

func checkEdgeCases(t *testing.T, name string, f func(float64) float64) {
	t.Helper()
	if v := f(0); v != 0 {
		t.Errorf("%s(0) = %g", name, v)
	}
	if v := f(math.Inf(1)); !math.IsInf(v, 1) {
		t.Errorf("%s(+Inf) = %g", name, v)
	}
	for _, x := range []float64{-1, math.NaN()} {
		if v := f(x); !math.IsNaN(v) {
			t.Errorf("%s(%g) = %g, want NaN", name, x, v)
		}
	}
}

func TestRationalAtLeast(t *testing.T) {
	tests := []struct {
		x                float64
		wantNum, wantDen uint64 // 0 = don't check exactly
	}{
		{1, 1, 1},
		{7.5, 15, 2},
		{0.25, 1, 4},
		{2.0 / 3, 699051, 1 << 20},
		{1.0 / 3, 174763, 1 << 19}, // ceil(2^20/3) = 349526, reduced
		{1e-9, 1, 1 << 20},
		{5e-324, 1, 1 << 20},
		{1000, 1000, 1},
		{1000.1, 0, 0},
		{123456.789, 0, 0},
		{1e9, 1e9, 1},
		{1e9 + 0.5, 1e9 + 1, 1},
		{1e15, 1e15, 1},
		{1.8e19, 1.8e19, 1},
		{math.Nextafter(0x1p64, 0), 1<<64 - 2048, 1},
	}
	for _, tc := range tests {
		num, den := RationalAtLeast(tc.x)
		if tc.wantDen != 0 && (num != tc.wantNum || den != tc.wantDen) {
			t.Errorf("RationalAtLeast(%g) = %d/%d, want %d/%d", tc.x, num, den, tc.wantNum, tc.wantDen)
		}
		if den == 0 || den > 1<<20 || den&(den-1) != 0 || num == 0 {
			t.Errorf("RationalAtLeast(%g) = %d/%d: bad denominator", tc.x, num, den)
			continue
		}
		if num&1 == 0 && den > 1 {
			t.Errorf("RationalAtLeast(%g) = %d/%d not reduced", tc.x, num, den)
		}
		got := new(big.Rat).SetFrac(new(big.Int).SetUint64(num), new(big.Int).SetUint64(den))
		x := new(big.Rat).SetFloat64(tc.x)
		if got.Cmp(x) < 0 {
			t.Errorf("RationalAtLeast(%g) = %d/%d is below x", tc.x, num, den)
		}
		// excess < max(2^-20, x·2^-29)
		excess := new(big.Rat).Sub(got, x)
		bound := new(big.Rat).SetFloat64(math.Max(0x1p-20, tc.x*0x1p-29))
		if excess.Cmp(bound) >= 0 {
			t.Errorf("RationalAtLeast(%g) = %d/%d exceeds x by %s", tc.x, num, den, excess.FloatString(12))
		}
	}
}
