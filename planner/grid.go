package planner

import (
	"errors"
	"math"
	"slices"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"
)

// The rounding grid.
//
// Exact discrete noise needs an integer-valued measurement. An optimised
// strategy A is real, normalised so that its sensitivity is Δ = 1 (column
// L1 norms for Laplace, L2 for Gaussian). The planner measures instead the
// integer matrix
//
//	B = round(K·A),   K = gridLaplace or gridGauss,
//
// rounding each column to the nearest integers and then moving the entries
// rounded away from zero that were closest to the rounding boundary back
// toward zero until the column's norm is at most K. So B is an integer
// strategy like every other: the release is y = B·x + Z with Z discrete
// Laplace of scale Δ₁(B)/ε or discrete Gaussian of σ² = Δ₂(B)²/(2ρ), where
// Δ(B) ≤ K is B's exact largest column norm, and reconstruction is
// x̂ = B⁺y. In the units of A one grid step is γ = 1/K (ColumnStrategy.Grid):
// B/K approximates A entry by entry within γ/2, or γ where a column had to
// shed norm.
//
// Cost: the sensitivity never exceeds the real strategy's (Δ(B) ≤ K = Δ(A)/γ),
// so the only price is the perturbation of the Gram matrix BᵀB/K² − AᵀA,
// entries of order γ: the relative change of the expected error is of
// order γ·(nonzeros per column): measured, about 10⁻⁵ for the Laplace
// strategies at K = 2¹⁶ and 10⁻⁴ for the Gaussian ones at K = 2¹² — and it
// is not estimated but accounted for exactly, since the plan's error is
// computed from B itself. The Gaussian grid is coarser so that the
// discrete Gaussian's σ² = K²/(2ρ) stays on the sampler's 64-bit fast path
// for ρ ≥ 0.003; the discrete Laplace sampler is fast at any scale. Compared with
// rounding the answers (γ·round(Ax/γ)), rounding the matrix keeps the
// release a linear function of the histogram computed in exact integer
// arithmetic, its sensitivity a property of B alone, reconstruction exact
// without noise, and the expected error exactly σ²·w(BᵀB)⁻¹wᵀ with no
// data-dependent rounding term.
const (
	gridLaplace = 1 << 16
	gridGauss   = 1 << 12
)

// roundColumn rounds K·v (v the real entries of one column, K = scale) to
// integers whose L1 (or, if l2, L2) norm is at most scale. Entry keep (if
// ≥ 0) stays at least 1 in magnitude, so a diagonal that makes B full rank
// survives rounding.
func roundColumn(v []float64, scale float64, l2 bool, keep int) []float64 {
	r := make([]float64, len(v))
	for i, x := range v {
		r[i] = math.Round(scale * x)
	}
	if keep >= 0 && r[keep] == 0 {
		r[keep] = math.Copysign(1, v[keep])
		if v[keep] == 0 {
			r[keep] = 1
		}
	}
	norm := func() float64 {
		s := 0.0
		for _, x := range r {
			if l2 {
				s += x * x
			} else {
				s += math.Abs(x)
			}
		}
		return s
	}
	limit := scale
	if l2 {
		limit = scale * scale
	}
	for norm() > limit {
		// The entry rounded farthest away from zero moves back by one.
		best, bestOver := -1, math.Inf(-1)
		for i, x := range r {
			if x == 0 || (i == keep && math.Abs(x) <= 1) {
				continue
			}
			over := math.Abs(x) - scale*math.Abs(v[i])
			if over > bestOver {
				best, bestOver = i, over
			}
		}
		if best < 0 {
			break
		}
		r[best] -= math.Copysign(1, r[best])
	}
	return r
}

// columnNorms returns the largest column L1 and L2 norms of a.
func columnNorms(a mat.Matrix) (l1, l2 float64) {
	m, n := a.Dims()
	s1 := make([]float64, n)
	s2 := make([]float64, n)
	if d, ok := a.(*mat.Dense); ok {
		raw := d.RawMatrix()
		for i := 0; i < m; i++ {
			row := raw.Data[i*raw.Stride : i*raw.Stride+n]
			for j, v := range row {
				if v != 0 {
					s1[j] += math.Abs(v)
					s2[j] += v * v
				}
			}
		}
	} else {
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				v := a.At(i, j)
				s1[j] += math.Abs(v)
				s2[j] += v * v
			}
		}
	}
	for j := 0; j < n; j++ {
		l1 = math.Max(l1, s1[j])
		l2 = math.Max(l2, s2[j])
	}
	return l1, math.Sqrt(l2)
}

