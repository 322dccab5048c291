package planner

import (
	"context"
	"math"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
	"gonum.org/v1/gonum/mat"
)

// longMatrix is a long strategy's dense matrix, scaled as its option is.
func longMatrix(o *colOpt, fam catalog.NoiseFamily) *mat.Dense {
	n := o.n
	if o.long.Tree == nil {
		a := mat.NewDense(n, n, nil)
		c := 1.0
		for k := 0; k < n; k++ {
			for i := k; i < n; i++ {
				a.Set(i, i-k, c)
			}
			c = sqrtCoefficient(c, k)
		}
		return a
	}
	t := o.long.Tree
	s := t.Sensitivity(fam)
	a := treeMatrix(t)
	for id := range t.nodes {
		for i := 0; i < n; i++ {
			a.Set(id, i, a.At(id, i)*t.weight(id)/s)
		}
	}
	return a
}

// TestLongPrefixOptionsAgainstDense: every structured option of a long
// prefix column reports the sensitivities of its matrix's columns
// (brute force) and its exact error trace(G·(AᵀA)⁻¹); the square root
// squares to the prefix matrix.
func TestLongPrefixOptionsAgainstDense(t *testing.T) {
	const n = 48
	g := mat.NewDense(n, n, nil)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			g.Set(i, j, float64(n-max(i, j)))
		}
	}
	for _, fam := range []catalog.NoiseFamily{catalog.Laplace, catalog.Gaussian} {
		evals, err := New().evalLongPrefix(context.Background(), n, fam)
		if err != nil {
			t.Fatal(err)
		}
		for _, ce := range evals {
			if ce.opt.long.Blocks != nil || ce.opt.long.Dual != nil {
				continue // TestBlockPrefixAgainstDense, TestDualPrefixAgainstDense
			}
			a := longMatrix(ce.opt, fam)
			r, _ := a.Dims()
			l1, l2 := 0.0, 0.0
			for i := 0; i < n; i++ {
				c1, c2 := 0.0, 0.0
				for k := 0; k < r; k++ {
					c1 += math.Abs(a.At(k, i))
					c2 += a.At(k, i) * a.At(k, i)
				}
				l1, l2 = math.Max(l1, c1), math.Max(l2, math.Sqrt(c2))
			}
			if math.Abs(l1-ce.opt.l1) > 1e-9*l1 || math.Abs(l2-ce.opt.l2) > 1e-9*l2 {
				t.Fatalf("%s %s: sensitivities %v/%v, brute force %v/%v", fam, ce.opt.name, ce.opt.l1, ce.opt.l2, l1, l2)
			}
			var ata, inv, gi mat.Dense
			ata.Mul(a.T(), a)
			if err := inv.Inverse(&ata); err != nil {
				t.Fatal(err)
			}
			gi.Mul(g, &inv)
			if want := mat.Trace(&gi); math.Abs(ce.err-want) > 1e-8*want {
				t.Fatalf("%s %s: error %v, dense %v", fam, ce.opt.name, ce.err, want)
			}
			if ce.opt.long.Tree == nil {
				var sq mat.Dense
				sq.Mul(a, a)
				for i := 0; i < n; i++ {
					for j := 0; j < n; j++ {
						if want := float64(map[bool]int{true: 1}[j <= i]); math.Abs(sq.At(i, j)-want) > 1e-12 {
							t.Fatalf("C²[%d,%d] = %v, want %v", i, j, sq.At(i, j), want)
						}
					}
				}
			}
		}
	}
}

// TestChooseKroneckerLongPrefix: a prefix column past longColumn is
// planned with structured strategies only (nothing materialised), each
// candidate's error a product of exact column errors.
func TestChooseKroneckerLongPrefix(t *testing.T) {
	for _, fam := range []catalog.NoiseFamily{catalog.Laplace, catalog.Gaussian} {
		plan, err := New().ChooseKronecker(context.Background(), []Gram{PrefixGram{Size: 8760}}, Options{Noise: fam, Epsilon: 1, Rho: 0.5})
		if err != nil {
			t.Fatal(err)
		}
		if plan.Factors[0] != nil || plan.Long == nil || plan.Long[0] == nil {
			t.Fatalf("%s: factors %v, long %v", fam, plan.Factors, plan.Long)
		}
		best := plan.Best()
		if best.Name != plan.Long[0].Name {
			t.Fatalf("%s: best %s, long %s", fam, best.Name, plan.Long[0].Name)
		}
		ratio := best.Unit / plan.SVDBound
		t.Logf("%s: %s, %.4g × the SVD bound", fam, best.Name, ratio)
		// Laplace: the block strategies (7.79 × per unit) beat the
		// weighted trees (11.24 ×).
		if fam == catalog.Laplace && (plan.Long[0].Blocks == nil || ratio > 8.5) {
			t.Fatalf("laplace: best %s at %.4g × the SVD bound, want a block strategy below 8.5", best.Name, ratio)
		}
		// Gaussian: the dual's strategy (1.021 ×) beats the square root
		// (1.115 ×) and the dense optimum at 1,024 cells (1.032 ×).
		if fam == catalog.Gaussian && (plan.Long[0].Dual == nil || ratio > 1.025) {
			t.Fatalf("gaussian: best %s at %.4g × the SVD bound, want the dual's below 1.025", best.Name, ratio)
		}
	}
}
