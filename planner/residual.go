package planner

import (
	"context"
	"fmt"
	"math"
	"slices"
)

// The residual algebra over a family of column sets (ResidualPlanner,
// Xiao, He, Zhang, Kifer, NeurIPS 2023, in the E_T notation of
// marginals.go).
//
// Over columns of sizes n_j with N = Π n_j cells, E_T (T a set of columns)
// is the orthogonal projection ⊗_{j∈T}P1 ⊗_{j∉T}P0, P0 = J/n, P1 = I − P0;
// the E_T are mutually orthogonal and sum to I. A marginal-space strategy
// is a list of blocks, each reading only the marginal table m_S = M_S·x of
// its columns S (π_S = Π_{j∈S} n_j cells):
//
//   - a marginal block releases m_S itself: M_SᵀM_S = (N/π_S)·Σ_{T⊆S} E_T,
//     and every cell of the product domain lies in one row, so its column
//     norms are 1 (L1 and L2);
//   - a residual block releases (⊗_{j∈S} C_j)·m_S with C_j = n_j·I − J, the
//     table with every axis centred and scaled by n_j: its rows span
//     E_S's range only, its Gram is N·π_S·E_S (C_jᵀC_j = n_j²·P1), and
//     every column has L1 norm β_S = Π 2(n_j − 1) and squared L2 norm
//     π_S·r_S, r_S = Π (n_j − 1) = rank(E_S).
//
// Each block b gets its own noise of variance V_b (its share of ε or ρ,
// calibrated to its own norm; Laplace shares add up under basic
// composition, Gaussian ρ shares under zCDP composition), and the
// generalised least-squares estimate from all blocks has precision
//
//	Σ_b A_bᵀA_b/V_b = N·Σ_T λ̃_T·E_T,
//	λ̃_T = Σ_{marginal S⊇T} 1/(π_S·V_S) + π_T/V_T (residual block on T),
//
// so an answer w has variance Σ_T (w·E_T·wᵀ/N)/λ̃_T: every quantity is per
// column set, normalised by N, and nothing is ever formed over the product
// domain. The same algebra will combine a stored measurement with new ones
// (each is a block with its own V_b).
//
// For the optimisers a block's weight v_b is its share of the sensitivity
// (L1: Δ₁ = Σ v_b; L2: Δ₂² = Σ v_b²); at unit noise it adds v_b²·h_b to
// λ̃_T on the sets it covers, with h = 1/π_S for a marginal block (every
// T ⊆ S) and h = π_T/β_T² (L1) or 1/r_T (L2) for a residual block (T only).
// With objective Σ_T a_T/λ̃_T, residual blocks alone have closed-form
// optima: L2, v_T² ∝ √(a_T·r_T) — which meets the SVD bound for marginal
// workloads, ResidualPlanner's optimality — and L1, v_T ∝ (a_T·β_T²/π_T)^⅓.

// subsetFamily is a downward-closed family of column sets with the sizes
// of the E_T algebra on each.
type subsetFamily struct {
	sizes []int
	sets  []colSet // ∅ first, by size
	index map[colSet]int
	r     []float64 // rank of E_T: Π_{j∈T}(n_j − 1)
	pi    []float64 // cells of T's marginal: Π_{j∈T} n_j
	beta  []float64 // L1 column norm of T's residual block: Π_{j∈T} 2(n_j − 1)
	down  [][]int32 // indexes of the subsets of sets[i], itself included
}

// maxGeneratorColumns bounds a generating set: its 2^|S| subsets are listed.
const maxGeneratorColumns = 16

