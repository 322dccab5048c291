package planner

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// ColumnStrategy is a measurement matrix over one column's domain. Its
// entries are integers, so A·x is integer for an integer histogram x and
// exact discrete noise can be added without rounding.
type ColumnStrategy struct {
	Name string
	A    *mat.Dense // m × n
	// Pinv is A⁺ (n × m): least-squares reconstruction.
	Pinv *mat.Dense
	// Gram is (AᵀA)⁺ (n × n): the error form, w(AᵀA)⁺wᵀ. It is nil for
	// optimised Gaussian strategies over more than maxDenseGram cells, which
	// keep only a triangular factor; GramMatrix materialises it.
	Gram *mat.Dense
	// L1, L2 are the largest column norms.
	L1, L2 float64
	// FullRank reports whether every vector over the column is answerable.
	FullRank bool
	// Grid is the value of one integer unit of A in the units of the
	// real-valued strategy A approximates: 1 for the integer families
	// (identity, hierarchical, wavelet, workload rows), 1/K for optimised
	// strategies rounded to the grid (see gridLaplace).
	Grid float64

	// Classes, when set, puts the strategy over a long column's classes
	// (reduce.go): A (m × r) and Pinv (r × m) are over the r classes, and
	// over the column's n = len(Classes) cells the strategy is A·P and its
	// reconstruction Pᵀ·D⁻¹·Pinv, with P the r × n partition matrix
	// (Classes[i] = −1: a cell in no class, a zero column) and D the class
	// sizes. The same matrix, kept at m × r instead of m × n: a year of
	// days over five years of hours is 365 × 365, not 365 × 43,824 twice.
	// Gram and gramFactor are not set in this form.
	Classes []int

	// gramFactor, when set, is C with (AᵀA)⁻¹ = C·Cᵀ. Optimised Gaussian
	// strategies over more than maxDenseGram cells keep only the factor and
	// leave Gram nil.
	gramFactor *mat.Dense
}

func newColumnStrategy(name string, a *mat.Dense) (*ColumnStrategy, error) {
	m, n := a.Dims()
	cs := &ColumnStrategy{Name: name, A: a, Grid: 1}
	for j := 0; j < n; j++ {
		var l1, l2 float64
		for i := 0; i < m; i++ {
			v := a.At(i, j)
			l1 += math.Abs(v)
			l2 += v * v
		}
		cs.L1 = math.Max(cs.L1, l1)
		cs.L2 = math.Max(cs.L2, math.Sqrt(l2))
	}
	var ata mat.SymDense
	ata.SymOuterK(1, a.T())
	var chol mat.Cholesky
	if m >= n && chol.Factorize(&ata) {
		var inv mat.SymDense
		if err := chol.InverseTo(&inv); err == nil {
			cs.FullRank = true
			cs.Gram = mat.DenseCopyOf(&inv)
			cs.Pinv = mat.NewDense(n, m, nil)
			cs.Pinv.Mul(cs.Gram, a.T())
			return cs, nil
		}
	}
	// Rank-deficient (a column workload): pseudo-inverse by SVD.
	var svd mat.SVD
	if !svd.Factorize(a, mat.SVDThin) {
		return nil, fmt.Errorf("planner: SVD of %s strategy failed", name)
	}
	vals := svd.Values(nil)
	var u, v mat.Dense
	svd.UTo(&u)
	svd.VTo(&v)
	tol := float64(max(m, n)) * vals[0] * 1e-12
	k := len(vals)
	inv := mat.NewDense(n, m, nil)
	gram := mat.NewDense(n, n, nil)
	rank := 0
	for r := 0; r < k; r++ {
		if vals[r] <= tol {
			continue
		}
		rank++
		vc := v.ColView(r)
		uc := u.ColView(r)
		var outer mat.Dense
		outer.Outer(1/vals[r], vc, uc)
		inv.Add(inv, &outer)
		var g mat.Dense
		g.Outer(1/(vals[r]*vals[r]), vc, vc)
		gram.Add(gram, &g)
	}
	cs.Pinv, cs.Gram, cs.FullRank = inv, gram, rank == n
	return cs, nil
}

