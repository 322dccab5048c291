package planner

import (
	"fmt"
	"math"
	"slices"

	"github.com/dpproxy/dpproxy/measure"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack/lapack64"
	"gonum.org/v1/gonum/mat"
)

// MaxKnownCells bounds the cells of one dense generalised least-squares
// system: a domain of at most this many cells (over the batch's own
// columns, never the table's product domain) is one dense system; a larger
// one, up to MaxBlockedCells, is solved block by block (known_blocks.go),
// each block at most this many cells.
const MaxKnownCells = 1024

// GLS accumulates the information stored measurements carry about the
// histogram x over a batch's columns S, for the generalised
// least-squares estimate x̂ = J⁺b with J = Σ_m P_mᵀ A_mᵀ A_m P_m / σ_m²
// and b = Σ_m P_mᵀ A_mᵀ y_m / σ_m², whose covariance is exactly J⁺ (each
// measurement's noise independent, of variance σ_m² per answer). A
// measurement over columns C joins with the part T = C ∩ S: it is first
// summed over its columns outside S (see marginalise), which needs those
// columns whole and their factors of full column rank, and it observes
// P_m x, x summed over S's columns outside T, which needs those whole.
//
// Every estimate it gives is post-processing of released answers: it
// costs nothing.
type GLS struct {
	Columns []measure.Column
	sizes   []int
	n       int
	j       *mat.SymDense
	b       []float64
	// blk holds a domain of more than MaxKnownCells cells, solved block
	// by block (nil: j is dense over all n cells).
	blk *blocked
	// Used lists the measurements added, by ID.
	Used []int64
}

// NewGLS starts an empty system over cols (in table order): dense over
// up to MaxKnownCells cells, blocked over up to MaxBlockedCells; ok is
// false when their domain is larger.
func NewGLS(cols []measure.Column) (*GLS, bool) {
	return newGLS(cols, MaxKnownCells)
}

// newGLS is NewGLS with the dense system's bound (tests set it lower to
// compare the blocked system with the dense one).
func newGLS(cols []measure.Column, denseCells int) (*GLS, bool) {
	n := 1
	sizes := make([]int, len(cols))
	for k, c := range cols {
		sizes[k] = c.Size
		n *= c.Size
		if n > MaxBlockedCells {
			return nil, false
		}
	}
	// J and b are allocated by the first Add: a system that only checks
	// which measurements join (Joins) costs no n² memory.
	g := &GLS{Columns: cols, sizes: sizes, n: n}
	if n > denseCells {
		g.blk = newBlocked(n)
		g.b = make([]float64, n)
	}
	return g, true
}

// Clone returns an independent copy.
func (g *GLS) Clone() *GLS {
	cp := *g
	if g.blk != nil {
		cp.blk = g.blk.clone()
	}
	if g.j != nil {
		cp.j = mat.NewSymDense(g.n, nil)
		cp.j.CopySym(g.j)
	}
	cp.b = append([]float64(nil), g.b...)
	cp.Used = append([]int64(nil), g.Used...)
	return &cp
}

// Empty reports whether nothing was added.
func (g *GLS) Empty() bool { return len(g.Used) == 0 }

// Add adds m's information, weighted by weight (1 for the measurement as
// made; a planned measurement's structure may be added at another scale
// before it is made, with m.Answers nil). It reports false, adding
// nothing, when m cannot join (see GLS).
func (g *GLS) Add(m *measure.Measurement, weight float64) bool {
	return g.add(m, weight, true)
}

// Joins reports whether Add would add m, without adding it: the checks
// alone cost O(|m|), where adding costs O(n²) over the system's n cells.
func (g *GLS) Joins(m *measure.Measurement) bool {
	return g.add(m, 0, false)
}

// Equal reports whether g and o hold the same information matrix J
// (bit for bit), so that a factorisation of one serves the other.
func (g *GLS) Equal(o *GLS) bool {
	if g.blk != nil || o.blk != nil {
		return g.blk != nil && o.blk != nil && g.n == o.n && g.blocks().equal(o.blocks())
	}
	if g.n != o.n || (g.j == nil) != (o.j == nil) {
		return false
	}
	if g.j == nil {
		return true
	}
	a, b := g.j.RawSymmetric(), o.j.RawSymmetric()
	for i := 0; i < g.n; i++ {
		if !slices.Equal(a.Data[i*a.Stride+i:i*a.Stride+g.n], b.Data[i*b.Stride+i:i*b.Stride+g.n]) {
			return false
		}
	}
	return true
}

