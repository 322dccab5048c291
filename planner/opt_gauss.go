package planner

import (
	"context"
	"errors"
	"math"

	"gonum.org/v1/gonum/mat"
)

// The Gaussian (ρ-zCDP) strategy problem is convex in X = AᵀA:
//
//	minimise trace(G X⁻¹)  subject to  diag(X) ≤ 1,  X ≻ 0,
//
// (columns of A of L2 norm ≤ 1, so Δ₂ = 1). Its Lagrange dual, for u ≥ 0, is
//
//	g(u) = 2·trace((U^{1/2} G U^{1/2})^{1/2}) − Σ u_i,    U = diag(u),
//
// attained at X(u) = U^{-1/2}(U^{1/2}GU^{1/2})^{1/2}U^{-1/2}, and
// ∂g/∂u_i = X(u)_ii − 1. Every g(u) is a lower bound on every strategy's
// error (weak duality), and optimising the scale of u gives the sharper
// bound (Σ_i d_i)²/Σ_i u_i with d_i = u_i X(u)_ii. At the optimum d = u,
// which suggests the fixed point u ← d(u).
//
// Everything is computed through T = G⁻¹. With M = U^{-1/2}TU^{-1/2},
// (U^{1/2}GU^{1/2})^{1/2} = M^{-1/2} and the integral representation
// M^{-1/2} = (2/π)∫₀^∞ (M + t²I)⁻¹ dt gives
//
//	X(u) = (2/π)∫₀^∞ (T + t²U)⁻¹ dt,
//
// evaluated by the trapezoidal rule after t = e^s (the integrand is a
// hyperbolic secant in s, so the rule converges geometrically). For the
// all-range and prefix workloads T is tridiagonal, so diag(X(u)) costs O(n)
// per node; for a compiled column T is diagonal minus low rank (Woodbury),
// O(n·r²) per node. No eigendecomposition is ever needed.

// invStructure is T = G⁻¹ = tridiag(d, e) − Y·Yᵀ (Y is n×r, r may be 0).
type invStructure struct {
	d, e []float64
	y    *mat.Dense // n × r, or nil
}

var gaussRidge = 1e-9

var errNoInverseStructure = errors.New("planner: no structured inverse for this Gram")

// gramInverse returns G⁻¹ in structured form when G has one. Singular
// low-rank Grams are regularised by ridge·(trace/n)·I first.
func gramInverse(g Gram, ridge float64) (*invStructure, error) {
	switch g := g.(type) {
	case tridiagInverse:
		d, e := g.InverseTridiag()
		return &invStructure{d: d, e: e}, nil
	case scaledGram:
		s, err := gramInverse(g.g, ridge)
		if err != nil {
			return nil, err
		}
		out := &invStructure{d: make([]float64, len(s.d)), e: make([]float64, len(s.e))}
		for i, v := range s.d {
			out.d[i] = v / g.c
		}
		for i, v := range s.e {
			out.e[i] = v / g.c
		}
		if s.y != nil {
			out.y = mat.DenseCopyOf(s.y)
			out.y.Scale(1/math.Sqrt(g.c), out.y)
		}
		return out, nil
	case *LowRankGram:
		return lowRankInverse(g, ridge)
	}
	return nil, errNoInverseStructure
}

