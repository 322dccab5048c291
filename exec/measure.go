package exec

import (
	"fmt"
	"math"
	"math/big"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/planner"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"
)

// Answers holds a measured batch: Values[q][a][g] is aggregate a of query q
// in group g (row-major over the query's group columns), Variance the same
// answer's exact expected squared error from the plan.
type Answers struct {
	Values   [][][]float64
	Variance [][][]float64
	// Raw is a Kronecker plan's released vector A·x + Z itself, row-major
	// over the factors' rows (what the measurement store keeps); nil for
	// other plans, whose released values are Values.
	Raw []float64
	// Blocks are a Marginal plan's released blocks, one per
	// Plan.Marginals.Blocks entry, row-major over the block's columns
	// (the residual blocks before centring).
	Blocks [][]float64
}

// Measure runs plan p on histogram x, the counts over the product domain
// of the workload's columns, with fresh noise from r. Plans measured in
// marginal space take their tables from x; MeasureCounts measures what
// Fetch counted instead.
//
// Marginal plans are measured by measureMarginal, whose comment states
// their sensitivity.
//
// Privacy: the released vector is A·x + Z with A the plan's integer strategy
// matrix and Z i.i.d. discrete Laplace with scale t = Δ₁/ε (ε-DP) or discrete
// Gaussian with σ² = Δ₂²/(2ρ) (ρ-zCDP), Δ the strategy's largest column norm
// as computed by the planner. Optimised (real-valued) strategies reach here
// already rounded to integers by the planner (see planner.Plan.Grid), so
// this holds for them unchanged. A·x is computed exactly (see
// exactKronecker): the sensitivity argument is about the function
// actually computed. A Direct plan over the queries' own tables releases
// the same rows, each computed from the table of its query's columns (a
// row of the protected table lies in one cell of each). Everything after
// the noise (reconstruction, answering) is post-processing. The caller
// must have charged ε or ρ first.
func Measure(p *planner.Plan, x []float64, r Sampler) (*Answers, error) {
	if len(x) != p.Workload.Cells() {
		return nil, fmt.Errorf("exec: histogram has %d cells, workload %d", len(x), p.Workload.Cells())
	}
	return measure(p, countsFromProduct(p, x), r)
}

// MeasureCounts runs plan p on what Fetch counted, with fresh noise from r
// (see Measure).
func MeasureCounts(p *planner.Plan, c *Counts, r Sampler) (*Answers, error) {
	return measure(p, c, r)
}

