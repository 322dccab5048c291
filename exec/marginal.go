package exec

import (
	"fmt"
	"math"
	"math/big"
	"slices"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/planner"
)

// Marginal plans are measured and reconstructed in marginal space: every
// block reads the marginal table of its own columns, and each query is
// answered from the estimate of the marginal on its own support, so time
// and memory follow the tables, never the product domain.
//
// Privacy: a block over columns S (π_S cells) releases
//
//	marginal block:  m_S + Z,
//	residual block:  (⊗_{j∈S}(n_j·I − J))·m_S + Z,
//
// m_S the table's integer counts, the residual computed exactly in int64
// (every entry is bounded by Σm·Π 2(n_j − 1), checked below 2⁶²), Z one
// draw per cell from the block's own discrete Laplace (scale t) or
// discrete Gaussian (σ²). One row of the protected table lies in at most
// one cell of m_S, so the block's L1 (L2) sensitivity is its largest
// column norm: 1 for a marginal block, Π 2(n_j − 1) (√Π n_j(n_j − 1)) for
// a residual one. A block is therefore ε_b-DP when t ≥ Δ₁/ε_b (ρ_b-zCDP
// when σ² ≥ Δ₂²/(2ρ_b)), and the plan, by composition, Σ ε_b-DP
// (Σ ρ_b-zCDP). checkBlocks recomputes every Δ from the block's columns
// and checks each calibration and the sum against the batch's ε (ρ) in
// exact rational arithmetic before any draw. The caller must have charged
// the batch first. Everything after the draws touches only noisy values:
// post-processing.
//
// Reconstruction is the generalised least-squares estimate (each block
// weighted by its noise's inverse variance V_b), component by component in
// the E_T algebra (see planner/residual.go): for every set T under a block
//
//	λ̃_T = Σ_{marginal S⊇T} 1/(π_S·V_S) + π_T/V_T,
//	ζ_T = Σ_{marginal S⊇T} centre_T(Σ_{S∖T} y_S)/(π_{S∖T}·V_S) + (⊗_{j∈T}C_j)·y_T/V_T,
//
// and the estimate of the marginal on Q is (1/π_Q)·Σ_{T⊆Q, λ̃_T>0}
// broadcast_Q(ζ_T/λ̃_T), with no N-sized quantity anywhere.

// blockDraw draws one noise value for block b.
type blockDraw func(b *planner.MarginalBlock) int64

// checkBlocks verifies a Marginal plan's calibration before any draw: each
// block's noise parameter against the sensitivity recomputed from its
// columns and its share, and the shares' sum against the batch's ε or ρ.
func checkBlocks(p *planner.Plan) error {
	if p.Marginals == nil || len(p.Marginals.Blocks) == 0 {
		return fmt.Errorf("exec: marginal plan without blocks")
	}
	gauss := p.Options.Noise == catalog.Gaussian
	sizes := p.Workload.Sizes()
	sum := new(big.Rat)
	for _, b := range p.Marginals.Blocks {
		for i, j := range b.Cols {
			if j < 0 || j >= len(sizes) || (i > 0 && b.Cols[i-1] >= j) {
				return fmt.Errorf("exec: block columns %v are not ascending workload columns", b.Cols)
			}
		}
		if b.NoiseNum == 0 || b.NoiseDen == 0 {
			return fmt.Errorf("exec: block over %v has no noise", b.Cols)
		}
		share := b.Epsilon
		if gauss {
			share = b.Rho
		}
		if !(share > 0) || math.IsInf(share, 0) {
			return fmt.Errorf("exec: block over %v has share %v", b.Cols, share)
		}
		// need: num/den ≥ Δ₁/ε_b, or num/den ≥ Δ₂²/(2ρ_b), Δ an integer
		// (Δ₁ = Π 2(n_j − 1), Δ₂² = Π n_j(n_j − 1), or 1).
		d := big.NewInt(1)
		if b.Residual {
			for _, j := range b.Cols {
				n := int64(sizes[j])
				f := 2 * (n - 1)
				if gauss {
					f = n * (n - 1)
				}
				d.Mul(d, big.NewInt(f))
			}
		}
		s := new(big.Rat).SetFloat64(share)
		lhs := new(big.Rat).Mul(new(big.Rat).SetFrac(new(big.Int).SetUint64(b.NoiseNum), new(big.Int).SetUint64(b.NoiseDen)), s)
		if gauss {
			lhs.Mul(lhs, big.NewRat(2, 1))
		}
		if lhs.Cmp(new(big.Rat).SetInt(d)) < 0 {
			return fmt.Errorf("exec: block over %v has noise %d/%d below its sensitivity %v at share %v", b.Cols, b.NoiseNum, b.NoiseDen, d, share)
		}
		sum.Add(sum, s)
	}
	budget := p.Options.Calibration().Epsilon
	if gauss {
		budget = p.Options.Calibration().Rho
	}
	if sum.Cmp(new(big.Rat).SetFloat64(budget)) > 0 {
		return fmt.Errorf("exec: marginal blocks' shares sum to %s, above the batch's %v", sum.FloatString(12), budget)
	}
	return nil
}

