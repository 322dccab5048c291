package engine

import (
	"context"
	"fmt"
	"math"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/exec"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/planner"
	"github.com/dpproxy/dpproxy/reuse"
)

// looksTopK is the syntactic shape of a top-k query (GROUP BY, ORDER BY a
// count first, LIMIT): such statements are batches of their own.
func looksTopK(q *parser.Query) bool {
	if q == nil || q.Limit == nil || len(q.GroupBy)+len(q.GroupExprs) == 0 || len(q.OrderBy) == 0 {
		return false
	}
	o := q.OrderBy[0]
	if o.SelectIndex >= 0 && o.SelectIndex < len(q.Select) {
		it := q.Select[o.SelectIndex]
		return (it.Agg == parser.AggCount || it.Agg == parser.AggCountCol) && it.Bar == parser.BarNone
	}
	return o.Agg == parser.AggCount || o.Agg == parser.AggCountCol
}

// maxSelectionTrials bounds k × groups for a selection by the exponential
// mechanism. Its cost is data-independent, so every round pays one exact
// Bernoulli trial per remaining group (about a microsecond each): past this
// bound (about 0.1 s) the query is answered as a GROUP BY instead — every
// group's count measured at the batch's ε, then sorted and cut to k, which
// is post-processing and just as private.
const maxSelectionTrials = 100_000

// isTopK reports whether q selects the k largest (or smallest) groups by
// count with k smaller than the number of groups: a selection, answered by
// the exponential mechanism. With k at least the number of groups the
// query is an ordinary GROUP BY whose ordering is free post-processing, and
// so it is when k × groups exceeds maxSelectionTrials.
func isTopK(w *compile.Workload, q *compile.Query) bool {
	if !looksTopK(q.Source) || len(q.Order) == 0 {
		return false
	}
	it := q.Items[q.Order[0].Item]
	k, groups := *q.Source.Limit, int64(q.RowCount(w))
	return it.Kind == compile.ItemAgg && it.IsCount && it.Bar == parser.BarNone && k < groups && k*groups <= maxSelectionTrials
}

// measuresValues reports whether a top-k query needs noisy values after the
// selection: an aggregate in the select list, or a HAVING on noisy values.
func measuresValues(q *compile.Query) bool {
	if q.Having != nil {
		return true
	}
	for _, it := range q.Items[:q.Visible] {
		if it.Kind != compile.ItemGroup {
			return true
		}
	}
	return false
}

// epsilonGrid is the denominator of the rational ε handed to the
// exponential mechanism. ε is rounded down to it, so the mechanism never
// spends more than the ledger charged; a selection ε below 1/epsilonGrid
// is refused. With ε at most EpsilonRange.Max = 100 the numerator stays
// below 2⁴⁷.
const epsilonGrid = 1 << 40

// topKOptions splits a top-k batch's privacy between the selection (pure
// ε, exponential mechanism) and the measurement of the selected groups'
// values, by the table's topk_selection_share. It returns the measurement's
// options, the total cost, and the selection's ε.
func (e *Engine) topKOptions(ctx context.Context, s *Session, t *catalog.Table, w *compile.Workload) (planner.Options, budget.Cost, float64, error) {
	opt, cost, _, err := e.options(ctx, s, t, w)
	if err != nil {
		return opt, cost, 0, err
	}
	total := budget.EpsilonFor(cost, t.Budget.Delta)
	if !measuresValues(w.Queries[0]) {
		return planner.Options{}, budget.Cost{Epsilon: total}, total, nil
	}
	share := t.Budget.TopKSelectionShare
	if share <= 0 || share >= 1 {
		share = catalog.DefaultTopKSelectionShare
	}
	if v, ok, _ := sessionFloat(s, VarMaxStderr); ok && v > 0 {
		// The target sizes the measurement; the selection gets its share on top.
		sel := total * share / (1 - share)
		cost.Epsilon += sel
		if m := maxEpsilon(e.cat.User(s.User), t); m > 0 && total+sel > m*(1+1e-9) {
			return opt, cost, 0, parser.Errorf(parser.CodeDPRefused, "@dp_max_stderr with top-k selection needs ε = %.6g, above the per-query maximum ε = %g on table %s", total+sel, m, t.Name)
		}
		return opt, cost, sel, nil
	}
	sel := total * share
	meas := total - sel
	if t.Noise == catalog.Gaussian {
		rho := budget.RhoForEpsilon(meas, t.Budget.Delta)
		return planner.Options{Noise: catalog.Gaussian, Rho: rho, MaxCells: opt.MaxCells, Unit: opt.Unit}, budget.Cost{Epsilon: sel, Rho: rho}, sel, nil
	}
	return planner.Options{Noise: catalog.Laplace, Epsilon: meas, MaxCells: opt.MaxCells, Unit: opt.Unit}, budget.Cost{Epsilon: sel + meas}, sel, nil
}