// ClassSizes is the number of cells in each class of a strategy in class
// form.
func (cs *ColumnStrategy) ClassSizes() []float64 {
	_, r := cs.A.Dims()
	size := make([]float64, r)
	for _, c := range cs.Classes {
		if c >= 0 {
			size[c]++
		}
	}
	return size
}

// CellMatrices is A and A⁺ over the column's cells: the fields
// themselves, or in class form A·P and Pᵀ·D⁻¹·Pinv built densely (for
// tests and small columns: m × n each).
func (cs *ColumnStrategy) CellMatrices() (a, pinv *mat.Dense) {
	if cs.Classes == nil {
		return cs.A, cs.Pinv
	}
	n := len(cs.Classes)
	size := cs.ClassSizes()
	m, _ := cs.A.Dims()
	a = mat.NewDense(m, n, nil)
	pinv = mat.NewDense(n, m, nil)
	for i, c := range cs.Classes {
		if c < 0 {
			continue
		}
		for k := 0; k < m; k++ {
			a.Set(k, i, cs.A.At(k, c))
			pinv.Set(i, k, cs.Pinv.At(c, k)/size[c])
		}
	}
	return a, pinv
}

// GramMatrix returns (AᵀA)⁺, materialising it from the strategy's factor
// when Gram was not kept (O(n³)).
func (cs *ColumnStrategy) GramMatrix() *mat.Dense {
	if cs.Gram != nil || cs.gramFactor == nil {
		return cs.Gram
	}
	var g mat.Dense
	g.Mul(cs.gramFactor, cs.gramFactor.T())
	symmetrize(&g)
	return &g
}

// Identity measures every cell.
func Identity(n int) (*ColumnStrategy, error) {
	a := mat.NewDense(n, n, nil)
	for i := 0; i < n; i++ {
		a.Set(i, i, 1)
	}
	return newColumnStrategy("identity", a)
}

// Hierarchical measures every node of a b-ary tree of intervals over the
// cells, the root (total) included and the single cells as leaves.
func Hierarchical(n, b int) (*ColumnStrategy, error) {
	var rows [][2]int
	var build func(lo, hi int)
	build = func(lo, hi int) {
		rows = append(rows, [2]int{lo, hi})
		if hi-lo <= 1 {
			return
		}
		size := hi - lo
		for k := 0; k < b; k++ {
			clo, chi := lo+size*k/b, lo+size*(k+1)/b
			if chi > clo {
				build(clo, chi)
			}
		}
	}
	build(0, n)
	a := mat.NewDense(len(rows), n, nil)
	for r, iv := range rows {
		for c := iv[0]; c < iv[1]; c++ {
			a.Set(r, c, 1)
		}
	}
	return newColumnStrategy(fmt.Sprintf("H%d", b), a)
}

// Wavelet is the (unnormalised, ±1) Haar wavelet: the total, then for each
// interval of a binary split the left half minus the right half. It has n
// rows and full rank for any n.
func Wavelet(n int) (*ColumnStrategy, error) {
	a := mat.NewDense(n, n, nil)
	for c := 0; c < n; c++ {
		a.Set(0, c, 1)
	}
	r := 1
	var build func(lo, hi int)
	build = func(lo, hi int) {
		if hi-lo < 2 {
			return
		}
		mid := lo + (hi-lo+1)/2
		for c := lo; c < hi; c++ {
			if c < mid {
				a.Set(r, c, 1)
			} else {
				a.Set(r, c, -1)
			}
		}
		r++
		build(lo, mid)
		build(mid, hi)
	}
	build(0, n)
	return newColumnStrategy("wavelet", a)
}

// Rows builds a strategy from explicit integer rows (e.g. the distinct
// per-column vectors a workload needs).
func Rows(name string, n int, rows [][]float64) (*ColumnStrategy, error) {
	a := mat.NewDense(len(rows), n, nil)
	for r, row := range rows {
		a.SetRow(r, row)
	}
	return newColumnStrategy(name, a)
}
