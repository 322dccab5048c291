package reuse

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/measure"
	"github.com/dpproxy/dpproxy/planner"
)

// Planner is what the policy asks of the planner: the best plan for a
// workload and the next best ones.
type Planner interface {
	Choose(ctx context.Context, w *compile.Workload, opt planner.Options) (*planner.Plan, error)
	Alternatives(ctx context.Context, w *compile.Workload, opt planner.Options, k int) ([]*planner.Plan, error)
}

// Policy decides how batches are answered given the stored measurements.
// It holds no data: only the planner, the smallest ε and ρ a plan may be
// calibrated to, and the cache of solved stored systems (cache.go, each a
// function of released measurements), so one Policy serves every table
// of an engine, concurrently.
type Policy struct {
	planner            Planner
	minEpsilon, minRho float64
	solved             *Cache
	folds              *folds
	// solveEach makes the least-ε search solve every step instead of
	// reading pencils (tests compare the two).
	solveEach bool
}

// New returns a policy that plans with pl, calibrates no plan below
// minEpsilon (ε) or minRho (ρ), and keeps up to cacheBytes of solved
// stored systems (≤ 0: none).
func New(pl Planner, minEpsilon, minRho float64, cacheBytes int64) *Policy {
	return &Policy{planner: pl, minEpsilon: minEpsilon, minRho: minRho, solved: NewCache(cacheBytes), folds: newFolds()}
}

// Request is a batch to decide about.
type Request struct {
	W    *compile.Workload
	Plan *planner.Plan // the batch's own plan at the session's options
	Cost budget.Cost   // what Plan costs
	// MaxStderr is the session's @dp_max_stderr when HasTarget; without
	// one each answer is asked the variance Plan gives it.
	MaxStderr float64
	HasTarget bool
	// Version is the data version measurements are kept under ("" when
	// none are), and Stored what is stored under it (nil when unreadable).
	Version string
	Stored  []*measure.Measurement
}

// Estimated is every answer of a batch from one estimate: per query, per
// aggregate, per plain group, the value and its exact variance (a
// query's are nil where the estimate does not identify them).
type Estimated struct {
	Vals, Vars [][][]float64
}

// roundingVariance is what rounding a count to an integer adds to the
// squared error of an estimate that is not an integer itself (about 1/12
// for an estimate spread over many units): counts combined from several
// measurements are, a single measurement's counts are not.
const roundingVariance = 1.0 / 12

// meets reports whether every live answer's variance plus margin is at
// most its target's.
func meets(w *compile.Workload, es *Estimated, target func(q, a, g int) float64, margin float64) bool {
	return meetsWithin(w, es, target, margin, 1e-9)
}

// meetsWithin is meets with variances allowed past their targets by the
// relative slack.
func meetsWithin(w *compile.Workload, es *Estimated, target func(q, a, g int) float64, margin, slack float64) bool {
	for q := range w.Queries {
		if !queryMeets(w, q, es.Vars[q], target, margin, slack) {
			return false
		}
	}
	return true
}

// queryMeets is meetsWithin for query q, whose variances are vars.
func queryMeets(w *compile.Workload, q int, vars [][]float64, target func(q, a, g int) float64, margin, slack float64) bool {
	qu := w.Queries[q]
	for a := range qu.Aggregates {
		for g, v := range vars[a] {
			if qu.IsLive(a, g) && v+margin > target(q, a, g)*(1+slack) {
				return false
			}
		}
	}
	return true
}