// topK answers a top-k query.
//
// Privacy: the selection is k rounds of the exponential mechanism without
// replacement ("peeling"), each with ε_sel/k, utility = the group's exact
// count (its negation for ASC), sensitivity Δ = 1: adding or removing a
// row changes one group's count by one; with a privacy unit, Δ is the most
// one unit moves one group's count (selectionSensitivity). Counts are monotone — between
// neighbours they all move the same way (up when a row is added, down when
// one is removed) — so each round selects with weights exp((ε_sel/k)·u/Δ),
// without the factor 1/2 of the general mechanism, and is (ε_sel/k)-DP
// (McSherry–Talwar 2007; Dwork–Roth 2014, Thm 3.10 and its remark on
// monotone utilities; see noise.Rand.ExponentialMechanism). Its cost is
// ε_sel (basic composition over the rounds), and its running time does not
// depend on the counts. When values are asked for, every group is measured
// with the remaining budget by the matrix mechanism and only the selected
// groups are shown (post-processing). Both are charged in one ledger entry
// before anything is released.
func (e *Engine) topK(ctx context.Context, s *Session, t *catalog.Table, p *prepared, sts []*parser.Statement) ([]*Result, error) {
	w, opt, cost, selEps := p.w, p.opt, p.cost, p.selEps
	q := w.Queries[0]
	key := reuseKey(t, sts, opt) + fmt.Sprintf("|topk(%v,%v)", selEps, cost)
	if selEps > EpsilonRange.Max {
		return nil, parser.Errorf(parser.CodeDPRefused, "the top-k selection's ε = %g is above the largest supported (%g)", selEps, EpsilonRange.Max)
	}
	epsNum := uint64(math.Floor(selEps * epsilonGrid))
	if epsNum == 0 {
		return nil, parser.Errorf(parser.CodeDPRefused, "the top-k selection's ε = %g is below the smallest supported (2^-40)", selEps)
	}
	rs, fresh, err := e.stored.answer(ctx, key, func(ctx context.Context) ([]*Result, error) {
		var plan *planner.Plan
		mechanism := "exponential"
		strategy := "top-k"
		if measuresValues(q) {
			var err error
			if plan, err = e.choose(ctx, w, opt); err != nil {
				return nil, err
			}
			mechanism += "+" + string(opt.Noise)
			strategy += "; " + plan.Name
		}
		var version string // measurements of the values are kept like any
		if plan != nil {
			var err error
			if version, err = e.measurementVersion(ctx, t); err != nil {
				return nil, err
			}
		}
		x, err := e.hist.Histogram(ctx, t, w.Columns)
		if err != nil {
			return nil, e.internal("histogram", err)
		}
		delta := selectionSensitivity(t, w, q)
		entry, err := e.charge(ctx, s, t, mechanism, strategy, cost, sts, unitBound(t, opt, selEps, delta))
		if err != nil {
			return nil, err
		}
		// The candidates are the output rows: the groups the WHERE admits
		// by construction (a public fact), each with its exact count.
		order := q.Order[0]
		counts := make([][]float64, q.ExprCount())
		utilities := make([]int64, q.RowCount(w))
		for r := range utilities {
			row := q.RowAt(r)
			if counts[row.Expr] == nil {
				counts[row.Expr] = exec.Contract(q.Aggregates[q.Agg(q.Items[order.Item].Agg, int(row.Expr))], x, w.Sizes(), q.GroupCols)
			}
			utilities[r] = int64(math.Round(counts[row.Expr][row.Plain]))
			if !order.Desc {
				utilities[r] = -utilities[r]
			}
		}
		r := e.newSampler()
		chosen := r.TopK(utilities, int(*q.Source.Limit), epsNum, epsilonGrid, delta)
		var m *measured
		if plan != nil {
			ans, err := exec.Measure(plan, x, r)
			if err != nil {
				e.log.Error("measurement failed after charge; nothing released", "seq", entry.Seq, "err", err)
				return nil, e.internal("measure", err)
			}
			m = measuredFrom(plan, ans, 0)
			// Every group's value was measured and charged, the selected
			// ones shown: the measurement is kept whole.
			recs, _ := reuse.Records(w, plan, ans)
			e.keep(ctx, t, version, recs, entry.Seq)
		}
		return []*Result{assemble(w, q, m, chosen)}, nil
	})
	return e.released(ctx, s, t, sts, rs, fresh, err)
}

// selectionSensitivity is the exponential mechanism's Δ for q: the most one
// unit moves one group's count — 1 for row privacy; min(k, r) when every
// group is one cell of the batch's domain (q groups by every column and by
// no expression); min(k, g·r) otherwise (planner.Contribution).
func selectionSensitivity(t *catalog.Table, w *compile.Workload, q *compile.Query) int64 {
	oneCell := len(q.GroupCols) == len(w.Columns) && q.ExprCount() == 1
	return planner.ContributionOf(t.Unit).UtilitySensitivity(oneCell)
}