// Quad is wᵀJw for w given on some cells (cells[k] has weight w[k]),
// reading J's upper triangle: the information the system holds in the
// direction w, at O(len(cells)²).
func (g *GLS) Quad(cells []int, w []float64) float64 {
	if g.blk != nil {
		return g.blocks().quad(cells, w)
	}
	if g.j == nil {
		return 0
	}
	raw := g.j.RawSymmetric()
	v := 0.0
	for k, c := range cells {
		for l, c2 := range cells {
			i, j := min(c, c2), max(c, c2)
			v += w[k] * w[l] * raw.Data[i*raw.Stride+j]
		}
	}
	return v
}

// Bytes is about the memory g holds.
func (g *GLS) Bytes() int64 {
	if g.blk != nil {
		return g.blk.bytes() + int64(g.n)*8 + int64(len(g.Used))*8
	}
	return int64(g.n)*int64(g.n)*8 + int64(g.n)*8 + int64(len(g.Used))*8
}

// add is Add; with apply false it only checks that m joins.
func (g *GLS) add(m *measure.Measurement, weight float64, apply bool) bool {
	if err := m.Valid(); err != nil {
		return false
	}
	if g.blk != nil {
		// The blocked system reads factors by column (sparseFactorOf),
		// in class form as over cells.
		return g.addBlocked(m, weight, apply)
	}
	if err := m.Check(); err != nil {
		return false // a factor in class form: over a column longer than a dense system
	}
	m = g.embed(m)
	// Map S's columns to m's.
	inT := make([]int, len(g.Columns)) // S column -> index in m.Columns, -1 if absent
	for k, c := range g.Columns {
		inT[k] = -1
		for i, mc := range m.Columns {
			if mc.Name == c.Name {
				if mc.Def != c.Def || mc.Size != c.Size {
					return false
				}
				inT[k] = i
			}
		}
		if inT[k] < 0 && !c.Whole {
			return false
		}
	}
	keep := make([]bool, len(m.Columns))
	for _, i := range inT {
		if i >= 0 {
			keep[i] = true
		}
	}
	factors, rows, y, variance, ok := marginalise(m, keep)
	if !ok {
		return false
	}
	if !apply {
		return true
	}
	// K = ⊗ A_jᵀA_j and a = (⊗ A_jᵀ) y over T's cells.
	var tSizes []int
	k := []float64{1}
	for i, f := range factors {
		n := m.Columns[i].Size
		if !keep[i] {
			continue
		}
		tSizes = append(tSizes, n)
		k = kron(k, gram(f, rows[i], n), n)
	}
	tCells := 1
	for _, n := range tSizes {
		tCells *= n
	}
	var a []float64
	if y != nil {
		a = y
		shape := append([]int(nil), rowsKept(rows, keep)...)
		t := 0
		for i, f := range factors {
			if !keep[i] {
				continue
			}
			a, shape = modeApplyT(a, shape, t, f, rows[i], m.Columns[i].Size)
			t++
		}
	}
	// Scatter into S: cell s of S maps to cell π(s) of T.
	pi := make([]int, g.n)
	coords := make([]int, len(g.sizes))
	for s := 0; s < g.n; s++ {
		r := s
		for k := len(g.sizes) - 1; k >= 0; k-- {
			coords[k] = r % g.sizes[k]
			r /= g.sizes[k]
		}
		idx := 0
		for k := range g.sizes {
			if inT[k] >= 0 {
				idx = idx*g.sizes[k] + coords[k]
			}
		}
		pi[s] = idx
	}
	if g.j == nil {
		g.j, g.b = mat.NewSymDense(g.n, nil), make([]float64, g.n)
	}
	raw := g.j.RawSymmetric() // the upper triangle, written directly
	w := weight / variance
	for s := 0; s < g.n; s++ {
		row := k[pi[s]*tCells : (pi[s]+1)*tCells]
		dst := raw.Data[s*raw.Stride : s*raw.Stride+g.n]
		for s2 := s; s2 < g.n; s2++ {
			if v := row[pi[s2]]; v != 0 {
				dst[s2] += w * v
			}
		}
		if a != nil {
			g.b[s] += w * a[pi[s]]
		}
	}
	g.Used = append(g.Used, m.ID)
	return true
}

