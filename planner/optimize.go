package planner

import (
	"context"
	"errors"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"
)

// Optimised per-column strategies.

// laplaceConfig is one starting point for the p-Identity optimiser: rows at
// several levels, level ℓ having tents of spacing spacings[ℓ] cells,
// half-width 1.5 spacings, initial height heights[ℓ], each row free on a
// window of ±window spacings around its centre (dense rows when
// window = 0, which suits workloads without locality).
type laplaceConfig struct {
	spacings []float64
	heights  []float64
	window   float64
}

// laplaceConfigs lists the starts tried for a column of n cells, best first.
// Range-like workloads have optimal p-Identity rows that are overlapping
// local bumps plus a coarser level (measured: from these starts the
// optimiser passes HDMM's OPT_0 figures for all ranges and prefixes at 256,
// 1024 and 4096 cells within tens of evaluations).
func laplaceConfigs(n int) []laplaceConfig {
	switch {
	case n < 4:
		return nil
	case n <= 16:
		return []laplaceConfig{{spacings: []float64{math.Max(2, float64(n)/4)}, heights: []float64{0.9}}}
	case n <= 64:
		return []laplaceConfig{
			{spacings: []float64{4, 16}, heights: []float64{0.9, 0.3}, window: 3},
			{spacings: []float64{8}, heights: []float64{0.9}},
		}
	case n <= 512:
		return []laplaceConfig{
			{spacings: []float64{16, 128}, heights: []float64{0.9, 0.3}, window: 3},
			{spacings: []float64{16, 64, 256}, heights: []float64{0.9, 0.3, 0.1}, window: 3},
		}
	}
	if n <= 2048 {
		return []laplaceConfig{
			{spacings: []float64{16, 256}, heights: []float64{0.9, 0.3}, window: 3},
			{spacings: []float64{16, 128, 1024}, heights: []float64{0.9, 0.3, 0.1}, window: 3},
		}
	}
	return []laplaceConfig{
		{spacings: []float64{16, 128, 1024}, heights: []float64{0.9, 0.3, 0.1}, window: 3},
		{spacings: []float64{16, 256}, heights: []float64{0.9, 0.3}, window: 3},
	}
}

// start builds the row supports and the initial Θ of a configuration.
func (c laplaceConfig) start(n int) (lo, hi []int, dense []float64, p int) {
	type row struct {
		lo, hi    int
		c, s, hgt float64
	}
	var rows []row
	for li, sp := range c.spacings {
		m := int(math.Ceil(float64(n) / sp))
		if li > 0 && m < 2 && len(c.spacings) > 1 && sp > float64(n) {
			m = 1
		}
		s := float64(n) / float64(m)
		for j := 0; j < m; j++ {
			ctr := (float64(j) + 0.5) * s
			r := row{lo: 0, hi: n, c: ctr, s: s, hgt: c.heights[li]}
			if c.window > 0 {
				r.lo = max(0, int(math.Floor(ctr-c.window*s)))
				r.hi = min(n, int(math.Ceil(ctr+c.window*s)))
			}
			rows = append(rows, r)
		}
	}
	p = len(rows)
	dense = make([]float64, p*n)
	for k, r := range rows {
		lo = append(lo, r.lo)
		hi = append(hi, r.hi)
		for i := r.lo; i < r.hi; i++ {
			d := math.Abs(float64(i)+0.5-r.c) / (1.5 * r.s)
			v := 0.01 * r.hgt // a floor so every entry can move
			if d < 1 {
				v += r.hgt * (1 - d)
			}
			dense[k*n+i] = v
		}
	}
	return lo, hi, dense, p
}

// laplaceOpt is an optimised p-Identity for one column.
type laplaceOpt struct {
	strategy *ColumnStrategy
	// Real is trace(G(AᵀA)⁻¹) of the real-valued optimum (Δ₁ = 1); the
	// rounded strategy's own error is computed from its Gram.
	Real float64
	// Evals counts objective evaluations.
	Evals int
	// Work is the estimated work spent (see meter).
	Work float64
}

