package planner

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
	"gonum.org/v1/gonum/mat"
)

// treeMatrix is t's strategy as a dense matrix (rows in preorder).
func treeMatrix(t *Tree) *mat.Dense {
	a := mat.NewDense(t.Nodes(), t.N, nil)
	for id, nd := range t.nodes {
		for i := nd.lo; i < nd.hi; i++ {
			a.Set(id, i, 1)
		}
	}
	return a
}

// TestTreeAgainstDense checks the tree against its dense matrix on small
// domains: Measure is A·x, Consistent is (AᵀA)⁻¹Aᵀy, the sensitivities are
// the brute-forced largest column norms (the worst neighbour: one row
// added to the cell whose column norm is largest), and noiseless
// reconstruction is exact.
func TestTreeAgainstDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2)) // test data only, not noise
	for _, n := range []int{1, 2, 3, 7, 16, 17, 50} {
		for _, b := range []int{2, 3, 4, 8} {
			tr, err := NewTree(n, b)
			if err != nil {
				t.Fatal(err)
			}
			a := treeMatrix(tr)
			l1, l2 := 0.0, 0.0
			for i := 0; i < n; i++ {
				c1, c2 := 0.0, 0.0
				for r := 0; r < tr.Nodes(); r++ {
					c1 += math.Abs(a.At(r, i))
					c2 += a.At(r, i) * a.At(r, i)
				}
				l1, l2 = math.Max(l1, c1), math.Max(l2, math.Sqrt(c2))
			}
			if tr.Sensitivity(catalog.Laplace) != l1 || math.Abs(tr.Sensitivity(catalog.Gaussian)-l2) > 1e-12 {
				t.Fatalf("n=%d b=%d: sensitivity %v/%v, brute force %v/%v", n, b, tr.Sensitivity(catalog.Laplace), tr.Sensitivity(catalog.Gaussian), l1, l2)
			}
			x := make([]float64, n)
			for i := range x {
				x[i] = float64(rng.IntN(20))
			}
			y := make([]float64, tr.Nodes())
			tr.Measure(y, x)
			var ax mat.VecDense
			ax.MulVec(a, mat.NewVecDense(n, x))
			for r := range y {
				if y[r] != ax.AtVec(r) {
					t.Fatalf("n=%d b=%d: Measure row %d = %v, A·x %v", n, b, r, y[r], ax.AtVec(r))
				}
			}
			for i, v := range tr.Consistent(y) {
				if math.Abs(v-x[i]) > 1e-9 {
					t.Fatalf("n=%d b=%d: noiseless reconstruction cell %d = %v, want %v", n, b, i, v, x[i])
				}
			}
			for r := range y {
				y[r] += rng.NormFloat64() * 3
			}
			var ata, inv mat.Dense
			ata.Mul(a.T(), a)
			if err := inv.Inverse(&ata); err != nil {
				t.Fatal(err)
			}
			var aty, gls mat.VecDense
			aty.MulVec(a.T(), mat.NewVecDense(len(y), y))
			gls.MulVec(&inv, &aty)
			for i, v := range tr.Consistent(y) {
				if math.Abs(v-gls.AtVec(i)) > 1e-8 {
					t.Fatalf("n=%d b=%d: Consistent cell %d = %v, GLS %v", n, b, i, v, gls.AtVec(i))
				}
			}
			// The prefix variance bound holds for the exact prefix variances.
			bound := tr.PrefixVarianceBound()
			for k := 0; k < n; k++ {
				p := make([]float64, n)
				for i := 0; i <= k; i++ {
					p[i] = 1
				}
				pv := mat.NewVecDense(n, p)
				var ip mat.VecDense
				ip.MulVec(&inv, pv)
				if v := mat.Dot(pv, &ip); v > bound+1e-9 {
					t.Fatalf("n=%d b=%d: prefix %d variance %v above the bound %v", n, b, k, v, bound)
				}
			}
			// The final variances are diag((AᵀA)⁻¹) at the leaves.
			for id, nd := range tr.nodes {
				if nd.children == nil && math.Abs(tr.f[id]-inv.At(nd.lo, nd.lo)) > 1e-9 {
					t.Fatalf("n=%d b=%d: leaf %d variance %v, want %v", n, b, nd.lo, tr.f[id], inv.At(nd.lo, nd.lo))
				}
			}
		}
	}
}

