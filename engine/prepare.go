package engine

import (
	"context"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/exec"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/planner"
)

// route is how a batch is answered.
type route int

const (
	routeKnown    route = iota // every answer is a fact about the declared domain: nothing measured
	routeDistinct              // COUNT(DISTINCT unit): distinct.go
	routeTopK                  // one top-k selection: topk.go
	routeMeasured              // the matrix mechanism, with stored measurements (package reuse)
	routeTree                  // DP_QUANTILE over a long column: a tree strategy (quantile_tree.go)
)

// prepared is what a batch and its EXPLAIN both start from, so that the
// two cannot disagree: the workload, the route it takes and its privacy
// options, each computed once, here.
type prepared struct {
	w     *compile.Workload
	route route
	opt   planner.Options
	cost  budget.Cost
	// plan is the session's plan of a measured batch (routeMeasured).
	plan *planner.Plan
	// selEps is a top-k selection's ε (routeTopK).
	selEps float64
	// distinct is COUNT(DISTINCT unit)'s noise (routeDistinct).
	distinct exec.DistinctNoise
	// tree is a long column's quantile plan (routeTree).
	tree *planner.TreePlan
}

// prepare compiles a batch (EXPLAIN statements as the queries they
// explain) and chooses its route and options; planning stops when ctx
// is cancelled.
func (e *Engine) prepare(ctx context.Context, s *Session, t *catalog.Table, sts []*parser.Statement) (*prepared, error) {
	queries := make([]*parser.Statement, len(sts))
	for i, st := range sts {
		cp := *st
		cp.Kind = parser.KindAggregate
		queries[i] = &cp
	}
	w, err := compile.Compile(t, queries)
	if err != nil {
		return nil, err
	}
	p := &prepared{w: w}
	tree, err := treeItem(w)
	if err != nil {
		return nil, err
	}
	switch {
	case !w.Measured():
		p.route = routeKnown
	case w.CountsUnits():
		p.route = routeDistinct
		p.opt, p.cost, p.distinct, err = e.distinctOptions(ctx, s, t, w)
	case len(w.Queries) == 1 && isTopK(w, w.Queries[0]):
		p.route = routeTopK
		p.opt, p.cost, p.selEps, err = e.topKOptions(ctx, s, t, w)
	case tree != nil:
		p.route = routeTree
		err = e.treeOptions(ctx, s, t, p, tree)
	default:
		p.route = routeMeasured
		p.opt, p.cost, p.plan, err = e.options(ctx, s, t, w)
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}