// embed returns m with every column that is the plain version of one of
// S's columns with a dropped cell (same Base, one cell fewer) replaced by
// S's column, its factor given a zero column for the dropped cell: m saw
// only the rows the column keeps, which are S's column's other cells.
func (g *GLS) embed(m *measure.Measurement) *measure.Measurement {
	var out *measure.Measurement
	for _, c := range g.Columns {
		if !c.DroppedCell || c.Base == "" {
			continue
		}
		for i, mc := range m.Columns {
			if mc.Name != c.Name || mc.DroppedCell || mc.Base != c.Base || mc.Size != c.Size-1 {
				continue
			}
			if out == nil {
				cp := *m
				cp.Columns = slices.Clone(m.Columns)
				cp.Factors = slices.Clone(m.Factors)
				cp.Classes = slices.Clone(m.Classes)
				out = &cp
			}
			n, rows, cells := mc.Size, m.Rows[i], m.FactorCells(i)
			f := make([]float64, rows*(n+1))
			for r := 0; r < rows; r++ {
				if cells == nil {
					f[r*(n+1)+r] = 1
					continue
				}
				copy(f[r*(n+1):r*(n+1)+n], cells[r*n:(r+1)*n])
			}
			out.Columns[i], out.Factors[i] = c, f
			if i < len(out.Classes) {
				out.Classes[i] = nil // f is over cells
			}
		}
	}
	if out == nil {
		return m
	}
	return out
}

func rowsKept(rows []int, keep []bool) []int {
	var out []int
	for i, r := range rows {
		if keep[i] {
			out = append(out, r)
		}
	}
	return out
}

// marginalise sums m over its columns not kept: with A_j of full column
// rank, u_j = A_j(A_jᵀA_j)⁻¹1 gives u_jᵀA_j = 1ᵀ, so contracting the
// answers with u_j along mode j observes x summed over column j, with the
// noise variance multiplied by u_jᵀu_j = 1ᵀ(A_jᵀA_j)⁻¹1. It returns the
// kept factors (others nil), the row counts, the contracted answers (nil
// when m has none) and the new noise variance.
func marginalise(m *measure.Measurement, keep []bool) (factors [][]float64, rows []int, y []float64, variance float64, ok bool) {
	factors = append([][]float64(nil), m.Factors...)
	rows = append([]int(nil), m.Rows...)
	y = m.Answers
	variance = m.Variance
	shape := append([]int(nil), m.Rows...)
	for i := len(m.Columns) - 1; i >= 0; i-- {
		if keep[i] {
			continue
		}
		if !m.Columns[i].Whole {
			return nil, nil, nil, 0, false
		}
		n := m.Columns[i].Size
		var u []float64
		var c float64
		if m.Factors[i] == nil {
			u = make([]float64, n)
			for r := range u {
				u[r] = 1
			}
			c = float64(n)
		} else {
			if m.Rows[i] < n || m.InClassForm(i) {
				// Fewer rows than cells: not of full column rank, so not
				// summed over (before forming its n × n Gram). A factor
				// in class form always has fewer.
				return nil, nil, nil, 0, false
			}
			a := mat.NewDense(m.Rows[i], n, m.Factors[i])
			var ata mat.SymDense
			ata.SymOuterK(1, a.T())
			var chol mat.Cholesky
			if !chol.Factorize(&ata) {
				return nil, nil, nil, 0, false
			}
			ones := mat.NewVecDense(n, nil)
			for r := 0; r < n; r++ {
				ones.SetVec(r, 1)
			}
			var gOnes mat.VecDense
			if err := chol.SolveVecTo(&gOnes, ones); err != nil {
				return nil, nil, nil, 0, false
			}
			c = mat.Dot(ones, &gOnes)
			var uv mat.VecDense
			uv.MulVec(a, &gOnes)
			u = uv.RawVector().Data
		}
		if y != nil {
			y, shape = contract(y, shape, i, u)
		} else {
			shape[i] = 1
		}
		variance *= c
		rows[i] = 1
		factors[i] = nil
	}
	return factors, rows, y, variance, true
}

