package planner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

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

// Choose picks the least-error strategy for w under opt with a Planner
// that caches nothing: a convenience for one-off plans, and the same plan
// as any Planner's. Engines that plan repeatedly (or for several ε in a
// row) should hold a Planner (New) so optimised strategies and whole plans
// are reused.
func Choose(ctx context.Context, w *compile.Workload, opt Options) (*Plan, error) {
	return (&Planner{noCache: true}).Choose(ctx, w, opt)
}

// CellsError refuses a batch whose histograms would exceed the cell limit
// even measured in marginal space. Its message depends only on the
// workload's shape and the catalog.
type CellsError struct {
	Cells, Limit float64
}

func (e *CellsError) Error() string {
	return fmt.Sprintf("the batch needs histograms of %.4g cells, more than the table's limit of %.4g; group by fewer or coarser columns, or split the batch", e.Cells, e.Limit)
}

// Choose picks the strategy for w under opt that minimises opt.Objective:
// the workload itself (Direct), a Kronecker product of per-column
// strategies chosen from the integer families and, where the column is
// long enough to benefit and the work budget allows, strategies optimised for
// the column's effective Gram matrix (p-Identity for Laplace, the
// certified convex optimum for Gaussian), refined by a few rounds of
// coordinate descent; and, when the queries touch different column sets,
// marginal and residual blocks (marginal_plan.go). Every candidate's
// expected error is exact. Plans over a product domain beyond
// opt.MaxCells never count it: Kronecker products are not considered,
// and the rest are measured from the queries' own column sets.
//
// The plan is a deterministic function of w, opt and the package's code:
// the optimisers stop by counted work (effort.go), never by the clock, and
// the Planner's caches only make it faster. A cancelled ctx stops the
// planning promptly with an error wrapping ctx.Err().
func (pl *Planner) Choose(ctx context.Context, w *compile.Workload, opt Options) (*Plan, error) {
	if err := opt.validate(); err != nil {
		return nil, err
	}
	if err := stopped(ctx); err != nil {
		return nil, err
	}
	// Plans are made at row level, at the unit's calibration (see
	// Contribution); the plan carries the options as asked.
	cal := opt.Calibration()
	key := fingerprint(w, cal)
	if p := pl.cachedPlan(key); p != nil {
		p.Workload = w
		p.Options = opt
		return p, nil
	}
	var best *Plan
	var err error
	if opt.Objective == ObjectiveMaxVariance {
		best, err = pl.chooseMinMax(ctx, w, cal)
	} else {
		best, _, err = pl.choose(ctx, w, cal, nil)
	}
	if err != nil {
		return nil, err
	}
	best.Options = opt
	pl.storePlan(key, best)
	return best, nil
}

// choose is one planning pass with the given per-answer weights (nil:
// answerWeights of opt.Objective). With ObjectiveMaxVariance it returns the
// finalist with the least largest variance, and the per-aggregate largest
// variances of the weighted optimum, which steer chooseMinMax.
func (pl *Planner) choose(ctx context.Context, w *compile.Workload, opt Options, weights [][]float64) (*Plan, [][]float64, error) {
	p, per, _, err := pl.chooseWith(ctx, w, opt, weights, 0)
	return p, per, err
}

// Alternatives returns up to k plans for w under opt, best first by the
// weighted objective of Choose's first pass: the candidates it ranks
// highest, each built and calibrated at opt. (With ObjectiveMaxVariance,
// Choose reweights further, so its plan need not be among them.) They
// serve a caller that ranks strategies by another criterion: the engine
// ranks them by the least ε at which, combined with stored measurements,
// they meet the batch's accuracy. Like Choose, they depend on w, opt and k
// alone, and a cancelled ctx stops the planning with an error.
func (pl *Planner) Alternatives(ctx context.Context, w *compile.Workload, opt Options, k int) ([]*Plan, error) {
	if err := opt.validate(); err != nil {
		return nil, err
	}
	_, _, alts, err := pl.chooseWith(ctx, w, opt.Calibration(), nil, k)
	if err != nil {
		return nil, err
	}
	for _, p := range alts {
		p.Options = opt
	}
	return alts, nil
}

