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

// chooseWith is choose, also building the k best candidates as plans. It
// collects the candidates of every family (addDirect, addKronecker,
// addMarginals), ranks them by the objective, and builds the winner: the
// least weighted objective, or with ObjectiveMaxVariance the finalist with
// the least largest variance (leastMaxVariance).
func (pl *Planner) chooseWith(ctx context.Context, w *compile.Workload, opt Options, weights [][]float64, k int) (*Plan, [][]float64, []*Plan, error) {
	if err := stopped(ctx); err != nil {
		return nil, nil, nil, err
	}
	maxCells := opt.maxCells()
	wide := productCells(w.Sizes()) > maxCells
	s, red := plannedSpace(w, wide)
	if weights == nil {
		weights = s.answerWeights(opt)
	}
	s.weight = weights
	cands := newCandidateSet(s.w, opt)
	s.addDirect(cands, wide, maxCells)
	// Kronecker products of per-column strategies, over the product domain.
	var choice map[string][]int
	if !wide {
		var err error
		if choice, err = pl.addKronecker(ctx, s, cands); err != nil {
			return nil, nil, nil, err
		}
	}
	if err := s.addMarginals(ctx, cands, maxCells); err != nil {
		return nil, nil, nil, err
	}
	cands.rank()
	if cands.finish == nil {
		return nil, nil, nil, cands.failure(s, wide, maxCells)
	}
	alts, err := cands.alternatives(s, choice, k)
	if err != nil {
		return nil, nil, nil, err
	}
	var best *Plan
	var proxy [][]float64
	if opt.Objective == ObjectiveMaxVariance {
		best, proxy, err = cands.leastMaxVariance()
	} else {
		best, err = cands.finished()
	}
	if err != nil {
		return nil, nil, nil, err
	}
	if red != nil {
		red.restore(best)
		for _, p := range alts {
			red.restore(p)
		}
	}
	return best, proxy, alts, nil
}

// plannedSpace is the space chooseWith plans w in: over the classes of
// its long columns (reduce.go) when that shortens a column, the batch is
// not wide and no marginal candidate applies, with the reduction that
// restores the plan; else over w as compiled.
func plannedSpace(w *compile.Workload, wide bool) (*space, *reduction) {
	if !wide {
		if rw, red := reduceLong(w); red != nil {
			if s := newSpace(rw); s.supports() == nil {
				s.reduced = make([]bool, len(red.classOf))
				for j, c := range red.classOf {
					s.reduced[j] = c != nil
				}
				return s, red
			}
		}
	}
	return newSpace(w), nil
}

// candidateSet collects one planning pass's candidates, each with the
// function that sets a Plan to it, and keeps the best by objective.
type candidateSet struct {
	opt Options
	// best holds every candidate (Candidates) and the best one's Name;
	// finish sets a plan to that candidate.
	best    *Plan
	bestErr float64
	finish  func(p *Plan) error
	applies map[string]func(p *Plan) error
	// tooSmall: a candidate's noise scale was beyond what the samplers take.
	tooSmall bool
}

func newCandidateSet(w *compile.Workload, opt Options) *candidateSet {
	return &candidateSet{
		opt:     opt,
		best:    &Plan{Workload: w, Options: opt, Grid: 1},
		bestErr: math.Inf(1),
		applies: map[string]func(p *Plan) error{},
	}
}

// add adds candidate c, which apply sets a plan to, unless its error is
// not finite or a candidate of its name is in already.
func (cs *candidateSet) add(c Candidate, apply func(p *Plan) error) {
	if math.IsInf(c.Objective, 0) || math.IsNaN(c.Objective) || math.IsInf(c.TotalSquaredError, 0) || math.IsNaN(c.TotalSquaredError) {
		return
	}
	if _, dup := cs.applies[c.Name]; dup {
		return
	}
	cs.applies[c.Name] = apply
	cs.best.Candidates = append(cs.best.Candidates, c)
	if c.Objective < cs.bestErr {
		cs.bestErr, cs.best.Name, cs.finish = c.Objective, c.Name, apply
	}
}

// consider adds a candidate measured with one noise draw per row at
// sensitivity sens.
func (cs *candidateSet) consider(name string, sens, unitErr, weighted float64, apply func(p *Plan) error) {
	if math.IsInf(weighted, 0) || math.IsNaN(weighted) || math.IsInf(unitErr, 0) || math.IsNaN(unitErr) {
		return
	}
	if !calibratable(cs.opt, sens) {
		cs.tooSmall = true
		return
	}
	num, den, v := calibrate(cs.opt, sens)
	cs.add(Candidate{Name: name, Sensitivity: sens, TotalSquaredError: v * unitErr, Unit: sens * sens * unitErr, Objective: v * weighted},
		func(p *Plan) error {
			p.Sensitivity, p.NoiseNum, p.NoiseDen, p.NoiseVariance = sens, num, den, v
			return apply(p)
		})
}

