package engine

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/planner"
)

// EXPLAIN: what a batch would measure, at what cost and with what error,
// from the same prepared batch (prepare.go) the batch itself runs; nothing
// is spent.

// explain plans without measuring or charging: the columns and domain, the
// strategies considered with their expected errors, the privacy cost, each
// answer's standard error, and the budget that would remain.
func (e *Engine) explain(ctx context.Context, s *Session, t *catalog.Table, sts []*parser.Statement) (*Result, error) {
	p, err := e.prepare(ctx, s, t, sts)
	if err != nil {
		return nil, err
	}
	w := p.w
	res := &Result{Columns: []Column{{Name: "property", Type: TypeString}, {Name: "value", Type: TypeString}}}
	add := func(k, v string) { res.Rows = append(res.Rows, []any{k, v}) }
	var dom []string
	for _, c := range w.Columns {
		dom = append(dom, fmt.Sprintf("%s(%d)", c.Name, c.Size()))
	}
	add("table", t.Name)
	if len(sts) > 1 {
		add("batch", fmt.Sprintf("%d statements, measured together", len(sts)))
	}
	add("columns", strings.Join(dom, " × "))
	explainJoins(sts, add)
	// What each query's groups are, and which queries are known from the
	// declared domain without a measurement.
	queries := func() {
		for q, qu := range w.Queries {
			if !qu.Measured() {
				add(fmt.Sprintf("query %d", q+1), "answered exactly from the declared domain, nothing measured: "+qu.Why)
			}
			if len(qu.Keys) > 0 {
				var keys []string
				for _, k := range qu.Keys {
					keys = append(keys, k.Text)
				}
				add(fmt.Sprintf("groups query %d", q+1), fmt.Sprintf("%d (GROUP BY %s: the groups the WHERE admits on the declared domain)", qu.RowCount(w), strings.Join(keys, ", ")))
			}
		}
	}
	if p.route == routeKnown {
		explainKnownRoute(w, add, queries)
		return res, nil
	}
	if p.route == routeDistinct {
		return e.explainDistinct(t, p, res, queries)
	}
	if p.route == routeTree {
		add("cells", fmt.Sprintf("%.0f", planner.CountedCells(w, p.opt.MaxCells)))
		queries()
		add("noise", string(p.opt.Noise))
		add("epsilon charged if run", fmt.Sprintf("%.6g", costEpsilon(p.cost, t)))
		explainTree(t, p, add)
		return res, e.explainEnd(ctx, s, t, p.cost, add)
	}
	opt, cost, plan, selEps := p.opt, p.cost, p.plan, p.selEps
	add("cells", fmt.Sprintf("%.0f", planner.CountedCells(w, opt.MaxCells)))
	queries()
	explainNoise(t, opt, cost, add)
	if selEps > 0 && !explainTopK(t, w, opt, selEps, add) {
		add("charged", "nothing (EXPLAIN)")
		return res, nil
	}
	// A top-k without counts measures nothing and returned above: only
	// batches that measure values are planned (with options to plan with).
	if plan == nil {
		if plan, err = e.choose(ctx, w, opt); err != nil {
			return nil, err
		}
	}
	// variance is the planned expected squared error of aggregate a of
	// query q in plain group g (cells group): the plan's, or the
	// combination's when stored measurements are combined with it.
	variance := func(q, a, g int, group []int) float64 { return plan.Variance(q, a, group) }
	if selEps == 0 {
		d, err := e.decide(ctx, s, t, w, opt, cost, plan)
		if err != nil {
			return nil, err
		}
		explainKnown(w, d, add, func(c budget.Cost) {
			cost = c
			for _, row := range res.Rows {
				if row[0] == "epsilon charged if run" {
					row[1] = fmt.Sprintf("%.6g", costEpsilon(c, t))
				}
			}
		})
		if d.Free != nil {
			return res, e.explainEnd(ctx, s, t, budget.Cost{}, add)
		}
		plan = d.Plan
		if d.Combine {
			variance = func(q, a, g int, _ []int) float64 { return d.After.Vars[q][a][g] }
		}
	}
	explainPlan(w, t, plan, add)
	explainErrors(w, variance, add)
	return res, e.explainEnd(ctx, s, t, cost, add)
}