// chooseWith is choose, also building the k best candidates as plans.
func (pl *Planner) chooseWith(ctx context.Context, w *compile.Workload, opt Options, weights [][]float64, k int) (*Plan, [][]float64, []*Plan, error) {
	if err := stopped(ctx); err != nil {
		return nil, nil, nil, err
	}
	s := newSpace(w)
	if weights == nil {
		weights = s.answerWeights(opt)
	}
	s.weight = weights
	gauss := opt.Noise == catalog.Gaussian
	maxCells := opt.maxCells()
	wide := productCells(w.Sizes()) > maxCells
	best := &Plan{Workload: w, Options: opt, Grid: 1}
	bestErr := math.Inf(1)
	var finish func(p *Plan) error
	applies := map[string]func(p *Plan) error{}
	add := func(c Candidate, apply func(p *Plan) error) {
		if math.IsInf(c.Objective, 0) || math.IsNaN(c.Objective) || math.IsInf(c.TotalSquaredError, 0) || math.IsNaN(c.TotalSquaredError) {
			return
		}
		if _, dup := applies[c.Name]; dup {
			return
		}
		applies[c.Name] = apply
		best.Candidates = append(best.Candidates, c)
		if c.Objective < bestErr {
			bestErr, best.Name, finish = c.Objective, c.Name, apply
		}
	}
	// consider adds a candidate measured with one noise draw per row at
	// sensitivity sens.
	tooSmall := false // a candidate's noise scale was beyond what the samplers take
	consider := func(name string, sens, unitErr, weighted float64, apply func(p *Plan) error) {
		if math.IsInf(weighted, 0) || math.IsNaN(weighted) || math.IsInf(unitErr, 0) || math.IsNaN(unitErr) {
			return
		}
		if !calibratable(opt, sens) {
			tooSmall = true
			return
		}
		num, den, v := calibrate(opt, sens)
		add(Candidate{Name: name, Sensitivity: sens, TotalSquaredError: v * unitErr, Unit: sens * sens * unitErr, Objective: v * weighted},
			func(p *Plan) error {
				p.Sensitivity, p.NoiseNum, p.NoiseDen, p.NoiseVariance = sens, num, den, v
				return apply(p)
			})
	}

	// The workload itself: one noise for the stacked rows, or one per
	// aggregate.
	var tables [][]int
	cells := 0.0
	if wide {
		tables, cells = s.queryTables()
	}
	stacked := math.Inf(1) // the stacked direct plan's objective
	if scale, sens, ok := s.direct(opt.Noise); ok && cells <= maxCells {
		unit, weighted := s.directError(scale)
		if calibratable(opt, sens) {
			_, _, v := calibrate(opt, sens)
			stacked = v * weighted
		}
		consider("workload", sens, unit, weighted, func(p *Plan) error {
			p.Kind, p.Scale, p.Tables = Direct, scale, tables
			return nil
		})
		// For the largest variance, every row at its least integer scale
		// (equal shares of one noise) is often the best direct plan.
		if base, _, ok := s.directBase(); ok && opt.Objective == ObjectiveMaxVariance && !slices.EqualFunc(base, scale, slices.Equal) {
			sens := s.directSensitivity(base, gauss)
			unit, weighted := s.directError(base)
			consider("workload-unscaled", sens, unit, weighted, func(p *Plan) error {
				p.Kind, p.Scale, p.Tables = Direct, base, tables
				return nil
			})
		}
	}
	if noises, scale, unit, weighted, ok := s.directSplit(opt); ok && cells <= maxCells && s.aggregates() > 1 && weighted < stacked*(1-1e-6) {
		add(Candidate{Name: "workload-split", Sensitivity: 1, TotalSquaredError: unit, Objective: weighted}, func(p *Plan) error {
			p.Kind, p.Scale, p.Tables, p.AggNoise, p.Sensitivity = Direct, scale, tables, noises, 1
			return nil
		})
	}

	// Kronecker products of per-column strategies, over the product domain.
	var choice map[string][]int
	kron := func(c []int) func(p *Plan) error {
		return func(p *Plan) error {
			p.Kind = Kronecker
			p.diags = make([][]float64, len(c))
			p.forms = s.pairForms(c)
			for j, o := range c {
				p.diags[j] = s.cols[j].options[o].diag
			}
			if p.light {
				return nil // the error forms only: no matrices
			}
			p.Factors = make([]*ColumnStrategy, len(c))
			for j, o := range c {
				opt := s.cols[j].options[o]
				cs, err := opt.strategy()
				if err != nil {
					return err
				}
				p.Factors[j] = cs
				p.Grid *= cs.Grid
			}
			return nil
		}
	}
	if !wide {
		var cur []int
		choice, cur = s.searchKronecker(opt.Noise, func(c []int) {
			sens, unit, weighted := s.kronErrors(c, opt.Noise)
			consider(s.kronName(c), sens, unit, weighted, kron(c))
		})
		if err := stopped(ctx); err != nil {
			return nil, nil, nil, err
		}
		// Optimised per-column strategies, by coordinate descent from the best
		// enumerated product: column j's error, the others fixed, is
		// trace(G_j^eff·(A_jᵀA_j)⁻¹) (see effectiveGram). The descent stops
		// after three rounds, or once chooseWork is spent: first by the
		// direct candidates' evaluation (directWork; a batch over a large
		// domain spends it there, as it spent the former 300 ms), then by
		// the columns optimised (a cached column counts the work it cost,
		// so the plan does not depend on what the Planner has cached).
		if cur != nil {
			curScore := s.score(cur, opt.Noise)
			spent := s.directWork()
			for round := 0; round < 3 && spent < chooseWork; round++ {
				improved := false
				for j := range s.cols {
					if !s.worthOptimising(j) || spent >= chooseWork {
						continue
					}
					if err := stopped(ctx); err != nil {
						return nil, nil, nil, err
					}
					g := s.effectiveGram(j, cur, gauss)
					o, info, err := pl.optimised(ctx, g, opt.Noise, min(columnWork(s.cols[j].n), chooseWork))
					if err != nil {
						return nil, nil, nil, err
					}
					spent += info.work
					if o == nil || o.classOf != nil && !constantOnClasses(s.cols[j].vecs, o.classOf, o.cs.gramFactor.RawMatrix().Cols) {
						continue
					}
					idx := s.addOption(j, o)
					next := slices.Clone(cur)
					next[j] = idx
					name := s.kronName(next)
					if _, seen := choice[name]; !seen {
						choice[name] = next
						sens, unit, weighted := s.kronErrors(next, opt.Noise)
						consider(name, sens, unit, weighted, kron(next))
					}
					if v := s.score(next, opt.Noise); v < curScore*(1-1e-12) {
						cur, curScore, improved = next, v, true
					}
				}
				if !improved {
					break
				}
			}
		}
	}

	// Marginal and residual blocks, when the queries touch different column sets.
	ms, margs, err := s.marginalCandidates(ctx, opt, maxCells)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, c := range margs {
		if c.cells > maxCells {
			continue
		}
		add(Candidate{Name: c.name, Sensitivity: 1, TotalSquaredError: c.total, Unit: c.unit, Objective: c.objective},
			func(p *Plan) error {
				p.Kind, p.Sensitivity, p.Tables = Marginal, 1, c.tables
				p.Marginals = &MarginalStrategy{Blocks: c.blocks}
				p.mforms, p.mspace = s.marginalPlanForms(ms, c), ms
				return nil
			})
	}
	slices.SortStableFunc(best.Candidates, func(a, b Candidate) int {
		return cmp.Compare(a.Objective, b.Objective)
	})
	if len(best.Candidates) > 12 {
		best.Candidates = best.Candidates[:12]
	}
	if finish == nil {
		if wide {
			_, cells := s.queryTables()
			return nil, nil, nil, &CellsError{Cells: cells, Limit: maxCells}
		}
		if tooSmall {
			return nil, nil, nil, ErrScale
		}
		return nil, nil, nil, fmt.Errorf("planner: no strategy answers this workload")
	}
	var alts []*Plan
	for i := range best.Candidates {
		if len(alts) == k {
			break
		}
		c := best.Candidates[i]
		if kc, ok := choice[c.Name]; ok && !s.cheapToBuild(kc) {
			continue // an alternative is not worth a dense strategy over a long column
		}
		p := &Plan{Workload: w, Options: opt, Grid: 1, Name: c.Name, Candidates: best.Candidates}
		if err := applies[c.Name](p); err != nil {
			return nil, nil, nil, err
		}
		p.MaxVariance = maxVariance(p)
		alts = append(alts, p)
	}
	if opt.Objective == ObjectiveMaxVariance {
		// The weighted total is a proxy for the largest variance: among the
		// finalists, the one with the least largest variance wins.
		var winner *Plan
		var proxy [][]float64 // the weighted optimum's variances steer chooseMinMax
		for i := range best.Candidates[:min(len(best.Candidates), maxVarianceFinalists)] {
			c := &best.Candidates[i]
			// Compared by their error forms alone: a finalist's matrices
			// (a hierarchical strategy over a year of hours is dense
			// 8,760 × 8,760) are built only if it wins.
			p := &Plan{Workload: w, Options: opt, Grid: 1, Name: c.Name, light: true}
			if err := applies[c.Name](p); err != nil {
				return nil, nil, nil, err
			}
			per := aggregateMaxVariances(p)
			if i == 0 {
				proxy = per
			}
			for _, r := range per {
				for _, v := range r {
					p.MaxVariance = math.Max(p.MaxVariance, v)
				}
			}
			c.MaxVariance = p.MaxVariance
			if winner == nil || p.MaxVariance < winner.MaxVariance {
				winner = p
			}
		}
		full := &Plan{Workload: w, Options: opt, Grid: 1, Name: winner.Name}
		if err := applies[winner.Name](full); err != nil {
			return nil, nil, nil, err
		}
		full.MaxVariance, full.Candidates = winner.MaxVariance, best.Candidates
		return full, proxy, alts, nil
	}
	if err := finish(best); err != nil {
		return nil, nil, nil, err
	}
	best.MaxVariance = maxVariance(best)
	for i := range best.Candidates {
		if best.Candidates[i].Name == best.Name {
			best.Candidates[i].MaxVariance = best.MaxVariance
		}
	}
	return best, nil, alts, nil
}

