package planner

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// Gram is a workload's Gram matrix G = WᵀW over one column's cells, kept
// structured: the optimisers only multiply by it and read its diagonal, so a
// structured Gram (all ranges, prefixes, a union of a few factor vectors
// plus a diagonal) costs O(n) or O(n·r) per product instead of O(n²).
//
// The expected total squared error of a strategy A on the workload W, per
// unit noise variance, is trace(G (AᵀA)⁻¹) — so G is all the planner needs
// to know about W.
type Gram interface {
	// N is the number of cells.
	N() int
	// MulVec sets dst = G·v (len(dst) = len(v) = N; dst and v do not alias).
	MulVec(dst, v []float64)
	// Diag returns G's diagonal (a fresh slice).
	Diag() []float64
	// Key identifies the matrix for caching: equal keys mean equal matrices
	// (up to the float rounding of the key's own hash).
	Key() string
}

// tridiagInverse is implemented by Grams whose inverse is tridiagonal; the
// Gaussian optimiser then runs in O(n) per iteration.
type tridiagInverse interface {
	// InverseTridiag returns G⁻¹'s diagonal (n) and off-diagonal (n−1).
	InverseTridiag() (diag, off []float64)
}

// spectral is implemented by Grams with closed-form eigenvalues.
type spectral interface {
	Eigenvalues() []float64
}

// AllRangeGram is the Gram matrix of the workload of all n(n+1)/2 ranges
// [a, b] over n cells: G_ij = (min(i,j)+1)(n−max(i,j)), the number of ranges
// holding both i and j. G = (n+1)·T⁻¹ with T = tridiag(−1, 2, −1), so its
// inverse is tridiagonal and its eigenvalues are (n+1)/(4 sin²(kπ/(2n+2))).
type AllRangeGram struct{ Size int }

// PrefixGram is the Gram matrix of the n prefix queries [0, b]:
// G_ij = n − max(i,j) = LᵀL with L the lower-triangular matrix of ones, so
// G⁻¹ = L⁻¹L⁻ᵀ is tridiagonal and the eigenvalues are the squared singular
// values of L, 1/(4 sin²((2k−1)π/(4n+2))).
type PrefixGram struct{ Size int }

func (g AllRangeGram) N() int { return g.Size }
func (g PrefixGram) N() int   { return g.Size }

func (g AllRangeGram) Key() string { return fmt.Sprintf("allrange/%d", g.Size) }
func (g PrefixGram) Key() string   { return fmt.Sprintf("prefix/%d", g.Size) }

// MulVec: (Gv)_i = (n−i)·Σ_{j≤i}(j+1)v_j + (i+1)·Σ_{j>i}(n−j)v_j.
func (g AllRangeGram) MulVec(dst, v []float64) {
	n := g.Size
	acc := 0.0
	for i := 0; i < n; i++ {
		acc += float64(i+1) * v[i]
		dst[i] = float64(n-i) * acc
	}
	acc = 0
	for i := n - 1; i >= 0; i-- {
		dst[i] += float64(i+1) * acc
		acc += float64(n-i) * v[i]
	}
}

// MulVec: (Gv)_i = (n−i)·Σ_{j≤i}v_j + Σ_{j>i}(n−j)v_j.
func (g PrefixGram) MulVec(dst, v []float64) {
	n := g.Size
	acc := 0.0
	for i := 0; i < n; i++ {
		acc += v[i]
		dst[i] = float64(n-i) * acc
	}
	acc = 0
	for i := n - 1; i >= 0; i-- {
		dst[i] += acc
		acc += float64(n-i) * v[i]
	}
}

func (g AllRangeGram) Diag() []float64 {
	d := make([]float64, g.Size)
	for i := range d {
		d[i] = float64(i+1) * float64(g.Size-i)
	}
	return d
}

func (g PrefixGram) Diag() []float64 {
	d := make([]float64, g.Size)
	for i := range d {
		d[i] = float64(g.Size - i)
	}
	return d
}

func (g AllRangeGram) InverseTridiag() ([]float64, []float64) {
	n := g.Size
	d, o := make([]float64, n), make([]float64, max(n-1, 0))
	c := 1 / float64(n+1)
	for i := range d {
		d[i] = 2 * c
	}
	for i := range o {
		o[i] = -c
	}
	return d, o
}

