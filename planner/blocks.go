package planner

import (
	"fmt"
	"math"
	"strings"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/noise"
)

// MarginalStrategy is a Marginal plan's strategy: blocks, each measured
// from the marginal table of its own columns with its own noise (see the
// residual algebra in residual.go). A plan's blocks, their noise and their
// noisy answers are all that a later generalised least-squares estimate
// needs to reuse the measurement.
type MarginalStrategy struct {
	Blocks []MarginalBlock
}

// MarginalBlock is one measurement of a Marginal plan over the marginal
// table m (the histogram over Cols only, row-major, last column fastest).
//
// Privacy: a marginal block releases m + Z and a residual block releases
// (⊗_{j∈Cols}(n_j·I − J))·m + Z, Z i.i.d. discrete Laplace of scale
// t = NoiseNum/NoiseDen ≥ Δ₁/Epsilon or discrete Gaussian of
// σ² = NoiseNum/NoiseDen ≥ Δ₂²/(2·Rho), with Δ the block's largest column
// norm (Sensitivity): a row of the table lies in at most one cell of m, so
// Δ = 1 for a marginal block, and Δ₁ = Π 2(n_j − 1), Δ₂² = Π n_j(n_j − 1)
// for a residual block. The block is Epsilon-DP (Rho-zCDP); the plan's
// blocks compose to the sum of their shares, which the planner keeps at
// most the batch's ε (ρ). exec recomputes Δ and checks every calibration
// and the sum before drawing.
type MarginalBlock struct {
	Cols     []int // workload column indexes, ascending
	Residual bool
	// Epsilon (Laplace) or Rho (Gaussian) is this block's share of the batch.
	Epsilon, Rho float64
	// NoiseNum/NoiseDen is the Laplace scale or the Gaussian σ².
	NoiseNum, NoiseDen uint64
	// NoiseVariance is the exact variance of one draw.
	NoiseVariance float64

	set int // index in the planner's subset family
}

// BlockSensitivity is the largest column norm of a block over columns of
// the given sizes: 1 for a marginal table; Π 2(n_j − 1) (L1) or
// √Π n_j(n_j − 1) (L2) for a residual block.
func BlockSensitivity(residual bool, sizes []int, l2 bool) float64 {
	if !residual {
		return 1
	}
	s := 1.0
	for _, n := range sizes {
		if l2 {
			s *= float64(n) * float64(n-1)
		} else {
			s *= 2 * float64(n-1)
		}
	}
	if l2 {
		return math.Sqrt(s)
	}
	return s
}

// shareMargin keeps the blocks' shares strictly inside the batch's ε or ρ
// whatever the floating-point rounding of their sum (n·2⁻⁵³ < 10⁻⁹ for
// fewer than 9·10⁶ blocks).
const shareMargin = 1 - 1e-9

// calibrateBlocks turns optimiser weights (unit sensitivity: Σv = 1 for
// Laplace, Σv² = 1 for Gaussian) into blocks, each with its share of the
// batch's ε (ε·v_b) or ρ (ρ·v_b²) and noise calibrated to its own norm. It
// fails when some block's noise parameter cannot be represented (a share
// so small that the scale passes 2⁶³).
func (f *subsetFamily) calibrateBlocks(vars []blockVar, v []float64, opt Options) ([]MarginalBlock, error) {
	gauss := opt.Noise == catalog.Gaussian
	var out []MarginalBlock
	for b, bv := range vars {
		if !(v[b] > 0) {
			continue
		}
		blk := MarginalBlock{Cols: f.sets[bv.set].cols(), Residual: bv.residual, set: bv.set}
		if gauss {
			blk.Rho = opt.Rho * v[b] * v[b] * shareMargin
		} else {
			blk.Epsilon = opt.Epsilon * v[b] * shareMargin
		}
		if err := f.calibrateBlock(&blk, gauss); err != nil {
			return nil, err
		}
		out = append(out, blk)
	}
	return out, nil
}

// calibrateBlock sets a block's noise for its share (Epsilon or Rho) and
// its own sensitivity.
func (f *subsetFamily) calibrateBlock(blk *MarginalBlock, gauss bool) error {
	sizes := make([]int, len(blk.Cols))
	for i, j := range blk.Cols {
		sizes[i] = f.sizes[j]
	}
	sens := BlockSensitivity(blk.Residual, sizes, gauss)
	x := sens / blk.Epsilon
	if gauss {
		x = sens * sens / (2 * blk.Rho)
	}
	if !(x > 0) || x >= 0x1p63 {
		return fmt.Errorf("planner: block over %v needs noise %g, beyond the samplers' range", blk.Cols, x)
	}
	blk.NoiseNum, blk.NoiseDen = noise.RationalAtLeast(x)
	t := float64(blk.NoiseNum) / float64(blk.NoiseDen)
	if gauss {
		blk.NoiseVariance = noise.DiscreteGaussianVariance(t)
	} else {
		blk.NoiseVariance = noise.DiscreteLaplaceVariance(t)
	}
	return nil
}

// recalibrateBlock is b with its share multiplied by ratio and its noise
// calibrated again (a plan's strategy at another ε or ρ).
func (f *subsetFamily) recalibrateBlock(b MarginalBlock, ratio float64, opt Options) (MarginalBlock, error) {
	gauss := opt.Noise == catalog.Gaussian
	b.Epsilon *= ratio
	b.Rho *= ratio
	err := f.calibrateBlock(&b, gauss)
	return b, err
}

// blockLambda is the precision λ̃_T of calibrated blocks: Σ 1/(π_S·V) over
// marginal blocks on S ⊇ T, plus π_T/V for a residual block on T.
func (f *subsetFamily) blockLambda(blocks []MarginalBlock) []float64 {
	lam := make([]float64, len(f.sets))
	for _, b := range blocks {
		if b.Residual {
			lam[b.set] += f.pi[b.set] / b.NoiseVariance
			continue
		}
		c := 1 / (f.pi[b.set] * b.NoiseVariance)
		for _, t := range f.down[b.set] {
			lam[t] += c
		}
	}
	return lam
}

// blocksName names a strategy's blocks by their columns, with each block's
// share of the sensitivity (marginal blocks plain, residual blocks as
// r(…)), e.g. "sex:0.2, education×race:0.5, r(total):0.3"; long lists are
// cut after a few blocks.
func (f *subsetFamily) blocksName(names []string, vars []blockVar, v []float64, shares bool) string {
	var parts []string
	kept := 0
	for b, bv := range vars {
		if !(v[b] > 0) {
			continue
		}
		kept++
		if len(parts) >= 8 {
			continue
		}
		var cols []string
		for _, j := range f.sets[bv.set].cols() {
			cols = append(cols, names[j])
		}
		part := strings.Join(cols, "×")
		if part == "" {
			part = "total"
		}
		if bv.residual {
			part = "r(" + part + ")"
		}
		if shares {
			part += fmt.Sprintf(":%.3g", v[b])
		}
		parts = append(parts, part)
	}
	if kept > len(parts) {
		parts = append(parts, fmt.Sprintf("… %d blocks", kept))
	}
	return strings.Join(parts, ", ")
}
