package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/measure"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/planner"
)

// Answering from what is known. Every measurement a batch makes is stored
// (package measure) under the table's definition and the source's data
// version. A later batch over the same version first computes, for every
// answer, the generalised least-squares estimate from all stored
// measurements that can join its columns (planner.GLS, one system per
// estimation domain: domains.go) and its exact variance. If every answer
// meets the batch's accuracy — the session's @dp_max_stderr, or without
// one the variance the batch's own plan would give at the session's ε —
// the batch is answered from them alone: free, with a zero-cost
// KindDerived ledger entry naming the measurements. Otherwise candidate
// new measurements (the batch's plan, the planner's best alternatives, a
// plan for only the queries the store does not already answer) are each
// scored by the least ε (ρ) at which, combined with the stored ones, they
// meet that accuracy; the cheapest is measured at that ε, and every answer
// comes from the combined estimate. The choice reads only public things:
// the catalog, the stored measurements' structure and noise variances, the
// session's options.
//
// Stored: Kronecker plans; plans of marginal and residual blocks (one
// measurement per block); direct plans whose aggregates are products of
// per-column vectors (COUNT, SUM, a WHERE that is a conjunction of
// per-column conditions); a top-k query's value measurement. A measurement
// joins a domain over other columns when the columns it sums out count
// every row and its factors there have full column rank. Direct plans of
// other aggregates are measured and answered as before, and not stored.

// measurementVersion is the data version t's measurements are kept and
// combined under; "" when none are: the table opts out, the source cannot
// tell when its data changes, or the table is bounded per cell
// (max_groups, max_rows_per_group), which truncates each histogram for
// its own cells, so that measurements over other column sets are of other
// tables. Read before the histogram is built.
func (e *Engine) measurementVersion(ctx context.Context, t *catalog.Table) (string, error) {
	v, ok := e.hist.(dataVersioner)
	if e.measures == nil || !ok || t.NoMeasurementReuse || t.Unit.CellBounded() {
		return "", nil
	}
	version, known, err := v.DataVersion(ctx, t)
	if err != nil {
		return "", e.internal("data version", err)
	}
	if !known {
		return "", nil
	}
	return version, nil
}

// dataVersioner is what the engine asks a Counter that knows its sources'
// data versions (sources.Set does).
type dataVersioner interface {
	DataVersion(ctx context.Context, t *catalog.Table) (string, bool, error)
}

// measureSemantics versions what a stored measurement means.
const measureSemantics = 1

func digestString(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}

// tableDef digests what a table's measurements depend on: everything but
// its budgets.
func tableDef(t *catalog.Table) string {
	cp := *t
	cp.Budget = catalog.Budget{}
	cp.Columns = nil
	var b strings.Builder
	def := fmt.Sprintf("%+v", cp)
	if t.Join == nil {
		// Tables that join nothing keep the definition they had before
		// Table.Join existed, so their stored measurements stay usable.
		def = strings.TrimSuffix(def, " Join:}") + "}"
	}
	fmt.Fprintf(&b, "measurements %d|%s", measureSemantics, def)
	for _, c := range t.Columns {
		fmt.Fprintf(&b, "|%+v", *c)
	}
	return digestString(b.String())
}

// estimated is every answer of a batch from one estimate: per query, per
// aggregate, per plain group, the value and its exact variance.
type estimated struct {
	vals, vars [][][]float64
}

// measured turns q's estimated answers into what assemble reads, with
// normal 95% intervals (a combination of several noises).
func (es *estimated) measured(q int) *measured {
	m := &measured{vals: es.vals[q], vars: es.vars[q]}
	for _, vs := range m.vars {
		h := make([]float64, len(vs))
		for g, v := range vs {
			h[g] = z95 * math.Sqrt(v)
		}
		m.half = append(m.half, h)
	}
	return m
}

// roundingVariance is what rounding a count to an integer adds to the
// squared error of an estimate that is not an integer itself (about 1/12
// for an estimate spread over many units): counts combined from several
// measurements are, a single measurement's counts are not.
const roundingVariance = 1.0 / 12

// meets reports whether every live answer's variance plus margin is at
// most its target's.
func meets(w *compile.Workload, es *estimated, target func(q, a, g int) float64, margin float64) bool {
	for q := range w.Queries {
		if !queryMeets(w, q, es.vars[q], target, margin) {
			return false
		}
	}
	return true
}