// lowRankInverse: G = diag(D) + F K Fᵀ. With K = QΛQᵀ (Λ ≥ 0 kept) and
// V = F Q Λ^{1/2}, G = diag(D) + VVᵀ and
// G⁻¹ = D⁻¹ − D⁻¹V(I + VᵀD⁻¹V)⁻¹VᵀD⁻¹ = diag(1/D) − YYᵀ,
// Y = D⁻¹V R⁻¹ with RᵀR = I + VᵀD⁻¹V... (R upper, so YYᵀ = D⁻¹V(RᵀR)⁻¹VᵀD⁻¹).
func lowRankInverse(g *LowRankGram, ridge float64) (*invStructure, error) {
	n, r := g.Size, len(g.F)
	dg := make([]float64, n)
	if g.D != nil {
		copy(dg, g.D)
	}
	trace := 0.0
	for _, v := range g.Diag() {
		trace += v
	}
	floor := ridge * trace / float64(n)
	if floor <= 0 {
		floor = ridge
	}
	for i := range dg {
		if dg[i] < floor {
			dg[i] = floor
		}
	}
	out := &invStructure{d: make([]float64, n), e: make([]float64, max(n-1, 0))}
	for i := range dg {
		out.d[i] = 1 / dg[i]
	}
	if r == 0 {
		return out, nil
	}
	v, err := workloadFactor(g)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return out, nil
	}
	_, rr := v.Dims() // V = F Q Λ^{1/2}
	// C = I + VᵀD⁻¹V.
	dv := mat.NewDense(n, rr, nil) // D⁻¹V
	for i := 0; i < n; i++ {
		for c := 0; c < rr; c++ {
			dv.Set(i, c, v.At(i, c)/dg[i])
		}
	}
	cm := mat.NewSymDense(rr, nil)
	for a := 0; a < rr; a++ {
		for b := a; b < rr; b++ {
			s := 0.0
			for i := 0; i < n; i++ {
				s += v.At(i, a) * dv.At(i, b)
			}
			if a == b {
				s++
			}
			cm.SetSym(a, b, s)
		}
	}
	var ch mat.Cholesky
	if !ch.Factorize(cm) {
		return nil, errors.New("planner: workload Gram factorisation failed")
	}
	var rt mat.TriDense
	ch.UTo(&rt) // C = RᵀR
	// Y = D⁻¹V R⁻¹ : solve Yᵀ... Y R = D⁻¹V.
	var rinv mat.TriDense
	if err := rinv.InverseTri(&rt); err != nil {
		return nil, err
	}
	y := mat.NewDense(n, rr, nil)
	y.Mul(dv, &rinv)
	out.y = y
	return out, nil
}

// lowRankFactor returns V (n×r') with F·K·Fᵀ = V·Vᵀ, dropping the
// non-positive eigenvalues of K.
func lowRankFactor(g *LowRankGram) (*mat.Dense, error) {
	if len(g.F) == 0 {
		return nil, errors.New("planner: empty workload Gram")
	}
	v, err := workloadFactor(g)
	if err == nil && v == nil {
		err = errors.New("planner: workload Gram is zero")
	}
	return v, err
}

// workloadFactor is V = F·Q·Λ^{1/2} over the eigenpairs of K (symmetrised)
// above 1e-12 of the largest, so that F·K·Fᵀ = V·Vᵀ; nil when there are
// none.
func workloadFactor(g *LowRankGram) (*mat.Dense, error) {
	n, r := g.Size, len(g.F)
	ks := mat.NewSymDense(r, nil)
	for a := 0; a < r; a++ {
		for b := a; b < r; b++ {
			ks.SetSym(a, b, 0.5*(g.K[a][b]+g.K[b][a]))
		}
	}
	var es mat.EigenSym
	if !es.Factorize(ks, true) {
		return nil, errors.New("planner: eigendecomposition of workload weights failed")
	}
	vals := es.Values(nil)
	var q mat.Dense
	es.VectorsTo(&q)
	top := 0.0
	for _, v := range vals {
		top = math.Max(top, v)
	}
	var cols []int
	for c, v := range vals {
		if v > 1e-12*top {
			cols = append(cols, c)
		}
	}
	if len(cols) == 0 {
		return nil, nil
	}
	v := mat.NewDense(n, len(cols), nil)
	for i := 0; i < n; i++ {
		for cc, c := range cols {
			s := 0.0
			for a := 0; a < r; a++ {
				s += g.F[a][i] * q.At(a, c)
			}
			v.Set(i, cc, s*math.Sqrt(vals[c]))
		}
	}
	return v, nil
}

