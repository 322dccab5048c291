package planner

import (
	"context"
	"math"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/dpproxy/dpproxy/catalog"
)

// denseBlock materialises a block over the product domain of sizes
// (row-major, last column fastest): the marginal on cols (identity on
// cols, 1ᵀ elsewhere) or the residual block (n_j·I − J on cols).
func denseBlock(sizes []int, cols []int, residual bool) *mat.Dense {
	var m *mat.Dense
	for j, n := range sizes {
		var f *mat.Dense
		if slices.Contains(cols, j) {
			f = mat.NewDense(n, n, nil)
			for a := 0; a < n; a++ {
				for b := 0; b < n; b++ {
					v := 0.0
					if a == b {
						v = 1
					}
					if residual {
						v = float64(n)*v - 1
					}
					f.Set(a, b, v)
				}
			}
		} else {
			f = mat.NewDense(1, n, ones(n))
		}
		if m == nil {
			m = f
			continue
		}
		var k mat.Dense
		k.Kronecker(m, f)
		m = &k
	}
	return m
}

// whitened stacks the blocks, each divided by its noise's standard
// deviation: (AᵀA) of the result is the generalised least-squares
// precision, so ‖W·A⁺‖²_F is the exact total error.
func whitened(sizes []int, blocks []MarginalBlock) *mat.Dense {
	var parts []*mat.Dense
	for _, b := range blocks {
		d := denseBlock(sizes, b.Cols, b.Residual)
		d.Scale(1/math.Sqrt(b.NoiseVariance), d)
		parts = append(parts, d)
	}
	return stack(parts)
}

func denseMarginalWorkload(w MarginalWorkload) *mat.Dense {
	var parts []*mat.Dense
	for _, s := range w.Sets {
		parts = append(parts, denseBlock(w.Sizes, s, false))
	}
	return stack(parts)
}

// Every block's column norms are the same for every cell and equal
// BlockSensitivity: 1 for a marginal, Π 2(n_j − 1) (L1) and
// √Π n_j(n_j − 1) (L2) for a residual block.
func TestBlockSensitivityMatchesDense(t *testing.T) {
	sizes := []int{3, 4, 2}
	for _, cols := range [][]int{{}, {0}, {1, 2}, {0, 1, 2}} {
		for _, res := range []bool{false, true} {
			b := denseBlock(sizes, cols, res)
			r, c := b.Dims()
			sub := make([]int, len(cols))
			for i, j := range cols {
				sub[i] = sizes[j]
			}
			w1, w2 := BlockSensitivity(res, sub, false), BlockSensitivity(res, sub, true)
			for k := 0; k < c; k++ {
				var l1, l2 float64
				for i := 0; i < r; i++ {
					l1 += math.Abs(b.At(i, k))
					l2 += b.At(i, k) * b.At(i, k)
				}
				if math.Abs(l1-w1) > 1e-12 || math.Abs(math.Sqrt(l2)-w2) > 1e-12 {
					t.Fatalf("cols %v residual %v cell %d: norms %v, %v; want %v, %v", cols, res, k, l1, math.Sqrt(l2), w1, w2)
				}
			}
		}
	}
}

