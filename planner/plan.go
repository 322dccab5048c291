package planner

import (
	"errors"
	"fmt"
	"math"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/noise"
)

// Kind is the family of a chosen strategy.
type Kind int

const (
	// Direct measures every workload row itself (the workload as strategy):
	// each answer is its own noisy measurement.
	Direct Kind = iota
	// Kronecker measures A = A_1 ⊗ … ⊗ A_d and reconstructs the histogram by
	// least squares, x̂ = A⁺y; every answer is w·x̂.
	Kronecker
	// Marginal measures marginal and residual blocks (MarginalStrategy),
	// each from the table of its own columns with its own noise, and
	// answers every query from the generalised least-squares estimate of
	// the marginal on its columns.
	Marginal
)

// Options are the privacy parameters of one batch and what its plan
// minimises.
type Options struct {
	Noise   catalog.NoiseFamily
	Epsilon float64 // Laplace: ε of the whole batch
	Rho     float64 // Gaussian: ρ of the whole batch
	// Objective is what the strategy minimises; the zero value is
	// ObjectiveFair.
	Objective Objective
	// MaxCells bounds the histograms a plan may have counted: a plan over
	// a product domain larger than this is measured from the marginals of
	// the queries' own column sets instead (Plan.Tables), and a batch whose
	// tables still exceed it is refused (CellsError). Zero means
	// DefaultMaxCells.
	MaxCells float64
	// Unit bounds one privacy unit's contribution; Epsilon and Rho are
	// per unit, and every noise is calibrated at Calibration(). The zero
	// value is row privacy.
	Unit Contribution
}

// DefaultMaxCells is Options.MaxCells when unset.
const DefaultMaxCells = 10_000_000

func (o Options) maxCells() float64 {
	if o.MaxCells > 0 {
		return o.MaxCells
	}
	return DefaultMaxCells
}

// Candidate is a strategy the planner considered, with its expected total
// squared error (summed over every answer of the batch) at the batch's ε or ρ.
type Candidate struct {
	Name              string
	Sensitivity       float64
	TotalSquaredError float64
	// Unit is the error per unit noise variance: Δ²·Σ_w w(AᵀA)⁻¹wᵀ with Δ
	// the sensitivity in the family's norm — what the Gaussian error is
	// when the noise variance is 1, and half the continuous-Laplace error
	// at ε = 1.
	Unit float64
	// Seconds is the time spent building or optimising the candidate's
	// strategies (zero for a cache hit).
	Seconds float64
	// Gap is a certified relative duality gap of the candidate's own
	// objective, zero when there is none: for a Gaussian optimum,
	// Unit/(dual lower bound) − 1; for a max-variance marginal strategy,
	// its largest variance over the minimax lower bound, − 1.
	Gap float64
	// Objective is what Choose minimises (see Options.Objective): the
	// total error with each answer weighted by answerWeights.
	Objective float64
	// MaxVariance is the largest expected squared error of one answer,
	// where the planner computed it (marginal workloads, chosen plans);
	// zero otherwise.
	MaxVariance float64
}

