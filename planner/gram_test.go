package planner

import (
	"math"
	"testing"
)

// TestLowRankDiagIsThePlainSum checks that Diag, which adds only the
// non-zero terms, equals the plain double loop over every factor pair to
// the bit, for dense and sparse factors and diagonal, sparse and dense
// weights (plans hash their matrices, so a last-bit change would change a
// strategy's digest).
func TestLowRankDiagIsThePlainSum(t *testing.T) {
	r := splitmix64(7)
	for _, tc := range []struct {
		name            string
		density, kDense float64 // share of non-zero factor entries and off-diagonal weights
	}{
		{"dense factors, diagonal weights", 1, 0},
		{"prefix-like factors, diagonal weights", 0.5, 0},
		{"sparse factors, dense weights", 0.05, 1},
		{"sparse factors, sparse weights", 0.1, 0.2},
		{"dense factors, dense weights", 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n, k = 97, 23
			f := make([][]float64, k)
			for a := range f {
				f[a] = make([]float64, n)
				for i := range f[a] {
					if r.float() < tc.density {
						f[a][i] = r.float()*2 - 0.5
					}
				}
			}
			w := make([][]float64, k)
			for a := range w {
				w[a] = make([]float64, k)
			}
			for a := range w {
				w[a][a] = r.float() + 0.1
				for b := a + 1; b < k; b++ {
					if r.float() < tc.kDense {
						w[a][b] = r.float() - 0.5
						w[b][a] = w[a][b]
					}
				}
			}
			d := make([]float64, n)
			for i := range d {
				d[i] = r.float()
			}
			g := NewLowRankGram(n, f, w, d)
			got := g.Diag()
			for i := 0; i < n; i++ {
				want := g.D[i]
				for a, fa := range g.F {
					for b, fb := range g.F {
						want += g.K[a][b] * fa[i] * fb[i]
					}
				}
				if math.Float64bits(got[i]) != math.Float64bits(want) {
					t.Fatalf("cell %d: Diag %v, plain sum %v", i, got[i], want)
				}
			}
		})
	}
}