// cheapBuildCells bounds the columns on which an alternative plan (see
// Alternatives) may materialise a strategy not built yet.
const cheapBuildCells = 1024

// cheapToBuild reports whether the Kronecker product c's strategies are
// built already or over short columns.
func (s *space) cheapToBuild(c []int) bool {
	for j, o := range c {
		opt := s.cols[j].options[o]
		if opt.n > cheapBuildCells && !opt.built() {
			return false
		}
	}
	return true
}

// maxVarianceFinalists is how many of the best candidates by weighted
// total a max-variance plan compares by their largest variance.
const maxVarianceFinalists = 8

// aggregates is the number of measured aggregates of the batch.
func (s *space) aggregates() int {
	n := 0
	for _, q := range s.w.Queries {
		n += len(q.Aggregates)
	}
	return n
}

// productCells is the size of the product domain, as a float (it can pass
// the int range on wide tables).
func productCells(sizes []int) float64 {
	n := 1.0
	for _, s := range sizes {
		n *= float64(s)
	}
	return n
}

// queryTables are the maximal supports of the queries (the tables a
// Direct plan in marginal space counts) and their cells.
func (s *space) queryTables() ([][]int, float64) {
	var sets []colSet
	for q := range s.w.Queries {
		m := s.querySupport(q)
		if !slices.Contains(sets, m) {
			sets = append(sets, m)
		}
	}
	sizes := s.w.Sizes()
	var tables [][]int
	cells := 0.0
	for _, a := range sets {
		covered := false
		for _, b := range sets {
			if a != b && a.subsetOf(b) {
				covered = true
				break
			}
		}
		if covered {
			continue
		}
		cols := a.cols()
		tables = append(tables, cols)
		c := 1.0
		for _, j := range cols {
			c *= float64(sizes[j])
		}
		cells += c
	}
	slices.SortFunc(tables, slices.Compare)
	return tables, cells
}

