package exec

import (
	"fmt"
	"math"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/planner"
)

// Answers holds a measured batch: Values[q][a][g] is aggregate a of query q
// in group g (row-major over the query's group columns), Variance the same
// answer's exact expected squared error from the plan.
type Answers struct {
	Values   [][][]float64
	Variance [][][]float64
}

// Measure runs plan p on histogram x with fresh noise from r.
//
// Privacy: the released vector is A·x + Z with A the plan's integer strategy
// matrix and Z i.i.d. discrete Laplace with scale t = Δ₁/ε (ε-DP) or discrete
// Gaussian with σ² = Δ₂²/(2ρ) (ρ-zCDP), Δ the strategy's largest column norm
// as computed by the planner. Everything after the noise (reconstruction,
// answering) is post-processing. The caller must have charged ε or ρ first.
func Measure(p *planner.Plan, x []float64, r *noise.Rand) (*Answers, error) {
	w := p.Workload
	sizes := w.Sizes()
	if len(x) != w.Cells() {
		return nil, fmt.Errorf("exec: histogram has %d cells, workload %d", len(x), w.Cells())
	}
	draw := func() float64 {
		if p.Options.Noise == catalog.Gaussian {
			return float64(r.DiscreteGaussian(p.NoiseNum, p.NoiseDen))
		}
		return float64(r.DiscreteLaplace(p.NoiseNum, p.NoiseDen))
	}
	ans := &Answers{}
	switch p.Kind {
	case planner.Direct:
		for q, qu := range w.Queries {
			var vals, vars [][]float64
			for a, agg := range qu.Aggregates {
				exact := Contract(agg, x, sizes, qu.GroupCols)
				k := p.Scale[q][a]
				v := make([]float64, len(exact))
				for g, e := range exact {
					v[g] = (math.Round(k*e) + draw()) / k
				}
				vals = append(vals, v)
				vars = append(vars, variances(p, q, a, w, qu))
			}
			ans.Values = append(ans.Values, vals)
			ans.Variance = append(ans.Variance, vars)
		}
	case planner.Kronecker:
		// Copy first: x is a cached histogram and must never change.
		y, shape := append([]float64(nil), x...), sizes
		for j, f := range p.Factors {
			y, shape = modeProduct(y, shape, j, f.A)
		}
		for i := range y {
			y[i] = math.Round(y[i]) + draw()
		}
		for j, f := range p.Factors {
			y, shape = modeProduct(y, shape, j, f.Pinv)
		}
		for q, qu := range w.Queries {
			var vals, vars [][]float64
			for a, agg := range qu.Aggregates {
				vals = append(vals, Contract(agg, y, sizes, qu.GroupCols))
				vars = append(vars, variances(p, q, a, w, qu))
			}
			ans.Values = append(ans.Values, vals)
			ans.Variance = append(ans.Variance, vars)
		}
	default:
		return nil, fmt.Errorf("exec: unknown plan kind %d", p.Kind)
	}
	return ans, nil
}

func variances(p *planner.Plan, q, a int, w *compile.Workload, qu *compile.Query) []float64 {
	n := qu.Groups(w)
	out := make([]float64, n)
	group := make([]int, len(qu.GroupCols))
	for g := 0; g < n; g++ {
		rem := g
		for i := len(qu.GroupCols) - 1; i >= 0; i-- {
			size := w.Columns[qu.GroupCols[i]].Size()
			group[i] = rem % size
			rem /= size
		}
		out[g] = p.Variance(q, a, group)
	}
	return out
}

// modeProduct multiplies tensor t (shape) along mode j by matrix m
// (rows × shape[j]), returning a fresh tensor. The input is never modified.
func modeProduct(t []float64, shape []int, j int, m interface {
	Dims() (int, int)
	At(i, k int) float64
}) ([]float64, []int) {
	rows, cols := m.Dims()
	left, right := 1, 1
	for i := 0; i < j; i++ {
		left *= shape[i]
	}
	for i := j + 1; i < len(shape); i++ {
		right *= shape[i]
	}
	dense := make([]float64, rows*cols)
	for i := 0; i < rows; i++ {
		for k := 0; k < cols; k++ {
			dense[i*cols+k] = m.At(i, k)
		}
	}
	out := make([]float64, left*rows*right)
	for l := 0; l < left; l++ {
		in := t[l*cols*right : (l+1)*cols*right]
		o := out[l*rows*right : (l+1)*rows*right]
		for i := 0; i < rows; i++ {
			dst := o[i*right : (i+1)*right]
			for k := 0; k < cols; k++ {
				c := dense[i*cols+k]
				if c == 0 {
					continue
				}
				src := in[k*right : (k+1)*right]
				for r := range dst {
					dst[r] += c * src[r]
				}
			}
		}
	}
	ns := append([]int(nil), shape...)
	ns[j] = rows
	return out, ns
}