// TestPlanTreeCalibration checks that a tree plan's noise is calibrated
// for its sensitivity times the unit bound, and that CheckTree refuses a
// plan with less noise.
func TestPlanTreeCalibration(t *testing.T) {
	for _, opt := range []Options{
		{Noise: catalog.Laplace, Epsilon: 1},
		{Noise: catalog.Gaussian, Rho: 0.5},
		{Noise: catalog.Laplace, Epsilon: 1, Unit: Contribution{Rows: 3}},
	} {
		p, err := PlanTree(8760, opt)
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckTree(p); err != nil {
			t.Fatal(err)
		}
		scale := float64(p.NoiseNum) / float64(p.NoiseDen)
		k := opt.Unit.L1()
		want := k * p.Sensitivity / opt.Epsilon
		if opt.Noise == catalog.Gaussian {
			want = p.Sensitivity * p.Sensitivity / (2 * opt.Rho)
		}
		if scale < want*(1-1e-12) {
			t.Fatalf("%+v: noise %v below %v", opt, scale, want)
		}
		bad := *p
		bad.NoiseNum = p.NoiseNum / 2
		if CheckTree(&bad) == nil {
			t.Fatalf("%+v: CheckTree accepted half the noise", opt)
		}
	}
}

// TestTreeErrorAgainstDense checks PrefixError, and the least squares of
// weighted trees, against dense matrices: trace(LᵀL·(AᵀA)⁻¹) with A the
// weighted strategy.
func TestTreeErrorAgainstDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6)) // test data only, not noise
	for _, n := range []int{1, 2, 5, 16, 33, 64} {
		for _, b := range []int{2, 3, 4, 8} {
			base, err := NewTree(n, b)
			if err != nil {
				t.Fatal(err)
			}
			for trial := 0; trial < 3; trial++ {
				tr := base
				if trial > 0 {
					w := make([]float64, base.Depth)
					for d := range w {
						w[d] = 0.2 + rng.Float64()
					}
					if trial == 2 && len(w) > 1 {
						w[0] = 0 // the root unmeasured
					}
					if tr, err = base.Weighted(w); err != nil {
						t.Fatal(err)
					}
				}
				a := treeMatrix(tr)
				for id := range tr.nodes {
					for i := 0; i < n; i++ {
						a.Set(id, i, a.At(id, i)*tr.weight(id))
					}
				}
				var ata, inv mat.Dense
				ata.Mul(a.T(), a)
				if err := inv.Inverse(&ata); err != nil {
					t.Fatal(err)
				}
				want := 0.0
				for k := 0; k < n; k++ {
					for i := 0; i <= k; i++ {
						for j := 0; j <= k; j++ {
							want += inv.At(i, j)
						}
					}
				}
				if got := tr.PrefixError(); math.Abs(got-want) > 1e-8*math.Max(1, want) {
					t.Fatalf("n=%d b=%d trial %d: PrefixError %v, dense %v", n, b, trial, got, want)
				}
				x := make([]float64, n)
				for i := range x {
					x[i] = float64(rng.IntN(9))
				}
				y := make([]float64, tr.Nodes())
				tr.Measure(y, x)
				ay := make([]float64, tr.Nodes()) // the weighted rows' noisy values
				for id := range y {
					ay[id] = y[id]*tr.weight(id) + rng.NormFloat64()
					if w := tr.weight(id); w > 0 {
						y[id] = ay[id] / w
					}
				}
				var aty, gls mat.VecDense
				aty.MulVec(a.T(), mat.NewVecDense(len(ay), ay))
				gls.MulVec(&inv, &aty)
				for i, v := range tr.Consistent(y) {
					if math.Abs(v-gls.AtVec(i)) > 1e-8 {
						t.Fatalf("n=%d b=%d trial %d: Consistent cell %d = %v, GLS %v", n, b, trial, i, v, gls.AtVec(i))
					}
				}
			}
		}
	}
}