// explainEnd adds the budgets the batch would charge and that EXPLAIN
// charged nothing.
func (e *Engine) explainEnd(ctx context.Context, s *Session, t *catalog.Table, cost budget.Cost, add func(k, v string)) error {
	if err := e.explainBudget(ctx, s, t, cost, add); err != nil {
		return err
	}
	add("charged", "nothing (EXPLAIN)")
	return nil
}

// explainKnownRoute is EXPLAIN of a batch known from the declared domain.
func explainKnownRoute(w *compile.Workload, add func(k, v string), queries func()) {
	cells := 1.0
	for _, n := range w.Sizes() {
		cells *= float64(n)
	}
	add("cells", fmt.Sprintf("%.0f", cells))
	queries()
	add("measurement", "none: every answer is known from the declared domain")
	add("epsilon charged if run", "0 (no ledger entry)")
	add("charged", "nothing (EXPLAIN)")
}

// explainNoise adds the noise, its parameters, what a run would charge and
// the privacy unit the guarantee covers.
func explainNoise(t *catalog.Table, opt planner.Options, cost budget.Cost, add func(k, v string)) {
	switch {
	case opt.Noise == "": // a top-k selection only: no values measured
		add("noise", "none (a selection only)")
	case opt.Noise == catalog.Gaussian:
		add("noise", string(opt.Noise))
		add("rho", fmt.Sprintf("%g", opt.Rho))
		add("epsilon (at delta)", fmt.Sprintf("%g (δ=%g)", costEpsilon(cost, t), t.Budget.Delta))
	default:
		add("noise", string(opt.Noise))
		add("epsilon", fmt.Sprintf("%g", opt.Epsilon))
	}
	add("epsilon charged if run", fmt.Sprintf("%.6g", costEpsilon(cost, t)))
	if t.Unit == nil {
		add("privacy unit", "row (each row is its own unit: the guarantee covers one row)")
	} else {
		c := planner.ContributionOf(t.Unit)
		add("privacy unit", fmt.Sprintf("%s: the guarantee covers all rows of one %s; rows with a NULL %s are not counted", t.Unit, t.Unit.Column, t.Unit.Column))
		add("unit contribution", fmt.Sprintf("at most %g rows of one unit change the histogram (L1, min(k, g·r)); sensitivities below are per unit", c.L1()))
	}
}

// explainTopK adds a top-k selection's row; it reports whether the batch
// also measures the selected groups' values.
func explainTopK(t *catalog.Table, w *compile.Workload, opt planner.Options, selEps float64, add func(k, v string)) bool {
	k := *w.Queries[0].Source.Limit
	rounds := "rounds"
	if k == 1 {
		rounds = "round"
	}
	delta := selectionSensitivity(t, w, w.Queries[0])
	weights := fmt.Sprintf("exp(ε/%d·count)", k)
	if delta != 1 {
		weights = fmt.Sprintf("exp(ε/(%d·%d)·count)", k, delta)
	}
	add("top-k selection", fmt.Sprintf("exponential mechanism, %d %s without replacement over %d groups, ε = %g (utility: the group's count, sensitivity %d; weights %s)", k, rounds, w.Queries[0].RowCount(w), selEps, delta, weights))
	if !measuresValues(w.Queries[0]) {
		return false
	}
	add("measurement of the selected groups' values", fmt.Sprintf("ε = %g", opt.Epsilon+costEpsilon(budget.Cost{Rho: opt.Rho}, t)))
	return true
}

// explainBudget adds the budgets the batch would charge, with what they
// have spent and what would remain after cost.
func (e *Engine) explainBudget(ctx context.Context, s *Session, t *catalog.Table, cost budget.Cost, add func(k, v string)) error {
	for _, l := range e.limits(s.User, t) {
		spent, err := e.ledger.SpentSpace(ctx, l.User, l.Space)
		if err != nil {
			return e.internal("ledger read", err)
		}
		used := costEpsilon(spent, t)
		after := costEpsilon(spent.Add(cost), t)
		add("budget "+l.Scope, fmt.Sprintf("space %s: limit ε=%g, spent ε=%.6g, remaining after this batch ε=%.6g", l.Space, l.Epsilon, used, l.Epsilon-after))
	}
	return nil
}