// newSubsetFamily is the family of all subsets of the generating sets.
func newSubsetFamily(sizes []int, gens []colSet) (*subsetFamily, error) {
	if len(sizes) > maxSetColumns {
		return nil, fmt.Errorf("planner: %d columns, at most %d in a marginal plan", len(sizes), maxSetColumns)
	}
	seen := map[colSet]bool{}
	for _, g := range gens {
		if g.len() > maxGeneratorColumns {
			return nil, fmt.Errorf("planner: a marginal over %d columns, at most %d", g.len(), maxGeneratorColumns)
		}
		for _, j := range g.cols() {
			if j >= len(sizes) {
				return nil, fmt.Errorf("planner: column %d of a marginal beyond the %d columns", j, len(sizes))
			}
		}
		if seen[g] {
			continue
		}
		g.eachSubset(func(t colSet) { seen[t] = true })
	}
	f := &subsetFamily{sizes: sizes, index: make(map[colSet]int, len(seen))}
	f.sets = make([]colSet, 0, len(seen))
	for s := range seen {
		f.sets = append(f.sets, s)
	}
	slices.SortFunc(f.sets, func(a, b colSet) int {
		if a == b {
			return 0
		}
		if a.less(b) {
			return -1
		}
		return 1
	})
	n := len(f.sets)
	f.r, f.pi, f.beta, f.down = make([]float64, n), make([]float64, n), make([]float64, n), make([][]int32, n)
	for i, s := range f.sets {
		f.index[s] = i
		f.r[i], f.pi[i], f.beta[i] = 1, 1, 1
		for _, j := range s.cols() {
			nj := float64(sizes[j])
			f.r[i] *= nj - 1
			f.pi[i] *= nj
			f.beta[i] *= 2 * (nj - 1)
		}
	}
	for i, s := range f.sets {
		d := make([]int32, 0, 1<<s.len())
		s.eachSubset(func(t colSet) { d = append(d, int32(f.index[t])) })
		f.down[i] = d
	}
	return f, nil
}

// blockVar is one block an optimiser may weight: a marginal or residual
// block on family set `set`, adding v²·h to λ̃ (see the algebra above).
type blockVar struct {
	set      int
	residual bool
	h        float64
}

func (f *subsetFamily) marginalVar(set int) blockVar {
	return blockVar{set: set, h: 1 / f.pi[set]}
}

func (f *subsetFamily) residualVar(set int, l2 bool) blockVar {
	h := f.pi[set] / (f.beta[set] * f.beta[set])
	if l2 {
		h = 1 / f.r[set]
	}
	return blockVar{set: set, residual: true, h: h}
}

// lambda is λ̃ at unit noise for block weights v (parallel to vars).
func (f *subsetFamily) lambda(vars []blockVar, v []float64) []float64 {
	lam := make([]float64, len(f.sets))
	for b, bv := range vars {
		if v[b] == 0 {
			continue
		}
		c := v[b] * v[b] * bv.h
		if bv.residual {
			lam[bv.set] += c
			continue
		}
		for _, t := range f.down[bv.set] {
			lam[t] += c
		}
	}
	return lam
}

// unit is Σ_T a_T/λ̃_T, +Inf when some a_T > 0 has λ̃_T = 0.
func unitError(coef, lam []float64) float64 {
	e := 0.0
	for t, a := range coef {
		if a == 0 {
			continue
		}
		if !(lam[t] > 0) {
			return math.Inf(1)
		}
		e += a / lam[t]
	}
	return e
}

// normalised scales weights to unit sensitivity (Σv = 1, or Σv² = 1).
func normalised(v []float64, l2 bool) []float64 {
	s := weightNorm(v, l2)
	if l2 {
		s = math.Sqrt(s)
	}
	out := make([]float64, len(v))
	if s > 0 {
		for i, x := range v {
			out[i] = x / s
		}
	}
	return out
}

// objective is Δ²·Σ_T a_T/λ̃_T: the error per unit noise variance at the
// weights' sensitivity, which is invariant to scaling all weights.
func (f *subsetFamily) objective(coef []float64, vars []blockVar, v []float64, l2 bool) float64 {
	d := weightNorm(v, l2)
	if !l2 {
		d *= d
	}
	return d * unitError(coef, f.lambda(vars, v))
}

