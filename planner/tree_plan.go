package planner

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/dpproxy/dpproxy/catalog"
)

// longColumn is the longest column ChooseKronecker plans with the dense
// families (error forms applied n times, O(n²) each option) and the
// optimisers (O(n^2.5) work); a longer prefix column is planned with
// structured strategies whose error is exact in O(n·depth): weighted trees
// and, for Gaussian noise, the square-root factorisation.
const longColumn = 2048

// LongStrategy is a column strategy kept structured, never as a matrix: a
// weighted Tree, a BlockPrefix, the square-root factorisation of the
// prefix matrix, or the Gaussian dual's strategy. Exactly one of Tree,
// Blocks, Sqrt and Dual is set.
type LongStrategy struct {
	Name string
	// Tree is the strategy when it is a tree.
	Tree *Tree
	// Blocks is the strategy when it is block-wise (tree_blocks.go).
	Blocks *BlockPrefix
	// Sqrt is the column size of the square-root factorisation (0 for a
	// tree): the lower-triangular Toeplitz C with C² = L, L the prefix
	// matrix, C_ij = c_{i−j}, c_k = binom(2k, k)/4ᵏ (the Taylor
	// coefficients of (1 − x)^(−1/2)). Its error with decoder C is exact.
	Sqrt int
	// Dual is the weights u of the Gaussian dual (long_gauss.go): the
	// strategy is any A with AᵀA = X(u)/max_i X(u)_ii, X(u) =
	// U^{-1/2}(U^{1/2}GU^{1/2})^{1/2}U^{-1/2} for the prefix Gram G.
	Dual []float64
}

// sqrtCoefficient iterates c_k: c_0 = 1, c_{k+1} = c_k·(2k+1)/(2k+2).
func sqrtCoefficient(c float64, k int) float64 { return c * float64(2*k+1) / float64(2*k+2) }

// sqrtPrefixOption is the square-root factorisation of the n×n prefix
// matrix L = C·C (Fichtenberger, Henzinger and Upadhyay 2023): measure
// C·x, answer the prefixes as C·(C·x + z). Its L1 and L2 column norms are
// those of its first column, (Σ c_k) and (Σ c_k²)^½, and its error per
// unit noise variance on the prefix workload is ‖C‖_F² = Σ_k Σ_{j≤k} c_j²
// — which least squares does not improve, C being square and invertible.
// O(n).
func sqrtPrefixOption(n int) (*colOpt, float64) {
	c, l1, l2, acc, fro := 1.0, 0.0, 0.0, 0.0, 0.0
	for k := 0; k < n; k++ {
		l1 += c
		l2 += c * c
		acc += c * c
		fro += acc
		c = sqrtCoefficient(c, k)
	}
	o := &colOpt{name: "sqrt", n: n, l1: l1, l2: math.Sqrt(l2), long: &LongStrategy{Name: "sqrt", Sqrt: n}}
	o.once.Do(func() {})
	return o, fro
}

// treeWeightWork bounds the weight search of one branching's tree (the
// PrefixError evaluations, at treeEvalCost each).
const treeWeightWork = 1.5 * workRate

// treeEvalCost is the work of one weighted tree's PrefixError (with its
// variances): about 100 per leaf and level (timed at 2²⁰ cells on the
// development machine, under its usual load).
func treeEvalCost(t *Tree) float64 { return 100 * float64(t.N) * float64(t.Depth) }

// treeWeightProfile is a tree's weights from three parameters: the root's,
// the leaves' depth's (the deepest level) and every other level's. Three
// parameters transfer between tree sizes and keep the search short.
func treeWeightProfile(depth int, root, mid, leaf float64) []float64 {
	w := make([]float64, depth)
	for d := range w {
		w[d] = mid
	}
	w[depth-1] = leaf
	if depth > 1 {
		w[0] = root
	}
	return w
}