// Decision is how a batch will be answered given what is stored.
type Decision struct {
	Version string // the data version; "" when measurements are not kept
	Plan    *planner.Plan
	Cost    budget.Cost
	Stored  int // measurements stored for this table version
	// StoredIDs are their IDs, in the order stored: the store the
	// decision read, which re-deriving it needs (engine/replan.go).
	StoredIDs []int64
	Joined    []int64    // the stored measurements that join the batch
	Free      *Estimated // set when the batch is answered from them alone
	Combine   bool       // answers from old and new measurements together
	After     *Estimated // the combination's answers' variances as planned (values meaningless)
	// Alone is set, to the cells of the largest estimation domain, when
	// the batch is measured and answered from its new measurement alone
	// because its domain is too large to combine on the request path
	// (over CombineCells): the new measurement is stored and folded into
	// the stored system for later batches (Fold). AloneBlock says the
	// domain is solved block by block and Alone is the largest block a
	// combination would have: the new measurement links more cells than
	// that (a total over the whole domain, a hierarchy over all of it).
	Alone      int
	AloneBlock bool
	// Target is the variance asked of each answer (query, aggregate,
	// plain group).
	Target func(q, a, g int) float64
	// Measured is the workload Plan measures: the batch, or (when
	// combining) the batch's queries the stored measurements do not
	// already answer.
	Measured *compile.Workload
	// Considered are the candidate new measurements scored, and Pick the
	// one chosen (nil when not combining).
	Considered []*Combined
	Pick       *Combined

	w      *compile.Workload
	doms   []*domain  // the estimation domains, with the stored measurements that join
	before *Estimated // Before's, once solved
	// combos and recs are what Combined solved, for Remember.
	combos []*combination
	recs   []*measure.Measurement
}

// searchCells bounds the domain on which the least ε is searched for
// (each step solves the system once).
const searchCells = 400

// CombineCells bounds the domain over which a new measurement is
// combined with the stored ones. Above searchCells a combination is
// measured at the batch's own ε, so it would only add accuracy beyond
// what was asked, which the new measurement alone already gives (its
// answers are those of the batch with reuse off), at the price of one
// O(n³) solve on the request path: about 0.1 s at 1,024 cells against
// the batch's 15 ms. So a batch over a larger domain that the stored
// measurements do not answer is measured and answered alone, the
// measurement stored, and the system with it built off the request path
// (Fold), for the later batches it does answer. Decided from the public
// domain size only, so what is released never depends on timing.
const CombineCells = searchCells

// Decide decides how r.W is answered: free, from the stored
// measurements alone, or measured by a plan (at the least ε that meets
// the accuracy when combined with what is stored, for a domain small
// enough to search). It reads only public things: the workload, the
// plans, the stored measurements' structure and noise variances, and the
// session's options; never their answers or the data.
func (pol *Policy) Decide(ctx context.Context, r Request) *Decision {
	w, plan := r.W, r.Plan
	d := &Decision{Plan: plan, Cost: r.Cost, Measured: w, w: w, Version: r.Version}
	d.Target = targets(w, plan, r.MaxStderr, r.HasTarget)
	if r.Version == "" {
		return d
	}
	ms := r.Stored
	d.Stored = len(ms)
	for _, m := range ms {
		d.StoredIDs = append(d.StoredIDs, m.ID)
	}
	doms, ok := domainsOf(w, ms, nil, pol.solved)
	if !ok || len(ms) == 0 {
		return d
	}
	joined := joinedOf(doms)
	if len(joined) == 0 {
		return d
	}
	d.doms, d.Joined = doms, joined
	margin := 0.0
	if len(joined) > 1 {
		margin = roundingVariance
	}
	// The public bound shows most batches that the stored measurements
	// cannot answer without solving their system (O(n³)); the others are
	// solved, and answered free when every answer meets its target: the
	// decision the solve alone would make.
	if !cannotMeet(w, doms, nil, d.Target, margin) {
		before, _, all, _ := estimate(w, doms, nil, 1, nil, nil)
		d.before = before
		if all && meets(w, before, d.Target, margin) {
			d.Free = before
			return d
		}
	}
	pol.choose(ctx, d, ms)
	return d
}

// Before is every answer from the stored measurements that join alone
// (per query, nil where they do not identify it; nil when none joins),
// solved on first use: Decide skips the solve when a public bound shows
// they cannot answer the batch, and only EXPLAIN and the choice of a
// candidate read it then.
func (d *Decision) Before() *Estimated {
	if d.before == nil && d.doms != nil {
		d.before, _, _, _ = estimate(d.w, d.doms, nil, 1, nil, nil)
	}
	return d.before
}

// joinedOf lists the stored measurements that join some domain, by ID,
// ascending.
func joinedOf(doms []*domain) []int64 {
	var used []int64
	for _, d := range doms {
		used = append(used, d.g.Used...)
	}
	slices.Sort(used)
	return slices.Compact(used)
}

