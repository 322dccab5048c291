package planner

import (
	"math"

	"gonum.org/v1/gonum/mat"
)

// Column compression. On a long column the workload rarely tells every
// cell apart: under DATE(ts) the 24 hours of a day have equal weights in
// every factor, and the cells outside every WHERE range are zero in all
// of them. Such cells form a class; the optimiser runs on the reduced
// column of one cell per class, and its strategy is expanded back.
//
// Let P (r × n) be the partition matrix (P[c][i] = 1 when cell i is in
// class c), D = PPᵀ = diag(class sizes s_c). The workload on the column is
// W = W_r·P, so its Gram is G = Pᵀ·G_r·P with G_r = W_rᵀW_r: a
// LowRankGram whose factors are read at one representative per class.
//
// Sensitivity. The expanded strategy A = A_r·P has column i equal to
// column c(i) of A_r, so every column norm of A is one of A_r's (and each
// of A_r's is one of A's): ‖A‖₁ = ‖A_r‖₁, ‖A‖₂ = ‖A_r‖₂. Measuring A·x is
// measuring A_r·(P·x), the histogram summed per class, at the same noise.
//
// Error. A_r has full column rank, P full row rank, so A⁺ = Pᵀ·D⁻¹·A_r⁺
// and (AᵀA)⁺ = Pᵀ·D⁻¹·(A_rᵀA_r)⁻¹·D⁻¹·P. For a workload row w = w_r·P,
// w·(AᵀA)⁺·wᵀ = w_r·(A_rᵀA_r)⁻¹·w_rᵀ (PPᵀ = D), and w·A⁺·y = w_r·A_r⁺·y:
// every answer and its variance are those of the reduced problem.
//
// Optimality. For any strategy B over the n cells, B_r = B·Pᵀ·D⁻¹ (each
// class's columns averaged) has column norms no larger than B's (a norm
// of an average is at most the largest norm), and for class-constant
// workloads the symmetrisation argument of HDMM (averaging B over the
// permutations within classes, which fix W and do not increase the
// convex objective) gives an error no larger than B's. So the reduced
// problem's optimum is at least as good as the full one's, and the
// optimiser, working on r instead of n cells, gets much closer to it in
// its work budget.
//
// Compression applies to columns longer than compressAbove cells (short
// columns keep full-rank strategies, which stored measurements can later
// reuse for any query) when the classes are fewer than the cells.
const compressAbove = 256

// gramClasses partitions the cells of g: cells whose values agree in every
// factor of F and that carry no diagonal (group-by) weight share a class.
// It returns each cell's class and the class count.
func gramClasses(g *LowRankGram) ([]int, int) {
	n := g.Size
	hash := make([]uint64, n)
	for i := range hash {
		hash[i] = 1469598103934665603
	}
	for _, f := range g.F {
		for i, x := range f {
			hash[i] = (hash[i] ^ math.Float64bits(x)) * 1099511628211
		}
	}
	same := func(i, j int) bool {
		for _, f := range g.F {
			if f[i] != f[j] {
				return false
			}
		}
		return true
	}
	return hashClasses(hash, same, func(i int) cellClass {
		if g.D != nil && g.D[i] != 0 {
			return classAlone
		}
		return classShared
	})
}

// cellClass is how hashClasses places a cell.
type cellClass int

const (
	classShared cellClass = iota // with the earlier cells equal to it
	classAlone                   // in a class of its own
	classNone                    // in no class
)

// hashClasses partitions cells 0..len(hash)-1: a cell kind places
// classNone is in no class (-1), classAlone in a new class of its own,
// and classShared in the class of the first earlier such cell with the
// same hash that same says equals it, else a new one. It returns each
// cell's class, numbered in order of first cell, and the class count.
func hashClasses(hash []uint64, same func(rep, i int) bool, kind func(i int) cellClass) ([]int, int) {
	classOf := make([]int, len(hash))
	var reps []int
	byHash := map[uint64][]int{} // hash → shared classes
next:
	for i := range hash {
		switch kind(i) {
		case classNone:
			classOf[i] = -1
			continue
		case classAlone:
			classOf[i] = len(reps)
			reps = append(reps, i)
			continue
		}
		for _, c := range byHash[hash[i]] {
			if same(reps[c], i) {
				classOf[i] = c
				continue next
			}
		}
		c := len(reps)
		byHash[hash[i]] = append(byHash[hash[i]], c)
		classOf[i] = c
		reps = append(reps, i)
	}
	return classOf, len(reps)
}