// buildPIdentity rounds the p-Identity strategy [I; Θ]·D to the grid and
// returns it with A⁺ and (AᵀA)⁻¹ computed through Woodbury in O(n²p):
// with B = [diag(b); B₁], Λ = diag(b²), V = B₁Λ⁻¹, S = I + B₁Λ⁻¹B₁ᵀ and
// W = S⁻¹V,
//
//	(BᵀB)⁻¹ = Λ⁻¹ − VᵀW,   B⁺ = [(BᵀB)⁻¹·diag(b) | Wᵀ].
func buildPIdentity(name string, o *pIdentity, theta []float64) (*ColumnStrategy, error) {
	n, p := o.n, o.p
	s := make([]float64, n)
	for i := range s {
		s[i] = 1
	}
	for k := 0; k < p; k++ {
		for i, v := range o.row(theta, k) {
			s[o.lo[k]+i] += v
		}
	}
	b0 := make([]float64, n)
	b1 := make([][]float64, p) // dense rows over [lo_k, hi_k)
	for k := 0; k < p; k++ {
		b1[k] = make([]float64, o.hi[k]-o.lo[k])
	}
	cover := make([][]int, n)
	for k := 0; k < p; k++ {
		for i := o.lo[k]; i < o.hi[k]; i++ {
			cover[i] = append(cover[i], k)
		}
	}
	for i := 0; i < n; i++ {
		vals := []float64{1 / s[i]}
		for _, k := range cover[i] {
			vals = append(vals, o.row(theta, k)[i-o.lo[k]]/s[i])
		}
		r := roundColumn(vals, gridLaplace, false, 0)
		b0[i] = r[0]
		for c, k := range cover[i] {
			b1[k][i-o.lo[k]] = r[c+1]
		}
	}
	// Drop rows that rounded to zero.
	var rows []int
	for k := 0; k < p; k++ {
		if slices.ContainsFunc(b1[k], func(x float64) bool { return x != 0 }) {
			rows = append(rows, k)
		}
	}
	q := len(rows)
	a := mat.NewDense(n+q, n, nil)
	for i := 0; i < n; i++ {
		a.Set(i, i, b0[i])
	}
	v := mat.NewDense(max(q, 1), n, nil)
	for r, k := range rows {
		for i, x := range b1[k] {
			a.Set(n+r, o.lo[k]+i, x)
			v.Set(r, o.lo[k]+i, x/(b0[o.lo[k]+i]*b0[o.lo[k]+i]))
		}
	}
	cs := &ColumnStrategy{Name: name, A: a, Grid: 1.0 / gridLaplace, FullRank: true}
	cs.L1, cs.L2 = columnNorms(a)
	gram := mat.NewDense(n, n, nil)
	pinv := mat.NewDense(n, n+q, nil)
	if q > 0 {
		v = v.Slice(0, q, 0, n).(*mat.Dense)
		sm := mat.NewSymDense(q, nil)
		for r1, k1 := range rows {
			for r2 := r1; r2 < q; r2++ {
				k2 := rows[r2]
				lo, hi := max(o.lo[k1], o.lo[k2]), min(o.hi[k1], o.hi[k2])
				x := 0.0
				for i := lo; i < hi; i++ {
					x += b1[k1][i-o.lo[k1]] * b1[k2][i-o.lo[k2]] / (b0[i] * b0[i])
				}
				if r1 == r2 {
					x++
				}
				sm.SetSym(r1, r2, x)
			}
		}
		var ch mat.Cholesky
		if !ch.Factorize(sm) {
			return nil, errors.New("planner: p-Identity Woodbury factorisation failed")
		}
		var w mat.Dense
		if err := ch.SolveTo(&w, v); err != nil {
			return nil, err
		}
		gram.Mul(v.T(), &w)
		gram.Scale(-1, gram)
		pinv.Slice(0, n, n, n+q).(*mat.Dense).Copy(w.T())
	}
	for i := 0; i < n; i++ {
		gram.Set(i, i, gram.At(i, i)+1/(b0[i]*b0[i]))
	}
	symmetrize(gram)
	left := pinv.Slice(0, n, 0, n).(*mat.Dense)
	left.Copy(gram)
	for j := 0; j < n; j++ {
		for i := 0; i < n; i++ {
			left.Set(i, j, left.At(i, j)*b0[j])
		}
	}
	cs.Gram, cs.Pinv = gram, pinv
	return cs, nil
}