// residualOptimum weights residual blocks on every set with a_T > 0 in
// closed form (see the algebra above), at unit sensitivity.
func (f *subsetFamily) residualOptimum(coef []float64, l2 bool) ([]blockVar, []float64) {
	var vars []blockVar
	var v []float64
	for t, a := range coef {
		if !(a > 0) {
			continue
		}
		bv := f.residualVar(t, l2)
		vars = append(vars, bv)
		if l2 {
			v = append(v, math.Sqrt(math.Sqrt(a*f.r[t]))) // v² ∝ √(a·r)
		} else {
			v = append(v, math.Cbrt(a*f.beta[t]*f.beta[t]/f.pi[t]))
		}
	}
	return vars, normalised(v, l2)
}

// optimiseWeights minimises Δ²·Σ_T a_T/λ̃_T over non-negative block weights
// by projected L-BFGS from each start (weights parallel to vars) within the
// given work, and returns the best at unit sensitivity (nil with an error
// only when ctx is done).
func (f *subsetFamily) optimiseWeights(ctx context.Context, coef []float64, vars []blockVar, starts [][]float64, l2 bool, work float64) ([]float64, error) {
	fg := func(v, grad []float64) float64 {
		d := weightNorm(v, l2) // Δ₁, or Δ₂²
		lam := f.lambda(vars, v)
		e := unitError(coef, lam)
		if math.IsInf(e, 1) || d == 0 {
			clear(grad)
			return math.Inf(1)
		}
		// q_T = a_T/λ̃_T²; ∂e/∂v_b = −2·v_b·h_b·Σ_{T covered} q_T.
		q := make([]float64, len(lam))
		for t, a := range coef {
			if a > 0 {
				q[t] = a / (lam[t] * lam[t])
			}
		}
		for b, bv := range vars {
			acc := q[bv.set]
			if !bv.residual {
				acc = 0
				for _, t := range f.down[bv.set] {
					acc += q[t]
				}
			}
			de := -2 * v[b] * bv.h * acc
			if l2 {
				grad[b] = 2*v[b]*e + d*de
			} else {
				grad[b] = 2*d*e + d*d*de
			}
		}
		if l2 {
			return d * e
		}
		return d * d * e
	}
	// One evaluation: λ̃ and the gradient each visit every block's covered
	// sets; the error and q visit every set.
	cover := 0
	for _, bv := range vars {
		if bv.residual {
			cover++
		} else {
			cover += len(f.down[bv.set])
		}
	}
	evalCost := float64(2*cover+3*len(f.sets)+4*len(vars)) + evalOverhead/4
	m := &meter{limit: work}
	var best []float64
	bestF := math.Inf(1)
	for _, s := range starts {
		if best != nil && m.done() {
			break
		}
		v := slices.Clone(s)
		fv, _, err := projLBFGS(ctx, fg, v, projOpts{maxIter: 2000, relTol: 1e-10, patience: 30, evalCost: evalCost, work: m})
		if err != nil {
			return nil, err
		}
		if fv < bestF {
			bestF, best = fv, v
		}
	}
	if best == nil {
		return nil, nil
	}
	return normalised(best, l2), nil
}

// mixedStarts are the variables of the Laplace mix of marginal blocks (on
// every set of f) and residual blocks (resVars), and four starts for
// optimiseWeights: the workload's marginals (on the sets ws), the
// closed-form residuals res, the marginals with a little on every set, and
// a fourth left zero for the caller.
func (f *subsetFamily) mixedStarts(ws []int, resVars []blockVar, res []float64) ([]blockVar, [][]float64) {
	var vars []blockVar
	for s := range f.sets {
		vars = append(vars, f.marginalVar(s))
	}
	nm := len(vars)
	vars = append(vars, resVars...)
	starts := make([][]float64, 4)
	for i := range starts {
		starts[i] = make([]float64, len(vars))
	}
	for _, s := range ws {
		starts[0][s] = 1
		starts[2][s] = 1
	}
	copy(starts[1][nm:], res)
	for s := range f.sets {
		starts[2][s] += 0.05
	}
	return vars, starts
}