// shiftedDiagInv returns diag((T + c·U)⁻¹) in dst, O(n + n·r²).
// work must have room for 2n floats (+ n·r when r > 0).
func (s *invStructure) shiftedDiagInv(dst []float64, c float64, u []float64, work []float64) bool {
	n := len(s.d)
	a := work[:n]
	alpha := work[n : 2*n]
	for i := 0; i < n; i++ {
		a[i] = s.d[i] + c*u[i]
	}
	// Forward pivots α and backward pivots β (stored in dst first).
	alpha[0] = a[0]
	for i := 1; i < n; i++ {
		alpha[i] = a[i] - s.e[i-1]*s.e[i-1]/alpha[i-1]
		if !(alpha[i] > 0) {
			return false
		}
	}
	if !(alpha[0] > 0) {
		return false
	}
	beta := dst
	beta[n-1] = a[n-1]
	for i := n - 2; i >= 0; i-- {
		beta[i] = a[i] - s.e[i]*s.e[i]/beta[i+1]
	}
	for i := 0; i < n; i++ {
		dst[i] = 1 / (alpha[i] + beta[i] - a[i])
	}
	if s.y == nil {
		return true
	}
	// (A − YYᵀ)⁻¹ = A⁻¹ + A⁻¹Y (I − YᵀA⁻¹Y)⁻¹ YᵀA⁻¹.
	_, r := s.y.Dims()
	ay := mat.NewDense(n, r, nil)
	col := make([]float64, n)
	sol := make([]float64, n)
	for k := 0; k < r; k++ {
		for i := 0; i < n; i++ {
			col[i] = s.y.At(i, k)
		}
		tridiagSolve(sol, a, s.e, col, alpha)
		for i := 0; i < n; i++ {
			ay.Set(i, k, sol[i])
		}
	}
	cm := capacitance(s.y, ay)
	var ch mat.Cholesky
	if !ch.Factorize(cm) {
		return false
	}
	var ci mat.SymDense
	if err := ch.InverseTo(&ci); err != nil {
		return false
	}
	for i := 0; i < n; i++ {
		row := ay.RawRowView(i)
		v := 0.0
		for p := 0; p < r; p++ {
			for q := 0; q < r; q++ {
				v += row[p] * ci.At(p, q) * row[q]
			}
		}
		dst[i] += v
	}
	return true
}

// tridiagSolve solves tridiag(a, e)·x = b given the forward pivots alpha.
func tridiagSolve(x, a, e, b, alpha []float64) {
	n := len(a)
	// Forward: L with multipliers e_{i-1}/alpha_{i-1}.
	x[0] = b[0]
	for i := 1; i < n; i++ {
		x[i] = b[i] - e[i-1]/alpha[i-1]*x[i-1]
	}
	x[n-1] /= alpha[n-1]
	for i := n - 2; i >= 0; i-- {
		x[i] = (x[i] - e[i]*x[i+1]) / alpha[i]
	}
}

// quadrature holds the trapezoidal nodes for (2/π)∫ e^s (T + e^{2s}U)⁻¹ ds.
type quadrature struct {
	c, w []float64 // shifts e^{2s} and weights (2/π)·h·e^s
}

// newQuadrature covers eigenvalues of M in [lmin, lmax] with relative
// accuracy about e^{-π²/h} + e^{-tail}.
func newQuadrature(lmin, lmax, h, tail float64) quadrature {
	lo := 0.5*math.Log(lmin) - tail
	hi := 0.5*math.Log(lmax) + tail
	var q quadrature
	for s := lo; s <= hi+h/2; s += h {
		q.c = append(q.c, math.Exp(2*s))
		q.w = append(q.w, 2/math.Pi*h*math.Exp(s))
	}
	return q
}

// gaussDual runs the dual fixed point for T = G⁻¹.
type gaussDual struct {
	t     *invStructure
	g     Gram
	n     int
	work  []float64
	tmp   []float64
	gdiag []float64
}

// spectrumBounds bounds the eigenvalues of M = U^{-1/2}TU^{-1/2}: λmax by
// Gershgorin on the tridiagonal part (the low-rank part only lowers it),
// λmin = 1/λmax(M⁻¹) ≥ 1/trace(M⁻¹) with diag(M⁻¹) = u∘diag(G). The
// quadrature's tails reach far beyond both, so loose bounds cost nodes, not
// accuracy.
func (gd *gaussDual) spectrumBounds(u []float64) (float64, float64) {
	n := gd.n
	hi := 0.0
	for i := 0; i < n; i++ {
		r := math.Abs(gd.t.d[i])
		if i > 0 {
			r += math.Abs(gd.t.e[i-1])
		}
		if i < n-1 {
			r += math.Abs(gd.t.e[i])
		}
		hi = math.Max(hi, r/u[i])
	}
	tr := 0.0
	for i, v := range gd.gdiag {
		tr += u[i] * v
	}
	return 1 / tr, hi
}

