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

// TestLowRankMulVecIsThePlainProduct checks MulVec, which skips zero
// terms and sums prefix-like factors by running sums, against the plain
// loops over every factor and cell, to the bit (signs of zeros included),
// for prefixes, ranges, buckets, irregular factors, zero weights and a
// diagonal with zeros, on vectors with zeros and negative values.
func TestLowRankMulVecIsThePlainProduct(t *testing.T) {
	// Factors reach only cells below covered, so the cells above it
	// start and stay at D[i]·v[i], a −0 where D is zero and v negative.
	const n, covered = 83, 70
	r := splitmix64(5)
	var f [][]float64
	for hi := 0; hi < covered; hi += 4 {
		v := make([]float64, n)
		for i := 0; i <= hi; i++ {
			v[i] = 1
		}
		f = append(f, v) // prefixes
	}
	for k := 0; k < 15; k++ {
		lo := int(r.next() % covered)
		hi := lo + int(r.next()%uint64(covered-lo))
		v := make([]float64, n)
		for i := lo; i <= hi; i++ {
			v[i] = []float64{1, 0.25, -3}[k%3]
		}
		f = append(f, v) // ranges and buckets, scaled
	}
	for k := 0; k < 6; k++ {
		v := make([]float64, n)
		for i := range v[:covered] {
			if r.float() < 0.4 {
				v[i] = r.float() - 0.3
			}
		}
		f = append(f, v) // irregular
	}
	f = append(f, make([]float64, n)) // all zero
	w := make([][]float64, len(f))
	for a := range w {
		w[a] = make([]float64, len(f))
	}
	for a := range w {
		w[a][a] = r.float()
		for b := a + 1; b < len(f); b++ {
			if r.float() < 0.1 {
				w[a][b] = r.float() - 0.5
				w[b][a] = w[a][b]
			}
		}
	}
	d := make([]float64, n)
	for i := range d {
		if i%3 != 0 {
			d[i] = r.float()
		}
	}
	g := NewLowRankGram(n, f, w, d)
	for trial := 0; trial < 20; trial++ {
		v := make([]float64, n)
		for i := range v {
			switch r.next() % 4 {
			case 0: // zero
			case 1:
				v[i] = math.Copysign(0, -1)
			default:
				v[i] = r.float() - 0.5
			}
		}
		got := make([]float64, n)
		g.MulVec(got, v)
		// The plain loops.
		proj := make([]float64, len(g.F))
		for a, fa := range g.F {
			proj[a] = dot(fa, v)
		}
		want := make([]float64, n)
		for i := range want {
			want[i] = g.D[i] * v[i]
		}
		for a := range g.F {
			c := 0.0
			for b := range g.F {
				c += g.K[a][b] * proj[b]
			}
			if c != 0 {
				axpy(want, c, g.F[a])
			}
		}
		for i := range want {
			if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
				t.Fatalf("trial %d, cell %d: MulVec %v, plain product %v", trial, i, got[i], want[i])
			}
		}
	}
}