// thetaMax bounds the p-Identity weights. The optimum sometimes routes
// long-range structure through "hub" cells with weights in the tens; far
// larger weights only buy cancellation error in the Woodbury objective.
const thetaMax = 1000

// laplaceStart is one run of the optimiser: supports and initial Θ.
type laplaceStart struct {
	lo, hi []int
	dense  []float64
	p      int
}

// laplaceStarts lists the runs for a column of n cells, most promising
// first: multi-level tents for long columns (range-like workloads have
// optimal rows that are overlapping local bumps plus a coarser level), and
// dense rows from deterministic pseudo-random starts for short ones, where
// a run costs milliseconds and restarts find better local optima.
func laplaceStarts(n int) []laplaceStart {
	var out []laplaceStart
	if n < 4 {
		return nil
	}
	if n <= 64 {
		ps := []int{4, 2, 3, 6, 8}
		for seed := uint64(1); seed <= 4; seed++ {
			for _, p := range ps {
				if p >= n {
					continue
				}
				out = append(out, laplaceStart{dense: randomInit(n, p, seed*7919+uint64(p)), p: p})
			}
		}
		return out
	}
	for _, c := range laplaceConfigs(n) {
		lo, hi, dense, p := c.start(n)
		out = append(out, laplaceStart{lo: lo, hi: hi, dense: dense, p: p})
	}
	return out
}

// optimizeLaplace searches p-Identity strategies for Gram g within the
// given work (see columnWork) and returns the best, rounded to the grid. It
// returns nil when the column is too small to benefit.
func optimizeLaplace(ctx context.Context, g Gram, work float64) (*laplaceOpt, error) {
	n := g.N()
	starts := laplaceStarts(n)
	if len(starts) == 0 {
		return nil, nil
	}
	var best *pIdentity
	var bestTheta []float64
	bestF := math.Inf(1)
	evals := 0
	// Short columns run every start (a few milliseconds each) to its
	// tolerance, within a cap.
	if n <= smallColumn {
		work += smallColumnExtra
	}
	m := &meter{limit: work}
	for si, st := range starts {
		if si > 0 && m.done() {
			break
		}
		// With few (long) runs the first gets two thirds of the work.
		run := m
		if si == 0 && len(starts) == 2 {
			run = &meter{limit: work * 2 / 3}
		}
		o := newPIdentity(g, st.p, st.lo, st.hi)
		th := o.pack(st.dense)
		f, ev, err := projLBFGS(ctx, func(x, gr []float64) float64 { return o.eval(x, gr) }, th,
			projOpts{maxIter: 5000, relTol: 1e-7, patience: 25, upper: thetaMax, evalCost: o.evalCost(), work: run})
		if err != nil {
			return nil, err
		}
		if run != m {
			m.spend(run.used)
		}
		evals += ev
		if f < bestF && f > 0 {
			bestF, best, bestTheta = f, o, th
		}
	}
	if best == nil {
		return nil, nil
	}
	cs, err := buildPIdentity("opt-laplace", best, bestTheta)
	if err != nil {
		return nil, err
	}
	return &laplaceOpt{strategy: cs, Real: bestF, Evals: evals, Work: m.used}, nil
}

// gaussOpt is the certified Gaussian optimum for one column.
type gaussOpt struct {
	strategy *ColumnStrategy
	cert     GaussCertificate
	work     float64 // estimated work spent
}