// marginalTables is every block's table, summed from a counted table that
// covers it, with the residual blocks' exactness bound checked.
func marginalTables(p *planner.Plan, c *Counts) ([][]float64, error) {
	sizes := p.Workload.Sizes()
	var out [][]float64
	for _, b := range p.Marginals.Blocks {
		m, err := tableFor(p, c, b.Cols)
		if err != nil {
			return nil, err
		}
		total, err := countTotal(m)
		if err != nil {
			return nil, err
		}
		if b.Residual {
			bound := math.Max(total, 1)
			for _, j := range b.Cols {
				bound *= 2 * float64(sizes[j]-1)
			}
			if bound >= 1<<62 {
				return nil, fmt.Errorf("exec: residual block over %v too large for exact measurement", b.Cols)
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// measureMarginal measures a Marginal plan's blocks and returns, per
// query, the estimate of the marginal on its support (q.Support(w)), and
// per block the released vector itself (row-major over the block's
// columns: m_S + Z, or the residual (⊗(n_j·I − J))·m_S + Z).
func measureMarginal(p *planner.Plan, c *Counts, draw blockDraw) (est, released [][]float64, err error) {
	if err := checkBlocks(p); err != nil {
		return nil, nil, err
	}
	tables, err := marginalTables(p, c)
	if err != nil {
		return nil, nil, err
	}
	w := p.Workload
	sizes := w.Sizes()
	type component struct {
		cols []int
		lam  float64
		zeta []float64
	}
	comps := map[string]*component{}
	at := func(cols []int) *component {
		k := fmt.Sprint(cols)
		if c := comps[k]; c != nil {
			return c
		}
		c := &component{cols: cols, zeta: make([]float64, cellsOf(sizes, cols))}
		comps[k] = c
		return c
	}
	for bi := range p.Marginals.Blocks {
		b := &p.Marginals.Blocks[bi]
		m, bs := tables[bi], subSizes(sizes, b.Cols)
		pi := float64(len(m))
		v := b.NoiseVariance
		if !(v > 0) {
			return nil, nil, fmt.Errorf("exec: block over %v has noise variance %v", b.Cols, v)
		}
		if b.Residual {
			yi := make([]int64, len(m))
			for i, x := range m {
				yi[i] = int64(x)
			}
			for j := range bs {
				centreScaleInt(yi, bs, j)
			}
			y := make([]float64, len(yi))
			for i, x := range yi {
				y[i] = float64(addClamp(x, draw(b)))
			}
			released = append(released, slices.Clone(y))
			for j := range bs {
				y = centreScale(y, bs, j)
			}
			c := at(b.Cols)
			c.lam += pi / v
			for i, x := range y {
				c.zeta[i] += x / v
			}
			continue
		}
		y := make([]float64, len(m))
		for i, x := range m {
			y[i] = float64(addClamp(int64(x), draw(b)))
		}
		released = append(released, y)
		eachSubset(b.Cols, func(t []int) {
			s := sumTo(y, b.Cols, sizes, t)
			ts := subSizes(sizes, t)
			rest := pi / float64(len(s))
			for j := range ts {
				s = centre(s, ts, j)
			}
			c := at(t)
			c.lam += 1 / (pi * v)
			for i, x := range s {
				c.zeta[i] += x / (rest * v)
			}
		})
	}
	out := make([][]float64, len(w.Queries))
	for q, qu := range w.Queries {
		cols := qu.Support(w)
		est := make([]float64, cellsOf(sizes, cols))
		piQ := float64(len(est))
		eachSubset(cols, func(t []int) {
			c := comps[fmt.Sprint(t)]
			if c == nil || !(c.lam > 0) {
				return
			}
			broadcastInto(est, cols, sizes, c.zeta, t, 1/(c.lam*piQ))
		})
		out[q] = est
	}
	return out, released, nil
}

// eachSubset calls f with every subset of cols (ascending), cols included.
func eachSubset(cols []int, f func([]int)) {
	for m := 0; m < 1<<len(cols); m++ {
		var t []int
		for i, j := range cols {
			if m&(1<<i) != 0 {
				t = append(t, j)
			}
		}
		f(t)
	}
}

// centreScaleInt applies C = n·I − J along mode j of an int64 tensor in
// place: each fibre becomes n·v − Σv. The caller bounds the entries.
func centreScaleInt(t []int64, shape []int, j int) {
	left, n, right := modeSplit(shape, j)
	sum := make([]int64, right)
	for l := 0; l < left; l++ {
		clear(sum)
		base := l * n * right
		for k := 0; k < n; k++ {
			for r, v := range t[base+k*right : base+(k+1)*right] {
				sum[r] += v
			}
		}
		for k := 0; k < n; k++ {
			row := t[base+k*right : base+(k+1)*right]
			for r := range row {
				row[r] = int64(n)*row[r] - sum[r]
			}
		}
	}
}

// centreScale is C = n·I − J along mode j (a fresh tensor).
func centreScale(t []float64, shape []int, j int) []float64 {
	out := centre(t, shape, j)
	n := float64(shape[j])
	for i := range out {
		out[i] *= n
	}
	return out
}

// centre applies P1 = I − J/n along mode j: each fibre minus its mean (a
// fresh tensor).
func centre(t []float64, shape []int, j int) []float64 {
	left, n, right := modeSplit(shape, j)
	out := make([]float64, len(t))
	mean := make([]float64, right)
	for l := 0; l < left; l++ {
		clear(mean)
		base := l * n * right
		for k := 0; k < n; k++ {
			for r, v := range t[base+k*right : base+(k+1)*right] {
				mean[r] += v
			}
		}
		for r := range mean {
			mean[r] /= float64(n)
		}
		for k := 0; k < n; k++ {
			off := base + k*right
			for r := 0; r < right; r++ {
				out[off+r] = t[off+r] - mean[r]
			}
		}
	}
	return out
}

// broadcastInto adds k·src to dst, src a tensor over the columns srcCols
// (a subset of dstCols, both ascending), constant along the others.
func broadcastInto(dst []float64, dstCols []int, sizes []int, src []float64, srcCols []int, k float64) {
	d := len(dstCols)
	stride := make([]int, d) // in src; 0 for columns not in srcCols
	s := 1
	for i := d - 1; i >= 0; i-- {
		if slices.Contains(srcCols, dstCols[i]) {
			stride[i] = s
			s *= sizes[dstCols[i]]
		}
	}
	idx := make([]int, d)
	off := 0
	for i := range dst {
		dst[i] += k * src[off]
		for j := d - 1; j >= 0; j-- { // odometer
			idx[j]++
			off += stride[j]
			if idx[j] < sizes[dstCols[j]] {
				break
			}
			off -= stride[j] * idx[j]
			idx[j] = 0
		}
	}
}