// marginalVariances is, for each set S of a marginal workload, the
// variance of one cell of M_S·x̂ given λ̃: Σ_{T⊆S} (r_T/π_S²)/λ̃_T (the cell
// row w = e_c ⊗ 1 has w·E_T·wᵀ/N = r_T/π_S² for every cell c).
func (f *subsetFamily) marginalVariances(ws []int, lam []float64) []float64 {
	out := make([]float64, len(ws))
	for i, s := range ws {
		v := 0.0
		for _, t := range f.down[s] {
			if !(lam[t] > 0) {
				v = math.Inf(1)
				break
			}
			v += f.r[t] / lam[t]
		}
		out[i] = v / (f.pi[s] * f.pi[s])
	}
	return out
}

// marginalCoefficients is a_T for a weighted marginal workload (weight p_i
// on every cell of marginal ws[i]): Σ_{S⊇T} p_S·π_S·r_T/π_S², the
// workload's weighted Σ_w w·E_T·wᵀ/N.
func (f *subsetFamily) marginalCoefficients(ws []int, p []float64) []float64 {
	a := make([]float64, len(f.sets))
	for i, s := range ws {
		c := p[i] / f.pi[s]
		for _, t := range f.down[s] {
			a[t] += c * f.r[t]
		}
	}
	return a
}

// minimaxResiduals weights residual blocks to minimise the largest cell
// variance of a marginal workload (ResidualPlanner's max-variance
// objective). For weights p on the marginals (Σp = 1) the closed form
// minimises Σ_S p_S·v_S; by minimax duality (the problem is convex in 1/λ̃),
// max over p of that minimum is a lower bound on the optimum, and the best
// max_S v_S seen is an upper bound. Multiplicative updates p_S ∝ p_S·v_S
// close the gap, until it is below 10⁻⁴ or the work is spent; it returns
// the best weights and the certified gap (upper/lower − 1).
func (f *subsetFamily) minimaxResiduals(ctx context.Context, ws []int, l2 bool, work float64) ([]blockVar, []float64, float64, error) {
	p := make([]float64, len(ws))
	for i := range p {
		p[i] = 1 / float64(len(ws))
	}
	var bestVars []blockVar
	var bestV []float64
	upper, lower := math.Inf(1), 0.0
	pc := make([]float64, len(ws))
	// One iteration: the coefficients, λ̃ and the variances each visit the
	// subsets of every marginal; the closed form visits every set.
	cover := 0
	for _, s := range ws {
		cover += len(f.down[s])
	}
	m := &meter{limit: work}
	for it := 0; it < 500; it++ {
		if err := stopped(ctx); err != nil {
			return nil, nil, 0, err
		}
		m.spend(float64(3*cover + 6*len(f.sets)))
		for i, s := range ws {
			pc[i] = p[i] / f.pi[s] // p_S on the marginal's mean cell variance
		}
		vars, v := f.residualOptimum(f.marginalCoefficients(ws, pc), l2)
		// At unit sensitivity the noise variance is 1 per unit weight, so
		// the variances below are per unit noise variance at Δ = 1.
		vs := f.marginalVariances(ws, f.lambda(vars, v))
		mx, avg := 0.0, 0.0
		for i, x := range vs {
			mx = math.Max(mx, x)
			avg += p[i] * x
		}
		if mx < upper {
			upper, bestVars, bestV = mx, vars, v
		}
		lower = math.Max(lower, avg)
		if upper <= lower*(1+1e-4) || m.done() {
			break
		}
		sum := 0.0
		for i, x := range vs {
			p[i] *= math.Sqrt(x / mx)
			sum += p[i]
		}
		for i := range p {
			p[i] /= sum
		}
	}
	return bestVars, bestV, upper/lower - 1, nil
}

// weightNorm is Σ v (L1) or Σ v² (L2) over non-negative weights: a
// strategy's Δ₁, or its Δ₂².
func weightNorm(v []float64, l2 bool) float64 {
	s := 0.0
	for _, x := range v {
		if l2 {
			s += x * x
		} else {
			s += x
		}
	}
	return s
}
