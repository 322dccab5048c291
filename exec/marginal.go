package exec

import (
	"fmt"
	"math"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/planner"
)

// measureMarginal measures a Marginal plan and reconstructs the histogram.
//
// Privacy: block S releases k_S·M_S·x + Z_S, with M_S·x the marginal of x
// on S summed exactly in integers (every partial sum is bounded by Σ|x|,
// checked below 2⁵³ before k_S multiplies it in int64) and Z_S one draw per
// row. A cell lies in one row of each block, so the largest column norm of
// the stacked matrix is Σ k_S (L1) or √Σ k_S² (L2): the plan's Sensitivity,
// to which the noise is calibrated. The reconstruction
//
//	x̂ = Σ_{λ_T>0} E_T·(Aᵀy)/λ_T,  Aᵀy = Σ_S k_S·broadcast_S(y_S),
//
// touches only noisy values: post-processing.
func measureMarginal(p *planner.Plan, x []float64, sizes []int, draw func() int64) ([]float64, error) {
	ms := p.Marginals
	total := 0.0
	for _, v := range x {
		if v != math.Trunc(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("exec: histogram cell %v is not an integer", v)
		}
		total += math.Abs(v)
	}
	kmax := 0.0
	for _, k := range ms.Weights {
		if k != math.Trunc(k) || k < 1 {
			return nil, fmt.Errorf("exec: marginal weight %v is not a positive integer", k)
		}
		kmax = math.Max(kmax, k)
	}
	// The noise was calibrated to the planner's Sensitivity: check it is the
	// stacked matrix's largest column norm before releasing anything.
	var l1, l2 float64
	for _, k := range ms.Weights {
		l1, l2 = l1+k, l2+k*k
	}
	norm := l1
	if p.Options.Noise == catalog.Gaussian {
		norm = math.Sqrt(l2)
	}
	if norm > p.Sensitivity*(1+1e-12) {
		return nil, fmt.Errorf("exec: marginal strategy has column norm %v above the calibrated sensitivity %v", norm, p.Sensitivity)
	}
	if total >= 1<<53 || total*kmax >= 1<<62 {
		return nil, fmt.Errorf("exec: histogram total %v too large for exact marginal measurement", total)
	}
	z := make([]float64, len(x)) // Aᵀy
	for si, set := range ms.Sets {
		k := int64(ms.Weights[si])
		m := marginalOf(x, sizes, set)
		y := make([]float64, len(m))
		for i, v := range m {
			y[i] = float64(addClamp(k*int64(v), draw()))
		}
		broadcastAdd(z, sizes, set, y, float64(k))
	}
	xhat := make([]float64, len(x))
	var rec func(t []float64, j int, set uint)
	rec = func(t []float64, j int, set uint) {
		if j == len(sizes) {
			lam := ms.Lambda[set]
			if lam <= 0 {
				return
			}
			for i, v := range t {
				xhat[i] += v / lam
			}
			return
		}
		lower, upper := projectMode(t, sizes, j)
		rec(lower, j+1, set)
		rec(upper, j+1, set|1<<j)
	}
	rec(z, 0, 0)
	return xhat, nil
}

// marginalOf sums x over the columns not in set, leaving a tensor over the
// set's columns in column order. Integer inputs give exact sums (bounded by
// Σ|x| < 2⁵³).
func marginalOf(x []float64, sizes []int, set uint) []float64 {
	cur, shape := x, append([]int(nil), sizes...)
	for j := len(sizes) - 1; j >= 0; j-- {
		if set&(1<<j) == 0 {
			cur, shape = contractMode(cur, shape, j, nil)
		}
	}
	return cur
}

// broadcastAdd adds k·y, a tensor over set's columns, to every cell of z
// over the full domain: z += k·M_setᵀ·y.
func broadcastAdd(z []float64, sizes []int, set uint, y []float64, k float64) {
	d := len(sizes)
	stride := make([]int, d) // in y; 0 for columns outside the set
	s := 1
	for j := d - 1; j >= 0; j-- {
		if set&(1<<j) != 0 {
			stride[j] = s
			s *= sizes[j]
		}
	}
	idx := make([]int, d)
	off := 0
	for i := range z {
		z[i] += k * y[off]
		for j := d - 1; j >= 0; j-- { // odometer
			idx[j]++
			off += stride[j]
			if idx[j] < sizes[j] {
				break
			}
			off -= stride[j] * idx[j]
			idx[j] = 0
		}
	}
}

// projectMode splits t into P0 and P1 along mode j: lower replaces each
// fibre by its mean, upper is t − lower.
func projectMode(t []float64, sizes []int, j int) (lower, upper []float64) {
	left, n, right := modeSplit(sizes, j)
	lower, upper = make([]float64, len(t)), make([]float64, len(t))
	mean := make([]float64, right)
	for l := 0; l < left; l++ {
		clear(mean)
		base := l * n * right
		for k := 0; k < n; k++ {
			row := t[base+k*right : base+(k+1)*right]
			for r, v := range row {
				mean[r] += v
			}
		}
		for r := range mean {
			mean[r] /= float64(n)
		}
		for k := 0; k < n; k++ {
			off := base + k*right
			copy(lower[off:off+right], mean)
			for r := 0; r < right; r++ {
				upper[off+r] = t[off+r] - mean[r]
			}
		}
	}
	return lower, upper
}