// onSupport is l over only the columns where some term is not all ones,
// for evaluating its weights cell by cell; ok is false when those columns
// have more than 2^20 cells together.
func onSupport(l compile.Linear, sizes []int) (compile.Linear, []int, bool) {
	var cols []int
	cells := 1.0
	for j := range sizes {
		for _, t := range l {
			if t.Factors[j] != nil {
				cols = append(cols, j)
				cells *= float64(sizes[j])
				break
			}
		}
	}
	if cells > 1<<20 {
		return nil, nil, false
	}
	out := make(compile.Linear, len(l))
	sub := make([]int, len(cols))
	for k, j := range cols {
		sub[k] = sizes[j]
	}
	for i, t := range l {
		nt := compile.Term{Coef: t.Coef, Factors: make([]compile.Factor, len(cols))}
		for k, j := range cols {
			nt.Factors[k] = t.Factors[j]
		}
		out[i] = nt
	}
	return out, sub, true
}

// explainJoins says, for each query joined to public tables, what each
// join does to the domain and why it leaves the sensitivity alone.
func explainJoins(sts []*parser.Statement, add func(k, v string)) {
	for q, st := range sts {
		for _, j := range st.Query.Joins {
			key := compile.ExprSQL(j.Match.Key)
			what := "cells whose key matches no row are dropped"
			if j.Left {
				what = "every cell kept, its columns NULL where the key matches no row"
			}
			add(fmt.Sprintf("join query %d", q+1), fmt.Sprintf("%s: %s.* are functions of %s (%s); the key is unique on every cell, so a row joins at most once: sensitivity as without the join",
				j.SQL(key), j.Match.Alias, key, what))
		}
	}
}

// explainPlan adds the chosen strategy: its sensitivity (per unit where
// the table has one), expected error, histograms, objective, and the
// candidates considered.
func explainPlan(w *compile.Workload, t *catalog.Table, plan *planner.Plan, add func(k, v string)) {
	add("strategy", plan.Name)
	if t.Unit == nil {
		add("sensitivity", fmt.Sprintf("%g", plan.Sensitivity))
	} else {
		cal := plan.Options.Calibration()
		at := fmt.Sprintf("ε = %.6g", cal.Epsilon)
		if cal.Noise == catalog.Gaussian {
			at = fmt.Sprintf("ρ = %.6g", cal.Rho)
		}
		add("sensitivity", fmt.Sprintf("%g per unit (%g per row × %g rows); noise calibrated at %s per row", plan.UnitSensitivity(), plan.Sensitivity, plan.Options.Unit.L1(), at))
	}
	add("expected total squared error", fmt.Sprintf("%.6g", plan.TotalSquaredError()))
	if plan.Tables != nil {
		var ts []string
		for _, cols := range plan.Tables {
			var names []string
			for _, j := range cols {
				names = append(names, w.Columns[j].Name)
			}
			ts = append(ts, "("+strings.Join(names, ", ")+")")
		}
		add("histograms", "one per column set, each over its own columns: "+strings.Join(ts, " "))
	}
	answers := 0
	for _, qu := range w.Queries {
		for _, it := range qu.Items[:qu.Visible] {
			if it.Kind == compile.ItemAgg || it.Kind == compile.ItemRatio || it.Kind == compile.ItemVariance {
				answers++
			}
		}
	}
	switch {
	case plan.Options.Objective == planner.ObjectiveMaxVariance:
		add("objective minimised", fmt.Sprintf("largest variance of one answer, %.6g (the accuracy target's)", plan.MaxVariance))
	case answers > 1:
		add("objective minimised", fmt.Sprintf("%.6g (%s)", plan.Objective(), plan.Options.Objective.Describe()))
	}
	for _, c := range plan.Candidates {
		if t.Unit != nil {
			add("considered "+c.Name, fmt.Sprintf("total squared error %.6g (sensitivity %g per unit)", c.TotalSquaredError, c.Sensitivity*plan.Options.Unit.L1()))
			continue
		}
		add("considered "+c.Name, fmt.Sprintf("total squared error %.6g (sensitivity %g)", c.TotalSquaredError, c.Sensitivity))
	}
}