// contract sums tensor t (row-major over shape) along mode j against u.
func contract(t []float64, shape []int, j int, u []float64) ([]float64, []int) {
	left, right := 1, 1
	for k := 0; k < j; k++ {
		left *= shape[k]
	}
	for k := j + 1; k < len(shape); k++ {
		right *= shape[k]
	}
	n := shape[j]
	out := make([]float64, left*right)
	for l := 0; l < left; l++ {
		for i := 0; i < n; i++ {
			base := (l*n + i) * right
			for r := 0; r < right; r++ {
				out[l*right+r] += u[i] * t[base+r]
			}
		}
	}
	ns := append([]int(nil), shape...)
	ns[j] = 1
	return out, ns
}

// modeApplyT applies Aᵀ (A rows × n, row-major; nil the identity) to
// tensor t along mode j.
func modeApplyT(t []float64, shape []int, j int, a []float64, rows, n int) ([]float64, []int) {
	ns := append([]int(nil), shape...)
	ns[j] = n
	if a == nil {
		return t, ns
	}
	left, right := 1, 1
	for k := 0; k < j; k++ {
		left *= shape[k]
	}
	for k := j + 1; k < len(shape); k++ {
		right *= shape[k]
	}
	out := make([]float64, left*n*right)
	for l := 0; l < left; l++ {
		for i := 0; i < rows; i++ {
			src := t[(l*rows+i)*right : (l*rows+i+1)*right]
			for c := 0; c < n; c++ {
				v := a[i*n+c]
				if v == 0 {
					continue
				}
				dst := out[(l*n+c)*right : (l*n+c+1)*right]
				for r := range dst {
					dst[r] += v * src[r]
				}
			}
		}
	}
	return out, ns
}

// gram is AᵀA (n × n, row-major) for A rows × n (nil: the identity).
func gram(a []float64, rows, n int) []float64 {
	out := make([]float64, n*n)
	if a == nil {
		for i := 0; i < n; i++ {
			out[i*n+i] = 1
		}
		return out
	}
	for r := 0; r < rows; r++ {
		row := a[r*n : (r+1)*n]
		for i, vi := range row {
			if vi == 0 {
				continue
			}
			for k, vk := range row {
				out[i*n+k] += vi * vk
			}
		}
	}
	return out
}

// kron is the Kronecker product of a (m × m) and b (n × n), row-major.
func kron(a []float64, b []float64, n int) []float64 {
	m := int(math.Round(math.Sqrt(float64(len(a)))))
	out := make([]float64, m*n*m*n)
	for i := 0; i < m; i++ {
		for k := 0; k < m; k++ {
			v := a[i*m+k]
			if v == 0 {
				continue
			}
			for p := 0; p < n; p++ {
				for q := 0; q < n; q++ {
					out[(i*n+p)*(m*n)+k*n+q] = v * b[p*n+q]
				}
			}
		}
	}
	return out
}

// Estimate is the solved system: the GLS estimate of x over the batch's
// columns and, kept factored, its covariance, with the directions the
// measurements do not identify.
type Estimate struct {
	X []float64
	// The covariance is G = P·W·Wᵀ·Pᵀ with W = U₁₁⁻¹ (r × r, upper,
	// row-major) and P the pivoting: kept as W rather than formed, since
	// forming it (n³) cost twice the factorisation, and an answer's
	// variance reads only the rows of its cells (see Answer).
	n, r int
	piv  []int     // position k of the pivoted order holds cell piv[k]
	pos  []int     // the inverse: cell c is at position pos[c]
	w    []float64 // U₁₁⁻¹
	// null is a basis (unit vectors) of J's null space within the
	// identifiability tolerance: empty when J is invertible.
	null []*mat.VecDense
	Used []int64
	// A blocked estimate (parts not nil) keeps one dense estimate per
	// block of blocks, nil where the block has no information, over the
	// block's cells in ascending order; the covariance across blocks is
	// zero.
	blocks *blockBuild
	parts  []*Estimate
	// A pencil's estimate (pencil not nil) is the pencil at weight: its
	// answers' variances, no values (see Pencil).
	pencil *Pencil
	weight float64
}

