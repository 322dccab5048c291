package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strings"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/measure"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/planner"
	"github.com/dpproxy/dpproxy/reuse"
)

// Answering from what is known. Every measurement a batch makes is
// stored (package measure) under the table's definition and the source's
// data version; package reuse decides, from them, whether a later batch
// is answered free or what to measure, and the engine carries the
// decision out: a free batch gets a zero-cost KindDerived ledger entry
// naming the measurements (derive), a measured one is charged, measured,
// combined and stored (keep). Direct plans of aggregates that are not
// products of per-column vectors are measured and answered as before, and
// not stored.

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

// decide loads what is stored for t's current data version and asks the
// reuse policy how w is answered (plan nil: the session's plan is chosen
// first).
func (e *Engine) decide(ctx context.Context, s *Session, t *catalog.Table, w *compile.Workload, opt planner.Options, cost budget.Cost, plan *planner.Plan) (*reuse.Decision, error) {
	if plan == nil {
		var err error
		if plan, err = e.choose(ctx, w, opt); err != nil {
			return nil, err
		}
	}
	target, hasTarget, err := sessionFloat(s, VarMaxStderr)
	if err != nil {
		return nil, err
	}
	version, err := e.measurementVersion(ctx, t)
	if err != nil {
		return nil, err
	}
	r := reuse.Request{W: w, Plan: plan, Cost: cost, MaxStderr: target, HasTarget: hasTarget, Version: version}
	if version != "" {
		if r.Stored, err = e.measures.Load(ctx, t.Name, tableDef(t), version); err != nil {
			e.log.Warn("stored measurements unreadable; measuring anew", "table", t.Name, "err", err)
			r.Stored = nil
		}
	}
	return e.reuse.Decide(ctx, r), nil
}

// measuredEstimate turns q's estimated answers into what assemble reads,
// with normal 95% intervals (a combination of several noises).
func measuredEstimate(es *reuse.Estimated, q int) *measured {
	m := &measured{vals: es.Vals[q], vars: es.Vars[q]}
	for _, vs := range m.vars {
		h := make([]float64, len(vs))
		for g, v := range vs {
			h[g] = z95 * math.Sqrt(v)
		}
		m.half = append(m.half, h)
	}
	return m
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
func (e *Engine) derive(ctx context.Context, s *Session, t *catalog.Table, w *compile.Workload, d *reuse.Decision, sts []*parser.Statement) ([]*Result, error) {
	if _, err := e.ledger.Record(ctx, budget.KindDerived, budget.Charge{
		User: s.User, ConnID: s.ConnID, Tables: t.JoinedTables(),
		Mechanism: "derived", Strategy: usedText(d.Joined), QueryDigest: digest(sts),
	}); err != nil {
		return nil, e.internal("ledger record", err)
	}
	out := make([]*Result, len(w.Queries))
	for q, qu := range w.Queries {
		out[q] = assemble(w, qu, measuredEstimate(d.Free, q), nil)
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
// for it, and reports whether it did. Storing is best effort: the answers
// are released either way.
func (e *Engine) keep(ctx context.Context, t *catalog.Table, version string, recs []*measure.Measurement, seq int64) bool {
	if version == "" || e.measures == nil || len(recs) == 0 {
		return false
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
		return false
	}
	return true
}

// explainKnown adds EXPLAIN's rows about stored measurements: how many
// there are and join, whether the batch is derivable from them, what would
// be measured at what ε, and each query's standard errors before (from the
// stored measurements alone), asked for, and after. setCost updates the
// explanation's cost when it differs from the session's.
func explainKnown(w *compile.Workload, d *reuse.Decision, add func(k, v string), setCost func(budget.Cost)) {
	joined := len(d.Joined)
	switch {
	case d.Version == "":
		add("stored measurements", "none kept (reuse_measurements: false, or the source cannot tell when its data changes)")
	case joined == 0:
		add("stored measurements", fmt.Sprintf("%d for this table and data version; none joins this batch's columns", d.Stored))
	default:
		add("stored measurements", fmt.Sprintf("%d for this table and data version; %d join this batch's columns: %s", d.Stored, joined, strings.TrimPrefix(usedText(d.Joined), "generalised least squares over stored measurements ")))
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
		if before := d.Before(); before != nil && before.Vars[q] != nil {
			add(fmt.Sprintf("stderr from stored measurements query %d", q+1), sdRange(q, func(a, g int) float64 { return before.Vars[q][a][g] }))
		} else if joined > 0 {
			add(fmt.Sprintf("stderr from stored measurements query %d", q+1), "not derivable (they do not determine every answer of this query)")
		}
		add(fmt.Sprintf("stderr asked query %d", q+1), sdRange(q, func(a, g int) float64 { return d.Target(q, a, g) }))
	}
	if d.Free != nil {
		add("derivable from stored measurements", "yes: every answer meets the accuracy asked; answered free, with a zero-cost derived ledger entry")
		add("would measure", "nothing")
		setCost(budget.Cost{})
		return
	}
	at := fmt.Sprintf("ε = %.6g", d.Plan.Options.Epsilon)
	if d.Plan.Options.Noise == catalog.Gaussian {
		at = fmt.Sprintf("ρ = %.6g", d.Plan.Options.Rho)
	}
	if d.Combine {
		add("derivable from stored measurements", "no: some answer misses the accuracy asked")
		for _, c := range d.Considered {
			add("considered given stored: "+c.What(), fmt.Sprintf("%s needed to meet the accuracy combined", c.At()))
		}
		add("would measure", fmt.Sprintf("%s at %s, the cheapest candidate that meets the accuracy combined with the stored measurements", d.Pick.What(), at))
		for q := range w.Queries {
			add(fmt.Sprintf("stderr after query %d", q+1), sdRange(q, func(a, g int) float64 { return d.After.Vars[q][a][g] }))
		}
		setCost(d.Cost)
		return
	}
	if d.Alone > 0 {
		add("derivable from stored measurements", "no: some answer misses the accuracy asked")
		if d.AloneBlock {
			add("combined with stored measurements", fmt.Sprintf("no: the new measurement would link %d cells into one block of the stored system, more than the %d over which a new measurement is combined; answered from the new measurement alone, which is stored for later batches", d.Alone, reuse.CombineCells))
		} else {
			add("combined with stored measurements", fmt.Sprintf("no: the batch's domain has %d cells, more than the %d over which a new measurement is combined; answered from the new measurement alone, which is stored for later batches", d.Alone, reuse.CombineCells))
		}
	}
	add("would measure", fmt.Sprintf("%s at %s", d.Plan.Name, at))
}
