package planner

import (
	"math"
	"slices"

	"github.com/dpproxy/dpproxy/measure"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack"
	"gonum.org/v1/gonum/lapack/lapack64"
)

// Pencil is a blocked system with new measurements whose weight is still
// to be chosen: per block, J(f) = J_s + f·J_n, J_s the stored
// measurements' information and J_n the new ones' at weight 1. The search
// for the least ε a new measurement needs (package reuse) solves J(f)
// for a dozen f; a pencil factors each block once instead. With
// J_s = UᵀU (Cholesky), J_n = BᵀB (pivoted Cholesky, B of J_n's rank r:
// one row per day for daily sums over hours), C = B·U⁻¹ and
// C·Cᵀ = V·diag(λ)·Vᵀ (an r × r eigenproblem), Woodbury's identity gives
// an answer c's variance as
//
//	cᵀJ(f)⁻¹c = ‖a‖² − Σ_i y_i²·f/(1 + f·λ_i),  a = U⁻ᵀc, y = Vᵀ·C·a,
//
// O(|B|² + r·|B|) per answer and block, no factorisation per f, and
// O(|B|³/3 + r·|B|²) per block once.
//
// The variances equal Solve's on the same system up to rounding (both
// are exact formulas for cᵀJ(f)⁻¹c); a caller that releases or charges
// by them re-checks its final choice with Solve. A pencil exists only
// when every block's stored J_s is well conditioned (positive definite
// past the identifiability tolerance): then J(f) identifies every cell
// of every block for all f ≥ 0, as Solve would say.
type Pencil struct {
	n      int
	blocks *blockBuild
	parts  []pencilBlock
}

// pencilBlock is one block's U⁻ᵀ and G = Vᵀ·C·U⁻ᵀ (row-major, |B| × |B|
// and r × |B|) and λ.
type pencilBlock struct {
	uinvT, g, lambda []float64
}

// Pencil is g with ms added at a weight to be chosen (see Pencil): joined
// lists the indexes of the ms that join, as Add at any positive weight
// would add them after those before. ok is false for a dense system, when
// none joins, or when some block's stored information is singular or ill
// conditioned (the caller solves each f then).
func (g *GLS) Pencil(ms []*measure.Measurement) (p *Pencil, joined []int, ok bool) {
	if g.blk == nil || g.Empty() {
		return nil, nil, false
	}
	cb := g.Clone()
	for k, m := range ms {
		if cb.Add(m, 1) {
			joined = append(joined, k)
		}
	}
	if len(joined) == 0 {
		return nil, nil, false
	}
	stored := g.blocks() // finished, so the stored J below starts from it
	// The stored terms, and the new ones, over the combined system's
	// blocks: the same forest lays out the same blocks in the same order.
	nt := len(g.blk.terms)
	sg, ng := *cb, *cb
	sg.blk = &blocked{terms: cb.blk.terms[:nt:nt], parent: cb.blk.parent, size: cb.blk.size, built: &blockBuild{base: stored}, memo: cb.blk.memo}
	ng.blk = &blocked{terms: cb.blk.terms[nt:], parent: cb.blk.parent, size: cb.blk.size, built: &blockBuild{}, memo: cb.blk.memo}
	sb, nb := sg.blocks(), ng.blocks()
	p = &Pencil{n: g.n, blocks: sb, parts: make([]pencilBlock, len(sb.cells))}
	for i, cells := range sb.cells {
		part, ok := pencilOf(len(cells), sb.j[i], nb.j[i])
		if !ok {
			return nil, nil, false
		}
		p.parts[i] = part
	}
	return p, joined, true
}