// symmetrize replaces m by (m + mᵀ)/2, removing rounding asymmetry.
func symmetrize(m *mat.Dense) {
	n, _ := m.Dims()
	raw := m.RawMatrix()
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			a, b := raw.Data[i*raw.Stride+j], raw.Data[j*raw.Stride+i]
			x := 0.5 * (a + b)
			raw.Data[i*raw.Stride+j], raw.Data[j*raw.Stride+i] = x, x
		}
	}
}

// buildGauss forms the optimal X = (2/π)∫(T + t²U)⁻¹dt densely, scales it to
// unit diagonal, takes its Cholesky factor X = UᵀU (upper triangular U,
// column norms 1) and rounds K·U to the grid with column L2 norms ≤ K.
// B stays upper triangular with a nonzero diagonal, so BᵀB's Cholesky
// factor is B itself: (BᵀB)⁻¹ and B⁻¹ = B⁺ come from triangular inversions.
func buildGauss(name string, x *mat.SymDense) (*ColumnStrategy, error) {
	n := x.SymmetricDim()
	dg := make([]float64, n)
	for i := range dg {
		dg[i] = 1 / math.Sqrt(x.At(i, i))
	}
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			x.SetSym(i, j, x.At(i, j)*dg[i]*dg[j])
		}
	}
	var ch mat.Cholesky
	if !ch.Factorize(x) {
		return nil, errors.New("planner: Gaussian strategy is not positive definite")
	}
	var uf mat.TriDense
	ch.UTo(&uf)
	b := mat.NewTriDense(n, mat.Upper, nil)
	col := make([]float64, n)
	for j := 0; j < n; j++ {
		for i := 0; i <= j; i++ {
			col[i] = uf.At(i, j)
		}
		r := roundColumn(col[:j+1], gridGauss, true, j)
		if r[j] < 0 { // keep a positive diagonal (column sign is free)
			for i := range r {
				r[i] = -r[i]
			}
		}
		for i := 0; i <= j; i++ {
			b.SetTri(i, j, r[i])
		}
	}
	cs := &ColumnStrategy{Name: name, A: mat.DenseCopyOf(b), Grid: 1.0 / gridGauss, FullRank: true}
	cs.L1, cs.L2 = columnNorms(cs.A)
	// B⁺ = B⁻¹ = C (upper triangular), (BᵀB)⁻¹ = C·Cᵀ.
	c := mat.DenseCopyOf(b)
	raw := c.RawMatrix()
	if !invUpper(raw.Data, n, raw.Stride) {
		return nil, errors.New("planner: Gaussian strategy is singular")
	}
	cs.Pinv = c
	cs.gramFactor = c
	if n <= maxDenseGram {
		gram := mat.NewDense(n, n, nil)
		blas64.Gemm(blas.NoTrans, blas.Trans, 1, raw, raw, 0, gram.RawMatrix())
		symmetrize(gram)
		cs.Gram = gram
	}
	return cs, nil
}

// maxDenseGram bounds the size of the dense (AᵀA)⁻¹ kept for an optimised
// Gaussian strategy; longer columns keep only its factor (AᵀA)⁻¹ = C·Cᵀ,
// through which every error form is evaluated in O(n²) (see errorForm).
const maxDenseGram = 512