// identifiability is the tolerance below which a pivot of J, relative to
// its largest diagonal entry per cell, counts as no information: an
// answer in such a direction would have a variance 10¹¹ times the best
// measured cell's, and is called not identified.
const identifiability = 1e-11

// Solve returns the estimate; ok is false when the system has no
// information.
//
// J is factored by Cholesky with complete pivoting, PᵀJP = UᵀU with U's
// first r rows [U₁₁ U₁₂] non-zero (r the rank within the tolerance).
// G = P·[(U₁₁ᵀU₁₁)⁻¹ 0; 0 0]·Pᵀ is a generalised inverse of J (JGJ = J),
// so for every w in J's range (every identified answer) wᵀGb is the GLS
// estimate and wᵀGw its exact variance, whichever generalised inverse is
// used; the null space is P·[−U₁₁⁻¹U₁₂; I]. One factorisation and one
// triangular inverse, O(n³/3) each, whether or not the measurements
// identify every cell.
func (g *GLS) Solve() (*Estimate, bool) {
	if g.Empty() {
		return nil, false
	}
	if g.blk != nil {
		return g.solveBlocks()
	}
	n := g.n
	raw := g.j.RawSymmetric()
	data := make([]float64, n*n)
	for i := 0; i < n; i++ {
		copy(data[i*n+i:(i+1)*n], raw.Data[i*raw.Stride+i:i*raw.Stride+n])
	}
	est, ok := solveSym(n, data)
	if !ok {
		return nil, false
	}
	est.Used = g.Used
	est.X = est.apply(g.b)
	return est, true
}

// solveSym is Solve's factorisation of a dense J (n × n, upper triangle
// row-major in data, which it overwrites): the estimate without X and
// Used; ok is false when J has no information.
func solveSym(n int, data []float64) (*Estimate, bool) {
	top := 0.0
	for i := 0; i < n; i++ {
		top = math.Max(top, data[i*n+i])
	}
	if !(top > 0) {
		return nil, false
	}
	piv := make([]int, n)
	u, r, _ := lapack64.Pstrf(blas64.Symmetric{Uplo: blas.Upper, N: n, Stride: n, Data: data}, piv, top*float64(n)*identifiability, make([]float64, 2*n))
	if r == 0 {
		return nil, false
	}
	// U₁₁⁻¹ (r × r, upper), in place of U₁₁ in a copy of stride r.
	w := make([]float64, r*r)
	for i := 0; i < r; i++ {
		copy(w[i*r+i:(i+1)*r], u.Data[i*u.Stride+i:i*u.Stride+r])
	}
	inv := blas64.Triangular{Uplo: blas.Upper, Diag: blas.NonUnit, N: r, Stride: r, Data: w}
	if ok := lapack64.Trtri(inv); !ok {
		return nil, false
	}
	est := &Estimate{n: n, r: r, piv: piv, pos: make([]int, n), w: w}
	for k, c := range piv {
		est.pos[c] = k
	}
	if r < n {
		u11 := blas64.General{Rows: r, Cols: r, Stride: r, Data: w}
		u12 := blas64.General{Rows: r, Cols: n - r, Stride: n - r, Data: make([]float64, r*(n-r))}
		for i := 0; i < r; i++ {
			copy(u12.Data[i*(n-r):(i+1)*(n-r)], u.Data[i*u.Stride+r:i*u.Stride+n])
		}
		m := blas64.General{Rows: r, Cols: n - r, Stride: n - r, Data: make([]float64, r*(n-r))}
		blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, u11, u12, 0, m) // U₁₁⁻¹U₁₂ (the lower part of w is zero)
		for z := 0; z < n-r; z++ {
			v := mat.NewVecDense(n, nil)
			for k := 0; k < r; k++ {
				v.SetVec(piv[k], -m.Data[k*(n-r)+z])
			}
			v.SetVec(piv[r+z], 1)
			v.ScaleVec(1/mat.Norm(v, 2), v)
			est.null = append(est.null, v)
		}
	}
	return est, true
}