// targets is the variance asked of each answer (query, aggregate, plain
// group): maxStderr² when hasTarget, else what plan gives it, computed
// once per answer (the bound and the check of the stored measurements'
// answers both read every one; not safe for concurrent use).
func targets(w *compile.Workload, plan *planner.Plan, maxStderr float64, hasTarget bool) func(q, a, g int) float64 {
	if hasTarget {
		return func(q, a, g int) float64 { return maxStderr * maxStderr }
	}
	group := make([]int, len(w.Columns))
	memo := make([][][]float64, len(w.Queries)) // NaN: not yet computed
	return func(q, a, g int) float64 {
		if memo[q] == nil {
			qu := w.Queries[q]
			memo[q] = make([][]float64, len(qu.Aggregates))
			for i := range memo[q] {
				memo[q][i] = make([]float64, qu.Groups(w))
				for k := range memo[q][i] {
					memo[q][i][k] = math.NaN()
				}
			}
		}
		if v := memo[q][a][g]; !math.IsNaN(v) {
			return v
		}
		qu := w.Queries[q]
		qu.GroupCells(w, g, group[:len(qu.GroupCols)])
		v := plan.Variance(q, a, group[:len(qu.GroupCols)])
		memo[q][a][g] = v
		return v
	}
}

// choose picks what to measure: candidate new measurements, each scored
// by the least ε (ρ) at which, combined with the stored ones, it meets
// every answer's accuracy; the cheapest wins, the batch's own plan on
// ties. The bisection solves each domain's system a dozen times per
// candidate (about n³ each; a blocked domain's blocks are factored once,
// Σ|B|³, as a pencil): only small domains are searched, and only those
// are combined at all (CombineCells; for a blocked domain, the largest
// block the candidate makes). The candidates past the batch's own plan
// are planned on another goroutine while that one is scored.
func (pol *Policy) choose(ctx context.Context, d *Decision, ms []*measure.Measurement) {
	w, plan, doms := d.w, d.Plan, d.doms
	// A dense domain solves all its n cells (n³); a blocked one its
	// blocks, as the batch's plan would link them.
	var planRecs []*measure.Measurement
	planAll := false
	if slices.ContainsFunc(doms, (*domain).blocked) {
		planRecs, planAll = Records(w, plan, nil)
	}
	work, largest := 0.0, 0
	for _, dm := range doms {
		n, wk := dm.g.SizeWith(dm.reduceAll(planRecs))
		work += wk
		largest = max(largest, n)
	}
	if largest > CombineCells {
		d.Alone, d.AloneBlock = largest, slices.ContainsFunc(doms, (*domain).blocked)
		return
	}
	search := largest <= searchCells
	classed := slices.ContainsFunc(doms, func(dm *domain) bool { return dm.cls != nil })
	alone := 0
	score := func(c Candidate) {
		// The candidate's records, made once: over a long column each
		// stacks thousands of rows of factors.
		recs, all := planRecs, planAll
		if c.w != w || c.plan != plan || planRecs == nil {
			recs, all = Records(c.w, c.plan, nil)
		}
		if !all || len(recs) == 0 {
			return
		}
		cd := doms
		if classed {
			// Solved over classes of cells: the candidate's rows refine
			// them too.
			var ok bool
			if cd, ok = domainsOf(w, ms, recs, nil); !ok {
				return
			}
		}
		if n := largestWith(cd, recs); n > CombineCells {
			alone = max(alone, n) // links blocks past what is combined on the request path
			return
		}
		m, ok := pol.leastCombined(w, cd, c, recs, d.Target, search)
		if !ok {
			return
		}
		m.doms = cd
		d.Considered = append(d.Considered, m)
		if d.Pick == nil || m.cheaper(d.Pick) {
			d.Pick = m
		}
	}
	// The other candidates are planned (the planner's alternatives: as
	// long as the search itself over a long column) while the batch's own
	// plan is scored; all are scored in the same order as one after the
	// other, so the decision is the same.
	unmet := pol.unmet(w, d.Before(), d.Target)
	type planned struct {
		cs     []Candidate
		panicV any
	}
	others := make(chan planned, 1)
	go func() {
		// A panic while planning is re-raised on the request's goroutine,
		// where the request's own recovery answers it, as when the
		// candidates were planned there; here it would end the process.
		defer func() {
			if r := recover(); r != nil {
				others <- planned{panicV: r}
			}
		}()
		others <- planned{cs: pol.candidates(ctx, w, plan, unmet, search, work)[1:]}
	}()
	score(Candidate{w: w, plan: plan})
	got := <-others
	if got.panicV != nil {
		panic(got.panicV)
	}
	for _, c := range got.cs {
		score(c)
	}
	if d.Pick == nil {
		if alone > 0 {
			d.Alone, d.AloneBlock = alone, true
		}
		return // the plan's answers cannot all join: measured alone, as without a store
	}
	d.Combine, d.Plan, d.Measured, d.After, d.doms = true, d.Pick.plan, d.Pick.w, d.Pick.after, d.Pick.doms
	if o := d.Pick.plan.Options; o.Epsilon != plan.Options.Epsilon || o.Rho != plan.Options.Rho {
		d.Cost = budget.Cost{Epsilon: o.Epsilon, Rho: o.Rho}
	}
}

