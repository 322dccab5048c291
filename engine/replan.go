package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/measure"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/planner"
	"github.com/dpproxy/dpproxy/reuse"
)

// Re-deriving a charge's strategy (issue #24). Plans are a deterministic
// function of the catalog, the batch and the options (planner/effort.go),
// so a charge of the matrix mechanism records its plan's StrategyDigest in
// its strategy text — covered by the ledger's hash chain — and, beside
// the measurements, a replay record: the statements' texts (which the
// entry's query digest authenticates) and the session options the plan was
// made at. An auditor re-plans the batch from them (Replan) and compares
// digests: a proxy that measured something other than what its code plans
// from the recorded batch is caught.

// planVars are the session variables that shape a measured batch's plan
// (options): what a replay record keeps.
var planVars = [...]string{VarEpsilon, VarRho, VarMaxStderr}

// strategyDigestPrefix introduces the plan's digest in a charge's
// strategy text.
const strategyDigestPrefix = " plan=sha256:"

// withDigest is a measured charge's strategy text: the strategy's name as
// before, then the plan's digest.
func withDigest(strategy string, plan *planner.Plan) string {
	return strategy + strategyDigestPrefix + plan.StrategyDigest()
}

// sessionPlanVars are s's values of planVars, as exact decimal texts.
func sessionPlanVars(s *Session) (map[string]string, error) {
	out := map[string]string{}
	for _, name := range planVars {
		f, ok, err := sessionFloat(s, name)
		if err != nil {
			return nil, err
		}
		if ok {
			out[name] = strconv.FormatFloat(f, 'g', -1, 64)
		}
	}
	return out, nil
}

// recordReplay stores the replay record of the charge at seq, whose
// batch the session's options made opt. A failure is logged, not
// returned: the charge stands, and an audit reports the entry as having
// no record.
//
// When the session set none of planVars, the ε (ρ on a Gaussian table)
// the catalog's defaults gave is recorded as if set, so that a later
// change of a default does not make the re-plan differ: options() plans
// the same from @dp_epsilon (@dp_rho) as from the default it equals.
func (e *Engine) recordReplay(ctx context.Context, s *Session, t *catalog.Table, sts []*parser.Statement, seq int64, opt planner.Options, reused bool, stored []int64) {
	if e.measures == nil {
		return
	}
	vars, err := sessionPlanVars(s)
	if err != nil {
		e.log.Warn("no replay record: session options unreadable", "seq", seq, "err", err)
		return
	}
	if len(vars) == 0 {
		if opt.Noise == catalog.Gaussian {
			vars[VarRho] = strconv.FormatFloat(opt.Rho, 'g', -1, 64)
		} else {
			vars[VarEpsilon] = strconv.FormatFloat(opt.Epsilon, 'g', -1, 64)
		}
	}
	texts := make([]string, len(sts))
	for i, st := range sts {
		texts[i] = st.Text
	}
	r := measure.Replay{LedgerSeq: seq, Table: t.Name, User: s.User, Texts: texts, Options: vars, Reused: reused}
	if reused {
		r.Stored = append([]int64{}, stored...)
	}
	if err := e.measures.PutReplay(ctx, r); err != nil {
		e.log.Warn("no replay record", "seq", seq, "err", err)
	}
}

// ErrNotRederivable is Replan's error for a batch whose plan depended on
// more than the catalog, its texts and its options.
var ErrNotRederivable = errors.New("not re-derivable")