// apply is G·b: with bp = Pᵀb, x_k = Σ_m W[k,m]·(Wᵀbp)_m over the
// identified positions, zero elsewhere.
func (e *Estimate) apply(b []float64) []float64 {
	r := e.r
	t := make([]float64, r) // Wᵀ·bp
	for k := 0; k < r; k++ {
		if bk := b[e.piv[k]]; bk != 0 {
			row := e.w[k*r : (k+1)*r]
			for m := k; m < r; m++ {
				t[m] += row[m] * bk
			}
		}
	}
	x := make([]float64, e.n)
	for k := 0; k < r; k++ {
		row := e.w[k*r : (k+1)*r]
		v := 0.0
		for m := k; m < r; m++ {
			v += row[m] * t[m]
		}
		x[e.piv[k]] = v
	}
	return x
}

// Refit is e with its estimate recomputed from g's information vector:
// for a system whose J is e's (the same measurements' structure and
// noise, other answers) it is g.Solve() without a second factorisation.
func (g *GLS) Refit(e *Estimate) *Estimate {
	cp := *e
	if e.parts != nil {
		cp.X = e.applyBlocks(g.b)
		cp.Used = g.Used
		return &cp
	}
	cp.X = e.apply(g.b)
	cp.Used = g.Used
	return &cp
}

// Bytes is about the memory e holds.
func (e *Estimate) Bytes() int64 {
	if e.parts != nil {
		return e.blocksBytes()
	}
	return int64(len(e.w)+len(e.X)+2*e.n+len(e.null)*e.n)*8 + int64(len(e.Used))*8
}

// CovAt is the covariance of cells i and j (zero where either is not
// identified).
func (e *Estimate) CovAt(i, j int) float64 {
	if e.parts != nil {
		return e.covBlocks(i, j)
	}
	pi, pj := e.pos[i], e.pos[j]
	if pi >= e.r || pj >= e.r {
		return 0
	}
	r, v := e.r, 0.0
	for m := max(pi, pj); m < r; m++ {
		v += e.w[pi*r+m] * e.w[pj*r+m]
	}
	return v
}

// Answer is the estimate of w·x for w given on some cells (cells[k] has
// weight w[k]) and its exact variance, ‖Wᵀ·Pᵀw‖² (O(r) per cell); ok is
// false when the measurements do not identify it.
func (e *Estimate) Answer(cells []int, w []float64) (value, variance float64, ok bool) {
	norm := 0.0
	for k := range cells {
		norm += w[k] * w[k]
	}
	if e.pencil != nil {
		return e.answerPencil(cells, w, norm)
	}
	if e.parts != nil {
		return e.answerBlocks(cells, w, norm)
	}
	return e.answer(cells, w, norm, e.X)
}

// answer is Answer over a dense estimate, norm the squared norm of the
// whole answer's weights (the null-space test is relative to it), the
// value read from x (nil: no value; a block's estimate keeps none).
func (e *Estimate) answer(cells []int, w []float64, norm float64, x []float64) (value, variance float64, ok bool) {
	for _, u := range e.null {
		dot := 0.0
		for k, c := range cells {
			dot += u.AtVec(c) * w[k]
		}
		if dot*dot > 1e-9*norm {
			return 0, math.Inf(1), false
		}
	}
	r := e.r
	if len(cells) == 1 {
		if x != nil {
			value = w[0] * x[cells[0]]
		}
		if p := e.pos[cells[0]]; p < r {
			for _, x := range e.w[p*r+p : (p+1)*r] {
				variance += x * x
			}
		}
		return value, variance * w[0] * w[0], true
	}
	z := make([]float64, r)
	for k, c := range cells {
		if x != nil {
			value += w[k] * x[c]
		}
		p := e.pos[c]
		if p >= r {
			continue
		}
		row := e.w[p*r : (p+1)*r]
		for m := p; m < r; m++ {
			z[m] += w[k] * row[m]
		}
	}
	for _, x := range z {
		variance += x * x
	}
	return value, math.Max(variance, 0), true
}

// String names the measurements used, for ledger entries and EXPLAIN.
func (e *Estimate) String() string {
	return fmt.Sprintf("generalised least squares over measurements %v", e.Used)
}