// addDirect adds the workload itself as candidates: one noise for the
// stacked rows, or one per aggregate. Over a product domain beyond
// maxCells (wide) they count the queries' own tables, if those fit.
func (s *space) addDirect(cs *candidateSet, wide bool, maxCells float64) {
	opt := cs.opt
	gauss := opt.Noise == catalog.Gaussian
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
		cs.consider("workload", sens, unit, weighted, func(p *Plan) error {
			p.Kind, p.Scale, p.Tables = Direct, scale, tables
			return nil
		})
		// For the largest variance, every row at its least integer scale
		// (equal shares of one noise) is often the best direct plan.
		if base, _, ok := s.directBase(); ok && opt.Objective == ObjectiveMaxVariance && !slices.EqualFunc(base, scale, slices.Equal) {
			sens := s.directSensitivity(base, gauss)
			unit, weighted := s.directError(base)
			cs.consider("workload-unscaled", sens, unit, weighted, func(p *Plan) error {
				p.Kind, p.Scale, p.Tables = Direct, base, tables
				return nil
			})
		}
	}
	if noises, scale, unit, weighted, ok := s.directSplit(opt); ok && cells <= maxCells && s.aggregates() > 1 && weighted < stacked*(1-1e-6) {
		cs.add(Candidate{Name: "workload-split", Sensitivity: 1, TotalSquaredError: unit, Objective: weighted}, func(p *Plan) error {
			p.Kind, p.Scale, p.Tables, p.AggNoise, p.Sensitivity = Direct, scale, tables, noises, 1
			return nil
		})
	}
}

// addKronecker adds Kronecker products of per-column strategies: the
// integer families' products (searchKronecker), then optimised columns
// from the best of them (optimiseColumns). It returns the products
// considered, by name.
func (pl *Planner) addKronecker(ctx context.Context, s *space, cs *candidateSet) (map[string][]int, error) {
	fam := cs.opt.Noise
	choice, cur := s.searchKronecker(fam, func(c []int) {
		sens, unit, weighted := s.kronErrors(c, fam)
		cs.consider(s.kronName(c), sens, unit, weighted, s.kronApply(c))
	})
	if err := stopped(ctx); err != nil {
		return nil, err
	}
	if cur != nil {
		if err := pl.optimiseColumns(ctx, s, cs, choice, cur); err != nil {
			return nil, err
		}
	}
	return choice, nil
}

// optimiseColumns adds optimised per-column strategies, by coordinate
// descent from the best enumerated product cur: column j's error, the
// others fixed, is trace(G_j^eff·(A_jᵀA_j)⁻¹) (see effectiveGram). The
// descent stops after three rounds, or once chooseWork is spent: first by
// the direct candidates' evaluation (directWork; a batch over a large
// domain spends it there, as it spent the former 300 ms), then by the
// columns optimised (a cached column counts the work it cost, so the plan
// does not depend on what the Planner has cached). Every product it tries
// is added to choice.
func (pl *Planner) optimiseColumns(ctx context.Context, s *space, cs *candidateSet, choice map[string][]int, cur []int) error {
	fam := cs.opt.Noise
	gauss := fam == catalog.Gaussian
	curScore := s.score(cur, fam)
	spent := s.directWork()
	for round := 0; round < 3 && spent < chooseWork; round++ {
		improved := false
		for j := range s.cols {
			if !s.worthOptimising(j) || spent >= chooseWork {
				continue
			}
			if err := stopped(ctx); err != nil {
				return err
			}
			g := s.effectiveGram(j, cur, gauss)
			o, info, err := pl.optimised(ctx, g, fam, min(columnWork(s.cols[j].n), chooseWork))
			if err != nil {
				return err
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
				sens, unit, weighted := s.kronErrors(next, fam)
				cs.consider(name, sens, unit, weighted, s.kronApply(next))
			}
			if v := s.score(next, fam); v < curScore*(1-1e-12) {
				cur, curScore, improved = next, v, true
			}
		}
		if !improved {
			break
		}
	}
	return nil
}