// optimizeGauss solves the Gaussian problem for g to a certified relative
// gap of 1e-4 (or until the work is spent) and rounds the optimum to the
// grid.
// The returned certificate's Primal is the rounded strategy's own error
// Δ₂(B)²·trace(G(BᵀB)⁻¹), and Gap is measured against the dual bound.
func optimizeGauss(ctx context.Context, g Gram, work float64) (*gaussOpt, error) {
	m := &meter{limit: work}
	sol, cert, err := solveGauss(ctx, g, 1e-4, m)
	if err != nil {
		return nil, err
	}
	var cs *ColumnStrategy
	if sol.c != nil {
		cs, err = buildStacked("opt-gauss", sol.c, sol.u)
	} else {
		cs, err = buildGauss("opt-gauss", sol.x)
	}
	if err != nil {
		return nil, err
	}
	var tr float64
	if cs.Gram != nil {
		tr = traceProduct(g, cs.Gram)
	} else {
		tr = traceFactor(g, cs.gramFactor)
	}
	primal := cs.L2 * cs.L2 * tr
	cert.Primal = primal
	cert.Gap = primal/cert.Dual - 1
	return &gaussOpt{strategy: cs, cert: cert, work: m.used}, nil
}

// gaussSolution is a near-optimal X: either dense and positive definite
// (x), or singular and given by a factor c (k×n, X₀ = cᵀc, over the cells
// with u > 0) to be padded with the identity (see buildStacked).
type gaussSolution struct {
	x *mat.SymDense
	c *mat.Dense
	u []float64
}

// solveGauss returns a feasible X (diag(X) ≤ 1, positive definite) close
// to the optimum and a certificate whose Dual is a valid lower bound. It
// picks the cheapest exact method for g's structure: the O(n)-per-node
// quadrature for Grams with tridiagonal inverses, the r-dimensional fixed
// point for a pure low-rank compiled column, a dense eigendecomposition per
// iteration for other short columns, and the Woodbury quadrature otherwise.
// It stops when the gap is below tol or the work m is spent.
func solveGauss(ctx context.Context, g Gram, tol float64, m *meter) (gaussSolution, GaussCertificate, error) {
	inner := g
	if s, ok := g.(scaledGram); ok {
		inner = s.g
	}
	switch gg := inner.(type) {
	case tridiagInverse:
		u, t, cert, err := solveGaussDual(ctx, g, tol, m)
		if err != nil {
			return gaussSolution{}, cert, err
		}
		x, err := denseX(t, u)
		return gaussSolution{x: x, u: u}, cert, err
	case *LowRankGram:
		if gg.D == nil {
			return solveGaussLowRank(ctx, gg, tol, m)
		}
	}
	if g.N() <= maxDenseGauss {
		return solveGaussDense(ctx, DenseOf(g), tol, m)
	}
	u, t, cert, err := solveGaussDual(ctx, g, tol, m)
	if err != nil {
		return gaussSolution{}, cert, err
	}
	x, err := denseX(t, u)
	return gaussSolution{x: x, u: u}, cert, err
}

// maxDenseGauss bounds the column size for the dense-eigendecomposition
// Gaussian solver.
const maxDenseGauss = 256

// gaussPad is the share of each column's squared norm given to an identity
// row when the optimum X₀ is singular (a workload that does not touch every
// direction): A = [√(1−τ)·C; √τ·I] has AᵀA = (1−τ)X₀ + τI, answers every
// cell, and costs a factor of at most 1/(1−τ) in error. The identity rows
// keep the null directions at τ exactly after rounding, where rounding a
// Cholesky factor of (1−τ)X₀ + τI would perturb them by O(1/K) ≈ τ.
const gaussPad = 1e-3

// certify computes the scaled dual bound and the primal of X(u)/max diag
// from d = diag((U^{1/2}GU^{1/2})^{1/2}) (only cells with u > 0 count).
func certify(u, d []float64) (primal, dual, gap float64) {
	sd, su, mx := 0.0, 0.0, 0.0
	for i := range u {
		if u[i] <= 0 {
			continue
		}
		sd += d[i]
		su += u[i]
		mx = math.Max(mx, d[i]/u[i])
	}
	primal = mx * sd
	dual = sd * sd / su
	return primal, dual, primal/dual - 1
}

