package planner

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
)

// Choose picks the least-error strategy for w under opt with a Planner
// that caches nothing: a convenience for one-off plans, and the same plan
// as any Planner's. Engines that plan repeatedly (or for several ε in a
// row) should hold a Planner (New) so optimised strategies and whole plans
// are reused.
func Choose(ctx context.Context, w *compile.Workload, opt Options) (*Plan, error) {
	return (&Planner{noCache: true}).Choose(ctx, w, opt)
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

// ForTarget plans w for an accuracy target: the strategy that minimises
// opt.Objective — for a target, ObjectiveMaxVariance, the largest
// per-answer variance — chosen at ε = 1 or ρ = 1 (the optimum does not
// depend on the scale, up to the discreteness of the noise), then the
// least ε (ρ) at which every measured answer's expected standard error is
// at most target with that strategy. opt's ε and ρ are ignored; the
// returned plan's Options carry the ε (ρ) found. A plan with no noisy
// answer has MaxVariance 0 and is returned at the reference scale. The
// considered candidates other than the chosen one keep their errors at
// the reference scale, rescaled by the chosen plan's ratio. A cancelled
// ctx stops it with an error wrapping ctx.Err().
func (pl *Planner) ForTarget(ctx context.Context, w *compile.Workload, opt Options, target float64) (*Plan, error) {
	if !(target > 0) || math.IsInf(target, 0) {
		return nil, fmt.Errorf("planner: accuracy target must be positive, got %v", target)
	}
	fam := opt.Noise
	ref := opt
	ref.Epsilon, ref.Rho = 1, 0
	if fam == catalog.Gaussian {
		ref.Epsilon, ref.Rho = 0, 1
	}
	p, err := pl.Choose(ctx, w, ref)
	if err != nil {
		return nil, err
	}
	sd := math.Sqrt(p.MaxVariance)
	if sd == 0 {
		return p, nil
	}
	cur := p
	for i := 0; i < 40 && (i == 0 || sd > target); i++ {
		ratio := sd / target * (1 + 1e-9)
		o := cur.Options
		if fam == catalog.Gaussian {
			o.Rho *= ratio * ratio
		} else {
			o.Epsilon *= ratio
		}
		if cur, err = p.Recalibrated(o); err != nil {
			return nil, err
		}
		sd = math.Sqrt(cur.MaxVariance)
	}
	if sd > target {
		return nil, fmt.Errorf("planner: no ε reached stderr %g (last %g)", target, sd)
	}
	return cur, nil
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
