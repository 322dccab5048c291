package planner

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/dpproxy/dpproxy/catalog"
)

// Marginal workloads.
//
// Over attributes of sizes n_1..n_d (N = Π n_i cells), the marginal on S,
// M_S = ⊗_{i∈S}I ⊗_{i∉S}1ᵀ, has M_SᵀM_S = (N/π_S)·Σ_{T⊆S} E_T (see
// residual.go for E_T, π_T, r_T). So a workload of marginals has Gram
// N·Σ_T μ̃_T·E_T with μ̃_T = Σ_{S⊇T} 1/π_S, its coefficient on E_T is
// a_T = r_T·μ̃_T (normalised by N), its singular values are √(N·μ̃_T) with
// multiplicity r_T, and the SVD bound on the error per unit noise variance
// at unit sensitivity is (Σ_T r_T·√(N·μ̃_T))²/N = (Σ_T √(a_T·r_T))², which
// residual blocks weighted in closed form meet for Gaussian noise. Every
// quantity lives on the downward closure of the workload's sets, so
// planning all 3-way marginals of 100 attributes touches 166,751 sets and
// never the 10¹⁰⁰ cells.

// MarginalWorkload is a set of marginals (each the ascending indexes of its
// attributes) over attributes of the given sizes.
type MarginalWorkload struct {
	Sizes []int
	Sets  [][]int
}

// AllMarginals is every k-way marginal over the attributes, in
// lexicographic order.
func AllMarginals(sizes []int, k int) MarginalWorkload {
	w := MarginalWorkload{Sizes: sizes}
	d := len(sizes)
	if k < 0 || k > d {
		return w
	}
	c := make([]int, k)
	for i := range c {
		c[i] = i
	}
	for {
		w.Sets = append(w.Sets, slices.Clone(c))
		i := k - 1
		for i >= 0 && c[i] == d-k+i {
			i--
		}
		if i < 0 {
			return w
		}
		c[i]++
		for j := i + 1; j < k; j++ {
			c[j] = c[j-1] + 1
		}
	}
}

// maxAllSubsets is the largest number of attributes for which marginal
// blocks are considered on every subset, not only on the workload's.
const maxAllSubsets = 10