// largestWith is the largest block a blocked domain of doms would solve
// with recs, a candidate's records (0 when none is blocked).
func largestWith(doms []*domain, recs []*measure.Measurement) int {
	largest := 0
	for _, dm := range doms {
		if !dm.blocked() {
			continue
		}
		n, _ := dm.g.SizeWith(dm.reduceAll(recs))
		largest = max(largest, n)
	}
	return largest
}

// Combined answers the batch from the stored measurements and recs, the
// records of what Plan measured (with their answers); ok is false when
// they do not answer every query.
func (d *Decision) Combined(recs []*measure.Measurement) (*Estimated, bool) {
	var prior []*combination
	if d.Pick != nil {
		prior = d.Pick.solved
	}
	es, _, ok, combos := estimate(d.w, d.doms, recs, 1, prior, nil)
	d.combos, d.recs = combos, recs
	return es, ok
}

// Remember puts the systems Combined solved in the policy's cache under
// the keys the next batch over the same domains will find, once the
// records are stored (their IDs set): the next batch's stored-only
// system is this one, its measurements added in the same order (stored
// oldest first, then these, whose IDs come after), so its information
// matrix is the same bit for bit. Records not stored (ID 0) make the
// domain's system one no batch will find: not kept.
func (pol *Policy) Remember(d *Decision) {
	for i, cb := range d.combos {
		if cb.est == nil || i >= len(d.doms) {
			continue
		}
		dm := d.doms[i]
		if dm.cls != nil {
			continue // the classes were refined by the records: another key
		}
		joined := slices.Clone(dm.joined)
		used := slices.Clone(dm.g.Used)
		for _, k := range cb.recs {
			r := d.recs[k]
			if r.ID == 0 {
				joined = nil
				break
			}
			joined, used = append(joined, r), append(used, r.ID)
		}
		if joined == nil {
			continue
		}
		g, est := *cb.g, *cb.est
		g.Used, est.Used = used, used
		s := &solved{g: &g, est: &est}
		pol.solved.put(systemKey(dm.mcols, nil, dm.sub, joined), s)
	}
}

// Candidate is a new measurement that could be combined with the stored
// ones: plan, measuring workload w — the batch, or the batch's queries
// that the stored measurements do not already answer.
type Candidate struct {
	w    *compile.Workload
	plan *planner.Plan
	// queries are the batch's queries w has (nil: all).
	queries []int
}

// Combined is a candidate at the least ε (ρ) found, with the combined
// answers' variances as planned.
type Combined struct {
	Candidate
	after  *Estimated
	doms   []*domain      // the estimation domains it was scored in
	solved []*combination // their systems with the candidate, as scored
}

// What names the candidate's strategy and, when it measures only some of
// the batch's queries, which.
func (c *Candidate) What() string {
	if c.queries == nil {
		return c.plan.Name
	}
	qs := make([]string, len(c.queries))
	for i, q := range c.queries {
		qs[i] = fmt.Sprint(q + 1)
	}
	return fmt.Sprintf("%s for query %s only", c.plan.Name, strings.Join(qs, ", "))
}

// At is the candidate's ε (ρ).
func (c *Candidate) At() string {
	if o := c.plan.Options; o.Noise == catalog.Gaussian {
		return fmt.Sprintf("ρ = %.6g", o.Rho)
	}
	return fmt.Sprintf("ε = %.6g", c.plan.Options.Epsilon)
}

// cheaper reports whether m costs less than o (same noise family).
func (m *Combined) cheaper(o *Combined) bool {
	a, b := m.plan.Options, o.plan.Options
	if a.Noise == catalog.Gaussian {
		return a.Rho < b.Rho*(1-1e-9)
	}
	return a.Epsilon < b.Epsilon*(1-1e-9)
}

