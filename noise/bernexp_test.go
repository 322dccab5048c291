package noise

import (
	"math"
	"math/big"
	"testing"
	"time"
)

func TestBernoulliExpFrequency(t *testing.T) {
	r := seeded(4)
	tests := []struct {
		name     string
		num, den uint64
	}{
		{"0", 0, 1},
		{"0.3", 3, 10},
		{"1", 1, 1},
		{"2.5", 5, 2},
		{"7/3", 7, 3},
		{"0.3 den·k overflows", 3 << 60, 10 << 60}, // exercises the split Bernoulli(num/den)·Bernoulli(1/k)
		{"7/3 huge terms", 7 * (math.MaxUint64 / 7), 3 * (math.MaxUint64 / 7)},
		{"4 integer", 4, 1},
	}
	draws := sampleCount(100000)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hits := 0
			for range draws {
				if r.BernoulliExp(tc.num, tc.den) {
					hits++
				}
			}
			checkFrequency(t, "BernoulliExp("+tc.name+")", hits, draws, math.Exp(-float64(tc.num)/float64(tc.den)))
		})
	}
}

func TestBernoulliExpHugeGammaIsFast(t *testing.T) {
	r := seeded(5)
	tests := []struct{ num, den uint64 }{
		{1e9, 1},
		{1e9 << 20, 1 << 20},
		{math.MaxUint64, 1},
		{math.MaxUint64, 3},
	}
	for _, tc := range tests {
		start := time.Now()
		for range 10000 {
			if r.BernoulliExp(tc.num, tc.den) {
				t.Fatalf("BernoulliExp(%d/%d) returned true", tc.num, tc.den)
			}
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("10000 × BernoulliExp(%d/%d) took %v", tc.num, tc.den, d)
		}
	}
}

// TestBernoulliExpBig checks the math/big slow path against exp(−γ),
// including a fractional part whose numerator and denominator exceed
// 64 bits and an integer part ≥ 2⁶⁴.
func TestBernoulliExpBig(t *testing.T) {
	r := seeded(6)
	scale := new(big.Int).Lsh(big.NewInt(1), 100)
	scale.Add(scale, big.NewInt(1)) // 2¹⁰⁰+1
	tests := []struct {
		name     string
		num, den int64
		scale    *big.Int
	}{
		{"0.3×(2^100+1)", 3, 10, scale},
		{"7/3×(2^100+1)", 7, 3, scale},
		{"1×(2^100+1)", 1, 1, scale},
		{"0.3 small", 3, 10, big.NewInt(1)},
		{"2.5 small", 5, 2, big.NewInt(1)},
	}
	draws := sampleCount(40000)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			num := new(big.Int).Mul(big.NewInt(tc.num), tc.scale)
			den := new(big.Int).Mul(big.NewInt(tc.den), tc.scale)
			hits := 0
			for range draws {
				if r.bernoulliExpBig(num, den) {
					hits++
				}
			}
			checkFrequency(t, tc.name, hits, draws, math.Exp(-float64(tc.num)/float64(tc.den)))
		})
	}
	// ⌊γ⌋ ≥ 2⁶⁴ terminates quickly and returns false.
	huge := new(big.Int).Lsh(big.NewInt(1), 200)
	for range 1000 {
		if r.bernoulliExpBig(huge, big.NewInt(3)) {
			t.Fatal("exp(−2^200/3) returned true")
		}
	}
}

func TestBernExpCount128(t *testing.T) {
	r := seeded(7)
	for range 1000 {
		if r.bernExpCount(1, 0) || r.bernExpCount(math.MaxUint64, math.MaxUint64) {
			t.Fatal("exp(−2^64) trial returned true")
		}
	}
	if !r.bernExpCount(0, 0) {
		t.Fatal("exp(0) trial returned false")
	}
	draws := sampleCount(100000)
	hits := 0
	for range draws {
		if r.bernExpCount(0, 2) {
			hits++
		}
	}
	checkFrequency(t, "bernExpCount(2)", hits, draws, math.Exp(-2))
}
