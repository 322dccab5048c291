package planner

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/dpproxy/dpproxy/catalog"
	"gonum.org/v1/gonum/blas"
	lapackgonum "gonum.org/v1/gonum/lapack/gonum"
	"gonum.org/v1/gonum/mat"
)

// BlockPrefix is a block-wise strategy for the prefix counts of a long
// column, kept structured: the n cells are cut into M blocks of B (the
// last one padded with cells that never hold data), every block is
// measured by the same dense strategy In over B cells (optimised once for
// the prefix workload of size B), and the M block totals by a dense
// strategy Top over M cells, stacked with weights:
//
//	A = [ TopWeight·Top·P ; InWeight·(I_M ⊗ In) ],
//
// P the M × MB matrix summing each block. A cell lies in one block and
// moves one block total, so A's column norms are those of Top and In
// combined: L1 sensitivity TopWeight·‖Top‖₁ + InWeight·‖In‖₁, L2
// sensitivity (TopWeight²‖Top‖₂² + InWeight²‖In‖₂²)^½ (‖·‖ the largest
// column norm). Nothing over n × n is ever formed.
//
// The estimate is the least-squares one over the padded domain,
// x̂ = (AᵀA)⁻¹Aᵀy (Reconstruct). With G = TopᵀTop and K = InᵀIn,
//
//	AᵀA = a²·G ⊗ 11ᵀ + b²·I ⊗ K,
//
// and, G's eigenvectors U being common to every block's coupling, each
// block of (U ⊗ I)ᵀ·AᵀA·(U ⊗ I) is a²λ_i·11ᵀ + b²K, inverted by
// Sherman–Morrison. Every prefix's variance then needs only quadratic
// forms in (I + cG)⁻¹ (c a scalar), which a tridiagonal reduction
// G = Q·T·Qᵀ, made once, gives in O(M²) per weighting (PrefixError): the
// error is exact and nothing over n × n is ever formed. Where B does not
// divide n the padding cells are estimated too (the estimator does not
// know they are empty): it is a linear unbiased estimator of the n real
// prefixes, at most B − 1 cells short of their joint least squares.
type BlockPrefix struct {
	// N is the column's cells, B the block size and M = ⌈N/B⌉ the blocks.
	N, B, M int
	// Top measures the M block totals, In each block's B cells; their
	// weights are TopWeight and InWeight.
	Top, In             *ColumnStrategy
	TopWeight, InWeight float64

	// G = TopᵀTop = q·T·qᵀ, T tridiagonal with diagonal td and
	// off-diagonal te, q orthogonal (row-major, M × M).
	td, te []float64
	q      []float64
	// For In's (InᵀIn)⁻¹ = Kinv: s = 1ᵀKinv1, g = Kinv·1, and over the
	// within-block prefixes ℓ_o (cells 0..o): h[o] = ℓ_oᵀg, p[o] =
	// ℓ_oᵀKinv·ℓ_o; hSum, h2Sum, pSum their running sums (index o: over
	// prefixes 0..o−1).
	s           float64
	g, h, p     []float64
	hSum, h2Sum []float64
	pSum        []float64
	kinv        *mat.Dense
	// Column norms: of Top's columns but the last, of its last, of In's
	// columns, of In's columns the last block holds (L1 and L2²).
	topL1, topL2, lastL1, lastL2 float64
	inL1, inL2, partL1, partL2   float64
	lastBlockCells               int
}

// columnRangeNorms is the largest L1 norm and squared L2 norm of columns lo
// to hi−1 of a.
func columnRangeNorms(a *mat.Dense, lo, hi int) (l1, l2sq float64) {
	r, _ := a.Dims()
	for j := lo; j < hi; j++ {
		c1, c2 := 0.0, 0.0
		for i := 0; i < r; i++ {
			v := a.At(i, j)
			c1 += math.Abs(v)
			c2 += v * v
		}
		l1, l2sq = math.Max(l1, c1), math.Max(l2sq, c2)
	}
	return l1, l2sq
}

// NewBlockPrefix is the block strategy over n cells with blocks of b
// measured by in (b cells, full rank) and the ⌈n/b⌉ totals by top, at
// weights 1 (Weighted sets them). O(M³ + B³) once: the tridiagonal
// reduction of TopᵀTop.
func NewBlockPrefix(n, b int, top, in *ColumnStrategy) (*BlockPrefix, error) {
	bp, err := newBlockTotals(n, b, top)
	if err != nil {
		return nil, err
	}
	return bp.WithBlocks(in)
}

