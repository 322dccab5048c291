package planner

import (
	"context"
	"math"
	"slices"

	"github.com/dpproxy/dpproxy/catalog"
)

// Unions of marginal and residual blocks for compiled workloads.
//
// When a batch's queries touch different column sets (a dashboard's
// GROUP BY sex, GROUP BY education, GROUP BY race, sex), the planner also
// tries strategies made of blocks over those sets (residual.go): each
// query's answers are linear in the marginal of x on its support, whose
// E_T components (T ⊆ support) the blocks measure. The workload enters only
// through a_T = Σ_w w·E_T·wᵀ/N, computed per T with the Kronecker forms
// of the projections (P0/n or P1/n per column, kronErrors), and each
// answer's variance is Σ_T (w·E_T·wᵀ/N)/λ̃_T by the same forms. Nothing is
// formed over the product domain, so wide tables (dozens of columns, each
// query touching a few) plan and measure in time and memory that follow
// the marginals.

// marginalForms holds what one E_T contributes to every answer's variance.
type marginalForms struct {
	t      int            // the set T (family index)
	lambda float64        // λ̃_T of the chosen blocks (noise included)
	forms  [][]*pairForms // per query, per aggregate: w·E_T·wᵀ/N
	diags  [][]float64    // per column: diag of P0/n or P1/n
}

// querySupport is the set of columns query q depends on: its group
// columns and every column where some term's factor is not all ones.
func (s *space) querySupport(q int) colSet {
	var m colSet
	for j := range s.cols {
		if s.grouped[q][j] {
			m = m.with(j)
		}
	}
	for a := range s.w.Queries[q].Aggregates {
		for _, ti := range s.idx[q][a] {
			for j, x := range ti {
				if s.cols[j].vecs[x] != nil {
					m = m.with(j)
				}
			}
		}
	}
	return m
}

// supports returns the maximal column sets the workload's queries touch: a
// union of blocks on their subsets answers every query. Nil when one set
// covers every query (a marginal strategy is then a Kronecker one), or when
// some support is too wide to list its subsets.
func (s *space) supports() []colSet {
	d := len(s.cols)
	if d < 2 || d > maxSetColumns {
		return nil
	}
	var sets []colSet
	for q, qu := range s.w.Queries {
		if !qu.Measured() {
			continue // answered exactly from the domain: nothing to support
		}
		m := s.querySupport(q)
		if m.len() > maxGeneratorColumns {
			return nil
		}
		if !slices.Contains(sets, m) {
			sets = append(sets, m)
		}
	}
	var maximal []colSet
	for _, a := range sets {
		covered := false
		for _, b := range sets {
			if a != b && a.subsetOf(b) {
				covered = true
				break
			}
		}
		if !covered {
			maximal = append(maximal, a)
		}
	}
	if len(maximal) < 2 {
		return nil
	}
	slices.SortFunc(maximal, func(a, b colSet) int {
		if a.less(b) {
			return -1
		}
		if b.less(a) {
			return 1
		}
		return 0
	})
	return maximal
}

// projectionOption is P0/n = J/n² (upper false) or P1/n = (I − J/n)/n as a
// column "form": evaluated with the bilinear and diagonal machinery of
// Kronecker plans over every column, the product is w·E_T·wᵀ/N.
func projectionOption(n int, upper bool) *colOpt {
	fn := float64(n)
	d := make([]float64, n)
	for i := range d {
		d[i] = 1 / (fn * fn)
		if upper {
			d[i] = (1 - 1/fn) / fn
		}
	}
	name := "P0"
	if upper {
		name = "P1"
	}
	return &colOpt{name: name, n: n, diag: d,
		mul: func(dst, v []float64) {
			mean := 0.0
			for _, x := range v {
				mean += x
			}
			mean /= fn
			for i := range dst {
				if upper {
					dst[i] = (v[i] - mean) / fn
				} else {
					dst[i] = mean / fn
				}
			}
		}}
}