func (g PrefixGram) InverseTridiag() ([]float64, []float64) {
	n := g.Size
	d, o := make([]float64, n), make([]float64, max(n-1, 0))
	for i := range d {
		d[i] = 2
	}
	d[0] = 1
	for i := range o {
		o[i] = -1
	}
	return d, o
}

func (g AllRangeGram) Eigenvalues() []float64 {
	n := g.Size
	out := make([]float64, n)
	for k := 1; k <= n; k++ {
		s := math.Sin(float64(k) * math.Pi / float64(2*n+2))
		out[k-1] = float64(n+1) / (4 * s * s)
	}
	return out
}

func (g PrefixGram) Eigenvalues() []float64 {
	n := g.Size
	out := make([]float64, n)
	for k := 1; k <= n; k++ {
		s := math.Sin(float64(2*k-1) * math.Pi / float64(4*n+2))
		out[k-1] = 1 / (4 * s * s)
	}
	return out
}

// scaledGram is c·G.
type scaledGram struct {
	c float64
	g Gram
}

func (s scaledGram) N() int { return s.g.N() }
func (s scaledGram) MulVec(dst, v []float64) {
	s.g.MulVec(dst, v)
	for i := range dst {
		dst[i] *= s.c
	}
}
func (s scaledGram) Diag() []float64 {
	d := s.g.Diag()
	for i := range d {
		d[i] *= s.c
	}
	return d
}
func (s scaledGram) Key() string { return s.g.Key() } // the optimum is scale-invariant

// LowRankGram is G = F·K·Fᵀ + diag(D): the effective Gram of a column in a
// compiled workload, where F's columns are the distinct factor vectors the
// workload uses on the column (K their pairwise weights) and D collects the
// group-by terms. Products cost O(n·r).
type LowRankGram struct {
	Size int
	F    [][]float64 // r vectors of length Size (nil entries: the ones vector)
	K    [][]float64 // r × r, symmetric
	D    []float64   // length Size, or nil
	key  string
	// For MulVec and Diag, set by NewLowRankGram: each factor's first and last
	// non-zero cell (lo > hi when all zero), the prefix-like factors
	// grouped for running sums, and each row of K's non-zero weights.
	lo, hi   []int
	runs     []runGroup
	inRun    []bool
	weighted [][]int
}

// NewLowRankGram builds F·K·Fᵀ + diag(D), dropping factors whose weights
// are all zero.
func NewLowRankGram(n int, f [][]float64, k [][]float64, d []float64) *LowRankGram {
	var keep []int
	for i := range f {
		nz := false
		for j := range f {
			if k[i][j] != 0 {
				nz = true
				break
			}
		}
		if nz {
			keep = append(keep, i)
		}
	}
	g := &LowRankGram{Size: n, D: d}
	for _, i := range keep {
		v := f[i]
		if v == nil {
			v = ones(n)
		}
		g.F = append(g.F, v)
		row := make([]float64, len(keep))
		for jj, j := range keep {
			row[jj] = k[i][j]
		}
		g.K = append(g.K, row)
	}
	g.key = hashFloats(n, g.F, g.K, d)
	g.index()
	return g
}

func ones(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = 1
	}
	return v
}

func (g *LowRankGram) N() int      { return g.Size }
func (g *LowRankGram) Key() string { return g.key }

