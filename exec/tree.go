package exec

import (
	"errors"
	"fmt"
	"math"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/planner"
)

// TreeInput is what a tree plan measures: the histogram of one column's
// cells weighted by a query's WHERE, and the largest weight a cell of the
// product domain carries.
type TreeInput struct {
	// Counts[k] is Σ over product cells c in column cell Cells[k] of
	// weight(c)·x(c): integers, since weights and counts are.
	Counts []float64
	// Weight is max_c |weight(c)|: a row moves one count by at most it.
	Weight float64
}

// ErrTreeWeights is TreeCounts' error for a WHERE whose cell weights are
// not integers (never from a compiled predicate, whose weights are 0 or 1).
var ErrTreeWeights = errors.New("exec: tree measurement needs integer cell weights")

// TreeCounts derives a tree plan's input from x, the histogram over the
// product domain of w's columns: aggregate l (the WHERE's weights, zero off
// the column's value cells) contracted onto column j's cells listed in
// cells. It checks, before anything is charged, that the counts are
// non-negative integers and the weights integers.
func TreeCounts(w *compile.Workload, l compile.Linear, j int, cells []int, x []float64) (*TreeInput, error) {
	sizes := w.Sizes()
	if len(x) != w.Cells() {
		return nil, fmt.Errorf("exec: histogram has %d cells, workload %d", len(x), w.Cells())
	}
	if _, err := countTotal(x); err != nil {
		return nil, fmt.Errorf("exec: tree counts: %w", err)
	}
	weight := 0.0
	for _, v := range planner.Dense(l, sizes) {
		if v != math.Trunc(v) {
			return nil, ErrTreeWeights
		}
		weight = math.Max(weight, math.Abs(v))
	}
	per := Contract(l, x, sizes, []int{j})
	in := &TreeInput{Counts: make([]float64, len(cells)), Weight: weight}
	for k, c := range cells {
		in.Counts[k] = per[c]
	}
	return in, nil
}

// MeasureTree measures in's counts with tree plan p and returns the
// least-squares estimate of every count (planner.Tree.Consistent).
//
// Privacy: the released vector is A·y + Z, A the tree's 0/1 node matrix
// and y = in.Counts. Adding or removing one row of cell c moves y by
// weight(c) ≤ in.Weight in one coordinate, so A·y moves by at most
// in.Weight × the tree's largest column norm (its Depth in L1, √Depth in
// L2): that is the sensitivity, times the privacy unit's bound
// Options.Unit.L1() (one unit moves the histogram by at most that in L1).
// Z is i.i.d. discrete Laplace of scale t = Δ₁/ε (ε-DP) or discrete
// Gaussian of σ² = Δ₂²/(2ρ) (ρ-zCDP) (Canonne, Kamath, Steinke 2020),
// drawn from r; the calibration is re-derived here (planner.CheckTree)
// and must cover in.Weight (1 for every compiled WHERE), or nothing is
// drawn. Node counts are integers, so no rounding to a grid is needed.
// The reconstruction is post-processing. The caller must have charged ε
// or ρ first.
func MeasureTree(p *planner.TreePlan, in *TreeInput, r Sampler) ([]float64, error) {
	if err := planner.CheckTree(p); err != nil {
		return nil, err
	}
	if in.Weight > 1 {
		return nil, fmt.Errorf("%w: a cell weighs %g, the plan is calibrated for 1", ErrTreeWeights, in.Weight)
	}
	if len(in.Counts) != p.Tree.N {
		return nil, fmt.Errorf("exec: tree over %d cells, %d counts", p.Tree.N, len(in.Counts))
	}
	y := make([]float64, p.Tree.Nodes())
	p.Tree.Measure(y, in.Counts)
	for i := range y {
		var z int64
		if p.Options.Noise == catalog.Gaussian {
			z = r.DiscreteGaussian(p.NoiseNum, p.NoiseDen)
		} else {
			z = r.DiscreteLaplace(p.NoiseNum, p.NoiseDen)
		}
		y[i] += float64(z)
	}
	return p.Tree.Consistent(y), nil
}