// pencilOf factors one block (js, jn: upper triangles, row-major, n × n);
// ok is false when js is not positive definite past the identifiability
// tolerance.
func pencilOf(n int, js, jn []float64) (pencilBlock, bool) {
	top := 0.0
	for i := 0; i < n; i++ {
		top = math.Max(top, js[i*n+i])
	}
	if !(top > 0) {
		return pencilBlock{}, false
	}
	u := make([]float64, n*n)
	for i := 0; i < n; i++ {
		copy(u[i*n+i:(i+1)*n], js[i*n+i:(i+1)*n])
	}
	if _, ok := lapack64.Potrf(blas64.Symmetric{Uplo: blas.Upper, N: n, Stride: n, Data: u}); !ok {
		return pencilBlock{}, false
	}
	for i := 0; i < n; i++ {
		// Pivots below Solve's tolerance: Solve would call some of the
		// block's cells not identified, so the block is not the pencil's.
		if d := u[i*n+i]; d*d <= top*float64(n)*identifiability {
			return pencilBlock{}, false
		}
	}
	if ok := lapack64.Trtri(blas64.Triangular{Uplo: blas.Upper, Diag: blas.NonUnit, N: n, Stride: n, Data: u}); !ok {
		return pencilBlock{}, false
	}
	uinv := blas64.General{Rows: n, Cols: n, Stride: n, Data: u} // upper; the lower part is zero
	uinvT := make([]float64, n*n)
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			uinvT[j*n+i] = u[i*n+j]
		}
	}
	// J_n = BᵀB: PᵀJ_nP = RᵀR, B = R·Pᵀ (its first r rows).
	rn := make([]float64, n*n)
	for i := 0; i < n; i++ {
		copy(rn[i*n+i:(i+1)*n], jn[i*n+i:(i+1)*n])
	}
	piv := make([]int, n)
	_, r, _ := lapack64.Pstrf(blas64.Symmetric{Uplo: blas.Upper, N: n, Stride: n, Data: rn}, piv, -1, make([]float64, 2*n))
	if r == 0 {
		return pencilBlock{uinvT: uinvT}, true // nothing new in this block
	}
	b := blas64.General{Rows: r, Cols: n, Stride: n, Data: make([]float64, r*n)}
	for i := 0; i < r; i++ {
		for l := i; l < n; l++ {
			b.Data[i*n+piv[l]] = rn[i*n+l]
		}
	}
	c := blas64.General{Rows: r, Cols: n, Stride: n, Data: make([]float64, r*n)}
	blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, b, uinv, 0, c) // C = B·U⁻¹
	s := blas64.Symmetric{Uplo: blas.Upper, N: r, Stride: r, Data: make([]float64, r*r)}
	blas64.Syrk(blas.NoTrans, 1, c, 0, s) // C·Cᵀ
	lambda := make([]float64, r)
	work := make([]float64, 1)
	lapack64.Syev(lapack.EVCompute, s, lambda, work, -1)
	work = make([]float64, int(work[0]))
	if ok := lapack64.Syev(lapack.EVCompute, s, lambda, work, len(work)); !ok {
		return pencilBlock{}, false
	}
	for i, v := range lambda {
		lambda[i] = math.Max(v, 0) // C·Cᵀ is positive semidefinite
	}
	// G = Vᵀ·C·U⁻ᵀ, V's columns in s.
	cu := blas64.General{Rows: r, Cols: n, Stride: n, Data: make([]float64, r*n)}
	blas64.Gemm(blas.NoTrans, blas.Trans, 1, c, uinv, 0, cu)
	g := blas64.General{Rows: r, Cols: n, Stride: n, Data: make([]float64, r*n)}
	blas64.Gemm(blas.Trans, blas.NoTrans, 1, blas64.General{Rows: r, Cols: r, Stride: r, Data: s.Data}, cu, 0, g)
	return pencilBlock{uinvT: uinvT, g: g.Data, lambda: lambda}, true
}

// At is the system at weight f: an estimate whose Answer gives each
// answer's variance (no values: the pencil holds no answers).
func (p *Pencil) At(f float64) *Estimate {
	return &Estimate{n: p.n, pencil: p, weight: f}
}

// answerPencil is Answer for a pencil's estimate: the sum over the blocks
// cells reads of Σ_i z_i²/(1 + f·μ_i), not identified when w reads a
// cell no block has (beyond the tolerance the dense test allows).
func (e *Estimate) answerPencil(cells []int, w []float64, norm float64) (value, variance float64, ok bool) {
	bb, p := e.pencil.blocks, e.pencil
	var done []int32 // blocks summed, few per answer
	var c []float64  // the answer's weights on one block's cells
	for k, cell := range cells {
		b := bb.of[cell]
		if b < 0 {
			if w[k]*w[k] > 1e-9*norm {
				return 0, math.Inf(1), false
			}
			continue
		}
		if slices.Contains(done, b) {
			continue
		}
		done = append(done, b)
		nb := len(bb.cells[b])
		c = slices.Grow(c[:0], nb)[:nb]
		clear(c)
		for l := k; l < len(cells); l++ {
			if bb.of[cells[l]] == b {
				c[bb.at[cells[l]]] += w[l]
			}
		}
		part := p.parts[b]
		for i := 0; i < nb; i++ {
			a := 0.0
			for j, x := range part.uinvT[i*nb : (i+1)*nb] {
				a += x * c[j]
			}
			variance += a * a
		}
		for i, l := range part.lambda {
			y := 0.0
			for j, x := range part.g[i*nb : (i+1)*nb] {
				y += x * c[j]
			}
			variance -= y * y * e.weight / (1 + e.weight*l)
		}
	}
	return 0, math.Max(variance, 0), true
}