// ReplanDigest re-plans the batch of replay record r with the engine's
// catalog, as the charge did (parse, table, prepare, the session's plan),
// and returns the plan's StrategyDigest and the batch's query digest (as
// the ledger entry records it). It reads no data and charges nothing.
// A batch planned with stored measurements is re-decided over the
// measurements the record says were stored then (redecide). Batches whose
// plan depended on more (stored measurements since forgotten, released
// keys of an open column, a route other than the matrix mechanism) wrap
// ErrNotRederivable.
func (e *Engine) ReplanDigest(ctx context.Context, r measure.Replay) (strategy, query string, err error) {
	if len(r.Texts) == 0 {
		return "", "", fmt.Errorf("replay %d: no statements", r.LedgerSeq)
	}
	sts := make([]*parser.Statement, 0, len(r.Texts))
	for _, text := range r.Texts {
		parsed, err := parser.ParseEnv(text, e.env())
		if err != nil {
			return "", "", fmt.Errorf("replay %d: parse: %w", r.LedgerSeq, err)
		}
		if len(parsed) != 1 || parsed[0].Kind != parser.KindAggregate || parsed[0].Query == nil {
			return "", "", fmt.Errorf("%w: %q is not one aggregate statement", ErrNotRederivable, text)
		}
		sts = append(sts, &parsed[0])
	}
	query = digest(sts)
	s := &Session{User: r.User, UserVar: func(name string) (any, bool) {
		v, ok := r.Options[name]
		return v, ok
	}}
	plan, p, err := e.replan(ctx, s, sts)
	if err != nil {
		return "", query, err
	}
	if r.Reused {
		if plan, err = e.redecide(ctx, s, r, p.w, p.cost, plan); err != nil {
			return "", query, err
		}
	}
	return plan.StrategyDigest(), query, nil
}

// redecide is the plan the reuse policy decided for a batch planned with
// stored measurements (its plan without them: plan), over the
// measurements r says were stored then. The policy reads only their
// structure and noise, never their answers, so this reads no data either.
func (e *Engine) redecide(ctx context.Context, s *Session, r measure.Replay, w *compile.Workload, cost budget.Cost, plan *planner.Plan) (*planner.Plan, error) {
	if r.Stored == nil {
		return nil, fmt.Errorf("%w: planned with stored measurements (a record written before it kept which)", ErrNotRederivable)
	}
	if e.measures == nil {
		return nil, fmt.Errorf("%w: planned with stored measurements, and no measurement store is open", ErrNotRederivable)
	}
	ms, missing, err := e.measures.ByID(ctx, r.Stored)
	if err != nil {
		return nil, fmt.Errorf("replay %d: %w", r.LedgerSeq, err)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: planned with stored measurement %d, since forgotten", ErrNotRederivable, missing[0])
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("%w: planned with stored measurements, and the record names none", ErrNotRederivable)
	}
	target, hasTarget, err := sessionFloat(s, VarMaxStderr)
	if err != nil {
		return nil, err
	}
	d := e.reuse.Decide(ctx, reuse.Request{W: w, Plan: plan, Cost: cost, MaxStderr: target, HasTarget: hasTarget, Version: ms[0].Version, Stored: ms})
	return d.Plan, nil
}

// replan is batch's planning for sts, up to the plan it charges for when
// no stored measurement joins, and what was prepared for it.
func (e *Engine) replan(ctx context.Context, s *Session, sts []*parser.Statement) (*planner.Plan, *prepared, error) {
	t, err := e.queryTable(ctx, sts[0].Query)
	if err != nil {
		return nil, nil, err
	}
	for _, st := range sts {
		if err := compile.CheckUnit(t, st.Query); err != nil {
			return nil, nil, err
		}
	}
	uses, err := openUses(t, sts)
	if err != nil {
		return nil, nil, err
	}
	for c, u := range uses {
		if u.grouped {
			return nil, nil, fmt.Errorf("%w: grouped by open column %s (its released keys)", ErrNotRederivable, c)
		}
	}
	tb, sb, err := e.openTable(ctx, s, t, sts, true)
	if err != nil {
		return nil, nil, err
	}
	p, err := e.prepare(ctx, sb, tb, sts)
	if err != nil {
		return nil, nil, err
	}
	if p.route != routeMeasured {
		return nil, nil, fmt.Errorf("%w: not planned by the matrix mechanism", ErrNotRederivable)
	}
	if p.plan != nil {
		return p.plan, p, nil
	}
	plan, err := e.choose(ctx, p.w, p.opt)
	return plan, p, err
}

// RecordedPlanDigest is the plan digest a charge's strategy text records;
// ok is false for an entry without one (another route, or written before
// digests were recorded).
func RecordedPlanDigest(strategy string) (digest string, ok bool) {
	i := strings.LastIndex(strategy, strategyDigestPrefix)
	if i < 0 {
		return "", false
	}
	d := strategy[i+len(strategyDigestPrefix):]
	if len(d) != 64 || strings.Trim(d, "0123456789abcdef") != "" {
		return "", false
	}
	return d, true
}