// queryMeets is meets for query q, whose variances are vars.
func queryMeets(w *compile.Workload, q int, vars [][]float64, target func(q, a, g int) float64, margin float64) bool {
	qu := w.Queries[q]
	for a := range qu.Aggregates {
		for g, v := range vars[a] {
			if qu.IsLive(a, g) && v+margin > target(q, a, g)*(1+1e-9) {
				return false
			}
		}
	}
	return true
}

// decision is how a batch will be answered given what is stored.
type decision struct {
	version string // the data version; "" when measurements are not kept
	plan    *planner.Plan
	cost    budget.Cost
	stored  int        // measurements stored for this table version
	doms    []*domain  // the estimation domains, with the stored measurements that join
	joined  []int64    // the stored measurements that join the batch
	before  *estimated // answers from them alone (per query, nil where not identified)
	free    *estimated // set when the batch is answered from them alone
	combine bool       // answers from old and new measurements together
	after   *estimated // the combination's answers' variances as planned (values meaningless)
	target  func(q, a, g int) float64
	// measured is the workload plan measures: the batch, or (when
	// combining) the batch's queries the stored measurements do not
	// already answer.
	measured *compile.Workload
	// considered are the candidate new measurements scored, and pick the
	// one chosen (nil when not combining).
	considered []*combined
	pick       *combined
}

// searchCells bounds the domain on which the least ε is searched for
// (each step solves the system once); larger batches combine at the
// batch's ε.
const searchCells = 400

// decide loads what is stored for t's current data version and decides
// how w is answered: free, or measured by plan (at the least ε that
// meets the accuracy when combined with what is stored).
func (e *Engine) decide(ctx context.Context, s *Session, t *catalog.Table, w *compile.Workload, opt planner.Options, cost budget.Cost, plan *planner.Plan) (*decision, error) {
	if plan == nil {
		var err error
		if plan, err = e.choose(ctx, w, opt); err != nil {
			return nil, err
		}
	}
	d := &decision{plan: plan, cost: cost, measured: w}
	target, hasTarget, err := sessionFloat(s, VarMaxStderr)
	if err != nil {
		return nil, err
	}
	group := make([]int, len(w.Columns))
	d.target = func(q, a, g int) float64 {
		if hasTarget {
			return target * target
		}
		qu := w.Queries[q]
		qu.GroupCells(w, g, group[:len(qu.GroupCols)])
		return plan.Variance(q, a, group[:len(qu.GroupCols)])
	}
	version, err := e.measurementVersion(ctx, t)
	if err != nil {
		return nil, err
	}
	if version == "" {
		return d, nil
	}
	d.version = version
	ms, err := e.measures.Load(ctx, t.Name, tableDef(t), version)
	if err != nil {
		e.log.Warn("stored measurements unreadable; measuring anew", "table", t.Name, "err", err)
		return d, nil
	}
	d.stored = len(ms)
	doms, ok := domainsOf(w, ms, nil)
	if !ok || len(ms) == 0 {
		return d, nil
	}
	before, joined, all := estimate(w, doms, nil, 1)
	if len(joined) == 0 {
		return d, nil
	}
	d.doms, d.joined, d.before = doms, joined, before
	margin := 0.0
	if len(joined) > 1 {
		margin = roundingVariance
	}
	if all && meets(w, before, d.target, margin) {
		d.free = before
		return d, nil
	}
	// What to measure: candidate new measurements, each scored by the
	// least ε (ρ) at which, combined with the stored ones, it meets every
	// answer's accuracy; the cheapest wins, the batch's own plan on ties.
	// The bisection solves each domain's system a dozen times per
	// candidate (about n³ each): only small domains are searched.
	work, largest := 0.0, 0
	for _, dm := range doms {
		n := dm.cells()
		work += float64(n) * float64(n) * float64(n)
		largest = max(largest, n)
	}
	search := largest <= searchCells
	classed := slices.ContainsFunc(doms, func(dm *domain) bool { return dm.cls != nil })
	for _, c := range e.measurementCandidates(ctx, w, plan, d.before, d.target, search, work) {
		cd := doms
		if classed {
			// Solved over classes of cells: the candidate's rows refine
			// them too.
			recs, all := records(c.w, c.plan, nil)
			if !all {
				continue
			}
			if cd, ok = domainsOf(w, ms, recs); !ok {
				continue
			}
		}
		m, ok := leastCombined(w, cd, c, d.target, search)
		if !ok {
			continue
		}
		m.doms = cd
		d.considered = append(d.considered, m)
		if d.pick == nil || m.cheaper(d.pick) {
			d.pick = m
		}
	}
	if d.pick == nil {
		return d, nil // the plan's answers cannot all join: measured alone, as without a store
	}
	d.combine, d.plan, d.measured, d.after, d.doms = true, d.pick.plan, d.pick.w, d.pick.after, d.pick.doms
	if o := d.pick.plan.Options; o.Epsilon != plan.Options.Epsilon || o.Rho != plan.Options.Rho {
		d.cost = budget.Cost{Epsilon: o.Epsilon, Rho: o.Rho}
	}
	return d, nil
}

