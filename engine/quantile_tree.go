package engine

import (
	"context"
	"fmt"
	"math"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/exec"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/planner"
)

// treeItem returns the batch's tree quantile (compile.Item.Tree: a
// DP_QUANTILE over a column of more than compile.MaxQuantileCells bins),
// or nil when it has none. Such a batch is measured by a tree strategy
// over the column (routeTree), which answers quantiles only: it must be
// one statement with no GROUP BY or HAVING whose every output is a
// quantile of the same column under the same WHERE. Anything else is
// refused (3900) naming the split to make.
func treeItem(w *compile.Workload) (*compile.Item, error) {
	var tree *compile.Item
	for _, q := range w.Queries {
		for i := range q.Items {
			if it := &q.Items[i]; it.Tree && tree == nil {
				tree = it
			}
		}
	}
	if tree == nil {
		return nil, nil
	}
	refuse := func(why string) (*compile.Item, error) {
		return nil, parser.Errorf(parser.CodeDPRefused, "DP_QUANTILE over %s (more than %d bins) is measured by a tree over the column's bins, which answers quantiles only: %s; send it as a statement of its own", tree.Arg, compile.MaxQuantileCells, why)
	}
	if len(w.Queries) != 1 {
		return refuse("it cannot share a batch with other statements")
	}
	q := w.Queries[0]
	if len(q.GroupCols) > 0 || len(q.ExprGroups) > 1 || q.Having != nil {
		return refuse("it cannot be grouped or filtered by HAVING")
	}
	for _, it := range q.Items {
		if it.Kind != compile.ItemQuantile || !it.Tree || it.TreeCol != tree.TreeCol || it.Prefix[0] != tree.Prefix[0] {
			return refuse("every column of the statement must be a quantile of the same column")
		}
	}
	return tree, nil
}

// treeOptions plans a tree batch at the session's ε or ρ. An accuracy
// target (@dp_max_stderr) is refused: tree batches are planned for an ε,
// not a target.
func (e *Engine) treeOptions(ctx context.Context, s *Session, t *catalog.Table, p *prepared, it *compile.Item) error {
	if _, ok, _ := sessionFloat(s, VarMaxStderr); ok {
		return parser.Errorf(parser.CodeDPRefused, "@dp_max_stderr is not supported for DP_QUANTILE over %s (more than %d bins); SET @dp_max_stderr = NULL and set @dp_epsilon", it.Arg, compile.MaxQuantileCells)
	}
	var err error
	if p.opt, p.cost, _, err = e.options(ctx, s, t, p.w); err != nil {
		return err
	}
	if p.tree, err = planner.PlanTree(len(it.Cells), p.opt); err != nil {
		return e.planError(err)
	}
	return nil
}

// treeQuantile answers a tree batch: the column's histogram under the
// WHERE, measured by the tree plan (exec.MeasureTree states its privacy),
// made consistent, summed into the CDF and read by quantile. The charge is
// one ledger entry before anything is released; the histogram is counted
// and checked before the charge, so a source failure costs nothing. The
// answer is stored like any batch's, so repeating it is free.
func (e *Engine) treeQuantile(ctx context.Context, s *Session, t *catalog.Table, p *prepared, sts []*parser.Statement) ([]*Result, error) {
	w, opt, tp := p.w, p.opt, p.tree
	q := w.Queries[0]
	it, err := treeItem(w)
	if err != nil {
		return nil, err
	}
	key := reuseKey(t, sts, opt) + fmt.Sprintf("|tree(%d)", tp.Tree.B)
	rs, fresh, err := e.stored.answer(ctx, key, func(ctx context.Context) ([]*Result, error) {
		x, err := e.hist.Histogram(ctx, w.Table, w.Columns)
		if err != nil {
			return nil, e.internal("histogram", err)
		}
		in, err := exec.TreeCounts(w, q.Aggregates[q.Agg(it.Prefix[0], 0)], it.TreeCol, it.Cells, x)
		if err != nil {
			return nil, e.internal("histogram", err)
		}
		entry, err := e.charge(ctx, s, t, string(opt.Noise), treeName(tp), p.cost, sts, unitBound(t, opt, 0, 0))
		if err != nil {
			return nil, err
		}
		cells, err := exec.MeasureTree(tp, in, e.newSampler())
		if err != nil {
			e.log.Error("measurement failed after charge; nothing released", "seq", entry.Seq, "err", err)
			return nil, e.internal("measure", err)
		}
		return []*Result{assemble(w, q, &measured{cdf: cells}, nil)}, nil
	})
	return e.released(ctx, s, t, sts, rs, fresh, err)
}

// treeName is a tree plan's strategy as the ledger and EXPLAIN show it.
func treeName(tp *planner.TreePlan) string {
	return fmt.Sprintf("tree(b=%d, %d cells, %d nodes, depth %d)", tp.Tree.B, tp.Tree.N, tp.Tree.Nodes(), tp.Tree.Depth)
}

// treeCDF is the noisy CDF of a tree quantile: the running sums of the
// consistent cell counts (nil when nothing was measured).
func treeCDF(m *measured) []float64 {
	if m == nil || m.cdf == nil {
		return nil
	}
	f := make([]float64, len(m.cdf))
	acc := 0.0
	for k, v := range m.cdf {
		acc += v
		f[k] = acc
	}
	return f
}

// explainTree is EXPLAIN's account of a tree batch: the strategy, its
// sensitivity and noise, and the bound on the prefix counts' standard
// error that the quantile's error bound (quantile) is stated in.
func explainTree(t *catalog.Table, p *prepared, add func(k, v string)) {
	tp := p.tree
	add("strategy", treeName(tp)+"; least squares over the tree (Hay et al.'s consistency), then the CDF's running sums")
	norm := "L1: the tree's depth, each bin lying in one node per level"
	if tp.Options.Noise == catalog.Gaussian {
		norm = "L2: the square root of the tree's depth, each bin lying in one node per level"
	}
	sens := fmt.Sprintf("%g (%s)", tp.Sensitivity, norm)
	if c := tp.Options.Unit.L1(); c != 1 {
		sens = fmt.Sprintf("%g = %g per row (%s) × %g rows per unit", c*tp.Sensitivity, tp.Sensitivity, norm, c)
	}
	add("sensitivity", sens)
	sd := math.Sqrt(tp.NodeVariance * tp.Tree.PrefixVarianceBound())
	n := float64(tp.Tree.N)
	add("prefix count stderr", fmt.Sprintf("at most %.4g (each prefix is at most %g nodes)", sd, tp.Tree.PrefixVarianceBound()))
	add("largest prefix error (95%)", fmt.Sprintf("at most %.4g (z = %.3g over %g prefix counts)", normalQuantile(1-0.025/n)*sd, normalQuantile(1-0.025/n), n))
}