// CountedCells is the number of histogram cells a batch's measurement
// needs at least: the product domain when it fits in maxCells (0:
// DefaultMaxCells), else the cells of the queries' own column sets. A
// batch whose CountedCells exceeds the limit is refused.
func CountedCells(w *compile.Workload, maxCells float64) float64 {
	if maxCells <= 0 {
		maxCells = DefaultMaxCells
	}
	if p := productCells(w.Sizes()); p <= maxCells {
		return p
	}
	_, cells := newSpace(w).queryTables()
	return cells
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

// ErrScale is Choose's error when every strategy would need a noise scale
// the samplers cannot take (see calibratable and noise.MaxScale): the
// privacy parameter is too small for the batch's sensitivities.
var ErrScale = errors.New("planner: the privacy parameter is too small for every strategy's sensitivity")

// space holds, per column, the candidate strategies and the distinct
// factor vectors the workload uses on that column, with their error forms
// precomputed so a Kronecker candidate is evaluated in O(terms²·columns).
type space struct {
	w    *compile.Workload
	cols []*columnSpace
	// idx[q][a][t][j] is the index of term t's factor on column j in cols[j].vecs.
	idx [][][][]int
	// grouped[q][j] reports whether query q groups by column j.
	grouped [][]bool
	// weight[q][a] is aggregate a's weight in the planning objective (see
	// answerWeights); nil when every weight is 1.
	weight [][]float64
}

// wt is aggregate a of query q's weight.
func (s *space) wt(q, a int) float64 {
	if s.weight == nil {
		return 1
	}
	return s.weight[q][a]
}

type columnSpace struct {
	n       int
	vecs    [][]float64 // distinct factors (nil = ones)
	full    [][]float64 // the same with nil expanded
	support [][]int     // the indexes where each full vector is non-zero
	options []*colOpt
	bil     [][][]float64 // [option][u][v] = uᵀ G v, G = (AᵀA)⁻¹
	diag    [][][]float64 // [option][u][v] = Σ u_i v_i G_ii
}

func newSpace(w *compile.Workload) *space {
	s := &space{w: w}
	sizes := w.Sizes()
	for j := range w.Columns {
		s.cols = append(s.cols, &columnSpace{n: sizes[j]})
	}
	seen := make([]vecSet, len(w.Columns))
	vecIndex := func(j int, f compile.Factor) int {
		cs := s.cols[j]
		i, added := seen[j].index(cs.vecs, f)
		if added {
			cs.vecs = append(cs.vecs, f)
		}
		return i
	}
	for _, q := range w.Queries {
		var qi [][][]int
		for _, agg := range q.Aggregates {
			var ai [][]int
			for _, t := range agg {
				ti := make([]int, len(t.Factors))
				for j, f := range t.Factors {
					ti[j] = vecIndex(j, f)
				}
				ai = append(ai, ti)
			}
			qi = append(qi, ai)
		}
		s.idx = append(s.idx, qi)
		g := make([]bool, len(w.Columns))
		for _, j := range q.GroupCols {
			g[j] = true
		}
		s.grouped = append(s.grouped, g)
	}
	for j, cs := range s.cols {
		for _, v := range cs.vecs {
			if v == nil {
				v = ones(cs.n)
			}
			cs.full = append(cs.full, v)
			cs.support = append(cs.support, nonZeros(v))
		}
		for _, o := range columnOptions(cs.n, s.columnWorkload(j)) {
			s.addOption(j, o)
		}
	}
	return s
}

// addOption appends o to column j's options (or finds it) with its error
// forms, and returns its index.
func (s *space) addOption(j int, o *colOpt) int {
	cs := s.cols[j]
	for i, x := range cs.options {
		if x == o {
			return i
		}
	}
	k := len(cs.vecs)
	b, d := make([][]float64, k), make([][]float64, k)
	h := make([]float64, cs.n)
	for u := 0; u < k; u++ {
		b[u], d[u] = make([]float64, k), make([]float64, k)
	}
	// The factors of time buckets and expression groups are sparse (an
	// hour, a day of a year of hourly bins): every sum runs over a
	// vector's support, so a column of k factors costs k products with
	// (AᵀA)⁻¹ plus k·Σ|support| instead of k²·n.
	ug := make([]float64, cs.n) // u∘diag(G), zero outside u's support
	for u := 0; u < k; u++ {
		fu := cs.full[u]
		o.mul(h, fu)
		for _, i := range cs.support[u] {
			ug[i] = fu[i] * o.diag[i]
		}
		for v := 0; v < k; v++ {
			fv := cs.full[v]
			bx, dx := 0.0, 0.0
			for _, i := range cs.support[v] {
				bx += fv[i] * h[i]
				dx += fv[i] * ug[i]
			}
			b[v][u] = bx
			d[u][v] = dx
		}
		for _, i := range cs.support[u] {
			ug[i] = 0
		}
	}
	// Symmetrise the bilinear forms (uᵀGv = vᵀGu in exact arithmetic).
	for u := 0; u < k; u++ {
		for v := u + 1; v < k; v++ {
			m := 0.5 * (b[u][v] + b[v][u])
			b[u][v], b[v][u] = m, m
		}
	}
	cs.options = append(cs.options, o)
	cs.bil = append(cs.bil, b)
	cs.diag = append(cs.diag, d)
	return len(cs.options) - 1
}

// columnWorkload is the set of integer rows column j must answer: each
// distinct factor used where j is not grouped, and each single cell where
// it is. Nil when that set is no smaller than the identity.
func (s *space) columnWorkload(j int) [][]float64 {
	n := s.cols[j].n
	var rows [][]float64
	cellNeeded := make([]bool, n)
	var seen vecSet
	add := func(v []float64) {
		if _, added := seen.index(rows, v); added {
			rows = append(rows, v)
		}
	}
	for q, qu := range s.w.Queries {
		grouped := s.grouped[q][j]
		for a := range qu.Aggregates {
			for _, ti := range s.idx[q][a] {
				f := s.cols[j].vecs[ti[j]]
				if grouped {
					for i := 0; i < n; i++ {
						if f == nil || f[i] != 0 {
							cellNeeded[i] = true
						}
					}
					continue
				}
				v := make([]float64, n)
				for i := range v {
					v[i] = 1
					if f != nil {
						v[i] = f[i]
					}
				}
				k, ok := integerScale(v)
				if !ok {
					return nil
				}
				for i := range v {
					v[i] *= k
				}
				add(v)
				if len(rows) >= n {
					return nil
				}
			}
		}
	}
	for i, need := range cellNeeded {
		if need {
			e := make([]float64, n)
			e[i] = 1
			add(e)
		}
	}
	if len(rows) >= n {
		return nil
	}
	return rows
}

// columnOptions are the integer strategies for a column: identity,
// hierarchical (b = 2, 4, 8, 16), the Haar wavelet and the column's own
// workload rows (the last two built densely, so only up to maxDenseOption
// cells).
func columnOptions(n int, workloadRows [][]float64) []*colOpt {
	out := fixedOptions(n)
	if workloadRows != nil && n <= maxDenseOption {
		if cs, err := Rows("workload", n, workloadRows); err == nil {
			out = append(out, optFromStrategy(cs))
		}
	}
	return out
}

// maxEnumerate bounds exhaustive search over per-column choices; beyond it
// the planner does coordinate descent.
const maxEnumerate = 4096

// searchKronecker visits candidate per-column choices and returns the
// choices by strategy name and the best choice found.
func (s *space) searchKronecker(fam catalog.NoiseFamily, visit func([]int)) (map[string][]int, []int) {
	byName := map[string][]int{}
	var best []int
	bestScore := math.Inf(1)
	seen := func(c []int) {
		cp := slices.Clone(c)
		name := s.kronName(cp)
		if _, ok := byName[name]; ok {
			return
		}
		byName[name] = cp
		visit(cp)
		if v := s.score(cp, fam); v < bestScore {
			bestScore, best = v, cp
		}
	}
	total := 1
	for _, cs := range s.cols {
		total *= len(cs.options)
		if total > maxEnumerate {
			break
		}
	}
	d := len(s.cols)
	if total <= maxEnumerate {
		c := make([]int, d)
		var rec func(j int)
		rec = func(j int) {
			if j == d {
				seen(c)
				return
			}
			for o := range s.cols[j].options {
				c[j] = o
				rec(j + 1)
			}
		}
		rec(0)
		return byName, best
	}
	// Coordinate descent from the all-identity choice.
	c := make([]int, d)
	cur := s.score(c, fam)
	seen(c)
	for sweep := 0; sweep < 4; sweep++ {
		improved := false
		for j := 0; j < d; j++ {
			for o := range s.cols[j].options {
				old := c[j]
				c[j] = o
				if v := s.score(c, fam); v < cur {
					cur, improved = v, true
					seen(c)
				} else {
					c[j] = old
				}
			}
		}
		if !improved {
			break
		}
	}
	return byName, best
}

func (s *space) score(c []int, fam catalog.NoiseFamily) float64 {
	sens, unit := s.kronError(c, fam)
	return sens * sens * unit
}

func (s *space) kronName(c []int) string {
	parts := make([]string, len(c))
	for j, o := range c {
		parts[j] = s.w.Columns[j].Name + ":" + s.cols[j].options[o].name
	}
	return "kron(" + strings.Join(parts, " ⊗ ") + ")"
}

// kronError returns the sensitivity of ⊗A_j and the total error per unit
// noise variance: Σ over every workload row w of w(AᵀA)⁺wᵀ. For a query
// grouped on a set of columns, the rows are agg∘e_g over the groups g, and
// Σ_g (agg∘e_g)ᵀ(⊗G_j)(agg∘e_g) factors over columns into bilinear forms
// (ungrouped columns) and diagonal forms (grouped ones).
func (s *space) kronError(c []int, fam catalog.NoiseFamily) (float64, float64) {
	sens, _, unit := s.kronErrors(c, fam)
	return sens, unit
}

// kronErrors is kronError with both the unweighted error (what is
// reported) and the weighted one (what is minimised; see answerWeights).
func (s *space) kronErrors(c []int, fam catalog.NoiseFamily) (sens, unit, weighted float64) {
	sens = 1.0
	for j, o := range c {
		sens *= s.cols[j].options[o].sens(fam == catalog.Gaussian)
	}
	for q, qu := range s.w.Queries {
		for a, agg := range qu.Aggregates {
			sum := 0.0
			for t := range agg {
				for u := range agg {
					p := agg[t].Coef * agg[u].Coef
					for j, o := range c {
						ct := s.cols[j]
						x, y := s.idx[q][a][t][j], s.idx[q][a][u][j]
						if s.grouped[q][j] {
							p *= ct.diag[o][x][y]
						} else {
							p *= ct.bil[o][x][y]
						}
					}
					sum += p
				}
			}
			unit += sum
			weighted += s.wt(q, a) * sum
		}
	}
	return sens, unit, weighted
}

// effectiveGram is column j's Gram matrix with the other columns' choices
// in c fixed: kronError is linear in column j's form G_j = (A_jᵀA_j)⁻¹,
//
//	unit = Σ_{q,a,t,s} c_t c_s Π_{l≠j} F_l(t,s) · F_j(t,s),
//
// with F_j(t,s) = u_tjᵀG_j u_sj (column j not grouped in q) or
// Σ_i u_tj,i u_sj,i (G_j)_ii (grouped), so unit = trace(G_j^eff·G_j) with
//
//	G_j^eff = Σ K_uv u·vᵀ + diag(Σ K'_uv u∘v),
//
// K collecting the weights c_t c_s Π_{l≠j}F_l of the pairs whose factors
// on column j are (u, v). The Gram is low rank (the column's distinct
// factors) plus diagonal (its group-by terms). For the optimiser's
// objective the other columns' sensitivities are a constant factor.
func (s *space) effectiveGram(j int, c []int, gauss bool) *LowRankGram {
	cs := s.cols[j]
	k := len(cs.vecs)
	K := make([][]float64, k)
	for u := range K {
		K[u] = make([]float64, k)
	}
	var dg []float64
	for q, qu := range s.w.Queries {
		for a, agg := range qu.Aggregates {
			for t := range agg {
				for u := range agg {
					p := s.wt(q, a) * agg[t].Coef * agg[u].Coef
					for l, o := range c {
						if l == j {
							continue
						}
						cl := s.cols[l]
						x, y := s.idx[q][a][t][l], s.idx[q][a][u][l]
						if s.grouped[q][l] {
							p *= cl.diag[o][x][y]
						} else {
							p *= cl.bil[o][x][y]
						}
					}
					if p == 0 {
						continue
					}
					x, y := s.idx[q][a][t][j], s.idx[q][a][u][j]
					if s.grouped[q][j] {
						if dg == nil {
							dg = make([]float64, cs.n)
						}
						fx, fy := cs.full[x], cs.full[y]
						for i := range dg {
							dg[i] += p * fx[i] * fy[i]
						}
					} else {
						K[x][y] += p
					}
				}
			}
		}
	}
	// Normalise (the optimum is scale-invariant) so equal shapes share a key.
	scale := 0.0
	for u := range K {
		for v := range K[u] {
			scale = math.Max(scale, math.Abs(K[u][v]))
		}
	}
	for _, x := range dg {
		scale = math.Max(scale, math.Abs(x))
	}
	if scale > 0 {
		for u := range K {
			for v := range K[u] {
				K[u][v] = roundSig(K[u][v] / scale)
			}
		}
		for i := range dg {
			dg[i] = roundSig(dg[i] / scale)
		}
	}
	return NewLowRankGram(cs.n, cs.vecs, K, dg)
}

// roundSig rounds to 12 significant digits, so effective Grams that differ
// only by floating-point noise share a cache key.
func roundSig(x float64) float64 {
	if x == 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		return x
	}
	e := math.Floor(math.Log10(math.Abs(x)))
	p := math.Pow(10, 11-e)
	return math.Round(x*p) / p
}