// candidate is a new measurement that could be combined with the stored
// ones: plan, measuring workload w — the batch, or the batch's queries
// that the stored measurements do not already answer.
type candidate struct {
	w    *compile.Workload
	plan *planner.Plan
	// queries are the batch's queries w has (nil: all).
	queries []int
}

// combined is a candidate at the least ε (ρ) found, with the combined
// answers' variances as planned.
type combined struct {
	candidate
	after *estimated
	doms  []*domain // the estimation domains it was scored in
}

// what names the candidate's strategy and, when it measures only some of
// the batch's queries, which.
func (c *candidate) what() string {
	if c.queries == nil {
		return c.plan.Name
	}
	qs := make([]string, len(c.queries))
	for i, q := range c.queries {
		qs[i] = fmt.Sprint(q + 1)
	}
	return fmt.Sprintf("%s for query %s only", c.plan.Name, strings.Join(qs, ", "))
}

// at is the candidate's ε (ρ).
func (c *candidate) at() string {
	if o := c.plan.Options; o.Noise == catalog.Gaussian {
		return fmt.Sprintf("ρ = %.6g", o.Rho)
	}
	return fmt.Sprintf("ε = %.6g", c.plan.Options.Epsilon)
}

// cheaper reports whether m costs less than o (same noise family).
func (m *combined) cheaper(o *combined) bool {
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

// measurementCandidates lists what could be measured for w: plan itself;
// when the stored measurements (before) already answer some queries
// within their targets, the plan
// for the others alone; and the planner's best alternatives for both,
// as many as searchWork allows.
func (e *Engine) measurementCandidates(ctx context.Context, w *compile.Workload, plan *planner.Plan, before *estimated, target func(q, a, g int) float64, search bool, work float64) []candidate {
	out := []candidate{{w: w, plan: plan}}
	if !search {
		return out
	}
	k := int(math.Min(maxCandidates, math.Max(1, searchWork/work)))
	if k == 1 {
		return out
	}
	var sub *compile.Workload
	var unmet []int
	for q := range w.Queries {
		if before != nil && before.vars[q] != nil && queryMeets(w, q, before.vars[q], target, roundingVariance) {
			continue
		}
		unmet = append(unmet, q)
	}
	if len(unmet) > 0 && len(unmet) < len(w.Queries) {
		sub = &compile.Workload{Table: w.Table, Columns: w.Columns}
		for _, q := range unmet {
			sub.Queries = append(sub.Queries, w.Queries[q])
		}
		if p, err := e.planner.Choose(ctx, sub, plan.Options); err == nil {
			out = append(out, candidate{w: sub, plan: p, queries: unmet})
		}
	}
	seen := map[string]bool{}
	for _, c := range out {
		seen[fmt.Sprint(c.queries, c.plan.Name)] = true
	}
	addAlts := func(cw *compile.Workload, queries []int) {
		alts, err := e.planner.Alternatives(ctx, cw, plan.Options, k)
		if err != nil {
			return
		}
		for _, p := range alts {
			if key := fmt.Sprint(queries, p.Name); !seen[key] && len(out) < k {
				seen[key] = true
				out = append(out, candidate{w: cw, plan: p, queries: queries})
			}
		}
	}
	if sub != nil {
		addAlts(sub, unmet)
	}
	addAlts(w, nil)
	return out
}

// leastCombined scores c: ok when its measurement's answers join the
// stored ones (in doms) and, combined, meet every answer's target at c's ε (ρ);
// with search, at the least ε (ρ) that still does, found by bisection
// over the share of c's information and checked at the plan's own
// calibration.
func leastCombined(w *compile.Workload, doms []*domain, c candidate, target func(q, a, g int) float64, search bool) (*combined, bool) {
	with := func(recs []*measure.Measurement, f float64) (*estimated, bool) {
		es, _, ok := estimate(w, doms, recs, f)
		return es, ok
	}
	recs, all := records(c.w, c.plan, nil)
	if !all || len(recs) == 0 {
		return nil, false
	}
	full, ok := with(recs, 1)
	if !ok || !meets(w, full, target, roundingVariance) {
		// Combined, the rounding of the counts would cost more than the
		// stored measurements add: not a candidate.
		return nil, false
	}
	out := &combined{candidate: c, after: full}
	if !search {
		return out, true
	}
	// The least share f of the plan's information (its noise variance
	// scaled by 1/f) that still meets the targets.
	lo, hi := 0.0, 1.0
	for range 12 {
		mid := (lo + hi) / 2
		es, ok := with(recs, mid)
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
			o.Rho = math.Max(o.Rho*f, RhoRange.Min)
		} else {
			o.Epsilon = math.Max(o.Epsilon*math.Sqrt(f), EpsilonRange.Min)
		}
	}
	more(hi * 1.01)
	for range 6 {
		if o.Rho >= c.plan.Options.Rho*0.98 && o.Epsilon >= c.plan.Options.Epsilon*0.98 {
			return out, true // hardly cheaper: the plan as it is
		}
		p2, err := c.plan.Recalibrated(o)
		if err != nil {
			return out, true
		}
		recs2, all := records(c.w, p2, nil)
		if !all {
			return out, true
		}
		if es2, ok := with(recs2, 1); ok && meets(w, es2, target, roundingVariance) {
			c.plan = p2
			return &combined{candidate: c, after: es2}, true
		}
		// One noise: p2 has the share v/v₂ of the plan's information and
		// needed hi. Several: 3% more.
		f := 1.03
		if v, v2 := c.plan.NoiseVariance, p2.NoiseVariance; v > 0 && v2 > 0 {
			f = math.Max(1.005, hi*v2/v*1.005)
		}
		more(f)
	}
	return out, true
}