// treePrefixOption is the b-ary tree over n cells with the weight profile
// (treeWeightProfile) that least errs on the prefix workload under fam:
// a coordinate search on the three parameters from uniform weights, each
// step multiplying one by 1 ± s (the root's may drop to 0: unmeasured),
// halving s when no step helps, within treeWeightWork. Deterministic.
func treePrefixOption(ctx context.Context, n, b int, fam catalog.NoiseFamily) (*colOpt, float64, error) {
	base, err := NewTree(n, b)
	if err != nil {
		return nil, 0, err
	}
	eval := func(p [3]float64) (*Tree, float64) {
		t, err := base.Weighted(treeWeightProfile(base.Depth, p[0], p[1], p[2]))
		if err != nil {
			return nil, math.Inf(1)
		}
		s := t.Sensitivity(fam)
		return t, s * s * t.PrefixError()
	}
	m := meter{limit: treeWeightWork}
	p := [3]float64{1, 1, 1}
	best, bestErr := eval(p)
	m.spend(treeEvalCost(base))
	for step := 0.5; step > 0.01 && !m.done(); {
		if err := stopped(ctx); err != nil {
			return nil, 0, err
		}
		improved := false
		for i := 0; i < 3 && !m.done(); i++ {
			for _, f := range [2]float64{1 + step, 1 / (1 + step)} {
				q := p
				q[i] *= f
				if i == 0 && q[i] < 0.05 {
					q[i] = 0
				}
				t, e := eval(q)
				m.spend(treeEvalCost(base))
				if e < bestErr*(1-1e-9) {
					p, best, bestErr, improved = q, t, e, true
					break
				}
			}
		}
		if !improved {
			step /= 2
		}
	}
	// The reported error is the chosen tree's, per unit noise variance
	// at unit sensitivity: trace(G(AᵀA)⁻¹) with A scaled to sensitivity 1.
	s := best.Sensitivity(fam)
	name := fmt.Sprintf("T%d", b)
	if p != [3]float64{1, 1, 1} {
		name = fmt.Sprintf("T%d(%.3g,%.3g,%.3g)", b, p[0], p[1], p[2])
	}
	o := &colOpt{name: name, n: n, l1: best.Sensitivity(catalog.Laplace) / s, l2: best.Sensitivity(catalog.Gaussian) / s,
		long: &LongStrategy{Name: name, Tree: best}}
	if fam == catalog.Gaussian {
		o.l2 = 1
	} else {
		o.l1 = 1
	}
	o.once.Do(func() {})
	return o, bestErr, nil
}

// evalLongPrefix evaluates the structured strategies of a long prefix
// column: weighted trees of branching 2 to 16 (4 to 16 past 2¹⁶ cells,
// where the binary tree, deepest and slowest, is never the best: 1.7 and
// 32 times the SVD bound at 2²⁰ against 1.08 for the square root and 14
// for T16) and the square-root factorisation, each error exact, in
// O(n·depth) per evaluation; for Gaussian noise, the dual's strategy
// (dualPrefixOption: within 2.3% of the optimum's lower bound from 8,760
// to 2²⁰ cells, against 11.5% and 8.1% for the square root), its error
// exact in O(n·nodes); and, for Laplace noise, the block strategies
// (evalBlockPrefix), each error exact in O(M² + B²) per evaluation after
// an O(M³) eigendecomposition.
func (pl *Planner) evalLongPrefix(ctx context.Context, n int, fam catalog.NoiseFamily) ([]colEval, error) {
	var out []colEval
	branchings := []int{2, 4, 8, 16}
	if n > 1<<16 {
		branchings = branchings[1:]
	}
	for _, b := range branchings {
		t0 := time.Now()
		o, e, err := treePrefixOption(ctx, n, b, fam)
		if err != nil {
			return nil, err
		}
		// e is the error at the option's sensitivity; colEval holds the
		// error per unit noise variance of the option as scaled (its
		// sensitivity in fam is 1).
		out = append(out, colEval{opt: o, err: e, seconds: time.Since(t0).Seconds()})
	}
	t0 := time.Now()
	o, e := sqrtPrefixOption(n)
	out = append(out, colEval{opt: o, err: e, seconds: time.Since(t0).Seconds()})
	if fam == catalog.Gaussian {
		t0 := time.Now()
		o, e, err := dualPrefixOption(ctx, n, longDualBase)
		if err != nil {
			return nil, err
		}
		out = append(out, colEval{opt: o, err: e, seconds: time.Since(t0).Seconds()})
	}
	blocks, err := pl.evalBlockPrefix(ctx, n, fam)
	if err != nil {
		return nil, err
	}
	return append(out, blocks...), nil
}
