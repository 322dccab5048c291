package planner

import (
	"context"
	"math"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
	"gonum.org/v1/gonum/mat"
)

// dayGram is the Gram of daily totals over days×hours cells, with the
// last idle hours of the column outside every query (all-zero factors),
// as DATE(ts) under a WHERE gives it.
func dayGram(days, hours, idle int) *LowRankGram {
	n := days*hours + idle
	var f [][]float64
	k := make([][]float64, days)
	for d := 0; d < days; d++ {
		v := make([]float64, n)
		for h := 0; h < hours; h++ {
			v[d*hours+h] = 1
		}
		f = append(f, v)
		k[d] = make([]float64, days)
		k[d][d] = 1
	}
	return NewLowRankGram(n, f, k, nil)
}

// Cells no factor distinguishes share a class: one per day, one for the
// idle cells; a cell with diagonal (group-by) weight stays alone.
func TestGramClasses(t *testing.T) {
	g := dayGram(5, 4, 3)
	classOf, r := gramClasses(g)
	if r != 6 {
		t.Fatalf("%d classes, want 6", r)
	}
	for i := range classOf {
		if i < 20 && classOf[i] != classOf[i/4*4] || i >= 20 && classOf[i] != classOf[20] {
			t.Fatalf("cell %d in class %d: %v", i, classOf[i], classOf)
		}
	}
	d := make([]float64, 23)
	d[21] = 1
	g2 := NewLowRankGram(23, g.F, g.K, d)
	if _, r := gramClasses(g2); r != 7 {
		t.Fatalf("with a diagonal cell: %d classes, want 7", r)
	}
}

// The expanded strategy A = A_r·P, checked by brute force: every column
// norm of A is one of A_r's (so Δ₁ and Δ₂ are equal), A⁺ is the
// Moore–Penrose inverse (A·A⁺·A = A, A⁺·A·A⁺ = A⁺, both products
// symmetric), the error form is (AᵀA)⁺ = A⁺·A⁺ᵀ, and on class-constant
// vectors the error is the reduced problem's, w_r·(A_rᵀA_r)⁻¹·w_rᵀ.
func TestExpandedStrategyMatchesBruteForce(t *testing.T) {
	classOf := []int{0, 0, 1, 2, 2, 2, 1, 3, 0, 3}
	n, r := len(classOf), 4
	for _, red := range []func() (*ColumnStrategy, error){
		func() (*ColumnStrategy, error) { return Identity(r) },
		func() (*ColumnStrategy, error) { return Hierarchical(r, 2) },
		func() (*ColumnStrategy, error) {
			return newColumnStrategy("random", mat.NewDense(5, r, []float64{1, 2, 0, 1, 0, 1, 3, 0, 2, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 4}))
		},
	} {
		cs, err := red()
		if err != nil {
			t.Fatal(err)
		}
		o, err := expandOpt(cs, classOf, r)
		if err != nil || o == nil {
			t.Fatalf("%s: %v", cs.Name, err)
		}
		a, pinv := o.cs.A, o.cs.Pinv
		m, _ := a.Dims()
		l1, l2 := 0.0, 0.0
		for i := 0; i < n; i++ {
			c1, c2, r1, r2 := 0.0, 0.0, 0.0, 0.0
			for k := 0; k < m; k++ {
				c1 += math.Abs(a.At(k, i))
				c2 += a.At(k, i) * a.At(k, i)
				r1 += math.Abs(cs.A.At(k, classOf[i]))
				r2 += cs.A.At(k, classOf[i]) * cs.A.At(k, classOf[i])
			}
			if c1 != r1 || c2 != r2 {
				t.Fatalf("%s: column %d norms %v/%v, reduced %v/%v", cs.Name, i, c1, c2, r1, r2)
			}
			l1, l2 = math.Max(l1, c1), math.Max(l2, math.Sqrt(c2))
		}
		if l1 != cs.L1 || relErr(l2, cs.L2) > 1e-12 || o.l1 != l1 || relErr(o.l2, l2) > 1e-12 {
			t.Fatalf("%s: sensitivities %v/%v, reduced %v/%v", cs.Name, l1, l2, cs.L1, cs.L2)
		}
		var apa, pap, ap, pa mat.Dense
		ap.Mul(a, pinv)
		pa.Mul(pinv, a)
		apa.Mul(&ap, a)
		pap.Mul(&pa, pinv)
		near := func(what string, x, y mat.Matrix) {
			if !mat.EqualApprox(x, y, 1e-9) {
				t.Fatalf("%s: %s differs", cs.Name, what)
			}
		}
		near("A·A⁺·A vs A", &apa, a)
		near("A⁺·A·A⁺ vs A⁺", &pap, pinv)
		near("A·A⁺ symmetric", &ap, ap.T())
		near("A⁺·A symmetric", &pa, pa.T())
		var gram mat.Dense
		gram.Mul(pinv, pinv.T())
		near("factor", o.cs.GramMatrix(), &gram)
		v, col := make([]float64, n), make([]float64, n)
		for i := 0; i < n; i++ {
			v[i] = 1
			o.mul(col, v)
			v[i] = 0
			for j := 0; j < n; j++ {
				if math.Abs(col[j]-gram.At(j, i)) > 1e-9 {
					t.Fatalf("%s: error form (%d,%d) %v vs %v", cs.Name, j, i, col[j], gram.At(j, i))
				}
			}
			if math.Abs(o.diag[i]-gram.At(i, i)) > 1e-9 {
				t.Fatalf("%s: diag %d", cs.Name, i)
			}
		}
		wr := []float64{3, -1, 2, 5}
		w := make([]float64, n)
		for i, c := range classOf {
			w[i] = wr[c]
		}
		o.mul(col, w)
		rg := cs.GramMatrix()
		want := mat.Inner(mat.NewVecDense(r, wr), rg, mat.NewVecDense(r, wr))
		if got := dot(w, col); relErr(got, want) > 1e-9 {
			t.Fatalf("%s: class-constant error %v, reduced %v", cs.Name, got, want)
		}
	}
}

// Compression never makes the optimised strategy worse: on daily totals
// over hourly cells (with idle hours) the compressed optimum's expected
// error, Δ²·trace(G·(AᵀA)⁺), is at most the uncompressed optimiser's with
// the same work.
func TestCompressionNoWorse(t *testing.T) {
	g := dayGram(25, 12, 20) // 320 cells, 26 classes
	for _, fam := range []catalog.NoiseFamily{catalog.Laplace, catalog.Gaussian} {
		comp, _, err := runOptimiser(context.Background(), g, fam, workOf(0.3))
		if err != nil || comp == nil || comp.classOf == nil {
			t.Fatalf("%s: compressed %v %v", fam, comp, err)
		}
		var full *colOpt
		switch fam {
		case catalog.Gaussian:
			r, err := optimizeGauss(context.Background(), g, workOf(0.3))
			if err != nil {
				t.Fatal(err)
			}
			full = optFromStrategy(r.strategy)
		default:
			r, err := optimizeLaplace(context.Background(), g, workOf(0.3))
			if err != nil {
				t.Fatal(err)
			}
			full = optFromStrategy(r.strategy)
		}
		gauss := fam == catalog.Gaussian
		ec := comp.sens(gauss) * comp.sens(gauss) * traceWith(g, comp)
		ef := full.sens(gauss) * full.sens(gauss) * traceWith(g, full)
		if ec > ef*(1+1e-9) {
			t.Errorf("%s: compressed error %v, uncompressed %v", fam, ec, ef)
		}
		t.Logf("%s: compressed %v, uncompressed %v", fam, ec, ef)
	}
}