// marginalSpace is the residual algebra of one workload.
type marginalSpace struct {
	f        *subsetFamily
	supports []int     // family indexes of the maximal supports
	coef     []float64 // a_T, unweighted (what is reported)
	wcoef    []float64 // a_T with answerWeights' weights (what is minimised)
	choice   [][]int   // per family set with a_T > 0: E_T's column options
}

// newMarginalSpace builds the algebra over the closure of the supports
// (over every subset of the columns when there are at most maxAllSubsets
// and their product fits in maxCells, so marginal blocks may also span
// several supports). Nil when the workload has fewer than two supports.
func (s *space) newMarginalSpace(maxCells float64) *marginalSpace {
	sups := s.supports()
	if sups == nil {
		return nil
	}
	gens := sups
	if d := len(s.cols); d <= maxAllSubsets && productCells(s.w.Sizes()) <= maxCells {
		var every colSet
		for j := 0; j < d; j++ {
			every = every.with(j)
		}
		gens = append(slices.Clone(sups), every)
	}
	f, err := newSubsetFamily(s.w.Sizes(), gens)
	if err != nil {
		return nil
	}
	ms := &marginalSpace{f: f, coef: make([]float64, len(f.sets)), wcoef: make([]float64, len(f.sets)),
		choice: make([][]int, len(f.sets))}
	for _, g := range sups {
		ms.supports = append(ms.supports, f.index[g])
	}
	d := len(s.cols)
	p0, p1 := make([]int, d), make([]int, d)
	for j, cs := range s.cols {
		p0[j] = s.addOption(j, projectionOption(cs.n, false))
		p1[j] = s.addOption(j, projectionOption(cs.n, true))
	}
	for t, set := range f.sets {
		inside := false
		for _, g := range sups {
			inside = inside || set.subsetOf(g)
		}
		if !inside || f.r[t] == 0 {
			continue // a column not in any support contributes 1ᵀP1·1 = 0
		}
		c := make([]int, d)
		for j := range c {
			c[j] = p0[j]
			if set.has(j) {
				c[j] = p1[j]
			}
		}
		_, unit, weighted := s.kronErrors(c, catalog.Laplace)
		if unit <= 0 {
			continue
		}
		ms.coef[t], ms.wcoef[t], ms.choice[t] = unit, math.Max(weighted, 0), c
	}
	return ms
}

// marginalCandidate is one blocks strategy with its exact errors.
type marginalCandidate struct {
	name      string
	blocks    []MarginalBlock
	lambda    []float64 // λ̃ of the calibrated blocks
	unit      float64   // Δ²·Σ_T a_T/λ̃_T at unit noise (Candidate.Unit)
	total     float64   // Σ_T a_T/λ̃_T: the expected total squared error
	objective float64   // the same with the weighted coefficients
	tables    [][]int   // maximal column sets the blocks read
	cells     float64   // cells of those tables
}