// Plan is a chosen strategy with its noise calibration. Every answer's
// expected squared error is known from the plan alone.
type Plan struct {
	Workload *compile.Workload
	Options  Options
	Kind     Kind
	Name     string
	// Factors are the per-column matrices of a Kronecker plan.
	Factors []*ColumnStrategy
	// Marginals is a Marginal plan's strategy: blocks with their own noise.
	Marginals *MarginalStrategy
	// Tables, when set, are the column sets whose histograms exec counts,
	// each over only those columns (Marginal plans; Direct plans whose
	// product domain is over Options.MaxCells); nil means the histogram
	// over the product domain of all the workload's columns.
	Tables [][]int
	// Scale[q][a] is the integer factor a Direct plan multiplies row (q, a) by
	// so that its measurement is integer; the answer divides it back out.
	Scale [][]float64
	// AggNoise, when set, gives each aggregate of a Direct plan its own
	// noise and share of the batch's ε or ρ (see DirectNoise); nil means
	// one noise for the stacked rows (NoiseNum/NoiseDen, Sensitivity).
	AggNoise [][]DirectNoise
	// Sensitivity is Δ₁ (Laplace) or Δ₂ (Gaussian) of the measured matrix.
	// A Marginal plan's blocks are calibrated one by one (MarginalBlock);
	// its Sensitivity is 1, the norm of the blocks stacked with weights
	// equal to their shares.
	Sensitivity float64
	// NoiseNum/NoiseDen is the Laplace scale t = Δ₁/ε, or the Gaussian
	// variance parameter σ² = Δ₂²/(2ρ), rounded up to a rational (zero for
	// Marginal plans, whose blocks carry their own).
	NoiseNum, NoiseDen uint64
	// NoiseVariance is the exact variance of one discrete noise draw.
	NoiseVariance float64
	// Grid is the value of one unit of the measured integer matrix in the
	// units of the real-valued strategy it approximates: the product of the
	// factors' grids (1 when every factor is an integer family). The
	// measured matrix itself is integer, so nothing in measurement or
	// reconstruction depends on it; see gridLaplace for the accounting.
	Grid       float64
	Candidates []Candidate
	// MaxVariance is the largest expected squared error of any answer.
	MaxVariance float64

	// light marks a plan built for its error forms only (no strategy
	// matrices): what comparing candidates by their largest variance
	// needs. Never measured.
	light  bool
	forms  [][]*pairForms // Kronecker: per query, per aggregate
	diags  [][]float64    // Kronecker: diag((A_jᵀA_j)⁻¹) per factor
	mforms []marginalForms
	mspace *marginalSpace
}

// TotalSquaredError is the expected sum of squared errors over every answer.
func (p *Plan) TotalSquaredError() float64 {
	for _, c := range p.Candidates {
		if c.Name == p.Name {
			return c.TotalSquaredError
		}
	}
	return math.NaN()
}

// Objective is the chosen candidate's weighted error, what Choose
// minimised (see Candidate.Objective).
func (p *Plan) Objective() float64 {
	for _, c := range p.Candidates {
		if c.Name == p.Name {
			return c.Objective
		}
	}
	return math.NaN()
}

// Variance is the exact expected squared error of aggregate a of query q in
// the group whose cell indexes (one per group column) are group.
func (p *Plan) Variance(q, a int, group []int) float64 {
	switch p.Kind {
	case Direct:
		k := p.Scale[q][a]
		if p.AggNoise != nil {
			return p.AggNoise[q][a].Variance / (k * k)
		}
		return p.NoiseVariance / (k * k)
	case Marginal:
		v := 0.0
		for _, mf := range p.mforms {
			v += mf.forms[q][a].at(p.Workload, mf.diags, group) / mf.lambda
		}
		return v
	}
	return p.NoiseVariance * p.forms[q][a].at(p.Workload, p.diags, group)
}

func (o Options) validate() error {
	if o.Unit.Rows < 0 || o.Unit.Groups < 0 || o.Unit.PerGroup < 0 || !o.Unit.IsRow() && o.Unit.Rows == 0 {
		return fmt.Errorf("planner: bad contribution bound %+v", o.Unit)
	}
	switch o.Noise {
	case catalog.Laplace:
		if !(o.Epsilon > 0) || math.IsInf(o.Epsilon, 0) {
			return fmt.Errorf("planner: ε must be positive, got %v", o.Epsilon)
		}
	case catalog.Gaussian:
		if !(o.Rho > 0) || math.IsInf(o.Rho, 0) {
			return fmt.Errorf("planner: ρ must be positive, got %v", o.Rho)
		}
	default:
		return fmt.Errorf("planner: unknown noise family %q", o.Noise)
	}
	return nil
}