// worthOptimising reports whether column j's workload can gain from an
// optimised strategy: the column is long enough (≥ 8 cells) and its
// effective workload is neither a single vector (measured best by itself)
// nor only group-by cells (measured best by the identity).
func (s *space) worthOptimising(j int) bool {
	cs := s.cols[j]
	if cs.n < 8 {
		return false
	}
	grouped := false
	for q := range s.w.Queries {
		grouped = grouped || s.grouped[q][j]
	}
	nonOnes := 0
	for _, v := range cs.vecs {
		if v != nil {
			nonOnes++
		}
	}
	if grouped {
		return nonOnes > 0
	}
	return len(cs.vecs) > 2
}

// pairForms holds, for one (query, aggregate) of a Kronecker plan, what is
// needed to evaluate one group's variance: the product over non-grouped
// columns for each pair of terms.
type pairForms struct {
	q, a  int
	coefK [][]float64
}

func (s *space) pairForms(c []int) [][]*pairForms {
	out := make([][]*pairForms, len(s.w.Queries))
	for q, qu := range s.w.Queries {
		for a, agg := range qu.Aggregates {
			pf := &pairForms{q: q, a: a, coefK: make([][]float64, len(agg))}
			for t := range agg {
				pf.coefK[t] = make([]float64, len(agg))
				for u := range agg {
					p := agg[t].Coef * agg[u].Coef
					for j, o := range c {
						if !s.grouped[q][j] {
							p *= s.cols[j].bil[o][s.idx[q][a][t][j]][s.idx[q][a][u][j]]
						}
					}
					pf.coefK[t][u] = p
				}
			}
			out[q] = append(out[q], pf)
		}
	}
	return out
}