// ChooseMarginals plans a marginal workload with every candidate computed
// in the residual algebra: the identity (every cell), the workload's own
// marginals with equal shares, residual blocks weighted in closed form
// (Gaussian: at the SVD bound), for Laplace an optimised mix of marginal
// and residual blocks (OPT_M's objective, projected L-BFGS within
// marginalsWork), and residual blocks weighted for the largest cell
// variance (a certified minimax, within marginalsWork). Errors are exact
// at opt's ε or ρ (each block's discrete noise); Unit is the error per unit
// noise variance at unit sensitivity, comparable with the SVD bound. A
// cancelled ctx stops it with an error wrapping ctx.Err().
func (pl *Planner) ChooseMarginals(ctx context.Context, w MarginalWorkload, opt Options) (*GramPlan, error) {
	if err := opt.validate(); err != nil {
		return nil, err
	}
	if err := stopped(ctx); err != nil {
		return nil, err
	}
	start := time.Now()
	f, gens, err := w.family()
	if err != nil {
		return nil, err
	}
	ws := make([]int, len(gens))
	ones := make([]float64, len(gens))
	for i, g := range gens {
		ws[i], ones[i] = f.index[g], 1
	}
	coef := f.marginalCoefficients(ws, ones)
	svd := 0.0
	for t, a := range coef {
		svd += math.Sqrt(a * f.r[t])
	}
	gauss := opt.Noise == catalog.Gaussian
	plan := &GramPlan{Options: opt, SVDBound: svd * svd}
	add := func(name string, vars []blockVar, v []float64, gap float64, t0 time.Time) {
		blocks, err := f.calibrateBlocks(vars, v, opt)
		if err != nil {
			return
		}
		lam := f.blockLambda(blocks)
		total := unitError(coef, lam)
		if math.IsInf(total, 0) || math.IsNaN(total) {
			return
		}
		plan.Candidates = append(plan.Candidates, Candidate{Name: name, Sensitivity: 1, TotalSquaredError: total,
			Unit: f.objective(coef, vars, v, gauss), Objective: total, MaxVariance: slices.Max(f.marginalVariances(ws, lam)),
			Gap: gap, Seconds: time.Since(t0).Seconds()})
	}

	// Identity: one draw per cell, λ̃_T = 1/(N·V) on every T.
	t0 := time.Now()
	cells := 1.0
	for _, n := range w.Sizes {
		cells *= float64(n)
	}
	if !math.IsInf(cells, 0) {
		_, _, v := calibrate(opt, 1)
		sum, worst := 0.0, 0.0
		for _, a := range coef {
			sum += a
		}
		for _, s := range ws {
			worst = math.Max(worst, cells/f.pi[s])
		}
		plan.Candidates = append(plan.Candidates, Candidate{Name: "identity", Sensitivity: 1, TotalSquaredError: v * cells * sum,
			Unit: cells * sum, Objective: v * cells * sum, MaxVariance: v * worst, Seconds: time.Since(t0).Seconds()})
	}

	// The workload's marginals, equal shares.
	t0 = time.Now()
	eqVars := make([]blockVar, len(ws))
	eq := make([]float64, len(ws))
	for i, s := range ws {
		eqVars[i], eq[i] = f.marginalVar(s), 1
	}
	eq = normalised(eq, gauss)
	add("marginals", eqVars, eq, 0, t0)

	// Residual blocks in closed form.
	t0 = time.Now()
	resVars, res := f.residualOptimum(coef, gauss)
	add("residuals", resVars, res, 0, t0)

	// Laplace: marginal and residual blocks together, optimised.
	if !gauss {
		t0 = time.Now()
		vars, starts := f.mixedStarts(ws, resVars, res)
		for s := range f.sets {
			starts[3][s] = 1 / (1 + float64(f.sets[s].len()))
		}
		v, err := f.optimiseWeights(ctx, coef, vars, starts, false, marginalsWork)
		if err != nil {
			return nil, err
		}
		if v != nil {
			add("opt-marginals", vars, v, 0, t0)
		}
	}

	// Residual blocks weighted for the largest cell variance.
	t0 = time.Now()
	mmVars, mm, gap, err := f.minimaxResiduals(ctx, ws, gauss, marginalsWork)
	if err != nil {
		return nil, err
	}
	add("residuals-maxvar", mmVars, mm, gap, t0)

	slices.SortStableFunc(plan.Candidates, func(x, y Candidate) int {
		return cmp.Compare(x.TotalSquaredError, y.TotalSquaredError)
	})
	plan.Seconds = time.Since(start).Seconds()
	return plan, nil
}

// family checks w and returns the subset family its blocks range over
// (the downward closure of its sets, and of all the attributes when there
// are at most maxAllSubsets), with the sets themselves.
func (w MarginalWorkload) family() (*subsetFamily, []colSet, error) {
	d := len(w.Sizes)
	if d == 0 || d > maxSetColumns || len(w.Sets) == 0 {
		return nil, nil, fmt.Errorf("planner: marginal workloads need 1..%d attributes and at least one marginal", maxSetColumns)
	}
	for _, n := range w.Sizes {
		if n < 1 {
			return nil, nil, fmt.Errorf("planner: attribute size %d", n)
		}
	}
	gens := make([]colSet, len(w.Sets))
	for i, s := range w.Sets {
		for _, j := range s {
			if j < 0 || j >= d {
				return nil, nil, fmt.Errorf("planner: marginal %v names attribute %d of %d", s, j, d)
			}
		}
		gens[i] = setOf(s...)
	}
	all := gens
	if d <= maxAllSubsets {
		var every colSet
		for j := 0; j < d; j++ {
			every = every.with(j)
		}
		all = append(slices.Clone(gens), every)
	}
	f, err := newSubsetFamily(w.Sizes, all)
	if err != nil {
		return nil, nil, err
	}
	return f, gens, nil
}