// diagX fills x with diag(X(u)) for the given quadrature.
func (gd *gaussDual) diagX(x []float64, u []float64, q quadrature) bool {
	for i := range x {
		x[i] = 0
	}
	col := gd.tmp
	for k := range q.c {
		if !gd.t.shiftedDiagInv(col, q.c[k], u, gd.work) {
			return false
		}
		for i := range x {
			x[i] += q.w[k] * col[i]
		}
	}
	return true
}

// GaussCertificate reports the Gaussian optimisation: a strategy's error
// per unit noise variance (Primal), a proven lower bound on every
// strategy's (Dual), and Gap = Primal/Dual − 1.
type GaussCertificate struct {
	Primal, Dual, Gap float64
	Iterations        int
}

// solveGaussDual iterates u ← u∘diag(X(u)) (normalised) until the
// certified relative gap is below tol or the work is spent. It returns u
// and the certificate of the scaled primal X(u)/max diag.
func solveGaussDual(ctx context.Context, g Gram, tol float64, work *meter) ([]float64, *invStructure, GaussCertificate, error) {
	t, err := gramInverse(g, gaussRidge)
	if err != nil {
		return nil, nil, GaussCertificate{}, err
	}
	n := g.N()
	r := 0
	if t.y != nil {
		_, r = t.y.Dims()
	}
	gd := &gaussDual{t: t, g: g, n: n, work: make([]float64, 2*n+n*r), tmp: make([]float64, n), gdiag: make([]float64, n)}
	if !t.shiftedDiagInv(gd.gdiag, 0, gd.tmp, gd.work) { // diag(T⁻¹); u is unused at c = 0
		return nil, nil, GaussCertificate{}, errors.New("planner: Gaussian dual: G⁻¹ is not positive definite")
	}
	// Start from the diagonal of G^{1/2}'s crude proxy: u_i ∝ √G_ii.
	u := g.Diag()
	for i := range u {
		u[i] = math.Sqrt(math.Max(u[i], 1e-300))
	}
	x := make([]float64, n)
	d := make([]float64, n)
	fp := newFixedPoint(u)
	var q quadrature
	// One quadrature node: a tridiagonal pass (≈ 10n) and, with a low-rank
	// part, r solves (5n each), the capacitance (n·r²) and the diagonal
	// (n·r² + r³).
	fn, fr := float64(n), float64(r)
	nodeCost := 10*fn + 5*fn*fr + 2*fn*fr*fr + fr*fr*fr
	for it := 0; it < 10000; it++ {
		if err := stopped(ctx); err != nil {
			return nil, nil, fp.best, err
		}
		if it%20 == 0 {
			lmin, lmax := gd.spectrumBounds(u)
			q = newQuadrature(lmin, lmax, 0.3, 32)
		}
		work.spend(float64(len(q.c))*nodeCost + 4*fn)
		if !gd.diagX(x, u, q) {
			return nil, nil, fp.best, errors.New("planner: Gaussian dual: factorisation failed")
		}
		sd, su, mx := 0.0, 0.0, 0.0
		for i := range x {
			sd += u[i] * x[i]
			su += u[i]
			mx = math.Max(mx, x[i])
		}
		primal := mx * sd
		dual := sd * sd / su
		gap := primal/dual - 1
		fp.record(primal, dual, gap, u, it)
		if gap <= tol || work.done() {
			break
		}
		// Fixed point u ← u∘x, renormalised (g is scale-free in u).
		for i := range d {
			d[i] = u[i] * x[i]
		}
		stepTo(u, d)
	}
	return fp.bestU, t, fp.best, nil
}

// capacitance is the Woodbury capacitance matrix I − YᵀZ (r × r, with
// Z = A⁻¹Y symmetric in the product), for inverses of A − YYᵀ.
func capacitance(y, z *mat.Dense) *mat.SymDense {
	n, r := y.Dims()
	cm := mat.NewSymDense(r, nil)
	for p := 0; p < r; p++ {
		for q := p; q < r; q++ {
			v := 0.0
			for i := 0; i < n; i++ {
				v += y.At(i, p) * z.At(i, q)
			}
			if p == q {
				v = 1 - v
			} else {
				v = -v
			}
			cm.SetSym(p, q, v)
		}
	}
	return cm
}