// searchWork bounds the work of choosing a new measurement given stored
// ones, in units of cells³ (one solve of the combined system over n cells
// costs about n³): a batch over searchCells cells scores one candidate,
// a smaller one up to maxCandidates.
const (
	searchWork    = searchCells * searchCells * searchCells
	maxCandidates = 8
)

// unmet lists the queries of w that the stored measurements (before)
// do not answer within their targets. (Read before candidates runs on
// another goroutine: target is not safe for concurrent use.)
func (pol *Policy) unmet(w *compile.Workload, before *Estimated, target func(q, a, g int) float64) []int {
	var unmet []int
	for q := range w.Queries {
		if before != nil && before.Vars[q] != nil && queryMeets(w, q, before.Vars[q], target, roundingVariance, 1e-9) {
			continue
		}
		unmet = append(unmet, q)
	}
	return unmet
}

// candidates lists what could be measured for w: plan itself;
// when the stored measurements already answer some queries within
// their targets (those not in unmet), the plan
// for the others alone; and the planner's best alternatives for both,
// as many as searchWork allows.
func (pol *Policy) candidates(ctx context.Context, w *compile.Workload, plan *planner.Plan, unmet []int, search bool, work float64) []Candidate {
	out := []Candidate{{w: w, plan: plan}}
	if !search {
		return out
	}
	k := int(math.Min(maxCandidates, math.Max(1, searchWork/work)))
	if k == 1 {
		return out
	}
	var sub *compile.Workload
	if len(unmet) > 0 && len(unmet) < len(w.Queries) {
		sub = &compile.Workload{Table: w.Table, Columns: w.Columns}
		for _, q := range unmet {
			sub.Queries = append(sub.Queries, w.Queries[q])
		}
		if p, err := pol.planner.Choose(ctx, sub, plan.Options); err == nil {
			out = append(out, Candidate{w: sub, plan: p, queries: unmet})
		}
	}
	seen := map[string]bool{}
	for _, c := range out {
		seen[fmt.Sprint(c.queries, c.plan.Name)] = true
	}
	addAlts := func(cw *compile.Workload, queries []int) {
		alts, err := pol.planner.Alternatives(ctx, cw, plan.Options, k)
		if err != nil {
			return
		}
		for _, p := range alts {
			if key := fmt.Sprint(queries, p.Name); !seen[key] && len(out) < k {
				seen[key] = true
				out = append(out, Candidate{w: cw, plan: p, queries: queries})
			}
		}
	}
	if sub != nil {
		addAlts(sub, unmet)
	}
	addAlts(w, nil)
	return out
}