// Contract evaluates aggregate l on tensor x per group: the sum over cells
// of l(cell)·x(cell), split by the cells of groupCols (row-major). With no
// group columns it returns one value.
func Contract(l compile.Linear, x []float64, sizes []int, groupCols []int) []float64 {
	groups := 1
	for _, j := range groupCols {
		groups *= sizes[j]
	}
	out := make([]float64, groups)
	for _, t := range l {
		cur, shape := x, append([]int(nil), sizes...)
		// Contract non-group modes from the last so earlier mode indexes stay valid.
		for j := len(sizes) - 1; j >= 0; j-- {
			grouped := false
			for _, g := range groupCols {
				grouped = grouped || g == j
			}
			f := t.Factors[j]
			if grouped {
				if f != nil {
					cur = scaleMode(cur, shape, j, f)
				}
				continue
			}
			cur, shape = contractMode(cur, shape, j, f)
		}
		// cur is now over the group columns in column order; reorder to groupCols order.
		cur = permuteGroups(cur, sizes, groupCols)
		for g := range out {
			out[g] += t.Coef * cur[g]
		}
	}
	return out
}

func contractMode(t []float64, shape []int, j int, f []float64) ([]float64, []int) {
	left, right := 1, 1
	for i := 0; i < j; i++ {
		left *= shape[i]
	}
	for i := j + 1; i < len(shape); i++ {
		right *= shape[i]
	}
	n := shape[j]
	out := make([]float64, left*right)
	for l := 0; l < left; l++ {
		for k := 0; k < n; k++ {
			c := 1.0
			if f != nil {
				c = f[k]
			}
			if c == 0 {
				continue
			}
			src := t[(l*n+k)*right : (l*n+k+1)*right]
			dst := out[l*right : (l+1)*right]
			for r := range dst {
				dst[r] += c * src[r]
			}
		}
	}
	ns := append(append([]int(nil), shape[:j]...), shape[j+1:]...)
	return out, ns
}

func scaleMode(t []float64, shape []int, j int, f []float64) []float64 {
	left, right := 1, 1
	for i := 0; i < j; i++ {
		left *= shape[i]
	}
	for i := j + 1; i < len(shape); i++ {
		right *= shape[i]
	}
	n := shape[j]
	out := make([]float64, len(t))
	for l := 0; l < left; l++ {
		for k := 0; k < n; k++ {
			c := f[k]
			base := (l*n + k) * right
			for r := 0; r < right; r++ {
				out[base+r] = c * t[base+r]
			}
		}
	}
	return out
}

// permuteGroups reorders a tensor over the group columns in ascending column
// order into the order the query lists them.
func permuteGroups(t []float64, sizes []int, groupCols []int) []float64 {
	sorted := true
	for i := 1; i < len(groupCols); i++ {
		sorted = sorted && groupCols[i-1] < groupCols[i]
	}
	if sorted {
		return t
	}
	asc := append([]int(nil), groupCols...)
	for i := range asc {
		for k := i + 1; k < len(asc); k++ {
			if asc[k] < asc[i] {
				asc[i], asc[k] = asc[k], asc[i]
			}
		}
	}
	out := make([]float64, len(t))
	idx := make([]int, len(groupCols)) // position in query order
	for g := range out {
		rem := g
		for i := len(groupCols) - 1; i >= 0; i-- {
			s := sizes[groupCols[i]]
			idx[i] = rem % s
			rem /= s
		}
		src := 0
		for _, col := range asc {
			for i, gc := range groupCols {
				if gc == col {
					src = src*sizes[col] + idx[i]
				}
			}
		}
		out[g] = t[src]
	}
	return out
}