// calibrate returns the noise parameter for sensitivity sens, rounded up to
// a rational (more noise is always safe), and one draw's exact variance.
// A scale the samplers cannot take (see calibratable) gives num = den = 0
// and an infinite variance, so no candidate with it is ever chosen.
//
// Laplace: t = Δ₁/ε gives ε-DP (discrete Laplace, Canonne–Kamath–Steinke 2020).
// Gaussian: σ² = Δ₂²/(2ρ) gives ρ-zCDP (discrete Gaussian, same paper, Thm 14).
func calibrate(o Options, sens float64) (num, den uint64, variance float64) {
	if !calibratable(o, sens) {
		return 0, 0, math.Inf(1)
	}
	if o.Noise == catalog.Laplace {
		num, den = noise.RationalAtLeast(sens / o.Epsilon)
		return num, den, noise.DiscreteLaplaceVariance(float64(num) / float64(den))
	}
	num, den = noise.RationalAtLeast(sens * sens / (2 * o.Rho))
	return num, den, noise.DiscreteGaussianVariance(float64(num) / float64(den))
}

// calibratable reports whether noise for sensitivity sens under opt has a
// representable parameter: a scale below noise.MaxScale, exactly what
// noise.RationalAtLeast, and so the samplers, take.
func calibratable(opt Options, sens float64) bool {
	x := sens / opt.Epsilon
	if opt.Noise == catalog.Gaussian {
		x = sens * sens / (2 * opt.Rho)
	}
	return x > 0 && x < noise.MaxScale
}

// ErrScale is Choose's error when every strategy would need a noise scale
// the samplers cannot take (see calibratable and noise.MaxScale): the
// privacy parameter is too small for the batch's sensitivities.
var ErrScale = errors.New("planner: the privacy parameter is too small for every strategy's sensitivity")

// Recalibrated is p's strategy with noise calibrated for o (same noise
// family, another ε or ρ).
func (p *Plan) Recalibrated(o Options) (*Plan, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	cp := *p
	cp.Options = o
	// Noise is calibrated at row level (Options.Calibration).
	o, po := o.Calibration(), p.Options.Calibration()
	switch p.Kind {
	case Direct, Kronecker:
		if p.AggNoise != nil {
			ratio := o.Epsilon / po.Epsilon
			if o.Noise == catalog.Gaussian {
				ratio = o.Rho / po.Rho
			}
			cp.AggNoise = make([][]DirectNoise, len(p.AggNoise))
			for q, r := range p.AggNoise {
				cp.AggNoise[q] = make([]DirectNoise, len(r))
				for a, n := range r {
					n.Epsilon *= ratio
					n.Rho *= ratio
					if !n.calibrate(o.Noise == catalog.Gaussian) {
						return nil, fmt.Errorf("planner: noise for an aggregate at %+v is out of the samplers' range", o)
					}
					cp.AggNoise[q][a] = n
				}
			}
			break
		}
		if !calibratable(o, p.Sensitivity) {
			return nil, fmt.Errorf("planner: noise for sensitivity %g at %+v is out of the samplers' range", p.Sensitivity, o)
		}
		cp.NoiseNum, cp.NoiseDen, cp.NoiseVariance = calibrate(o, p.Sensitivity)
	case Marginal:
		ratio := o.Epsilon / po.Epsilon
		if o.Noise == catalog.Gaussian {
			ratio = o.Rho / po.Rho
		}
		f := p.mspace.f
		blocks := make([]MarginalBlock, len(p.Marginals.Blocks))
		for i, b := range p.Marginals.Blocks {
			nb, err := f.recalibrateBlock(b, ratio, o)
			if err != nil {
				return nil, err
			}
			blocks[i] = nb
		}
		cp.Marginals = &MarginalStrategy{Blocks: blocks}
		lam := f.blockLambda(blocks)
		cp.mforms = make([]marginalForms, len(p.mforms))
		for i, mf := range p.mforms {
			mf.lambda = lam[mf.t]
			cp.mforms[i] = mf
		}
	}
	cp.MaxVariance = maxVariance(&cp)
	scale := 1.0
	if p.MaxVariance > 0 {
		scale = cp.MaxVariance / p.MaxVariance
	}
	cp.Candidates = make([]Candidate, len(p.Candidates))
	for i, c := range p.Candidates {
		c.TotalSquaredError *= scale
		c.Objective *= scale
		if c.MaxVariance > 0 {
			c.MaxVariance *= scale
		}
		cp.Candidates[i] = c
	}
	return &cp, nil
}