// buildStacked builds A = [√(1−τ)·C/√m; D] from a factor C (k×n) of a
// singular optimum X₀ = CᵀC, m = max over the cells with u > 0 of ‖C e_i‖²,
// D diagonal with D_ii = √τ on those cells and √(1 − (1−τ)‖Ce_i‖²/m)
// elsewhere (cells the workload never needs), so every column has L2 norm
// ≤ 1, then rounds it to the Gaussian grid keeping the identity entries ≥ 1.
// (AᵀA)⁻¹ and A⁺ come from a dense Cholesky factorisation (short columns).
func buildStacked(name string, c *mat.Dense, u []float64) (*ColumnStrategy, error) {
	k, n := c.Dims()
	norms := make([]float64, n)
	mx := 0.0
	for i := 0; i < n; i++ {
		s := 0.0
		for r := 0; r < k; r++ {
			s += c.At(r, i) * c.At(r, i)
		}
		norms[i] = s
		if u[i] > 0 {
			mx = math.Max(mx, s)
		}
	}
	if mx <= 0 {
		mx = 1
	}
	scale := math.Sqrt((1 - gaussPad) / mx)
	a := mat.NewDense(k+n, n, nil)
	col := make([]float64, k+1)
	for i := 0; i < n; i++ {
		for r := 0; r < k; r++ {
			col[r] = scale * c.At(r, i)
		}
		rest := 1 - (1-gaussPad)*norms[i]/mx
		col[k] = math.Sqrt(math.Max(rest, gaussPad))
		if u[i] > 0 {
			col[k] = math.Sqrt(gaussPad)
		}
		r := roundColumn(col, gridGauss, true, k)
		for rr := 0; rr < k; rr++ {
			a.Set(rr, i, r[rr])
		}
		a.Set(k+i, i, math.Abs(r[k]))
	}
	cs, err := newColumnStrategy(name, a)
	if err != nil {
		return nil, err
	}
	cs.Grid = 1.0 / gridGauss
	return cs, nil
}

// denseX evaluates X(u) = (2/π)∫₀^∞ (T + t²U)⁻¹ dt as a dense matrix. Each
// node's inverse of the tridiagonal part is built column by column from the
// forward and backward pivots (for i < j, x_i = −e_i/α_i·x_{i+1}; for i > j,
// x_i = −e_{i−1}/β_i·x_{i−1}), O(n²) per node and stable for SPD matrices;
// a low-rank part adds (A⁻¹Y)(I − YᵀA⁻¹Y)⁻¹(A⁻¹Y)ᵀ.
func denseX(t *invStructure, u []float64) (*mat.SymDense, error) {
	n := len(u)
	// Eigenvalue range of M from Gershgorin and the diagonal of G (u scaled).
	lmax := 0.0
	for i := 0; i < n; i++ {
		r := math.Abs(t.d[i])
		if i > 0 {
			r += math.Abs(t.e[i-1])
		}
		if i < n-1 {
			r += math.Abs(t.e[i])
		}
		lmax = math.Max(lmax, r/u[i])
	}
	// λmin(M) = 1/λmax(M⁻¹) ≥ 1/trace(M⁻¹), diag(M⁻¹) = u∘diag(T⁻¹).
	work := make([]float64, 2*n)
	di := make([]float64, n)
	if !t.shiftedDiagInv(di, 0, u, work) {
		return nil, errors.New("planner: G⁻¹ is not positive definite")
	}
	trInv := 0.0
	for i := range di {
		trInv += di[i] * u[i] // diag(M⁻¹) = u∘diag(T⁻¹)
	}
	lmin := 1 / trInv
	// h = 0.5 and tails of 21 give relative accuracy ≈ e^{-π²/h} + e^{-21} ≈ 10⁻⁹,
	// far below the grid's 1/K.
	q := newQuadrature(lmin, lmax, 0.5, 21)
	// Accumulate the lower triangle row by row (contiguous), transpose once.
	buf := make([]float64, n*n)
	a := make([]float64, n)
	alpha := make([]float64, n)
	beta := make([]float64, n)
	ratio := make([]float64, n)
	colv := make([]float64, n)
	var corrY *mat.Dense
	for k := range q.c {
		c, w := q.c[k], q.w[k]
		for i := 0; i < n; i++ {
			a[i] = t.d[i] + c*u[i]
		}
		alpha[0] = a[0]
		for i := 1; i < n; i++ {
			alpha[i] = a[i] - t.e[i-1]*t.e[i-1]/alpha[i-1]
		}
		beta[n-1] = a[n-1]
		for i := n - 2; i >= 0; i-- {
			beta[i] = a[i] - t.e[i]*t.e[i]/beta[i+1]
		}
		for i := 0; i < n-1; i++ {
			ratio[i] = -t.e[i] / alpha[i]
		}
		for j := 0; j < n; j++ {
			// Row j, columns i ≤ j: x_i = ratio_i·x_{i+1}, x_j = 1/(α_j+β_j−a_j).
			row := buf[j*n : j*n+j+1]
			v := w / (alpha[j] + beta[j] - a[j])
			row[j] += v
			for i := j - 1; i >= 0; i-- {
				v *= ratio[i]
				if v == 0 {
					break
				}
				row[i] += v
			}
		}
		if t.y != nil {
			_, r := t.y.Dims()
			ay := mat.NewDense(n, r, nil)
			for p := 0; p < r; p++ {
				for i := 0; i < n; i++ {
					colv[i] = t.y.At(i, p)
				}
				sol := make([]float64, n)
				tridiagSolve(sol, a, t.e, colv, alpha)
				ay.SetCol(p, sol)
			}
			cm := capacitance(t.y, ay)
			var ch mat.Cholesky
			if !ch.Factorize(cm) {
				return nil, errors.New("planner: Gaussian strategy: Woodbury factorisation failed")
			}
			var l mat.TriDense
			ch.LTo(&l)
			// (A⁻¹Y)C⁻¹(A⁻¹Y)ᵀ = ZZᵀ with Z = A⁻¹Y·L⁻ᵀ, scaled by √w.
			var linv mat.TriDense
			if err := linv.InverseTri(&l); err != nil {
				return nil, err
			}
			var z mat.Dense
			z.Mul(ay, linv.T())
			z.Scale(math.Sqrt(w), &z)
			if corrY == nil {
				corrY = &z
			} else {
				var cat mat.Dense
				cat.Augment(corrY, &z)
				corrY = &cat
			}
		}
	}
	x := mat.NewSymDense(n, nil)
	raw := x.RawSymmetric()
	for j := 0; j < n; j++ {
		for i := 0; i <= j; i++ {
			raw.Data[i*raw.Stride+j] = buf[j*n+i]
		}
	}
	if corrY != nil {
		var zz mat.SymDense
		zz.SymOuterK(1, corrY)
		x.AddSym(x, &zz)
	}
	return x, nil
}