// The residual algebra's errors equal the dense generalised least-squares
// computation to 1e-9, for every candidate family of ChooseMarginals and
// both noises: the total error, every marginal cell's variance, and the
// Gaussian closed form at the SVD bound.
func TestResidualAlgebraMatchesDense(t *testing.T) {
	for _, tc := range []struct {
		sizes []int
		k     int
	}{{[]int{3, 4, 2}, 1}, {[]int{3, 4, 2}, 2}, {[]int{2, 3, 2, 2}, 2}} {
		w := AllMarginals(tc.sizes, tc.k)
		W := denseMarginalWorkload(w)
		gens := make([]colSet, len(w.Sets))
		for i, s := range w.Sets {
			gens[i] = setOf(s...)
		}
		f, err := newSubsetFamily(tc.sizes, gens)
		if err != nil {
			t.Fatal(err)
		}
		ws := make([]int, len(gens))
		ones := make([]float64, len(gens))
		for i, g := range gens {
			ws[i], ones[i] = f.index[g], 1
		}
		coef := f.marginalCoefficients(ws, ones)
		for _, opt := range []Options{{Noise: catalog.Laplace, Epsilon: 0.7}, {Noise: catalog.Gaussian, Rho: 0.3}} {
			gauss := opt.Noise == catalog.Gaussian
			type cand struct {
				name string
				vars []blockVar
				v    []float64
			}
			var cands []cand
			eqVars := make([]blockVar, len(ws))
			eq := make([]float64, len(ws))
			for i, s := range ws {
				eqVars[i], eq[i] = f.marginalVar(s), 1
			}
			cands = append(cands, cand{"marginals", eqVars, normalised(eq, gauss)})
			rv, r := f.residualOptimum(coef, gauss)
			cands = append(cands, cand{"residuals", rv, r})
			var mixVars []blockVar
			for s := range f.sets {
				mixVars = append(mixVars, f.marginalVar(s))
			}
			mixVars = append(mixVars, rv...)
			start := make([]float64, len(mixVars))
			for i := range start {
				start[i] = 1
			}
			mix, err := f.optimiseWeights(context.Background(), coef, mixVars, [][]float64{start}, gauss, workOf(1))
			if err != nil {
				t.Fatal(err)
			}
			cands = append(cands, cand{"mix", mixVars, mix})
			mv, m, _, err := f.minimaxResiduals(context.Background(), ws, gauss, workOf(1))
			if err != nil {
				t.Fatal(err)
			}
			cands = append(cands, cand{"maxvar", mv, m})
			for _, c := range cands {
				blocks, err := f.calibrateBlocks(c.vars, c.v, opt)
				if err != nil {
					t.Fatal(err)
				}
				lam := f.blockLambda(blocks)
				A := whitened(tc.sizes, blocks)
				var wp mat.Dense
				wp.Mul(W, pinv(A))
				fro := mat.Norm(&wp, 2)
				if got, want := unitError(coef, lam), fro*fro; relErr(got, want) > 1e-9 {
					t.Errorf("%v k=%d %s %s: total %v, dense %v", tc.sizes, tc.k, opt.Noise, c.name, got, want)
				}
				var back mat.Dense
				back.Mul(&wp, A)
				if !mat.EqualApprox(&back, W, 1e-8) {
					t.Errorf("%v k=%d %s %s: workload not in the row space", tc.sizes, tc.k, opt.Noise, c.name)
				}
				vars := f.marginalVariances(ws, lam)
				row := 0
				for i, s := range w.Sets {
					cells := 1
					for _, j := range s {
						cells *= tc.sizes[j]
					}
					for k := 0; k < cells; k++ {
						r := wp.RawRowView(row)
						dense := 0.0
						for _, x := range r {
							dense += x * x
						}
						if relErr(vars[i], dense) > 1e-9 {
							t.Errorf("%v %s %s: marginal %v cell %d variance %v, dense %v", tc.sizes, opt.Noise, c.name, s, k, vars[i], dense)
						}
						row++
					}
				}
				// The shares compose to at most the batch's ε (ρ).
				sum := 0.0
				for _, b := range blocks {
					sum += b.Epsilon + b.Rho
				}
				if budget := opt.Epsilon + opt.Rho; sum > budget {
					t.Errorf("%s %s: shares sum to %v > %v", opt.Noise, c.name, sum, budget)
				}
			}
			if gauss {
				svd := 0.0
				for s, a := range coef {
					svd += math.Sqrt(a * f.r[s])
				}
				if got := f.objective(coef, rv, r, true); relErr(got, svd*svd) > 1e-9 {
					t.Errorf("%v k=%d: Gaussian residuals %v, SVD bound %v", tc.sizes, tc.k, got, svd*svd)
				}
			}
		}
	}
}

// The max-variance weighting certifies its gap, and its largest cell
// variance is never above the total-error optimum's.
func TestMinimaxResiduals(t *testing.T) {
	sizes := []int{2, 16, 7, 5, 74}
	w := MarginalWorkload{Sizes: sizes, Sets: [][]int{{0}, {1}, {2, 3}, {0, 4}, {1, 2}}}
	gens := make([]colSet, len(w.Sets))
	for i, s := range w.Sets {
		gens[i] = setOf(s...)
	}
	f, err := newSubsetFamily(sizes, gens)
	if err != nil {
		t.Fatal(err)
	}
	ws := make([]int, len(gens))
	ones := make([]float64, len(gens))
	for i, g := range gens {
		ws[i], ones[i] = f.index[g], 1
	}
	for _, gauss := range []bool{false, true} {
		tv, tw := f.residualOptimum(f.marginalCoefficients(ws, ones), gauss)
		mv, mw, gap, err := f.minimaxResiduals(context.Background(), ws, gauss, workOf(5))
		if err != nil {
			t.Fatal(err)
		}
		total := slices.Max(f.marginalVariances(ws, f.lambda(tv, tw)))
		minimax := slices.Max(f.marginalVariances(ws, f.lambda(mv, mw)))
		if !(gap < 1e-3) {
			t.Errorf("gauss=%v: gap %v", gauss, gap)
		}
		if minimax > total {
			t.Errorf("gauss=%v: minimax max variance %v above the total optimum's %v", gauss, minimax, total)
		}
		t.Logf("gauss=%v: max variance total-optimal %.4g, minimax %.4g (×%.2f), gap %.1e", gauss, total, minimax, total/minimax, gap)
	}
}

// All 3-way marginals of 40 attributes of 10 values (twice the old limit;
// `dpproxy-bench planner --domain 10^100` plans 100) plan in the residual
// algebra over 10,701 sets, Gaussian residuals at the SVD bound.
func TestChooseMarginalsWide(t *testing.T) {
	sizes := make([]int, 40)
	for i := range sizes {
		sizes[i] = 10
	}
	pl := New()
	p, err := pl.ChooseMarginals(context.Background(), AllMarginals(sizes, 3), Options{Noise: catalog.Gaussian, Rho: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Candidates {
		if c.Name == "residuals" {
			if r := c.Unit / p.SVDBound; math.Abs(r-1) > 1e-9 {
				t.Fatalf("residuals at %v × the SVD bound", r)
			}
			return
		}
	}
	t.Fatalf("no residuals candidate in %+v", p.Candidates)
}
