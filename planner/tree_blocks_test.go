package planner

import (
	"context"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
	"gonum.org/v1/gonum/mat"
)

// blockCases are small block strategies: the totals and the blocks
// measured by the optimised prefix strategy (integer, on the Laplace
// grid) or a hierarchical one, with B dividing n or not.
func blockCases(t *testing.T) map[string]*BlockPrefix {
	t.Helper()
	pl := New()
	optFor := func(g Gram) *ColumnStrategy {
		cs, err := pl.prefixStrategy(context.Background(), g, catalog.Laplace)
		if err != nil || cs == nil {
			t.Fatalf("optimised strategy for %s: %v", g.Key(), err)
		}
		return cs
	}
	opt := func(n int) *ColumnStrategy { return optFor(PrefixGram{Size: n}) }
	centred := optFor(centredPrefixGram{Size: 8, Kappa: centredKappa})
	h := func(n, b int) *ColumnStrategy {
		cs, err := Hierarchical(n, b)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	out := map[string]*BlockPrefix{}
	for name, c := range map[string]struct {
		n, b    int
		top, in *ColumnStrategy
		a, w    float64
	}{
		"64/8 optimised":      {64, 8, opt(8), opt(8), 0.4 / opt(8).L1, 0.6 / opt(8).L1},
		"61/8 optimised":      {61, 8, opt(8), opt(8), 0.3 / opt(8).L1, 0.7 / opt(8).L1},
		"59/8 centred":        {59, 8, opt(8), centred, 0.45 / opt(8).L1, 0.55 / centred.L1},
		"50/16 hierarchical":  {50, 16, h(4, 2), h(16, 4), 0.5, 1.7},
		"40/10 opt×hierarchy": {40, 10, opt(4), h(10, 3), 2.0 / opt(4).L1, 0.25},
		// 150 blocks: the tridiagonal reduction's blocked code path.
		"599/4 many blocks": {599, 4, h(150, 4), opt(4), 0.2, 0.5 / opt(4).L1},
	} {
		bp, err := NewBlockPrefix(c.n, c.b, c.top, c.in)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if bp, err = bp.Weighted(c.a, c.w); err != nil {
			t.Fatal(err)
		}
		out[name] = bp
	}
	return out
}

// paddedPrefixRows is the prefix workload over the first n of cells cells.
func paddedPrefixRows(n, cells int) *mat.Dense {
	w := mat.NewDense(n, cells, nil)
	for k := 0; k < n; k++ {
		for i := 0; i <= k; i++ {
			w.Set(k, i, 1)
		}
	}
	return w
}

// TestBlockPrefixAgainstDense: the exact error equals trace(W(AᵀA)⁻¹Wᵀ)
// over the real prefixes with the stacked matrix built densely; the
// reconstruction equals (AᵀA)⁻¹Aᵀy on arbitrary y and returns x with no
// noise; the sensitivity is the worst neighbour's (one row added or
// removed moves one real cell by one, hence A·x by that cell's column).
func TestBlockPrefixAgainstDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := blockCases(t)
	for _, name := range slices.Sorted(maps.Keys(cases)) {
		bp := cases[name]
		a := bp.Dense()
		rows, cells := a.Dims()
		var ata, inv mat.Dense
		ata.Mul(a.T(), a)
		if err := inv.Inverse(&ata); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		w := paddedPrefixRows(bp.N, cells)
		var wi, wiw mat.Dense
		wi.Mul(w, &inv)
		wiw.Mul(&wi, w.T())
		if got, want := bp.PrefixError(), mat.Trace(&wiw); math.Abs(got-want) > 1e-9*want {
			t.Errorf("%s: error %v, dense %v", name, got, want)
		}

		x := make([]float64, bp.N)
		for i := range x {
			x[i] = float64(rng.IntN(50))
		}
		y := make([]float64, bp.Rows())
		bp.Measure(y, x)
		padded := mat.NewVecDense(cells, nil)
		for i, v := range x {
			padded.SetVec(i, v)
		}
		var ax mat.VecDense
		ax.MulVec(a, padded)
		for i := range y {
			if math.Abs(y[i]-ax.AtVec(i)) > 1e-9*(1+math.Abs(y[i])) {
				t.Fatalf("%s: measurement %d is %v, dense %v", name, i, y[i], ax.AtVec(i))
			}
		}
		got, err := bp.Reconstruct(y)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range got {
			if math.Abs(v-x[i]) > 1e-7*(1+math.Abs(x[i])) {
				t.Fatalf("%s: noiseless cell %d is %v, want %v", name, i, v, x[i])
			}
		}
		for i := range y {
			y[i] = rng.NormFloat64() * 100
		}
		var aty, ls mat.VecDense
		aty.MulVec(a.T(), mat.NewVecDense(rows, y))
		ls.MulVec(&inv, &aty)
		if got, err = bp.Reconstruct(y); err != nil {
			t.Fatal(err)
		}
		for i, v := range got {
			if math.Abs(v-ls.AtVec(i)) > 1e-7*(1+math.Abs(v)) {
				t.Fatalf("%s: cell %d is %v, least squares %v", name, i, v, ls.AtVec(i))
			}
		}

		for _, fam := range []catalog.NoiseFamily{catalog.Laplace, catalog.Gaussian} {
			worst := 0.0
			for c := 0; c < bp.N; c++ { // neighbour: one row in real cell c
				col := mat.Col(nil, c, a)
				norm := mat.Norm(mat.NewVecDense(rows, col), 1)
				if fam == catalog.Gaussian {
					norm = mat.Norm(mat.NewVecDense(rows, col), 2)
				}
				worst = math.Max(worst, norm)
			}
			if got := bp.Sensitivity(fam); math.Abs(got-worst) > 1e-12*worst {
				t.Errorf("%s %s: sensitivity %v, worst neighbour %v", name, fam, got, worst)
			}
		}
	}
}