// traceFactor returns trace(G·C·Cᵀ) = Σ_j c_jᵀ G c_j over the columns of C:
// n products by G.
func traceFactor(g Gram, c *mat.Dense) float64 {
	n := g.N()
	col := make([]float64, n)
	gc := make([]float64, n)
	s := 0.0
	_, k := c.Dims() // n, or the class count of a compressed strategy
	for j := 0; j < k; j++ {
		mat.Col(col, j, c)
		g.MulVec(gc, col)
		s += dot(col, gc)
	}
	return s
}

// traceProduct returns trace(G·H) for a symmetric dense H: the error of a
// strategy with (AᵀA)⁻¹ = H on the workload with Gram G, per unit noise
// variance. O(n·r + r·n²) for a low-rank G, n products by G otherwise.
func traceProduct(g Gram, h *mat.Dense) float64 {
	n := g.N()
	switch g := g.(type) {
	case *LowRankGram:
		s := 0.0
		if g.D != nil {
			for i := 0; i < n; i++ {
				s += g.D[i] * h.At(i, i)
			}
		}
		hv := make([]float64, n)
		for b, fb := range g.F {
			mat.NewVecDense(n, hv).MulVec(h, mat.NewVecDense(n, fb))
			for a, fa := range g.F {
				if k := g.K[a][b]; k != 0 {
					s += k * dot(fa, hv)
				}
			}
		}
		return s
	case *DenseGram:
		s := 0.0
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				s += g.M.At(i, j) * h.At(i, j)
			}
		}
		return s
	}
	s := 0.0
	out := make([]float64, n)
	raw := h.RawMatrix()
	for i := 0; i < n; i++ {
		g.MulVec(out, raw.Data[i*raw.Stride:i*raw.Stride+n])
		s += out[i]
	}
	return s
}