// leastCombined scores c, whose records (structure only) are recs: ok
// when its measurement's answers join the stored ones (in doms) and,
// combined, meet every answer's target at c's ε (ρ);
// with search, at the least ε (ρ) that still does, found by bisection
// over the share of c's information and checked at the plan's own
// calibration.
func (pol *Policy) leastCombined(w *compile.Workload, doms []*domain, c Candidate, recs []*measure.Measurement, target func(q, a, g int) float64, search bool) (*Combined, bool) {
	var combos []*combination // the last evaluation's systems
	with := func(recs []*measure.Measurement, f float64) (*Estimated, bool) {
		es, _, ok, cbs := estimate(w, doms, recs, f, nil, nil)
		combos = cbs
		return es, ok
	}
	if cannotMeet(w, doms, recs, target, roundingVariance) {
		return nil, false
	}
	// Over a blocked domain the search reads the domains' pencils (every
	// block factored once for all f) rather than solving anew: the same
	// variances up to rounding. So the bisection's hi is the same up to
	// its step; and where every domain has one, a candidate the pencils
	// show missing its targets by more than rounding could explain
	// (clearMiss) is one solving would reject too, and is not solved.
	// What is chosen is still solved and checked.
	var pens []*planner.Pencil
	if search && !pol.solveEach {
		pens = pencils(doms, recs)
	}
	everyPencil := pens != nil && !slices.Contains(pens, nil)
	missesAt := func(f float64) bool {
		if !everyPencil {
			return false
		}
		es, _, ok, _ := estimate(w, doms, recs, f, nil, pens)
		return !ok || !meetsWithin(w, es, target, roundingVariance, clearMiss)
	}
	var out *Combined // c as it is, combined and solved
	solveOut := func() bool {
		full, ok := with(recs, 1)
		if !ok || !meets(w, full, target, roundingVariance) {
			// Combined, the rounding of the counts would cost more than the
			// stored measurements add: not a candidate.
			return false
		}
		out = &Combined{Candidate: c, after: full, solved: combos}
		return true
	}
	if everyPencil {
		if missesAt(1) {
			return nil, false
		}
	} else if !solveOut() {
		return nil, false
	}
	if !search {
		return out, true
	}
	asItIs := func() (*Combined, bool) {
		if out == nil && !solveOut() {
			return nil, false
		}
		return out, true
	}
	// The least share f of the plan's information (its noise variance
	// scaled by 1/f) that still meets the targets.
	lo, hi := 0.0, 1.0
	for range 12 {
		mid := (lo + hi) / 2
		es, _, ok, _ := estimate(w, doms, recs, mid, nil, pens)
		if ok && meets(w, es, target, roundingVariance) {
			hi = mid
		} else {
			lo = mid
		}
	}
	// The plan at that ε (ρ), checked at its own calibration. The discrete
	// noise's variance is not quite proportional to the scale squared, so
	// a calibration that misses is raised by the information it lacked.
	o := c.plan.Options
	more := func(f float64) { // multiplies the plan's information by f
		if o.Noise == catalog.Gaussian {
			o.Rho = math.Max(o.Rho*f, pol.minRho)
		} else {
			o.Epsilon = math.Max(o.Epsilon*math.Sqrt(f), pol.minEpsilon)
		}
	}
	more(hi * 1.01)
	for range 6 {
		if o.Rho >= c.plan.Options.Rho*0.98 && o.Epsilon >= c.plan.Options.Epsilon*0.98 {
			return asItIs() // hardly cheaper: the plan as it is
		}
		p2, err := c.plan.Recalibrated(o)
		if err != nil {
			return asItIs()
		}
		// A miss the pencils show is not solved, nor its records made
		// (over a long column they stack thousands of rows).
		if f, ok := share(c.plan, p2); !ok || !missesAt(f) {
			recs2, all := Records(c.w, p2, nil)
			if !all {
				return asItIs()
			}
			if es2, ok := with(recs2, 1); ok && meets(w, es2, target, roundingVariance) {
				c.plan = p2
				return &Combined{Candidate: c, after: es2, solved: combos}, true
			}
		}
		// One noise: p2 has the share v/v₂ of the plan's information and
		// needed hi. Several: 3% more.
		f := 1.03
		if v, v2 := c.plan.NoiseVariance, p2.NoiseVariance; v > 0 && v2 > 0 {
			f = math.Max(1.005, hi*v2/v*1.005)
		}
		more(f)
	}
	return asItIs()
}

// clearMiss is the relative excess of a variance over its target that
// rounding cannot explain: a pencil's variances are a solve's to about
// 1e-12 (planner.Pencil).
const clearMiss = 1e-6

// share is the share of p's information that p2, p recalibrated, holds:
// ok for a plan of one noise (Direct or Kronecker, no noise per
// aggregate), whose records' noise variances all scale by v₂/v, so that
// p2's records are p's at weight f = v/v₂ (up to rounding).
func share(p, p2 *planner.Plan) (f float64, ok bool) {
	if (p.Kind != planner.Direct && p.Kind != planner.Kronecker) || p.AggNoise != nil || p2.AggNoise != nil {
		return 0, false
	}
	f = p.NoiseVariance / p2.NoiseVariance
	return f, f > 0 && !math.IsInf(f, 0)
}

// pencils are the domains' systems with recs as pencils (see
// planner.Pencil), nil where a domain is dense, no rec joins it, or its
// stored blocks do not identify every cell; nil when none has one.
func pencils(doms []*domain, recs []*measure.Measurement) []*planner.Pencil {
	var pens []*planner.Pencil
	for i, dm := range doms {
		if !dm.blocked() {
			continue
		}
		if p, _, ok := dm.g.Pencil(dm.reduceAll(recs)); ok {
			if pens == nil {
				pens = make([]*planner.Pencil, len(doms))
			}
			pens[i] = p
		}
	}
	return pens
}