// newBlockTotals is the block strategy's part over the totals: sizes,
// Top's column norms and the tridiagonal reduction of its Gram (O(M³)).
// It has no In until WithBlocks.
func newBlockTotals(n, b int, top *ColumnStrategy) (*BlockPrefix, error) {
	if b < 1 || n < 2*b {
		return nil, fmt.Errorf("planner: blocks of %d over %d cells (want at least two blocks)", b, n)
	}
	m := (n + b - 1) / b
	if _, c := top.A.Dims(); c != m || !top.FullRank {
		return nil, fmt.Errorf("planner: block totals' strategy over %d cells (full rank %v), want %d", c, top.FullRank, m)
	}
	bp := &BlockPrefix{N: n, B: b, M: m, Top: top, TopWeight: 1, InWeight: 1, lastBlockCells: n - (m-1)*b}
	bp.topL1, bp.topL2 = columnRangeNorms(top.A, 0, m-1)
	bp.lastL1, bp.lastL2 = columnRangeNorms(top.A, m-1, m)
	bp.q, bp.td, bp.te = tridiagonal(top.A)
	return bp, nil
}

// WithBlocks is bp (its Top and the reduction kept) with In, B cells and
// full rank, measuring every block, at weights 1. O(B²).
func (bp *BlockPrefix) WithBlocks(in *ColumnStrategy) (*BlockPrefix, error) {
	b := bp.B
	if _, c := in.A.Dims(); c != b || !in.FullRank || in.Gram == nil {
		return nil, fmt.Errorf("planner: within-block strategy over %d cells (full rank %v), want %d", c, in.FullRank, b)
	}
	out := *bp
	bp = &out
	bp.In, bp.TopWeight, bp.InWeight = in, 1, 1
	bp.inL1, bp.inL2 = columnRangeNorms(in.A, 0, b)
	bp.partL1, bp.partL2 = columnRangeNorms(in.A, 0, bp.lastBlockCells)
	bp.kinv = in.Gram
	bp.g, bp.s = make([]float64, b), 0
	for i := 0; i < b; i++ {
		for j := 0; j < b; j++ {
			bp.g[i] += bp.kinv.At(i, j)
		}
		bp.s += bp.g[i]
	}
	bp.h, bp.p = make([]float64, b), make([]float64, b)
	bp.hSum, bp.h2Sum, bp.pSum = make([]float64, b+1), make([]float64, b+1), make([]float64, b+1)
	h, p := 0.0, 0.0
	for o := 0; o < b; o++ {
		h += bp.g[o]
		row := 0.0 // Σ_{j<o} Kinv[o][j]
		for j := 0; j < o; j++ {
			row += bp.kinv.At(o, j)
		}
		p += 2*row + bp.kinv.At(o, o)
		bp.h[o], bp.p[o] = h, p
		bp.hSum[o+1] = bp.hSum[o] + h
		bp.h2Sum[o+1] = bp.h2Sum[o] + h*h
		bp.pSum[o+1] = bp.pSum[o] + p
	}
	return bp, nil
}

// Weighted is bp with the weights a (Top) and b (In), both positive.
func (bp *BlockPrefix) Weighted(a, b float64) (*BlockPrefix, error) {
	if !(a > 0) || !(b > 0) || math.IsInf(a, 0) || math.IsInf(b, 0) {
		return nil, fmt.Errorf("planner: block weights %g, %g (want positive)", a, b)
	}
	out := *bp
	out.TopWeight, out.InWeight = a, b
	return &out, nil
}

// Sensitivity is the stacked strategy's largest column norm over the N
// real cells: L1 for Laplace, L2 for Gaussian (see BlockPrefix). Cell
// qB + o's column is Top's column q weighted by a over In's column o
// weighted by b: the largest is a full block's (every offset) or the last
// block's (its real offsets only; the padding holds no data).
func (bp *BlockPrefix) Sensitivity(fam catalog.NoiseFamily) float64 {
	a, b := bp.TopWeight, bp.InWeight
	if fam == catalog.Gaussian {
		full := a*a*bp.topL2 + b*b*bp.inL2
		last := a*a*bp.lastL2 + b*b*bp.partL2
		return math.Sqrt(math.Max(full, last))
	}
	return math.Max(a*bp.topL1+b*bp.inL1, a*bp.lastL1+b*bp.partL1)
}