// reduceGram is G_r: g's factors read at one cell per class.
func reduceGram(g *LowRankGram, classOf []int, r int) *LowRankGram {
	rep := make([]int, r)
	for i := len(classOf) - 1; i >= 0; i-- {
		rep[classOf[i]] = i
	}
	f := make([][]float64, len(g.F))
	for a, v := range g.F {
		f[a] = make([]float64, r)
		for c, i := range rep {
			f[a][c] = v[i]
		}
	}
	var d []float64
	if g.D != nil {
		d = make([]float64, r)
		for c, i := range rep {
			d[c] = g.D[i]
		}
	}
	return NewLowRankGram(r, f, g.K, d)
}

// expandOpt expands a strategy over the r classes to the n cells (see
// the comment above): A = A_r·P, A⁺ = Pᵀ·D⁻¹·A_r⁺, and (AᵀA)⁺ kept as the
// factor Pᵀ·D⁻¹·C_r (n × r) with C_r·C_rᵀ = (A_rᵀA_r)⁻¹, never as an n × n
// matrix. Its error form acts through the classes in O(n + r²).
func expandOpt(red *ColumnStrategy, classOf []int, r int) (*colOpt, error) {
	n := len(classOf)
	size := make([]float64, r)
	for _, c := range classOf {
		size[c]++
	}
	ar, pr := red.A, red.Pinv
	m, _ := ar.Dims()
	a := mat.NewDense(m, n, nil)
	pinv := mat.NewDense(n, m, nil)
	for i, c := range classOf {
		for k := 0; k < m; k++ {
			a.Set(k, i, ar.At(k, c))
			pinv.Set(i, k, pr.At(c, k)/size[c])
		}
	}
	gr := red.GramMatrix() // r × r
	var chol mat.Cholesky
	sym := mat.NewSymDense(r, nil)
	for i := 0; i < r; i++ {
		for j := i; j < r; j++ {
			sym.SetSym(i, j, 0.5*(gr.At(i, j)+gr.At(j, i)))
		}
	}
	if !chol.Factorize(sym) {
		return nil, nil // not positive definite: keep the uncompressed options
	}
	var l mat.TriDense
	chol.LTo(&l)
	factor := mat.NewDense(n, r, nil)
	for i, c := range classOf {
		for k := 0; k <= c; k++ {
			factor.Set(i, k, l.At(c, k)/size[c])
		}
	}
	cs := &ColumnStrategy{Name: red.Name, A: a, Pinv: pinv, L1: red.L1, L2: red.L2,
		FullRank: r == n, Grid: red.Grid, gramFactor: factor}
	o := &colOpt{name: red.Name, n: n, l1: red.L1, l2: red.L2, cs: cs, classOf: classOf}
	o.once.Do(func() {})
	o.ready.Store(true)
	o.diag = make([]float64, n)
	for i, c := range classOf {
		o.diag[i] = sym.At(c, c) / (size[c] * size[c])
	}
	o.mul = func(dst, v []float64) {
		t := make([]float64, r)
		for i, c := range classOf {
			t[c] += v[i] / size[c]
		}
		u := make([]float64, r)
		mat.NewVecDense(r, u).MulVec(sym, mat.NewVecDense(r, t))
		for i, c := range classOf {
			dst[i] = u[c] / size[c]
		}
	}
	return o, nil
}

// constantOnClasses reports that every vector is constant on each class
// (nil vectors are all ones).
func constantOnClasses(vecs [][]float64, classOf []int, r int) bool {
	first := make([]int, r)
	for _, v := range vecs {
		if v == nil {
			continue
		}
		for c := range first {
			first[c] = -1
		}
		for i, c := range classOf {
			if first[c] < 0 {
				first[c] = i
			} else if v[i] != v[first[c]] {
				return false
			}
		}
	}
	return true
}