// MulVec sets dst = G·v: the projections Fᵀv, weighted by K, then
// spread back by F. It adds only terms that are not zero, in the same
// order as the plain loops over every cell and factor (each factor over
// its run of non-zero cells; factors that are one constant from the same
// cell on, such as a quantile's prefixes, by one running sum; K's zero
// weights skipped), so the result is the same to the bit at a fraction
// of the cost for the prefix and bucket factors workloads hold.
func (g *LowRankGram) MulVec(dst, v []float64) {
	r := len(g.F)
	proj := make([]float64, r)
	for _, run := range g.runs {
		s, i := 0.0, run.lo
		for x, a := range run.vecs {
			for ; i <= run.hi[x]; i++ {
				s += run.c * v[i]
			}
			proj[a] = s
		}
	}
	for a, f := range g.F {
		if !g.inRun[a] && g.lo[a] <= g.hi[a] {
			proj[a] = dot(f[g.lo[a]:g.hi[a]+1], v[g.lo[a]:g.hi[a]+1])
		}
	}
	for i := range dst {
		dst[i] = 0
		if g.D != nil {
			dst[i] = g.D[i] * v[i]
		}
	}
	coef := make([]float64, r)
	for a := 0; a < r; a++ {
		c := 0.0
		for _, b := range g.weighted[a] {
			c += g.K[a][b] * proj[b]
		}
		coef[a] = c
		if c != 0 && g.lo[a] <= g.hi[a] {
			axpy(dst[g.lo[a]:g.hi[a]+1], c, g.F[a][g.lo[a]:g.hi[a]+1])
		}
	}
	// Skipping a zero term changes nothing but the sign of a zero result
	// (−0 + +0 is +0): recompute those cells with every term.
	for i, x := range dst {
		if x != 0 {
			continue
		}
		y := 0.0
		if g.D != nil {
			y = g.D[i] * v[i]
		}
		for a, c := range coef {
			if c != 0 {
				y += c * g.F[a][i]
			}
		}
		dst[i] = y
	}
}

// index sets what MulVec reads: each factor's run of non-zero cells, the
// groups of constant runs from the same cell, and K's non-zero weights.
func (g *LowRankGram) index() {
	r := len(g.F)
	g.lo, g.hi, g.weighted = make([]int, r), make([]int, r), make([][]int, r)
	for a, f := range g.F {
		g.lo[a], g.hi[a] = nonZeroRange(f)
	}
	g.runs, g.inRun = constantRuns(g.F, g.lo, g.hi)
	for a, row := range g.K {
		for b, k := range row {
			if k != 0 {
				g.weighted[a] = append(g.weighted[a], b)
			}
		}
	}
}

// Diag returns the diagonal, D[i] + Σ_a Σ_b K[a][b]·F[a][i]·F[b][i],
// adding only the terms that are not zero: at each cell, for each factor
// a non-zero there, the pairs (a, b) with b non-zero there or with
// K[a][b] non-zero, whichever list is shorter. A workload's K is usually
// diagonal (one weight per query), so a prefix workload of r queries
// costs about r·n instead of r²·n; the factors of a column's classes or
// time buckets are mostly zero, so they cost O(Σ_i nz(i)) instead of
// O(n·r²). Each cell's terms are added in the same order (a, then b)
// with the same products as the plain double loop, and the terms left
// out are zeros, so the result is the same to the bit.
func (g *LowRankGram) Diag() []float64 {
	d := make([]float64, g.Size)
	if g.D != nil {
		copy(d, g.D)
	}
	type entry struct {
		a int
		v float64
	}
	nz := make([][]entry, g.Size) // per cell, the factors non-zero there, ascending
	for a, fa := range g.F {
		for i, x := range fa {
			if x != 0 {
				nz[i] = append(nz[i], entry{a, x})
			}
		}
	}
	for i, es := range nz {
		for _, ea := range es {
			ka := g.K[ea.a]
			if ws := g.weighted[ea.a]; len(ws) < len(es) {
				for _, b := range ws {
					if fb := g.F[b][i]; fb != 0 {
						d[i] += ka[b] * ea.v * fb
					}
				}
				continue
			}
			for _, eb := range es {
				if k := ka[eb.a]; k != 0 {
					d[i] += k * ea.v * eb.v
				}
			}
		}
	}
	return d
}

// DenseGram wraps an explicit symmetric matrix.
type DenseGram struct {
	M   *mat.SymDense
	key string
}

// NewDenseGram wraps m (not copied).
func NewDenseGram(m *mat.SymDense) *DenseGram {
	n := m.SymmetricDim()
	raw := m.RawSymmetric()
	rows := make([][]float64, n)
	for i := range rows {
		rows[i] = raw.Data[i*raw.Stride+i : i*raw.Stride+n]
	}
	return &DenseGram{M: m, key: hashFloats(n, rows, nil, nil)}
}