// at evaluates the form for one group, with diags[j] the diagonal of
// column j's error form.
func (pf *pairForms) at(w *compile.Workload, diags [][]float64, group []int) float64 {
	qu := w.Queries[pf.q]
	agg := qu.Aggregates[pf.a]
	v := 0.0
	for t := range agg {
		for u := range agg {
			x := pf.coefK[t][u]
			for gi, j := range qu.GroupCols {
				i := group[gi]
				ft, fu := agg[t].Factors[j], agg[u].Factors[j]
				vt, vu := 1.0, 1.0
				if ft != nil {
					vt = ft[i]
				}
				if fu != nil {
					vu = fu[i]
				}
				x *= vt * vu * diags[j][i]
			}
			v += x
		}
	}
	return v
}

// fingerprint identifies a workload's structure and the options: equal
// fingerprints get equal plans.
func fingerprint(w *compile.Workload, opt Options) string {
	var rows [][]float64
	sizes := make([]float64, 0, len(w.Columns))
	for _, s := range w.Sizes() {
		sizes = append(sizes, float64(s))
	}
	rows = append(rows, sizes, []float64{opt.Epsilon, opt.Rho})
	for _, q := range w.Queries {
		g := []float64{-1}
		for _, j := range q.GroupCols {
			g = append(g, float64(j))
		}
		rows = append(rows, g)
		for _, agg := range q.Aggregates {
			rows = append(rows, []float64{-2, float64(len(agg))})
			for _, t := range agg {
				rows = append(rows, []float64{-3, t.Coef})
				for _, f := range t.Factors {
					if f == nil {
						rows = append(rows, nil)
					} else {
						rows = append(rows, f)
					}
				}
			}
		}
	}
	// The objective, the cell limit and the answers' items (which weight
	// the objective) change the plan.
	rows = append(rows, []float64{-4, float64(opt.Objective), opt.maxCells()})
	for _, q := range w.Queries {
		rows = append(rows, []float64{-6, float64(len(q.ExprGroups))})
		for _, it := range q.Items {
			if it.Kind == compile.ItemAgg || it.Kind == compile.ItemRatio || it.Kind == compile.ItemVariance {
				rows = append(rows, []float64{-5, float64(it.Kind), float64(it.Agg), float64(it.Den), float64(it.Sq), it.Lo, it.Hi})
			}
		}
	}
	names := string(opt.Noise)
	for _, c := range w.Columns {
		names += "|" + c.Name
	}
	return names + "|" + hashFloats(len(rows), rows, nil, nil)
}