// TestBlockPrefixEmpirical: over many runs with independent noise of unit
// variance on every count, the mean total squared error of the
// reconstructed prefixes matches PrefixError.
func TestBlockPrefixEmpirical(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const runs = 3000
	cases := blockCases(t)
	for _, name := range slices.Sorted(maps.Keys(cases)) { // a fixed order: a fixed stream of noise
		bp := cases[name]
		if bp.M > 16 {
			continue // checked against the dense form; its eigenbasis per run is slow
		}
		x := make([]float64, bp.N)
		for i := range x {
			x[i] = float64(rng.IntN(20))
		}
		exact := make([]float64, bp.Rows())
		bp.Measure(exact, x)
		y := make([]float64, len(exact))
		sum := 0.0
		for r := 0; r < runs; r++ {
			for i := range y {
				y[i] = exact[i] + rng.NormFloat64()
			}
			est, err := bp.Reconstruct(y)
			if err != nil {
				t.Fatal(err)
			}
			acc, truth := 0.0, 0.0
			for k := range est {
				acc += est[k]
				truth += x[k]
				sum += (acc - truth) * (acc - truth)
			}
		}
		got, want := sum/runs, bp.PrefixError()
		// The total's standard error over runs is about √2·want/√runs for
		// a few dominant directions; 8% is several of those.
		if math.Abs(got-want) > 0.08*want {
			t.Errorf("%s: empirical error %v, formula %v", name, got, want)
		}
		t.Logf("%s: empirical %.5g, formula %.5g", name, got, want)
	}
}

// TestBlockPrefixOption: the planned block option is scaled to unit
// sensitivity and its error is its strategy's.
func TestBlockPrefixOption(t *testing.T) {
	o, e, err := New().blockPrefixOption(context.Background(), 3000, 256, catalog.Laplace)
	if err != nil || o == nil {
		t.Fatalf("option %v, error %v", o, err)
	}
	bp := o.long.Blocks
	if bp == nil || bp.M != 12 || bp.B != 256 {
		t.Fatalf("blocks %+v", bp)
	}
	if s := bp.Sensitivity(catalog.Laplace); math.Abs(s-1) > 1e-12 || o.l1 != s {
		t.Fatalf("sensitivity %v, option's %v", s, o.l1)
	}
	if e != bp.PrefixError() {
		t.Fatalf("error %v, strategy's %v", e, bp.PrefixError())
	}
}

// TestCentredPrefixGram: the structured products and diagonal equal the
// dense Π·G·Π + κ'·11ᵀ.
func TestCentredPrefixGram(t *testing.T) {
	const n = 37
	g := centredPrefixGram{Size: n, Kappa: 0.3}
	pg := DenseOf(PrefixGram{Size: n})
	pi := mat.NewDense(n, n, nil)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			pi.Set(i, j, -1.0/n+map[bool]float64{true: 1}[i == j])
		}
	}
	var t1, want mat.Dense
	t1.Mul(pi, pg)
	want.Mul(&t1, pi)
	tr := float64(n*(n+1)) / 2
	got := DenseOf(g)
	diag := g.Diag()
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			w := want.At(i, j) + 0.3*tr/(n*n)
			if math.Abs(got.At(i, j)-w) > 1e-9*(1+math.Abs(w)) {
				t.Fatalf("G[%d,%d] = %v, dense %v", i, j, got.At(i, j), w)
			}
			if i == j && math.Abs(diag[i]-w) > 1e-9*(1+math.Abs(w)) {
				t.Fatalf("diag[%d] = %v, dense %v", i, diag[i], w)
			}
		}
	}
}