// fixedPoint keeps the best certified iterate of the dual fixed point
// u ← d (renormalised) that the Gaussian solvers run.
type fixedPoint struct {
	best  GaussCertificate
	bestU []float64
}

func newFixedPoint(u []float64) *fixedPoint {
	return &fixedPoint{best: GaussCertificate{Primal: math.Inf(1), Gap: math.Inf(1)}, bestU: slices.Clone(u)}
}

// observe certifies iterate u (d as in certify), keeps it if its gap is
// the smallest so far, and returns the gap.
func (fp *fixedPoint) observe(u, d []float64, it int) float64 {
	primal, dual, gap := certify(u, d)
	fp.record(primal, dual, gap, u, it)
	return gap
}

// record keeps iterate u, certified as primal, dual and gap, if its gap is
// the smallest so far.
func (fp *fixedPoint) record(primal, dual, gap float64, u []float64, it int) {
	if gap < fp.best.Gap {
		fp.best = GaussCertificate{Primal: primal, Dual: dual, Gap: gap, Iterations: it + 1}
		copy(fp.bestU, u)
	}
}

// stepTo moves u to d rescaled to Σu = len(u): the objective is
// scale-free in u.
func stepTo(u, d []float64) {
	s := 0.0
	for _, x := range d {
		s += x
	}
	f := float64(len(u)) / s
	for i := range u {
		u[i] = d[i] * f
	}
}

// solveGaussLowRank handles G = V·Vᵀ (rank r): with B = U^{1/2}V and
// M = BᵀB = VᵀUV, (U^{1/2}GU^{1/2})^{1/2} = B·M^{-1/2}·Bᵀ, so each fixed
// point step costs O(n·r² + r³), and X(u) = V·M^{-1/2}·Vᵀ. Cells the
// workload never touches (G_ii = 0) get u_i = 0 and X_ii = 1 after padding.
func solveGaussLowRank(ctx context.Context, g *LowRankGram, tol float64, work *meter) (gaussSolution, GaussCertificate, error) {
	inv, err := lowRankFactor(g)
	if err != nil {
		return gaussSolution{}, GaussCertificate{}, err
	}
	v := inv
	n, r := v.Dims()
	u := g.Diag()
	for i := range u {
		u[i] = math.Sqrt(math.Max(u[i], 0))
	}
	d := make([]float64, n)
	fp := newFixedPoint(u)
	m := mat.NewSymDense(r, nil)
	var es mat.EigenSym
	var q mat.Dense
	var mis mat.Dense // M^{-1/2}
	vm := mat.NewDense(n, r, nil)
	var half *mat.Dense // Q·Σ^{-1/4}: M^{-1/2} = half·halfᵀ
	minvHalf := func(u []float64) bool {
		for a := 0; a < r; a++ {
			for b := a; b < r; b++ {
				s := 0.0
				for i := 0; i < n; i++ {
					s += v.At(i, a) * u[i] * v.At(i, b)
				}
				m.SetSym(a, b, s)
			}
		}
		if !es.Factorize(m, true) {
			return false
		}
		vals := es.Values(nil)
		es.VectorsTo(&q)
		top := 0.0
		for _, x := range vals {
			top = math.Max(top, x)
		}
		scaled := mat.NewDense(r, r, nil)
		for k, x := range vals {
			if x <= 1e-13*top {
				continue
			}
			for a := 0; a < r; a++ {
				scaled.Set(a, k, q.At(a, k)/math.Sqrt(math.Sqrt(x)))
			}
		}
		mis.Mul(scaled, scaled.T())
		half = scaled
		return true
	}
	// One step: M (n·r²/2), its eigendecomposition (≈ 10r³), V·M^{-1/2}
	// (n·r²) and d (n·r).
	fn, fr := float64(n), float64(r)
	stepCost := 1.5*fn*fr*fr + 10*fr*fr*fr + fn*fr
	for it := 0; it < 5000; it++ {
		if err := stopped(ctx); err != nil {
			return gaussSolution{}, fp.best, err
		}
		work.spend(stepCost)
		if !minvHalf(u) {
			return gaussSolution{}, fp.best, errors.New("planner: Gaussian low-rank step failed")
		}
		// d_i = u_i·(V M^{-1/2} Vᵀ)_ii.
		vm.Mul(v, &mis)
		for i := 0; i < n; i++ {
			x := 0.0
			for a := 0; a < r; a++ {
				x += vm.At(i, a) * v.At(i, a)
			}
			d[i] = u[i] * x
		}
		if gap := fp.observe(u, d, it); gap <= tol || work.done() {
			break
		}
		stepTo(u, d)
	}
	if !minvHalf(fp.bestU) {
		return gaussSolution{}, fp.best, errors.New("planner: Gaussian low-rank step failed")
	}
	// X₀ = V·M^{-1/2}·Vᵀ = cᵀc with c = halfᵀ·Vᵀ.
	var c mat.Dense
	c.Mul(half.T(), v.T())
	return gaussSolution{c: &c, u: fp.bestU}, fp.best, nil
}