// integerScale finds the smallest k ≤ 64 such that k·v is integer.
func integerScale(v []float64) (float64, bool) {
	for k := 1.0; k <= 64; k++ {
		ok := true
		for _, x := range v {
			if y := k * x; math.Abs(y-math.Round(y)) > 1e-9 {
				ok = false
				break
			}
		}
		if ok {
			return k, true
		}
	}
	return 0, false
}

// maxDenseCells bounds exact enumeration of the product domain when
// computing the direct strategy's sensitivity; beyond it a safe upper bound
// is used.
const maxDenseCells = 1 << 22

// direct chooses, for measuring the workload rows themselves, each
// aggregate's integer scale k_a, and returns the exact sensitivity of the
// scaled rows. Within one query the groups partition the cells, so a
// cell's column norm sums over aggregates and queries only:
// Δ₁ = max_cell Σ_a k_a|v_a(cell)|, Δ₂² = max_cell Σ_a k_a²v_a(cell)².
//
// k_a is a multiple of the least g_a making k_a·v_a integer (so the
// measurement is exact). Scaling changes how the noise is shared: answer a
// has variance ∝ Δ(k)²/k_a², so an aggregate with small values (a COUNT
// beside a SUM of hours) gets a larger k_a. With c_a its weighted number of
// answers and m_a = max|v_a|, Δ ≈ Σ k_a m_a (L1) is minimised at
// k_a ∝ (c_a/m_a)^{1/3}, and Δ² ≈ Σ k_a² m_a² (L2) at k_a ∝ c_a^{1/4}/m_a^{1/2};
// those targets are rounded to multiples of g_a, the exact sensitivity is
// computed for them, and they are kept only if they beat k = g.
func (s *space) direct(fam catalog.NoiseFamily) (scale [][]float64, sens float64, ok bool) {
	w := s.w
	gauss := fam == catalog.Gaussian
	base, maxAbs, ok := s.directBase()
	if !ok {
		return nil, 0, false
	}
	sens = s.directSensitivity(base, gauss)
	if sens == 0 {
		return base, 1, true // every row is identically zero; any positive calibration is safe
	}
	// Target scales, relative to the smallest, at a resolution of 1/16.
	target := make([][]float64, len(base))
	lo := math.Inf(1)
	for q, qu := range w.Queries {
		target[q] = make([]float64, len(base[q]))
		for a := range base[q] {
			c := float64(qu.LiveRows(w, a)) * s.wt(q, a)
			m := maxAbs[q][a]
			if m == 0 {
				continue
			}
			t := math.Cbrt(c / m)
			if gauss {
				t = math.Sqrt(math.Sqrt(c) / m)
			}
			target[q][a] = t
			lo = math.Min(lo, t/base[q][a])
		}
	}
	mult := make([][]float64, len(base))
	common := 0.0
	for q := range base {
		mult[q] = make([]float64, len(base[q]))
		for a, g := range base[q] {
			j := 1.0
			if target[q][a] > 0 && !math.IsInf(lo, 0) {
				j = math.Max(1, math.Round(16*target[q][a]/(lo*g)))
			}
			mult[q][a] = j
			common = gcd(common, j)
		}
	}
	// A common factor of the multipliers changes no error: divide it out.
	tuned := make([][]float64, len(base))
	changed := false
	for q := range base {
		tuned[q] = make([]float64, len(base[q]))
		for a, g := range base[q] {
			j := mult[q][a] / common
			tuned[q][a] = g * j
			changed = changed || j != 1
		}
	}
	if !changed || !integerScales(tuned) {
		return base, sens, true
	}
	tunedSens := s.directSensitivity(tuned, gauss)
	_, wb := s.directError(base)
	_, wt := s.directError(tuned)
	if tunedSens*tunedSens*wt < sens*sens*wb {
		return tuned, tunedSens, true
	}
	return base, sens, true
}

// integerScales reports whether every scale is an integer small enough
// that scaled counts stay exact in float64.
func integerScales(k [][]float64) bool {
	for _, r := range k {
		for _, x := range r {
			if x != math.Trunc(x) || x > 1<<20 {
				return false
			}
		}
	}
	return true
}

// directError is the direct strategy's error per unit noise variance,
// Σ_{q,a} groups_q/k_{q,a}², unweighted and weighted by answerWeights.
func (s *space) directError(scale [][]float64) (unit, weighted float64) {
	for q, qu := range s.w.Queries {
		for a := range qu.Aggregates {
			e := float64(qu.LiveRows(s.w, a)) / (scale[q][a] * scale[q][a])
			unit += e
			weighted += s.wt(q, a) * e
		}
	}
	return unit, weighted
}