// explainErrors adds each shown aggregate's standard error (a range over
// its groups; the delta method's parts for ratios and variances; a
// quantile's rank bound) and its weights on the domain. variance is the
// expected squared error of aggregate a of query q in group g.
func explainErrors(w *compile.Workload, variance func(q, a, g int, group []int) float64, add func(k, v string)) {
	sizes := w.Sizes()
	for q, qu := range w.Queries {
		for i, it := range qu.Items[:qu.Visible] {
			name := fmt.Sprintf("query %d column %d (%s)", q+1, i+1, it.Name)
			var parts []int // base aggregates shown
			switch it.Kind {
			case compile.ItemAgg:
				parts = []int{it.Agg}
			case compile.ItemRatio:
				parts = []int{it.Agg, it.Den}
			case compile.ItemVariance:
				parts = []int{it.Den, it.Agg, it.Sq}
			case compile.ItemQuantile:
				parts = it.Prefix
			default:
				continue
			}
			if it.Bar != parser.BarNone {
				continue
			}
			var sds, ws []string
			for _, b := range parts {
				lo, hi := math.Inf(1), math.Inf(-1)
				wlo, whi := math.Inf(1), math.Inf(-1)
				group := make([]int, len(qu.GroupCols))
				for e := 0; e < qu.ExprCount(); e++ {
					a := qu.Agg(b, e)
					for g := 0; g < qu.Groups(w); g++ {
						if !qu.IsLive(a, g) {
							continue
						}
						qu.GroupCells(w, g, group)
						sd := math.Sqrt(variance(q, a, g, group))
						lo, hi = math.Min(lo, sd), math.Max(hi, sd)
					}
					if l, ls, ok := onSupport(qu.Aggregates[a], sizes); ok {
						for _, x := range planner.Dense(l, ls) {
							wlo, whi = math.Min(wlo, x), math.Max(whi, x)
						}
					}
				}
				switch {
				case math.IsInf(lo, 1):
					sds = append(sds, "0 (exact)")
				case lo == hi:
					sds = append(sds, fmt.Sprintf("%.4g", lo))
				default:
					sds = append(sds, fmt.Sprintf("%.4g..%.4g", lo, hi))
				}
				if !math.IsInf(wlo, 1) {
					ws = append(ws, fmt.Sprintf("[%g, %g], sensitivity alone %g", wlo, whi, math.Max(math.Abs(wlo), math.Abs(whi))))
				}
			}
			switch it.Kind {
			case compile.ItemQuantile:
				lo, hi := math.Inf(1), 0.0
				group := make([]int, len(qu.GroupCols))
				for _, b := range parts {
					for e := 0; e < qu.ExprCount(); e++ {
						a := qu.Agg(b, e)
						for g := 0; g < qu.Groups(w); g++ {
							if qu.IsLive(a, g) {
								qu.GroupCells(w, g, group)
								sd := math.Sqrt(variance(q, a, g, group))
								lo, hi = math.Min(lo, sd), math.Max(hi, sd)
							}
						}
					}
				}
				if math.IsInf(lo, 1) {
					lo = 0
				}
				n := float64(len(parts))
				z := normalQuantile(1 - 0.025/n)
				add("stderr "+name, fmt.Sprintf("the CDF's %d prefix counts: %.4g..%.4g; the answer's rank is within (1+q)·E of q·N, E ≤ %.4g (z = %.3f for %d counts) with probability ≥ 95%%", len(parts), lo, hi, z*hi, z, len(parts)))
				continue
			case compile.ItemRatio:
				add("stderr "+name, fmt.Sprintf("numerator %s, denominator %s (the ratio's error is the delta method's of both)", sds[0], sds[1]))
			case compile.ItemVariance:
				add("stderr "+name, fmt.Sprintf("COUNT %s, SUM %s, SUM of squares %s (combined by the delta method)", sds[0], sds[1], sds[2]))
			default:
				add("stderr "+name, sds[0])
			}
			if len(ws) > 0 {
				labels := map[compile.ItemKind][]string{compile.ItemAgg: {"weights"}, compile.ItemRatio: {"numerator weights", "denominator weights"},
					compile.ItemVariance: {"COUNT weights", "SUM weights", "SUM of squares weights"}}[it.Kind]
				for k, x := range ws {
					if k < len(labels) {
						add(labels[k]+" "+name, x)
					}
				}
			}
		}
	}
}