// Rows is the number of measured counts: Top's rows and M times In's.
func (bp *BlockPrefix) Rows() int {
	rt, _ := bp.Top.A.Dims()
	ri, _ := bp.In.A.Dims()
	return rt + bp.M*ri
}

// PrefixError is the total variance of the estimates of the N prefix
// counts, per unit noise variance of a row: trace(G_W·(AᵀA)⁻¹) over the
// real prefixes. In O(M² + B), never forming AᵀA.
//
// The prefix ending at cell qB + o is w = a_q ⊗ 1 + e_q ⊗ ℓ_o, a_q the
// indicator of blocks before q. With G = UΛUᵀ, α = Uᵀa_q, β = Uᵀe_q,
// K' = b²K, s' = 1ᵀK'⁻¹1, g' = K'⁻¹1, λ'_i = a²λ_i and, by Sherman–
// Morrison, (λ'_i·11ᵀ + K')⁻¹ = K'⁻¹ − λ'_i/(1 + λ'_i s')·g'g'ᵀ:
//
//	Var = Σ_i α_i² s'/(1+λ'_i s') + 2h'_o Σ_i α_iβ_i/(1+λ'_i s') + p'_o − h'_o² Σ_i β_i² λ'_i/(1+λ'_i s'),
//
// h'_o = ℓ_oᵀg', p'_o = ℓ_oᵀK'⁻¹ℓ_o. The three sums are s'·a_qᵀRa_q,
// a_qᵀRe_q and a²·e_qᵀGRe_q with R = (I + cG)⁻¹, c = a²s', so with
// G = QTQᵀ, x_q = Qᵀe_q (row q of Q), z_q = (I + cT)⁻¹x_q (a tridiagonal
// solve) and Qᵀa_q = Σ_{r<q} x_r, R·a_q's image Σ_{r<q} z_r: each q costs
// O(M). TestBlockPrefixAgainstDense checks it against the dense form.
func (bp *BlockPrefix) PrefixError() float64 {
	m, b := bp.M, bp.B
	ib2 := 1 / (bp.InWeight * bp.InWeight)
	a2 := bp.TopWeight * bp.TopWeight
	s := bp.s * ib2
	solve := newTridiagonalSolver(bp.td, bp.te, a2*s)
	y := make([]float64, m) // Qᵀa_q
	w := make([]float64, m) // Σ_{r<q} z_r = (I + cT)⁻¹Qᵀa_q
	z := make([]float64, m)
	total := 0.0
	for q := 0; q < m; q++ {
		x := bp.q[q*m : (q+1)*m]
		solve(z, x)
		var aq, cq, dq float64
		for i := 0; i < m; i++ {
			aq += y[i] * w[i]
			cq += x[i] * w[i]
			tz := bp.td[i] * z[i] // (T·z)_i
			if i > 0 {
				tz += bp.te[i-1] * z[i-1]
			}
			if i+1 < m {
				tz += bp.te[i] * z[i+1]
			}
			dq += x[i] * tz
		}
		aq *= s
		dq *= a2
		cells := b
		if q == m-1 {
			cells = bp.lastBlockCells
		}
		total += float64(cells)*aq + ib2*(2*cq*bp.hSum[cells]+bp.pSum[cells]) - ib2*ib2*dq*bp.h2Sum[cells]
		for i := range y {
			y[i] += x[i]
			w[i] += z[i]
		}
	}
	return total
}

// tridiagonal reduces G = AᵀA (A with M columns) to G = Q·T·Qᵀ: Q
// (row-major, M × M) orthogonal, T tridiagonal with diagonal d and
// off-diagonal e. Householder reduction (LAPACK's dsytrd and dorgtr),
// O(M³) and blocked, several times faster than the eigendecomposition.
func tridiagonal(a *mat.Dense) (q, d, e []float64) {
	_, m := a.Dims()
	var gram mat.Dense
	gram.Mul(a.T(), a)
	q = gram.RawMatrix().Data // row-major, stride m: Mul allocated it
	d, e, tau := make([]float64, m), make([]float64, max(m-1, 0)), make([]float64, max(m-1, 0))
	if m == 1 {
		d[0], q[0] = q[0], 1
		return q, d, e
	}
	var impl lapackgonum.Implementation
	work := []float64{0}
	impl.Dsytrd(blas.Upper, m, q, m, d, e, tau, work, -1)
	work = make([]float64, int(work[0]))
	impl.Dsytrd(blas.Upper, m, q, m, d, e, tau, work, len(work))
	impl.Dorgtr(blas.Upper, m, q, m, tau, work[:1], -1)
	work = make([]float64, max(int(work[0]), m))
	impl.Dorgtr(blas.Upper, m, q, m, tau, work, len(work))
	return q, d, e
}