// derive answers a batch from stored measurements alone: a zero-cost
// derived ledger entry names them before anything is released.
//
// Privacy: every value released is a function of stored measurements
// only (planner.GLS: a fixed linear map of their noisy answers, then
// rounding, clamping, HAVING, ORDER BY), each of which was charged in the
// ledger before its own release (Measurement.LedgerSeq); no histogram is
// read. Post-processing: it costs nothing, and the derived entry records
// the release for the audit, not for the budget.
func (e *Engine) derive(ctx context.Context, s *Session, t *catalog.Table, w *compile.Workload, d *decision, sts []*parser.Statement) ([]*Result, error) {
	if _, err := e.ledger.Record(ctx, budget.KindDerived, budget.Charge{
		User: s.User, ConnID: s.ConnID, Tables: t.JoinedTables(),
		Mechanism: "derived", Strategy: usedText(d.joined), QueryDigest: digest(sts),
	}); err != nil {
		return nil, e.internal("ledger record", err)
	}
	out := make([]*Result, len(w.Queries))
	for q, qu := range w.Queries {
		out[q] = assemble(w, qu, d.free.measured(q), nil)
	}
	return out, nil
}

// usedText names measurements for the ledger and EXPLAIN (the first 20).
func usedText(ids []int64) string {
	var parts []string
	for k, id := range ids {
		if k == 20 {
			parts = append(parts, fmt.Sprintf("and %d more", len(ids)-20))
			break
		}
		parts = append(parts, fmt.Sprint(id))
	}
	return "generalised least squares over stored measurements " + strings.Join(parts, ", ")
}

// maxStoredAnswers bounds the answers of one stored measurement: larger
// ones (a Kronecker plan over a large product domain) are not kept.
const maxStoredAnswers = 1 << 16