func (g *DenseGram) N() int      { return g.M.SymmetricDim() }
func (g *DenseGram) Key() string { return g.key }
func (g *DenseGram) MulVec(dst, v []float64) {
	d := mat.NewVecDense(len(dst), dst)
	d.MulVec(g.M, mat.NewVecDense(len(v), v))
}
func (g *DenseGram) Diag() []float64 {
	n := g.N()
	d := make([]float64, n)
	for i := range d {
		d[i] = g.M.At(i, i)
	}
	return d
}

// DenseOf materialises any Gram (tests and small domains only).
func DenseOf(g Gram) *mat.SymDense {
	n := g.N()
	out := mat.NewSymDense(n, nil)
	e := make([]float64, n)
	col := make([]float64, n)
	for j := 0; j < n; j++ {
		e[j] = 1
		g.MulVec(col, e)
		e[j] = 0
		for i := 0; i <= j; i++ {
			out.SetSym(i, j, col[i])
		}
	}
	return out
}

// Eigenvalues of G: closed forms for the structured Grams, a dense
// symmetric eigendecomposition otherwise (O(n³): small n only).
func gramEigenvalues(g Gram) ([]float64, error) {
	if s, ok := g.(spectral); ok {
		return s.Eigenvalues(), nil
	}
	if s, ok := g.(scaledGram); ok {
		ev, err := gramEigenvalues(s.g)
		for i := range ev {
			ev[i] *= s.c
		}
		return ev, err
	}
	var es mat.EigenSym
	if !es.Factorize(DenseOf(g), false) {
		return nil, fmt.Errorf("planner: eigendecomposition failed")
	}
	return es.Values(nil), nil
}

// SumSqrtEigen is Σ_k √λ_k(G) = Σ σ_k(W), the nuclear norm of W.
func SumSqrtEigen(g Gram) (float64, error) {
	ev, err := gramEigenvalues(g)
	if err != nil {
		return 0, err
	}
	s := 0.0
	for _, v := range ev {
		if v > 0 {
			s += math.Sqrt(v)
		}
	}
	return s, nil
}

// SVDBound is the lower bound (Σ σ_k(W))²/n (Li–Miklau) on trace(G(AᵀA)⁻¹)
// over every strategy A whose columns have L2 norm at most 1 — the Gaussian
// error per unit noise variance. For Laplace with ε = 1 the bound on the
// expected total squared error is twice this (columns of L1 norm ≤ 1 have
// L2 norm ≤ 1, and a Laplace draw of scale 1 has variance 2). For a
// Kronecker product of Grams the bound is the product of the per-column
// bounds.
func SVDBound(grams ...Gram) (float64, error) {
	b := 1.0
	for _, g := range grams {
		s, err := SumSqrtEigen(g)
		if err != nil {
			return 0, err
		}
		b *= s * s / float64(g.N())
	}
	return b, nil
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func axpy(dst []float64, c float64, x []float64) {
	for i := range dst {
		dst[i] += c * x[i]
	}
}

// hashFloats is a 128-bit FNV-1a style digest of the values' bit patterns:
// a cache key, not a security boundary. Each vector is mixed sparsely, as
// its length, its non-zero entries' (index, bits) and its length again
// (an index no entry has, ending it): the factors of time buckets are
// mostly zeros (a day of five years of hours is 24 of 43,824), and 0 and
// −0, equal as factors, hash alike.
func hashFloats(n int, rows [][]float64, k [][]float64, d []float64) string {
	const prime = 1099511628211
	h1, h2 := uint64(14695981039346656037), uint64(0x9e3779b97f4a7c15)
	mix := func(x uint64) {
		h1 = (h1 ^ x) * prime
		h2 = (h2 ^ (x * 0xff51afd7ed558ccd)) * 0xc4ceb9fe1a85ec53
		h2 ^= h2 >> 29
	}
	mix(uint64(n))
	for _, set := range [][][]float64{rows, k} {
		mix(uint64(len(set)))
		for _, r := range set {
			mix(uint64(len(r)))
			for i, v := range r {
				if v != 0 {
					mix(uint64(i))
					mix(math.Float64bits(v))
				}
			}
			mix(uint64(len(r)))
		}
	}
	mix(uint64(len(d)))
	for _, v := range d {
		mix(math.Float64bits(v))
	}
	return fmt.Sprintf("g%d/%016x%016x", n, h1, h2)
}
