package planner

import (
	"math"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// p-Identity strategies (the family of HDMM's OPT_0, McKenna et al. 2018,
// implemented here from the mathematics):
//
//	A(Θ) = [I; Θ]·D,  Θ ∈ ℝ^{p×n}, Θ ≥ 0,  D = diag(1/(1 + Σ_k Θ_ki)),
//
// so every column of A has L1 norm exactly 1 (Δ₁ = 1). With s_i = 1 + Σ_k Θ_ki,
// G̃ = diag(s)·G·diag(s) and S = I_p + ΘΘᵀ, Woodbury gives
//
//	(AᵀA)⁻¹ = diag(s)·(I − ΘᵀS⁻¹Θ)·diag(s),
//	f(Θ) = trace(G(AᵀA)⁻¹) = trace(G̃) − trace(S⁻¹ΘG̃Θᵀ),
//
// and with X = (I + ΘᵀΘ)⁻¹, Z = S⁻¹Θ = ΘX and R = Z·G̃:
//
//	∂f/∂Θ = −2·(R − (RΘᵀ)·Z) + 2·1_p·vᵀ,  v_i = (G̃X)_ii / s_i.
//
// Each row k of Θ has a support [lo_k, hi_k) (the whole column for a
// general workload; a window for range-like workloads, whose optimal rows
// are local bumps), and only entries on the support are variables. Every
// step is a product by G (O(n) for ranges and prefixes, O(n·r) for a
// compiled column), a p×p factorisation, or a sparse-times-dense product
// costing O(p·nnz(Θ)): no n×n matrix is ever formed.
type pIdentity struct {
	g      Gram
	n, p   int
	lo, hi []int // row supports
	off    []int // offsets of each row's entries in the parameter vector
	nnz    int
	gdiag  []float64

	// workspace
	s, tmp, buf, dgx []float64
	sm               *mat.SymDense
	sinv             mat.SymDense
	z, pt, r         *mat.Dense // p × n
	c                *mat.Dense // p × p
	chol             mat.Cholesky
}

// newPIdentity builds the objective for p rows with the given supports
// (nil: every row dense).
func newPIdentity(g Gram, p int, lo, hi []int) *pIdentity {
	n := g.N()
	if lo == nil {
		lo, hi = make([]int, p), make([]int, p)
		for k := range hi {
			hi[k] = n
		}
	}
	o := &pIdentity{
		g: g, n: n, p: p, lo: lo, hi: hi, gdiag: g.Diag(),
		s: make([]float64, n), tmp: make([]float64, n), buf: make([]float64, n), dgx: make([]float64, n),
		sm: mat.NewSymDense(p, nil),
		z:  mat.NewDense(p, n, nil), pt: mat.NewDense(p, n, nil), r: mat.NewDense(p, n, nil),
		c: mat.NewDense(p, p, nil),
	}
	o.off = make([]int, p+1)
	for k := 0; k < p; k++ {
		o.off[k+1] = o.off[k] + hi[k] - lo[k]
	}
	o.nnz = o.off[p]
	return o
}

// row returns row k's entries (over [lo_k, hi_k)) within the parameters.
func (o *pIdentity) row(theta []float64, k int) []float64 {
	return theta[o.off[k]:o.off[k+1]]
}

// dense expands the parameters into a p×n matrix.
func (o *pIdentity) dense(theta []float64) *mat.Dense {
	out := mat.NewDense(o.p, o.n, nil)
	for k := 0; k < o.p; k++ {
		copy(out.RawRowView(k)[o.lo[k]:o.hi[k]], o.row(theta, k))
	}
	return out
}

// gtilde sets dst = G̃·v = s∘G(s∘v).
func (o *pIdentity) gtilde(dst, v []float64) {
	for i, x := range v {
		o.tmp[i] = o.s[i] * x
	}
	o.g.MulVec(dst, o.tmp)
	for i := range dst {
		dst[i] *= o.s[i]
	}
}

// eval returns f(Θ) and, when grad is non-nil, ∂f/∂Θ on the supports.
// It returns +Inf if S is not numerically positive definite.
func (o *pIdentity) eval(theta []float64, grad []float64) float64 {
	return o.evalParts(theta, nil, grad, nil)
}

// evalParts evaluates f with s computed from sTheta (theta when nil). With
// gv nil, grad receives the full gradient; otherwise grad receives the part
// through X and gv the part through s.
//
// It is one function of some 125 lines on purpose: it follows the
// derivation above step by step (S, Z and Pt, diag(G̃X), R and C, the
// gradient), each step reading the previous ones' buffers in o, and it is
// the optimiser's hot loop; split, the steps would pass those buffers
// around without reading more easily.
func (o *pIdentity) evalParts(theta, sTheta []float64, grad, gv []float64) float64 {
	n, p := o.n, o.p
	if sTheta == nil {
		sTheta = theta
	}
	for i := range o.s {
		o.s[i] = 1
	}
	for k := 0; k < p; k++ {
		for i, v := range o.row(sTheta, k) {
			o.s[o.lo[k]+i] += v
		}
	}
	// S = I + ΘΘᵀ over overlapping supports.
	for k := 0; k < p; k++ {
		rk := o.row(theta, k)
		for l := k; l < p; l++ {
			a, b := max(o.lo[k], o.lo[l]), min(o.hi[k], o.hi[l])
			v := 0.0
			if a < b {
				rl := o.row(theta, l)
				v = dot(rk[a-o.lo[k]:b-o.lo[k]], rl[a-o.lo[l]:b-o.lo[l]])
			}
			if k == l {
				v++
			}
			o.sm.SetSym(k, l, v)
		}
	}
	if !o.chol.Factorize(o.sm) {
		return math.Inf(1)
	}
	if err := o.chol.InverseTo(&o.sinv); err != nil {
		return math.Inf(1)
	}
	// Z = S⁻¹Θ, Pt_k = G̃Θ_kᵀ.
	zraw := o.z.RawMatrix()
	for i := range zraw.Data {
		zraw.Data[i] = 0
	}
	full := o.buf
	sraw := o.sinv.RawSymmetric()
	for l := 0; l < p; l++ {
		rl := o.row(theta, l)
		for k := 0; k < p; k++ {
			var c float64
			if k <= l {
				c = sraw.Data[k*sraw.Stride+l]
			} else {
				c = sraw.Data[l*sraw.Stride+k]
			}
			if c == 0 {
				continue
			}
			floats.AddScaled(o.z.RawRowView(k)[o.lo[l]:o.hi[l]], c, rl)
		}
	}
	for k := 0; k < p; k++ {
		dst := o.pt.RawRowView(k)
		for i := range dst {
			dst[i] = 0
		}
		copy(dst[o.lo[k]:o.hi[k]], o.row(theta, k))
		copy(full, dst)
		o.gtilde(dst, full)
	}
	// diag(G̃X)_i = s_i² G_ii − Σ_k Pt_ki Z_ki; f is its sum.
	dgx := o.dgx
	for i := 0; i < n; i++ {
		dgx[i] = o.s[i] * o.s[i] * o.gdiag[i]
	}
	for k := 0; k < p; k++ {
		pr, zr := o.pt.RawRowView(k), o.z.RawRowView(k)
		for i := 0; i < n; i++ {
			dgx[i] -= pr[i] * zr[i]
		}
	}
	f := 0.0
	for _, v := range dgx {
		f += v
	}
	if grad == nil {
		return f
	}
	// R = Z·G̃ (rows), C = R·Θᵀ.
	for k := 0; k < p; k++ {
		copy(full, o.z.RawRowView(k))
		o.gtilde(o.r.RawRowView(k), full)
	}
	for k := 0; k < p; k++ {
		rr := o.r.RawRowView(k)
		for l := 0; l < p; l++ {
			o.c.Set(k, l, floats.Dot(rr[o.lo[l]:o.hi[l]], o.row(theta, l)))
		}
	}
	// grad_ki = −2(R_ki − Σ_l C_kl Z_li) + 2 dgx_i/s_i on the supports.
	for k := 0; k < p; k++ {
		gk := grad[o.off[k]:o.off[k+1]]
		rr := o.r.RawRowView(k)[o.lo[k]:o.hi[k]]
		for i := range gk {
			gk[i] = rr[i]
		}
		crow := o.c.RawRowView(k)
		for l := 0; l < p; l++ {
			c := crow[l]
			if c == 0 {
				continue
			}
			floats.AddScaled(gk, -c, o.z.RawRowView(l)[o.lo[k]:o.hi[k]])
		}
		if gv != nil {
			gvk := gv[o.off[k]:o.off[k+1]]
			for i := range gk {
				j := o.lo[k] + i
				gk[i] = -2 * gk[i]
				gvk[i] = 2 * dgx[j] / o.s[j]
			}
			continue
		}
		for i := range gk {
			j := o.lo[k] + i
			gk[i] = -2*gk[i] + 2*dgx[j]/o.s[j]
		}
	}
	return f
}

// pack extracts the supported entries of a dense p×n (row-major) Θ.
func (o *pIdentity) pack(dense []float64) []float64 {
	out := make([]float64, o.nnz)
	for k := 0; k < o.p; k++ {
		copy(o.row(out, k), dense[k*o.n+o.lo[k]:k*o.n+o.hi[k]])
	}
	return out
}

// splitmix64 is a tiny deterministic generator for optimiser restarts (the
// planner must be reproducible and never touches data; no math/rand).
type splitmix64 uint64

func (s *splitmix64) next() uint64 {
	*s += 0x9e3779b97f4a7c15
	z := uint64(*s)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (s *splitmix64) float() float64 { return float64(s.next()>>11) / (1 << 53) }

func randomInit(n, p int, seed uint64) []float64 {
	r := splitmix64(seed)
	theta := make([]float64, n*p)
	for i := range theta {
		theta[i] = r.float()
	}
	return theta
}
