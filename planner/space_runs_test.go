package planner

import (
	"math"
	"testing"
)

// TestRunFormsAreTheSupportSums checks addOption's error forms against the
// plain sums over each factor's support, to the bit, for a column mixing
// prefixes, ranges, single cells, scaled runs and irregular factors.
func TestRunFormsAreTheSupportSums(t *testing.T) {
	const n = 61
	r := splitmix64(11)
	run := func(lo, hi int, c float64) []float64 {
		v := make([]float64, n)
		for i := lo; i <= hi; i++ {
			v[i] = c
		}
		return v
	}
	var vecs [][]float64
	for hi := 0; hi < n; hi += 3 {
		vecs = append(vecs, run(0, hi, 1)) // prefixes
	}
	for k := 0; k < 20; k++ {
		lo := int(r.next() % n)
		hi := lo + int(r.next()%uint64(n-lo))
		vecs = append(vecs, run(lo, hi, []float64{1, 0.5, -2}[k%3])) // ranges, scaled
	}
	for k := 0; k < 8; k++ {
		v := make([]float64, n) // irregular: random values on random cells
		for i := range v {
			if r.float() < 0.3 {
				v[i] = r.float()
			}
		}
		vecs = append(vecs, v)
	}
	vecs = append(vecs, nil) // the ones vector
	cs := &columnSpace{n: n}
	for _, v := range vecs {
		cs.vecs = append(cs.vecs, v)
		if v == nil {
			v = ones(n)
		}
		cs.full = append(cs.full, v)
		cs.support = append(cs.support, nonZeros(v))
	}
	// A dense symmetric G stands in for (AᵀA)⁻¹.
	g := make([][]float64, n)
	for i := range g {
		g[i] = make([]float64, n)
	}
	for i := range g {
		for j := i; j < n; j++ {
			g[i][j] = r.float() - 0.5
			g[j][i] = g[i][j]
		}
		g[i][i] += n
	}
	o := &colOpt{name: "test", n: n, diag: make([]float64, n), mul: func(dst, v []float64) {
		for i := range dst {
			dst[i] = 0
			for j, x := range v {
				dst[i] += g[i][j] * x
			}
		}
	}}
	for i := range o.diag {
		o.diag[i] = g[i][i]
	}
	s := &space{cols: []*columnSpace{cs}}
	s.addOption(0, o)
	b, d := cs.bil[0], cs.diag[0]
	if groups, irregular := cs.runs(); len(groups) == 0 || len(irregular) < 8 {
		t.Fatalf("%d groups of runs, %d irregular factors: the test should exercise both", len(groups), len(irregular))
	}
	k := len(cs.full)
	h := make([]float64, n)
	for u := 0; u < k; u++ {
		fu := cs.full[u]
		o.mul(h, fu)
		ug := make([]float64, n)
		for _, i := range cs.support[u] {
			ug[i] = fu[i] * o.diag[i]
		}
		for v := 0; v < k; v++ {
			bx, dx := 0.0, 0.0
			for _, i := range cs.support[v] {
				bx += cs.full[v][i] * h[i]
				dx += cs.full[v][i] * ug[i]
			}
			if math.Float64bits(dx) != math.Float64bits(d[u][v]) {
				t.Fatalf("diag form (%d, %d) = %v, support sum %v", u, v, d[u][v], dx)
			}
			// b is symmetrised after: compare before the mean.
			if v > u {
				continue
			}
			o.mul(h, cs.full[v])
			by := 0.0
			for _, i := range cs.support[u] {
				by += cs.full[u][i] * h[i]
			}
			if want := 0.5 * (bx + by); u != v && math.Float64bits(want) != math.Float64bits(b[u][v]) {
				t.Fatalf("bilinear form (%d, %d) = %v, support sums give %v", u, v, b[u][v], want)
			}
			o.mul(h, fu)
		}
	}
}