func measure(p *planner.Plan, c *Counts, r Sampler) (*Answers, error) {
	w := p.Workload
	sizes := w.Sizes()
	x := c.Product
	if p.Tables == nil && x == nil {
		return nil, fmt.Errorf("exec: plan %s needs the product histogram", p.Name)
	}
	drawInt := func() int64 {
		if p.Options.Noise == catalog.Gaussian {
			return r.DiscreteGaussian(p.NoiseNum, p.NoiseDen)
		}
		return r.DiscreteLaplace(p.NoiseNum, p.NoiseDen)
	}
	draw := func() float64 { return float64(drawInt()) }
	ans := &Answers{}
	switch p.Kind {
	case planner.Direct:
		if p.AggNoise != nil {
			if err := checkDirectSplit(p); err != nil {
				return nil, err
			}
		}
		for q, qu := range w.Queries {
			var vals, vars [][]float64
			var m []float64
			var cols []int
			if p.Tables != nil {
				cols = qu.Support(w)
				var err error
				if m, err = tableFor(p, c, cols); err != nil {
					return nil, err
				}
			}
			for a, agg := range qu.Aggregates {
				var exact []float64
				if m != nil {
					exact = contractOn(agg, qu, m, sizes, cols)
				} else {
					exact = Contract(agg, x, sizes, qu.GroupCols)
				}
				k := p.Scale[q][a]
				d := draw
				if p.AggNoise != nil && p.AggNoise[q][a].NoiseNum == 0 {
					d = func() float64 { return 0 } // zero by construction (checkDirectSplit verified it)
				} else if p.AggNoise != nil {
					n := p.AggNoise[q][a]
					d = func() float64 {
						if p.Options.Noise == catalog.Gaussian {
							return float64(r.DiscreteGaussian(n.NoiseNum, n.NoiseDen))
						}
						return float64(r.DiscreteLaplace(n.NoiseNum, n.NoiseDen))
					}
				}
				v := make([]float64, len(exact))
				for g, e := range exact {
					v[g] = (math.Round(k*e) + d()) / k
				}
				vals = append(vals, v)
				vars = append(vars, variances(p, q, a, w, qu))
			}
			ans.Values = append(ans.Values, vals)
			ans.Variance = append(ans.Variance, vars)
		}
	case planner.Kronecker:
		// x is a cached histogram and must never change: every step below
		// writes fresh tensors.
		y, err := exactKronecker(x, sizes, p.Factors, kroneckerNoise(drawInt))
		if err != nil {
			return nil, err
		}
		ans.Raw = y // modeProduct below writes fresh tensors
		shape := make([]int, len(sizes))
		for j, f := range p.Factors {
			shape[j], _ = f.A.Dims()
		}
		for j, f := range p.Factors {
			y, shape = modeProduct(y, shape, j, f.Pinv)
			if f.Classes != nil {
				y, shape = spreadMode(y, shape, j, f)
			}
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
	case planner.Marginal:
		est, released, err := measureMarginal(p, c, func(b *planner.MarginalBlock) int64 {
			if p.Options.Noise == catalog.Gaussian {
				return r.DiscreteGaussian(b.NoiseNum, b.NoiseDen)
			}
			return r.DiscreteLaplace(b.NoiseNum, b.NoiseDen)
		})
		if err != nil {
			return nil, err
		}
		ans.Blocks = released
		for q, qu := range w.Queries {
			var vals, vars [][]float64
			cols := qu.Support(w)
			for a, agg := range qu.Aggregates {
				vals = append(vals, contractOn(agg, qu, est[q], sizes, cols))
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
//
// Viewing t as blocks T_l (shape[j] × right) for each index l of the modes
// before j, the result's blocks are M·T_l: one matrix product per block
// (or, when j is the last mode, a single product T·Mᵀ), done by BLAS. With
// integer entries whose partial sums stay below 2⁵³ every product and sum
// is exact in float64 whatever the summation order, which is what the
// exact measurement path relies on.
func modeProduct(t []float64, shape []int, j int, m interface {
	Dims() (int, int)
	At(i, k int) float64
}) ([]float64, []int) {
	rows, cols := m.Dims()
	left, _, right := modeSplit(shape, j)
	var a blas64.General
	if d, ok := m.(*mat.Dense); ok {
		a = d.RawMatrix()
	} else {
		dense := make([]float64, rows*cols)
		for i := 0; i < rows; i++ {
			for k := 0; k < cols; k++ {
				dense[i*cols+k] = m.At(i, k)
			}
		}
		a = blas64.General{Rows: rows, Cols: cols, Stride: cols, Data: dense}
	}
	out := make([]float64, left*rows*right)
	ns := append([]int(nil), shape...)
	ns[j] = rows
	if len(t) == 0 || len(out) == 0 {
		return out, ns
	}
	if right == 1 {
		// out (left × rows) = t (left × cols) · Mᵀ.
		blas64.Gemm(blas.NoTrans, blas.Trans, 1,
			blas64.General{Rows: left, Cols: cols, Stride: cols, Data: t},
			a, 0,
			blas64.General{Rows: left, Cols: rows, Stride: rows, Data: out})
		return out, ns
	}
	for l := 0; l < left; l++ {
		blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, a,
			blas64.General{Rows: cols, Cols: right, Stride: right, Data: t[l*cols*right : (l+1)*cols*right]}, 0,
			blas64.General{Rows: rows, Cols: right, Stride: right, Data: out[l*rows*right : (l+1)*rows*right]})
	}
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

// modeSplit views a tensor of the given shape, along mode j, as left
// blocks of n × right entries (n = shape[j]).
func modeSplit(shape []int, j int) (left, n, right int) {
	left, right = 1, 1
	for i := 0; i < j; i++ {
		left *= shape[i]
	}
	for i := j + 1; i < len(shape); i++ {
		right *= shape[i]
	}
	return left, shape[j], right
}

func contractMode(t []float64, shape []int, j int, f []float64) ([]float64, []int) {
	left, n, right := modeSplit(shape, j)
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
	left, n, right := modeSplit(shape, j)
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

// exactKronecker computes y = (⊗_j A_j)·x exactly for an integer histogram
// x and integer factors A_j, adds noise through addNoise, and returns y as
// float64 (the conversion of the noisy integers is post-processing).
//
// Every intermediate value of the mode products is bounded by
// B = Σ|x|·Π_j max|A_j| (each is a partial sum of terms A…A·x), so the
// float64 path is exact when B < 2⁵³ and the int64 path when B < 2⁶²; past
// that the products run in math/big. Grid strategies (entries up to 2¹⁶)
// need the int64 path on large histograms, and big integers only in
// extreme cases.
func exactKronecker(x []float64, sizes []int, factors []*planner.ColumnStrategy, addNoise func([]float64, []int64)) ([]float64, error) {
	total := 0.0
	for _, v := range x {
		if v != math.Trunc(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("exec: histogram cell %v is not an integer", v)
		}
		total += math.Abs(v)
	}
	if inClassForm(factors) {
		// Class-form factors measure the per-class sums.
		if !poolExact(total) {
			return nil, errPoolInexact
		}
		x, sizes = poolClasses(x, sizes, factors)
	}
	bound := math.Max(total, 1)
	for _, f := range factors {
		m, n := f.A.Dims()
		mx := 0.0
		for i := 0; i < m; i++ {
			for k := 0; k < n; k++ {
				v := f.A.At(i, k)
				if v != math.Trunc(v) {
					return nil, fmt.Errorf("exec: strategy %s has a non-integer entry", f.Name)
				}
				mx = math.Max(mx, math.Abs(v))
			}
		}
		bound *= math.Max(mx, 1)
	}
	shape := append([]int(nil), sizes...)
	switch {
	case bound < 1<<53:
		y := x
		for j, f := range factors {
			y, shape = modeProduct(y, shape, j, f.A)
		}
		if len(factors) == 0 {
			y = append([]float64(nil), x...)
		}
		addNoise(y, nil)
		return y, nil
	case bound < 1<<62:
		y := make([]int64, len(x))
		for i, v := range x {
			y[i] = int64(v)
		}
		for j, f := range factors {
			y, shape = modeProductInt(y, shape, j, f.A)
		}
		addNoise(nil, y)
		out := make([]float64, len(y))
		for i, v := range y {
			out[i] = float64(v)
		}
		return out, nil
	}
	y := make([]*big.Int, len(x))
	for i, v := range x {
		y[i] = big.NewInt(int64(v))
	}
	for j, f := range factors {
		y, shape = modeProductBig(y, shape, j, f.A)
	}
	noise := make([]int64, len(y))
	addNoise(nil, noise)
	out := make([]float64, len(y))
	for i, v := range y {
		v.Add(v, big.NewInt(noise[i]))
		out[i], _ = new(big.Float).SetInt(v).Float64()
	}
	return out, nil
}

// kroneckerNoise adds one integer draw to each entry of the exact
// measurement A·x, in whichever representation exactKronecker chose:
// float64 entries (all below 2⁵³, where the sum is exact as long as the
// draw is) or int64 entries, which get the integer draw itself — never
// passed through float64, which would round draws beyond 2⁵³.
func kroneckerNoise(drawInt func() int64) func(v []float64, vi []int64) {
	return func(v []float64, vi []int64) {
		for i := range v {
			v[i] += float64(drawInt())
		}
		for i := range vi {
			vi[i] = addClamp(vi[i], drawInt())
		}
	}
}

// addClamp is a + b saturating at the int64 range (reached only by noise
// draws beyond 2⁶²; saturation is post-processing of the noisy value).
func addClamp(a, b int64) int64 {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		if b > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return s
}

// intMatrix reads an integer matrix row-major, dropping nothing.
func intMatrix(m interface {
	Dims() (int, int)
	At(i, k int) float64
}) ([]int64, int, int) {
	rows, cols := m.Dims()
	out := make([]int64, rows*cols)
	for i := 0; i < rows; i++ {
		for k := 0; k < cols; k++ {
			out[i*cols+k] = int64(m.At(i, k))
		}
	}
	return out, rows, cols
}

// modeProductInt is modeProduct in int64 (exact within the caller's bound).
func modeProductInt(t []int64, shape []int, j int, m interface {
	Dims() (int, int)
	At(i, k int) float64
}) ([]int64, []int) {
	dense, rows, cols := intMatrix(m)
	left, _, right := modeSplit(shape, j)
	out := make([]int64, left*rows*right)
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

// modeProductBig is modeProduct in arbitrary precision.
func modeProductBig(t []*big.Int, shape []int, j int, m interface {
	Dims() (int, int)
	At(i, k int) float64
}) ([]*big.Int, []int) {
	dense, rows, cols := intMatrix(m)
	left, _, right := modeSplit(shape, j)
	out := make([]*big.Int, left*rows*right)
	for i := range out {
		out[i] = new(big.Int)
	}
	var prod big.Int
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
				bc := big.NewInt(c)
				src := in[k*right : (k+1)*right]
				for r := range dst {
					prod.Mul(bc, src[r])
					dst[r].Add(dst[r], &prod)
				}
			}
		}
	}
	ns := append([]int(nil), shape...)
	ns[j] = rows
	return out, ns
}
