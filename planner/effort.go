package planner

import (
	"context"
	"fmt"
	"math"
)

// Optimisation budgets: counted work, never the clock.
//
// A plan is a deterministic function of the catalog, the batch and the
// options, so that an auditor can re-derive any charge's strategy on
// another machine of the same architecture (Plan.StrategyDigest). Every optimiser therefore stops at
// its tolerance or at a budget of work — estimated multiply-adds, counted
// per objective evaluation or fixed-point iteration from the problem's
// dimensions (pIdentity.evalCost, mulCost, …) — and never at a deadline.
// A loaded machine plans more slowly; it does not plan differently.
//
// The budgets were set so that planning on the development machine (a
// shared 2-core AMD EPYC, which sustained about 10⁹ estimated multiply-adds
// per second on these kernels under its usual load) takes about as long as
// the wall-clock budgets they replace: workRate is that throughput, and
// each budget below is written as the time it stood for.
//
// A context only cancels: a cancelled planning returns an error wrapping
// ctx.Err() and never a plan made from a truncated search.

// workRate converts the former wall-clock budgets into work: the estimated
// multiply-adds per second the optimisers sustained on the development
// machine. It is a constant, not a measurement.
const workRate = 1e9

// workOf is the work the development machine did in seconds s.
func workOf(s float64) float64 { return s * workRate }

const (
	// chooseWork bounds the coordinate descent over optimised columns in
	// one planning pass of Choose (formerly 300 ms).
	chooseWork = 0.3 * workRate
	// smallColumnExtra is added to the work of a column of at most
	// smallColumn cells, whose search runs every pseudo-random start to its
	// tolerance within that cap (formerly 250 ms past the deadline).
	smallColumnExtra = 0.25 * workRate
	// weightsWork bounds the marginal/residual weight optimisation that
	// Choose runs for batches over different column sets (formerly 50 ms).
	weightsWork = 0.05 * workRate
	// marginalsWork bounds each of ChooseMarginals' optimisers (formerly
	// 300 ms each).
	marginalsWork = 0.3 * workRate
)

// smallColumn is the largest column whose Laplace search runs every
// pseudo-random start (laplaceStarts).
const smallColumn = 64

// columnWork is the work one column's optimiser may spend: HDMM's figures
// are passed within tens of evaluations, which cost O(p·n) each, so the
// budget grows with n² up to 1024 cells (0.6 s there) and n^2.5 beyond
// (19 s at 4096), never below 50 ms (150 ms from 128 cells) — the former
// deadlines, as work.
func columnWork(n int) float64 {
	r := float64(n) / 1024
	scale := r * r
	if r > 1 {
		scale = math.Pow(r, 2.5)
	}
	s := 0.6 * scale
	floor := 0.05
	if n >= 128 {
		floor = 0.15
	}
	return workOf(math.Max(s, floor))
}

// directWork estimates the work of evaluating the direct candidates
// (space.direct, directBase, directSplit, answerWeights): about
// directCellCost per cell of the product domain and aggregate when they
// expand aggregates densely (up to maxDenseCells cells), nothing beyond.
// It counts against chooseWork, so the coordinate descent of a batch over
// a million cells is skipped, as the former deadline skipped it there.
func (s *space) directWork() float64 {
	cells := productCells(s.w.Sizes())
	if cells > maxDenseCells {
		return 0
	}
	return directCellCost * cells * float64(s.aggregates())
}

// directCellCost is the work per cell and aggregate of the direct
// candidates, timed on a 10⁶-cell batch (75-160 ns per cell and aggregate
// on the development machine).
const directCellCost = 100

// meter counts an optimiser's work against its limit.
type meter struct {
	limit, used float64
}

// spend records work w.
func (m *meter) spend(w float64) { m.used += w }

// done reports whether the limit is reached.
func (m *meter) done() bool { return m.used >= m.limit }

// stopped returns a planning error wrapping ctx.Err() once ctx is done,
// nil before.
func stopped(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("planner: planning stopped: %w", err)
	}
	return nil
}

// mulCost estimates one product G·v in multiply-adds.
func mulCost(g Gram) float64 {
	n := float64(g.N())
	switch gg := g.(type) {
	case AllRangeGram, PrefixGram:
		return 4 * n
	case scaledGram:
		return mulCost(gg.g) + n
	case *LowRankGram:
		r := float64(len(gg.F))
		return 2*n*r + r*r + 2*n
	case interface{ mulCost() float64 }: // structured Grams of other files
		return gg.mulCost()
	}
	return n * n
}

// evalCost estimates one objective-and-gradient evaluation of the
// p-Identity objective: 2p products by G; four passes of p rows over the
// supports (S, Z, C, the gradient), vectorised kernels counted at half; the
// p×p factorisation and inverse; some sixteen plain passes of p rows over
// the n cells (G̃'s scalings, Pt, Z, diag(G̃X)); and a fixed overhead that
// dominates on short columns. The weights were fitted to timed evaluations
// on the development machine (columns of 16 to 2,048 cells, ranges,
// prefixes and compiled columns), within a factor of 1.5 either way.
func (o *pIdentity) evalCost() float64 {
	p, n := float64(o.p), float64(o.n)
	return 2*p*mulCost(o.g) + 2*p*float64(o.nnz) + p*p*p/3 + 16*p*n + evalOverhead
}

// evalOverhead is the fixed cost of one evaluation (calls, small
// allocations), as work.
const evalOverhead = 3000