// addMarginals adds strategies of marginal and residual blocks, when the
// queries touch different column sets (marginalCandidates), whose tables
// fit in maxCells.
func (s *space) addMarginals(ctx context.Context, cs *candidateSet, maxCells float64) error {
	ms, margs, err := s.marginalCandidates(ctx, cs.opt, maxCells)
	if err != nil {
		return err
	}
	for _, c := range margs {
		if c.cells > maxCells {
			continue
		}
		cs.add(Candidate{Name: c.name, Sensitivity: 1, TotalSquaredError: c.total, Unit: c.unit, Objective: c.objective},
			func(p *Plan) error {
				p.Kind, p.Sensitivity, p.Tables = Marginal, 1, c.tables
				p.Marginals = &MarginalStrategy{Blocks: c.blocks}
				p.mforms, p.mspace = s.marginalPlanForms(ms, c), ms
				return nil
			})
	}
	return nil
}

// rank orders the candidates by objective and keeps the best twelve.
func (cs *candidateSet) rank() {
	slices.SortStableFunc(cs.best.Candidates, func(a, b Candidate) int {
		return cmp.Compare(a.Objective, b.Objective)
	})
	if len(cs.best.Candidates) > 12 {
		cs.best.Candidates = cs.best.Candidates[:12]
	}
}

// failure is the error of a pass with no candidate: the cells of a wide
// batch, a privacy parameter too small, or no strategy at all.
func (cs *candidateSet) failure(s *space, wide bool, maxCells float64) error {
	if wide {
		_, cells := s.queryTables()
		return &CellsError{Cells: cells, Limit: maxCells}
	}
	if cs.tooSmall {
		return ErrScale
	}
	return fmt.Errorf("planner: no strategy answers this workload")
}

// alternatives builds up to k of the ranked candidates as plans (see
// Alternatives), skipping Kronecker products (in choice) not cheap to
// build. The plans share the ranked candidates.
func (cs *candidateSet) alternatives(s *space, choice map[string][]int, k int) ([]*Plan, error) {
	best := cs.best
	var alts []*Plan
	for i := range best.Candidates {
		if len(alts) == k {
			break
		}
		c := best.Candidates[i]
		if kc, ok := choice[c.Name]; ok && !s.cheapToBuild(kc) {
			continue // an alternative is not worth a dense strategy over a long column
		}
		p := &Plan{Workload: best.Workload, Options: cs.opt, Grid: 1, Name: c.Name, Candidates: best.Candidates}
		if err := cs.applies[c.Name](p); err != nil {
			return nil, err
		}
		p.MaxVariance = maxVariance(p)
		alts = append(alts, p)
	}
	return alts, nil
}

// leastMaxVariance is the plan for ObjectiveMaxVariance. The weighted
// total is a proxy for the largest variance: among the finalists, the one
// with the least largest variance wins. It also returns the per-aggregate
// largest variances of the weighted optimum, which steer chooseMinMax.
func (cs *candidateSet) leastMaxVariance() (*Plan, [][]float64, error) {
	best := cs.best
	w, opt := best.Workload, cs.opt
	var winner *Plan
	var proxy [][]float64 // the weighted optimum's variances steer chooseMinMax
	for i := range best.Candidates[:min(len(best.Candidates), maxVarianceFinalists)] {
		c := &best.Candidates[i]
		// Compared by their error forms alone: a finalist's matrices
		// (a hierarchical strategy over a year of hours is dense
		// 8,760 × 8,760) are built only if it wins.
		p := &Plan{Workload: w, Options: opt, Grid: 1, Name: c.Name, light: true}
		if err := cs.applies[c.Name](p); err != nil {
			return nil, nil, err
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
	if err := cs.applies[winner.Name](full); err != nil {
		return nil, nil, err
	}
	full.MaxVariance, full.Candidates = winner.MaxVariance, best.Candidates
	return full, proxy, nil
}

// finished is the plan of the least weighted objective, built, with its
// largest variance.
func (cs *candidateSet) finished() (*Plan, error) {
	best := cs.best
	if err := cs.finish(best); err != nil {
		return nil, err
	}
	best.MaxVariance = maxVariance(best)
	for i := range best.Candidates {
		if best.Candidates[i].Name == best.Name {
			best.Candidates[i].MaxVariance = best.MaxVariance
		}
	}
	return best, nil
}

// cheapBuildCells bounds the columns on which an alternative plan (see
// Alternatives) may materialise a strategy not built yet.
const cheapBuildCells = 1024

// cheapToBuild reports whether the Kronecker product c's strategies are
// built already or over short columns. A strategy over the classes of a
// long column is not: the plan expands it to a dense matrix over the
// column's cells (reduction.restore).
func (s *space) cheapToBuild(c []int) bool {
	for j, o := range c {
		if s.reduced != nil && s.reduced[j] {
			return false
		}
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