// marginalCandidates plans blocks for the workload: marginal blocks on the
// supports with equal shares, residual blocks in closed form for the
// planning objective, and (Laplace) marginal and residual blocks
// optimised together within weightsWork. Every candidate's blocks are
// calibrated at opt and its errors are exact. It fails only when ctx is
// done.
func (s *space) marginalCandidates(ctx context.Context, opt Options, maxCells float64) (*marginalSpace, []marginalCandidate, error) {
	ms := s.newMarginalSpace(maxCells)
	if ms == nil {
		return nil, nil, nil
	}
	f := ms.f
	gauss := opt.Noise == catalog.Gaussian
	names := make([]string, len(s.w.Columns))
	for j, c := range s.w.Columns {
		names[j] = c.Name
	}
	var out []marginalCandidate
	build := func(prefix string, vars []blockVar, v []float64, shares bool) {
		vars, v = ms.prune(vars, v, gauss)
		blocks, err := f.calibrateBlocks(vars, v, opt)
		if err != nil {
			return
		}
		c := marginalCandidate{blocks: blocks, lambda: f.blockLambda(blocks)}
		c.total, c.objective = unitError(ms.coef, c.lambda), unitError(ms.wcoef, c.lambda)
		if math.IsInf(c.total, 0) || math.IsNaN(c.total) || math.IsInf(c.objective, 0) || math.IsNaN(c.objective) {
			return
		}
		c.tables, c.cells = blockTables(f, blocks)
		c.unit = f.objective(ms.coef, vars, v, gauss)
		show := v
		if gauss {
			show = make([]float64, len(v))
			for i, x := range v {
				show[i] = x * x // the share of ρ
			}
		}
		c.name = prefix + "(" + f.blocksName(names, vars, show, shares) + ")"
		out = append(out, c)
	}
	eqVars := make([]blockVar, len(ms.supports))
	eq := make([]float64, len(ms.supports))
	for i, t := range ms.supports {
		eqVars[i], eq[i] = f.marginalVar(t), 1
	}
	build("marginals", eqVars, normalised(eq, gauss), false)
	resVars, res := f.residualOptimum(ms.wcoef, gauss)
	build("residuals", resVars, res, true)
	if !gauss {
		vars, starts := f.mixedStarts(ms.supports, resVars, res)
		// Every query's own support, as if each were measured alone.
		for q := range s.w.Queries {
			starts[3][f.index[s.querySupport(q)]] = 1
		}
		v, err := f.optimiseWeights(ctx, ms.wcoef, vars, starts, false, weightsWork)
		if err != nil {
			return nil, nil, err
		}
		if v != nil {
			build("opt-marginals", vars, v, true)
		}
	}
	return ms, out, nil
}

// prune drops blocks whose share is negligible (the optimiser leaves tiny
// weights on blocks it does not need, and every block is a table to count
// and draws to make): the largest threshold, among 10⁻², 10⁻³, 10⁻⁴ of the
// largest weight, whose renormalised objective is within 0.1% of the
// unpruned one.
func (ms *marginalSpace) prune(vars []blockVar, v []float64, l2 bool) ([]blockVar, []float64) {
	base := ms.f.objective(ms.wcoef, vars, v, l2)
	top := slices.Max(v)
	for _, th := range []float64{1e-2, 1e-3, 1e-4} {
		var pv []blockVar
		var pw []float64
		for b, x := range v {
			if x > th*top {
				pv, pw = append(pv, vars[b]), append(pw, x)
			}
		}
		pw = normalised(pw, l2)
		if ms.f.objective(ms.wcoef, pv, pw, l2) <= base*(1+1e-3) {
			return pv, pw
		}
	}
	var pv []blockVar
	var pw []float64
	for b, x := range v {
		if x > 0 {
			pv, pw = append(pv, vars[b]), append(pw, x)
		}
	}
	return pv, normalised(pw, l2)
}

// blockTables lists the maximal column sets among the blocks (each block's
// table is summed from one of them) and their cells.
func blockTables(f *subsetFamily, blocks []MarginalBlock) ([][]int, float64) {
	var sets []colSet
	for _, b := range blocks {
		s := f.sets[b.set]
		if !slices.Contains(sets, s) {
			sets = append(sets, s)
		}
	}
	var tables [][]int
	cells := 0.0
	for _, a := range sets {
		covered := false
		for _, b := range sets {
			if a != b && a.subsetOf(b) {
				covered = true
				break
			}
		}
		if !covered {
			tables = append(tables, a.cols())
			cells += f.pi[f.index[a]]
		}
	}
	slices.SortFunc(tables, slices.Compare)
	return tables, cells
}

// marginalPlanForms prepares the per-answer variance forms of a chosen
// candidate: one set of pair forms per E_T that any answer has a
// component on.
func (s *space) marginalPlanForms(ms *marginalSpace, c marginalCandidate) []marginalForms {
	var out []marginalForms
	for t, lam := range c.lambda {
		if lam <= 0 || ms.coef[t] == 0 {
			continue
		}
		mf := marginalForms{t: t, lambda: lam, forms: s.pairForms(ms.choice[t])}
		for j, o := range ms.choice[t] {
			mf.diags = append(mf.diags, s.cols[j].options[o].diag)
		}
		out = append(out, mf)
	}
	return out
}