// newTridiagonalSolver factors I + c·T (T symmetric tridiagonal with
// diagonal d and off-diagonal e, c ≥ 0: positive definite when T is
// positive semidefinite) once and returns the solve dst = (I + cT)⁻¹v by
// the Thomas algorithm, O(M) each.
func newTridiagonalSolver(d, e []float64, c float64) func(dst, v []float64) {
	m := len(d)
	diag := make([]float64, m) // the LDLᵀ pivots
	low := make([]float64, m)  // L's subdiagonal
	for i := 0; i < m; i++ {
		diag[i] = 1 + c*d[i]
		if i > 0 {
			low[i] = c * e[i-1] / diag[i-1]
			diag[i] -= low[i] * c * e[i-1]
		}
	}
	return func(dst, v []float64) {
		for i := 0; i < m; i++ {
			dst[i] = v[i]
			if i > 0 {
				dst[i] -= low[i] * dst[i-1]
			}
		}
		for i := m - 1; i >= 0; i-- {
			dst[i] /= diag[i]
			if i+1 < m {
				dst[i] -= low[i+1] * dst[i+1]
			}
		}
	}
}

// Measure sets dst (len Rows) to the exact weighted counts A·x of the
// histogram x over the N cells (the padding cells are 0): Top's rows on
// the block totals, then each block's In rows.
func (bp *BlockPrefix) Measure(dst, x []float64) {
	rt, _ := bp.Top.A.Dims()
	ri, _ := bp.In.A.Dims()
	totals := make([]float64, bp.M)
	block := make([]float64, bp.B)
	for q := 0; q < bp.M; q++ {
		for o := range block {
			block[o] = 0
			if k := q*bp.B + o; k < bp.N {
				block[o] = x[k]
				totals[q] += x[k]
			}
		}
		out := mat.NewVecDense(ri, dst[rt+q*ri:rt+(q+1)*ri])
		out.MulVec(bp.In.A, mat.NewVecDense(bp.B, block))
		out.ScaleVec(bp.InWeight, out)
	}
	top := mat.NewVecDense(rt, dst[:rt])
	top.MulVec(bp.Top.A, mat.NewVecDense(bp.M, totals))
	top.ScaleVec(bp.TopWeight, top)
}

// Reconstruct is the least-squares estimate (AᵀA)⁻¹Aᵀy of the N cells
// from noisy counts y (Measure's layout, noise independent and of equal
// variance), through the eigenbasis of TopᵀTop: O(M³ + M²B + MB²). With
// no noise it returns x.
func (bp *BlockPrefix) Reconstruct(y []float64) ([]float64, error) {
	m, b := bp.M, bp.B
	rt, _ := bp.Top.A.Dims()
	ri, _ := bp.In.A.Dims()
	// r = Aᵀy as an M × B matrix, row q the block q.
	var topT mat.VecDense
	topT.MulVec(bp.Top.A.T(), mat.NewVecDense(rt, y[:rt]))
	r := mat.NewDense(m, b, nil)
	for q := 0; q < m; q++ {
		row := mat.NewVecDense(b, r.RawRowView(q))
		row.MulVec(bp.In.A.T(), mat.NewVecDense(ri, y[rt+q*ri:rt+(q+1)*ri]))
		row.ScaleVec(bp.InWeight, row)
		for o := 0; o < b; o++ {
			row.SetVec(o, row.AtVec(o)+bp.TopWeight*topT.AtVec(q))
		}
	}
	// Rotate into the eigenbasis of G = TopᵀTop, solve each block, rotate
	// back.
	var gram mat.SymDense
	gram.SymOuterK(1, bp.Top.A.T())
	var eig mat.EigenSym
	if !eig.Factorize(&gram, true) {
		return nil, fmt.Errorf("planner: eigendecomposition of the block totals' Gram (%d cells) failed", m)
	}
	lambda := eig.Values(nil)
	var u mat.Dense
	eig.VectorsTo(&u)
	var rot mat.Dense
	rot.Mul(u.T(), r)
	ib2 := 1 / (bp.InWeight * bp.InWeight)
	s := bp.s * ib2
	kinv := mat.NewDense(b, b, nil)
	kinv.Scale(ib2, bp.kinv)
	g := mat.NewVecDense(b, nil)
	g.ScaleVec(ib2, mat.NewVecDense(b, bp.g))
	var sol mat.Dense
	sol.Mul(&rot, kinv) // rows: K'⁻¹·row (K'⁻¹ symmetric)
	for i := 0; i < m; i++ {
		l := bp.TopWeight * bp.TopWeight * lambda[i]
		c := l / (1 + l*s) * mat.Dot(g, mat.NewVecDense(b, rot.RawRowView(i)))
		row := sol.RawRowView(i)
		for o := range row {
			row[o] -= c * g.AtVec(o)
		}
	}
	var x mat.Dense
	x.Mul(&u, &sol)
	out := make([]float64, bp.N)
	for k := range out {
		out[k] = x.At(k/b, k%b)
	}
	return out, nil
}