// keep stores what a batch measured, stamped with the charge that paid
// for it. Storing is best effort: the answers are released either way.
func (e *Engine) keep(ctx context.Context, t *catalog.Table, version string, recs []*measure.Measurement, seq int64) {
	if version == "" || e.measures == nil || len(recs) == 0 {
		return
	}
	def := tableDef(t)
	var keep []*measure.Measurement
	for _, r := range recs {
		if r.Cells() > maxStoredAnswers {
			continue
		}
		r.Table, r.Def, r.Version, r.LedgerSeq = t.Name, def, version, seq
		keep = append(keep, r)
	}
	if err := e.measures.Put(ctx, keep); err != nil {
		e.log.Warn("measurement not stored", "table", t.Name, "seq", seq, "err", err)
	}
}

// explainKnown adds EXPLAIN's rows about stored measurements: how many
// there are and join, whether the batch is derivable from them, what would
// be measured at what ε, and each query's standard errors before (from the
// stored measurements alone), asked for, and after. setCost updates the
// explanation's cost when it differs from the session's.
func explainKnown(w *compile.Workload, d *decision, add func(k, v string), setCost func(budget.Cost)) {
	joined := len(d.joined)
	switch {
	case d.version == "":
		add("stored measurements", "none kept (reuse_measurements: false, or the source cannot tell when its data changes)")
	case joined == 0:
		add("stored measurements", fmt.Sprintf("%d for this table and data version; none joins this batch's columns", d.stored))
	default:
		add("stored measurements", fmt.Sprintf("%d for this table and data version; %d join this batch's columns: %s", d.stored, joined, strings.TrimPrefix(usedText(d.joined), "generalised least squares over stored measurements ")))
	}
	sdRange := func(q int, v func(a, g int) float64) string {
		lo, hi := math.Inf(1), math.Inf(-1)
		qu := w.Queries[q]
		for a := range qu.Aggregates {
			for g := 0; g < qu.Groups(w); g++ {
				if qu.IsLive(a, g) {
					x := math.Sqrt(v(a, g))
					lo, hi = math.Min(lo, x), math.Max(hi, x)
				}
			}
		}
		switch {
		case math.IsInf(lo, 1):
			return "0 (exact)"
		case lo == hi || hi-lo < 1e-4*hi:
			return fmt.Sprintf("%.4g", hi)
		}
		return fmt.Sprintf("%.4g..%.4g", lo, hi)
	}
	for q := range w.Queries {
		if d.before != nil && d.before.vars[q] != nil {
			add(fmt.Sprintf("stderr from stored measurements query %d", q+1), sdRange(q, func(a, g int) float64 { return d.before.vars[q][a][g] }))
		} else if joined > 0 {
			add(fmt.Sprintf("stderr from stored measurements query %d", q+1), "not derivable (they do not determine every answer of this query)")
		}
		add(fmt.Sprintf("stderr asked query %d", q+1), sdRange(q, func(a, g int) float64 { return d.target(q, a, g) }))
	}
	if d.free != nil {
		add("derivable from stored measurements", "yes: every answer meets the accuracy asked; answered free, with a zero-cost derived ledger entry")
		add("would measure", "nothing")
		setCost(budget.Cost{})
		return
	}
	at := fmt.Sprintf("ε = %.6g", d.plan.Options.Epsilon)
	if d.plan.Options.Noise == catalog.Gaussian {
		at = fmt.Sprintf("ρ = %.6g", d.plan.Options.Rho)
	}
	if d.combine {
		add("derivable from stored measurements", "no: some answer misses the accuracy asked")
		for _, c := range d.considered {
			add("considered given stored: "+c.what(), fmt.Sprintf("%s needed to meet the accuracy combined", c.at()))
		}
		add("would measure", fmt.Sprintf("%s at %s, the cheapest candidate that meets the accuracy combined with the stored measurements", d.pick.what(), at))
		for q := range w.Queries {
			add(fmt.Sprintf("stderr after query %d", q+1), sdRange(q, func(a, g int) float64 { return d.after.vars[q][a][g] }))
		}
		setCost(d.cost)
		return
	}
	add("would measure", fmt.Sprintf("%s at %s", d.plan.Name, at))
}