// solveGaussDense runs the fixed point with a dense eigendecomposition of
// S = U^{1/2}GU^{1/2} per step: d_i = Σ_k Q_ik²√λ_k, and at the end
// X = U^{-1/2}QΛ^{1/2}QᵀU^{-1/2} (padded if singular). O(n³) per step.
func solveGaussDense(ctx context.Context, g *mat.SymDense, tol float64, work *meter) (gaussSolution, GaussCertificate, error) {
	n := g.SymmetricDim()
	u := make([]float64, n)
	for i := range u {
		u[i] = math.Sqrt(math.Max(g.At(i, i), 0))
	}
	d := make([]float64, n)
	fp := newFixedPoint(u)
	s := mat.NewSymDense(n, nil)
	var es mat.EigenSym
	var q mat.Dense
	var vals []float64
	step := func(u []float64) bool {
		for i := 0; i < n; i++ {
			for j := i; j < n; j++ {
				s.SetSym(i, j, math.Sqrt(u[i]*u[j])*g.At(i, j))
			}
		}
		if !es.Factorize(s, true) {
			return false
		}
		vals = es.Values(vals)
		es.VectorsTo(&q)
		for i := 0; i < n; i++ {
			x := 0.0
			for k, l := range vals {
				if l > 0 {
					qi := q.At(i, k)
					x += qi * qi * math.Sqrt(l)
				}
			}
			d[i] = x
		}
		return true
	}
	// One step: S (n²), its eigendecomposition with vectors (≈ 9n³) and d (n²).
	fn := float64(n)
	stepCost := 9*fn*fn*fn + 2*fn*fn
	for it := 0; it < 5000; it++ {
		if err := stopped(ctx); err != nil {
			return gaussSolution{}, fp.best, err
		}
		work.spend(stepCost)
		if !step(u) {
			return gaussSolution{}, fp.best, errors.New("planner: Gaussian eigendecomposition failed")
		}
		if gap := fp.observe(u, d, it); gap <= tol || work.done() {
			break
		}
		stepTo(u, d)
	}
	if !step(fp.bestU) {
		return gaussSolution{}, fp.best, errors.New("planner: Gaussian eigendecomposition failed")
	}
	top := 0.0
	for _, l := range vals {
		top = math.Max(top, l)
	}
	half := mat.NewDense(n, n, nil)
	for k, l := range vals {
		if l <= 1e-13*top {
			continue
		}
		for i := 0; i < n; i++ {
			if fp.bestU[i] > 0 {
				half.Set(i, k, q.At(i, k)*math.Sqrt(math.Sqrt(l)/fp.bestU[i]))
			}
		}
	}
	return gaussSolution{c: mat.DenseCopyOf(half.T()), u: fp.bestU}, fp.best, nil
}
