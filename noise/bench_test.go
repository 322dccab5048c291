package noise

import (
	"fmt"
	"testing"
)

// Benchmarks read crypto/rand through NewRand, as production does.

func BenchmarkDiscreteLaplace(b *testing.B) {
	scales := []struct {
		name       string
		tNum, tDen uint64
	}{
		{"t=1", 1, 1},
		{"t=2/3", 2, 3},
		{"t=10", 10, 1},
		{"t=100", 100, 1},
		{"t=1000", 1000, 1},
		{"t=RationalAtLeast(1000/3)", 0, 0},
		{"t=1e6", 1e6, 1},
	}
	scales[5].tNum, scales[5].tDen = RationalAtLeast(1000.0 / 3)
	for _, s := range scales {
		b.Run(s.name, func(b *testing.B) {
			r := NewRand()
			var sink int64
			for b.Loop() {
				sink += r.DiscreteLaplace(s.tNum, s.tDen)
			}
			_ = sink
		})
	}
}

func BenchmarkDiscreteGaussian(b *testing.B) {
	type param struct {
		name         string
		s2Num, s2Den uint64
	}
	params := []param{
		{"σ²=1", 1, 1},
		{"σ²=7.5", 15, 2},
		{"σ²=100", 100, 1},
	}
	for _, x := range []float64{2.0 / 3, 1e4, 1e8} {
		n, d := RationalAtLeast(x)
		params = append(params, param{fmt.Sprintf("σ²=RationalAtLeast(%g)", x), n, d})
	}
	params = append(params, param{"σ²=2^40(big path)", 1 << 40, 1})
	for _, p := range params {
		b.Run(p.name, func(b *testing.B) {
			r := NewRand()
			var sink int64
			for b.Loop() {
				sink += r.DiscreteGaussian(p.s2Num, p.s2Den)
			}
			_ = sink
		})
	}
}

func BenchmarkBernoulliExp(b *testing.B) {
	for _, g := range []struct {
		name     string
		num, den uint64
	}{{"γ=0.3", 3, 10}, {"γ=7/3", 7, 3}, {"γ=1e9", 1e9, 1}} {
		b.Run(g.name, func(b *testing.B) {
			r := NewRand()
			for b.Loop() {
				r.BernoulliExp(g.num, g.den)
			}
		})
	}
}

func BenchmarkExponentialMechanism(b *testing.B) {
	for _, n := range []int{5, 1000} {
		u := make([]int64, n)
		for i := range u {
			u[i] = int64(i * 7 % 101)
		}
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			r := NewRand()
			for b.Loop() {
				r.ExponentialMechanism(u, 1, 1, 1)
			}
		})
	}
}

func BenchmarkTopK(b *testing.B) {
	for _, c := range []struct{ n, k int }{{100, 5}, {1000, 10}} {
		u := make([]int64, c.n)
		for i := range u {
			u[i] = int64(i * 7919 % 1009) // counts spread over 0..1008
		}
		b.Run(fmt.Sprintf("n=%d,k=%d", c.n, c.k), func(b *testing.B) {
			r := NewRand()
			for b.Loop() {
				r.TopK(u, c.k, 1, 1, 1)
			}
		})
	}
}