// directBase returns each aggregate's least integerising scale and its
// largest absolute value over the cells. On large domains, where the
// product domain is not enumerated, the scale of a term is the product of
// its coefficient's and factors' scales (exact: a product of k_i·f_i
// integers) and an aggregate's the least common multiple over its terms;
// the largest value is bounded by the sum over terms of |coef|·Π max|f|.
func (s *space) directBase() (scale, maxAbs [][]float64, ok bool) {
	w := s.w
	sizes := w.Sizes()
	dense := productCells(sizes) <= maxDenseCells
	for _, q := range w.Queries {
		var qs, qm []float64
		for _, agg := range q.Aggregates {
			if dense {
				vals := Dense(agg, sizes)
				k, good := integerScale(vals)
				if !good {
					return nil, nil, false
				}
				m := 0.0
				for _, v := range vals {
					m = math.Max(m, math.Abs(v))
				}
				qs, qm = append(qs, k), append(qm, m)
				continue
			}
			k, m := 1.0, 0.0
			for _, t := range agg {
				tk, good := integerScale([]float64{t.Coef})
				if !good {
					return nil, nil, false
				}
				p := math.Abs(t.Coef)
				for _, f := range t.Factors {
					if f == nil {
						continue
					}
					fk, good := integerScale(f)
					if !good {
						return nil, nil, false
					}
					tk *= fk
					mx := 0.0
					for _, x := range f {
						mx = math.Max(mx, math.Abs(x))
					}
					p *= mx
				}
				k = k / gcd(k, tk) * tk
				m += p
			}
			if k > 1<<20 {
				return nil, nil, false
			}
			qs, qm = append(qs, k), append(qm, m)
		}
		scale, maxAbs = append(scale, qs), append(maxAbs, qm)
	}
	return scale, maxAbs, true
}

// directSensitivity is the exact largest column norm of the scaled rows
// (enumerating the product domain up to maxDenseCells cells; beyond it the
// safe bound Σ k_a·max|v_a|, or its L2 analogue).
func (s *space) directSensitivity(scale [][]float64, gauss bool) float64 {
	w := s.w
	sizes := w.Sizes()
	if productCells(sizes) > maxDenseCells {
		_, maxAbs, _ := s.directBase()
		b := 0.0
		for q := range scale {
			for a, k := range scale[q] {
				if gauss {
					b += k * k * maxAbs[q][a] * maxAbs[q][a]
				} else {
					b += k * maxAbs[q][a]
				}
			}
		}
		if gauss {
			b = math.Sqrt(b)
		}
		return b
	}
	acc := make([]float64, int(productCells(sizes)))
	for q, qu := range w.Queries {
		for a, agg := range qu.Aggregates {
			k := scale[q][a]
			for i, v := range Dense(agg, sizes) {
				if gauss {
					acc[i] += k * k * v * v
				} else {
					acc[i] += k * math.Abs(v)
				}
			}
		}
	}
	b := 0.0
	for _, v := range acc {
		b = math.Max(b, v)
	}
	if gauss {
		b = math.Sqrt(b)
	}
	return b
}

// Dense expands a structured linear query over the product domain
// (row-major, last column fastest), term by term as Kronecker products:
// O(cells) per term.
func Dense(l compile.Linear, sizes []int) []float64 {
	n := 1
	for _, s := range sizes {
		n *= s
	}
	out := make([]float64, n)
	buf := make([]float64, n)
	for _, t := range l {
		// buf = coef·(f_1 ⊗ … ⊗ f_d), built from the last column up.
		cur := buf[:1]
		cur[0] = t.Coef
		size := 1
		for j := len(sizes) - 1; j >= 0; j-- {
			f := t.Factors[j]
			nj := sizes[j]
			// new[i*size + r] = f[i]·cur[r]; write from the top so cur (at
			// the front of buf) is read before it is overwritten.
			for i := nj - 1; i >= 0; i-- {
				c := 1.0
				if f != nil {
					c = f[i]
				}
				dst := buf[i*size : (i+1)*size]
				if i == 0 {
					for r := range dst {
						dst[r] *= c
					}
					continue
				}
				for r := range dst {
					dst[r] = c * buf[r]
				}
			}
			size *= nj
			cur = buf[:size]
		}
		for i, v := range cur {
			out[i] += v
		}
	}
	return out
}

func gcd(a, b float64) float64 {
	for b != 0 {
		a, b = b, math.Mod(a, b)
	}
	return a
}

// nonZeros lists the indexes where v is non-zero.
func nonZeros(v []float64) []int {
	var out []int
	for i, x := range v {
		if x != 0 {
			out = append(out, i)
		}
	}
	return out
}

// vecSet finds a vector among the distinct ones listed so far by hash, so
// that k vectors of length n are deduplicated in O(k·n), not O(k²·n).
type vecSet struct {
	byHash map[uint64][]int
}

// index returns v's index in list (nil is its own vector), or len(list)
// and true when v is new; the caller then appends it.
func (s *vecSet) index(list [][]float64, v []float64) (int, bool) {
	if s.byHash == nil {
		s.byHash = map[uint64][]int{}
	}
	h := uint64(1469598103934665603)
	if v == nil {
		h = 0
	}
	for _, x := range v {
		h = (h ^ math.Float64bits(x+0)) * 1099511628211 // x+0: −0 hashes as 0, as it compares
	}
	for _, i := range s.byHash[h] {
		u := list[i]
		if (u == nil) == (v == nil) && (u == nil || slices.Equal(u, v)) {
			return i, false
		}
	}
	s.byHash[h] = append(s.byHash[h], len(list))
	return len(list), true
}
