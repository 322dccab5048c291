package exec

import (
	"errors"
	"math"

	"github.com/dpproxy/dpproxy/planner"
)

// Strategies in class form (planner.ColumnStrategy.Classes) measure
// A·P·x = A·(P·x): the histogram is first summed per class along the
// column (poolClasses), then measured by A over the classes; the
// reconstruction Pᵀ·D⁻¹·Pinv·y spreads each class's estimate evenly over
// its cells (spreadMode). Neither ever builds an m × n matrix.

// poolClasses sums x (shape sizes) per class along every mode whose
// factor is in class form, returning a fresh tensor and its shape (x
// itself when no factor is). Every entry of the result is a sum of
// entries of x, so it is exact in float64 when Σ|x| < 2⁵³: a histogram of
// 9·10¹⁵ rows, which the caller checks.
func poolClasses(x []float64, sizes []int, factors []*planner.ColumnStrategy) ([]float64, []int) {
	shape := append([]int(nil), sizes...)
	for j, f := range factors {
		if f.Classes == nil {
			continue
		}
		_, r := f.A.Dims()
		left, n, right := modeSplit(shape, j)
		out := make([]float64, left*r*right)
		for l := 0; l < left; l++ {
			for i, c := range f.Classes {
				if c < 0 {
					continue
				}
				src := x[(l*n+i)*right : (l*n+i+1)*right]
				dst := out[(l*r+c)*right : (l*r+c+1)*right]
				for k, v := range src {
					dst[k] += v
				}
			}
		}
		x, shape[j] = out, r
	}
	return x, shape
}

// spreadMode expands tensor t (shape) along mode j from f's classes to
// the column's cells: each cell gets its class's entry over the class's
// size, a cell in no class 0 (Pᵀ·D⁻¹). It returns a fresh tensor.
func spreadMode(t []float64, shape []int, j int, f *planner.ColumnStrategy) ([]float64, []int) {
	size := f.ClassSizes()
	left, r, right := modeSplit(shape, j)
	n := len(f.Classes)
	out := make([]float64, left*n*right)
	for l := 0; l < left; l++ {
		for i, c := range f.Classes {
			if c < 0 {
				continue
			}
			src := t[(l*r+c)*right : (l*r+c+1)*right]
			dst := out[(l*n+i)*right : (l*n+i+1)*right]
			for k, v := range src {
				dst[k] = v / size[c]
			}
		}
	}
	ns := append([]int(nil), shape...)
	ns[j] = n
	return out, ns
}

// inClassForm reports whether some factor is in class form.
func inClassForm(factors []*planner.ColumnStrategy) bool {
	for _, f := range factors {
		if f.Classes != nil {
			return true
		}
	}
	return false
}

// errPoolInexact is a histogram too large for poolClasses's float64 sums.
var errPoolInexact = errors.New("exec: histogram total of at least 2⁵³ cannot be summed per class exactly")

// poolExact reports whether poolClasses is exact for a histogram whose
// entries' absolute values sum to total.
func poolExact(total float64) bool { return total < math.Exp2(53) }