// Dense is the stacked strategy as a matrix over the padded domain of
// M·B cells (tests only: it is Rows × MB).
func (bp *BlockPrefix) Dense() *mat.Dense {
	rt, _ := bp.Top.A.Dims()
	ri, _ := bp.In.A.Dims()
	a := mat.NewDense(bp.Rows(), bp.M*bp.B, nil)
	for q := 0; q < bp.M; q++ {
		for o := 0; o < bp.B; o++ {
			col := q*bp.B + o
			for i := 0; i < rt; i++ {
				a.Set(i, col, bp.TopWeight*bp.Top.A.At(i, q))
			}
			for i := 0; i < ri; i++ {
				a.Set(rt+q*ri+i, col, bp.InWeight*bp.In.A.At(i, o))
			}
		}
	}
	return a
}

// blockSizes are the block sizes tried on a long prefix column: the two
// smallest that leave at most maxTopBlocks blocks. They are sizes
// p-Identity plans well within its optimiser's budget, one strategy per
// size serving every block (and cached across plans); at a given column
// the error grows with the block size (8,760 cells: 7.17, 7.30 and 7.44
// times the SVD bound in blocks of 256, 512 and 1,024), while the time
// grows with it (0.36, 0.25 and 0.92 s).
var blockSizes = [...]int{256, 512, 1024}

// maxTopBlocks bounds the blocks M: the block totals' strategy is dense
// over M cells and its Gram reduced to tridiagonal form, O(M³).
const maxTopBlocks = 1024

// blockWeightSteps is the golden-section steps of the budget split.
const blockWeightSteps = 40

// blockPrefixOption is the block strategy over n cells with blocks of b:
// the totals measured by the optimised strategy of the prefix workload
// over the ⌈n/b⌉ blocks (identity when the optimiser gives none), each
// block by the optimised strategy of the centred prefix workload over b
// cells (centredPrefixGram: the totals are the Top's to measure; the
// plain prefix workload's strategy errs more at every size measured:
// 8,760 cells in blocks of 256, 512 and 1,024, 2²⁰ in blocks of 1,024),
// weighted to least error at unit sensitivity in fam (weightBlocks). nil
// when the optimiser gives no strategy for the blocks.
func (pl *Planner) blockPrefixOption(ctx context.Context, n, b int, fam catalog.NoiseFamily) (*colOpt, float64, error) {
	m := (n + b - 1) / b
	top, err := pl.prefixStrategy(ctx, PrefixGram{Size: m}, fam)
	if err != nil {
		return nil, 0, err
	}
	if top == nil {
		if top, err = Identity(m); err != nil {
			return nil, 0, err
		}
	}
	totals, err := newBlockTotals(n, b, top)
	if err != nil {
		return nil, 0, err
	}
	in, err := pl.prefixStrategy(ctx, centredPrefixGram{Size: b, Kappa: centredKappa}, fam)
	if err != nil || in == nil || in.Gram == nil {
		return nil, 0, err
	}
	base, err := totals.WithBlocks(in)
	if err != nil {
		return nil, 0, err
	}
	best, bestErr, theta, err := weightBlocks(ctx, base, fam)
	if err != nil || best == nil {
		return nil, 0, err
	}
	name := fmt.Sprintf("blocks(%d×%d: %s, centred %s; %.3g)", m, b, top.Name, in.Name, theta)
	o := &colOpt{name: name, n: n, l1: best.Sensitivity(catalog.Laplace), l2: best.Sensitivity(catalog.Gaussian),
		long: &LongStrategy{Name: name, Blocks: best}}
	o.once.Do(func() {})
	return o, bestErr, nil
}

