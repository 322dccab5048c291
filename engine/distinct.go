package engine

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/exec"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/planner"
)

// distinctOptions are the privacy options of a COUNT(DISTINCT <unit>)
// batch and its calibration (exec.DistinctNoise). Accuracy targets are
// not offered for it.
func (e *Engine) distinctOptions(ctx context.Context, s *Session, t *catalog.Table, w *compile.Workload) (planner.Options, budget.Cost, exec.DistinctNoise, error) {
	if v, ok, _ := sessionFloat(s, VarMaxStderr); ok && v > 0 {
		return planner.Options{}, budget.Cost{}, exec.DistinctNoise{}, parser.Errorf(parser.CodeDPRefused, "@dp_max_stderr is not supported for COUNT(DISTINCT %s); set it to NULL and choose @dp_epsilon", t.Unit.Column)
	}
	opt, cost, _, err := e.options(ctx, s, t, w)
	if err != nil {
		return opt, cost, exec.DistinctNoise{}, err
	}
	n, err := exec.PlanDistinct(w, opt)
	if errors.Is(err, planner.ErrScale) {
		return opt, cost, n, parser.Errorf(parser.CodeDPRefused, "the privacy parameter is too small for COUNT(DISTINCT %s): its noise scale would be 2^64 or more; raise it", t.Unit.Column)
	}
	if err != nil {
		return opt, cost, n, e.internal("count distinct", err)
	}
	return opt, cost, n, nil
}

// distinct answers a batch of COUNT(DISTINCT <unit>) queries: the number of
// units per group, exactly counted from each unit's bounded cells
// (exec.CountDistinct), charged, then perturbed (see exec.DistinctNoise
// for the sensitivity and cost).
func (e *Engine) distinct(ctx context.Context, s *Session, t *catalog.Table, p *prepared, sts []*parser.Statement) ([]*Result, error) {
	w, opt, cost, n := p.w, p.opt, p.cost, p.distinct
	uc, ok := e.hist.(exec.UnitCounter)
	if !ok {
		return nil, e.internal("count distinct", errors.New("the histogram source cannot list unit cells"))
	}
	key := reuseKey(t, sts, opt) + "|distinct"
	rs, fresh, err := e.stored.answer(ctx, key, func(ctx context.Context) ([]*Result, error) {
		exact, err := exec.CountDistinct(ctx, w, uc)
		if err != nil {
			return nil, e.internal("count distinct", err)
		}
		u := unitBound(t, opt, 0, 0)
		u.RowEpsilon, u.RowRho = 0, 0 // not a row-level calibration: see the strategy
		strategy := fmt.Sprintf("count-distinct-units (sensitivity %g)", n.Sensitivity)
		if _, err := e.charge(ctx, s, t, string(opt.Noise), strategy, cost, sts, u); err != nil {
			return nil, err
		}
		ans := exec.MeasureDistinct(exact, n, e.newSampler())
		out := make([]*Result, len(w.Queries))
		for q, qu := range w.Queries {
			m := &measured{vals: ans.Values[q], vars: ans.Variance[q]}
			for _, vs := range m.vars {
				h := make([]float64, len(vs))
				for g := range h {
					h[g] = n.HalfWidth95()
				}
				m.half = append(m.half, h)
			}
			out[q] = assemble(w, qu, m, nil)
		}
		return out, nil
	})
	return e.released(ctx, s, t, sts, rs, fresh, err)
}

// explainDistinct finishes EXPLAIN for a COUNT(DISTINCT <unit>) batch.
func (e *Engine) explainDistinct(t *catalog.Table, p *prepared, res *Result, queries func()) (*Result, error) {
	add := func(k, v string) { res.Rows = append(res.Rows, []any{k, v}) }
	opt, cost, n := p.opt, p.cost, p.distinct
	queries()
	add("noise", string(opt.Noise))
	if opt.Noise == catalog.Gaussian {
		add("rho", fmt.Sprintf("%g", opt.Rho))
	} else {
		add("epsilon", fmt.Sprintf("%g", opt.Epsilon))
	}
	add("epsilon charged if run", fmt.Sprintf("%.6g", costEpsilon(cost, t)))
	add("privacy unit", fmt.Sprintf("%s: the guarantee covers all rows of one %s; rows with a NULL %s are not counted", t.Unit, t.Unit.Column, t.Unit.Column))
	add("strategy", fmt.Sprintf("count-distinct-units: each unit counts once in each group it has a kept row in, at most %d groups per aggregate (min(k, g)); every answer measured directly", opt.Unit.CellsPerUnit()))
	add("sensitivity", fmt.Sprintf("%g per unit", n.Sensitivity))
	add("stderr per answer", fmt.Sprintf("%.6g", math.Sqrt(n.Variance)))
	add("charged", "nothing (EXPLAIN)")
	return res, nil
}