// centredKappa is the share of the total kept in centredPrefixGram: the
// error is flat in it from 10⁻³ to 1 (8,760 cells, blocks of 256).
const centredKappa = 0.1

// weightBlocks is base weighted to least error at unit sensitivity in
// fam: the share θ of the sensitivity given to Top (L1: a·‖Top‖₁ = θ; L2:
// a²‖Top‖₂² = θ, then both scaled to make the real cells' sensitivity 1)
// found by golden-section search on the exact error; with its error and θ.
func weightBlocks(ctx context.Context, base *BlockPrefix, fam catalog.NoiseFamily) (*BlockPrefix, float64, float64, error) {
	// Top's and In's largest column norms (L1, or L2 for Gaussian).
	topNorm, inNorm := base.Top.L1, base.In.L1
	if fam == catalog.Gaussian {
		topNorm, inNorm = base.Top.L2, base.In.L2
	}
	eval := func(theta float64) (*BlockPrefix, float64) {
		a, w := theta/topNorm, (1-theta)/inNorm
		if fam == catalog.Gaussian {
			a, w = math.Sqrt(theta)/topNorm, math.Sqrt(1-theta)/inNorm
		}
		bp, err := base.Weighted(a, w)
		if err != nil {
			return nil, math.Inf(1)
		}
		// Rescaled to unit sensitivity: at most 1 already (the largest
		// column need not be in a real cell), the error scales by s².
		s := bp.Sensitivity(fam)
		if bp, err = base.Weighted(a/s, w/s); err != nil {
			return nil, math.Inf(1)
		}
		return bp, bp.PrefixError()
	}
	// The error is smooth in θ and infinite at both ends; golden section
	// on (0, 1).
	const phi = 0.6180339887498949
	lo, hi := 0.0, 1.0
	x1, x2 := hi-phi*(hi-lo), lo+phi*(hi-lo)
	_, e1 := eval(x1)
	_, e2 := eval(x2)
	for i := 0; i < blockWeightSteps; i++ {
		if err := stopped(ctx); err != nil {
			return nil, 0, 0, err
		}
		if e1 < e2 {
			hi, x2, e2 = x2, x1, e1
			x1 = hi - phi*(hi-lo)
			_, e1 = eval(x1)
		} else {
			lo, x1, e1 = x1, x2, e2
			x2 = lo + phi*(hi-lo)
			_, e2 = eval(x2)
		}
	}
	theta := x1
	if e2 < e1 {
		theta = x2
	}
	bp, e := eval(theta)
	return bp, e, theta, nil
}

// prefixStrategy is the planner's optimised strategy for the Gram g
// (cached as any column's), or nil when it gives none.
func (pl *Planner) prefixStrategy(ctx context.Context, g Gram, fam catalog.NoiseFamily) (*ColumnStrategy, error) {
	o, _, err := pl.optimised(ctx, g, fam, columnWork(g.N()))
	if err != nil || o == nil {
		return nil, err
	}
	return o.strategy()
}

// evalBlockPrefix evaluates the block strategies of a long prefix column
// for Laplace noise (for Gaussian noise the dual's strategy is within
// 1.021 of the SVD bound from 8,760 to 2²⁰ cells: long_gauss.go): one per
// block size in blockSizes leaving between 2
// and maxTopBlocks blocks, the two smallest.
func (pl *Planner) evalBlockPrefix(ctx context.Context, n int, fam catalog.NoiseFamily) ([]colEval, error) {
	if fam != catalog.Laplace {
		return nil, nil
	}
	var out []colEval
	for _, b := range blockSizes {
		if m := (n + b - 1) / b; m < 2 || m > maxTopBlocks {
			continue
		}
		if len(out) == 2 {
			break
		}
		t0 := time.Now()
		o, e, err := pl.blockPrefixOption(ctx, n, b, fam)
		if err != nil {
			return nil, err
		}
		if o != nil {
			out = append(out, colEval{opt: o, err: e, seconds: time.Since(t0).Seconds()})
		}
	}
	return out, nil
}
