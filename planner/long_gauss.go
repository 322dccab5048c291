package planner

import (
	"context"
	"errors"
	"math"
	"sync"
)

// The Gaussian optimum of a long prefix column, without a matrix.
//
// The Gaussian strategy problem's dual (opt_gauss.go) is solved in O(n)
// per quadrature node for the prefix workload, whose G⁻¹ is tridiagonal:
// every weight vector u ≥ 0 defines the strategy X(u) = AᵀA with
// X(u) = U^{-1/2}(U^{1/2}GU^{1/2})^{1/2}U^{-1/2}, and scaled to columns of
// L2 norm 1 (X̃ = X(u)/max_i X(u)_ii) its error per unit noise variance is
//
//	trace(G X̃⁻¹) = max_i X(u)_ii · trace((U^{1/2}GU^{1/2})^{1/2})
//	             = max_i X(u)_ii · Σ_i u_i X(u)_ii,
//
// from diag(X(u)) alone. So any u is a strategy whose error is known in
// O(n·nodes); the optimiser only has to find a good u. What costs is the
// fixed point's slow phase: from the usual start it needs hundreds of
// iterations to settle the profile of u, each a pass of ~100 tridiagonal
// factorisations. The profile of the optimal u is smooth in the relative
// position i/n apart from boundary layers a few cells wide (u_0 ≈ 7.6,
// 8.5, 9.6 at 1,024, 2,048, 4,096 cells; 0.95, 0.96, 0.97 mid-column), so
// the optimum at one size, interpolated, is a near-optimal start at eight
// times the size, where a few over-relaxed steps fix the boundary layers.
// dualPrefixOption climbs from longDualBase by factors of longDualStep
// that way; every count is fixed, so the strategy never depends on the
// clock.

// longDualBase is the size solved by the usual fixed point to a certified
// gap of 1e-4 (0.26 s) before the climb.
const longDualBase = 1024

// longDualStep is the growth factor between the climb's sizes.
const longDualStep = 8

// longDualOmega over-relaxes the fixed point, u ← u∘x^ω (renormalised):
// ω = 1 is opt_gauss.go's step; ω = 3 reaches a gap of 2.3% at 8,192
// cells in 12 steps from the interpolated start, where ω = 1 stalls at 4%.
// The best iterate is kept, so an overshoot costs a step, never a plan.
const longDualOmega = 3

// longDualH and longDualTail are the climb's quadrature: relative accuracy
// about e^{-π²/h} + e^{-tail} ≈ 10⁻⁸, which changes no reported digit
// (against h = 0.3 and tails of 32: equal to five digits at 8,760 and 2²⁰
// cells) at half the nodes.
const (
	longDualH    = 0.5
	longDualTail = 21
)

// longDualSteps is the fixed-point steps at a climb size of n cells: each
// costs O(n·nodes), so the largest sizes get the fewest (8,760 cells: 12
// steps, 0.15 s; 2²⁰: 5 steps, about 10 s on one core).
func longDualSteps(n int) int {
	switch {
	case n <= 1<<14:
		return 12
	case n <= 1<<17:
		return 8
	}
	return 5
}

// errLongDual is a factorisation failure in the climb: G⁻¹ + c·U lost
// positive definiteness, which exact arithmetic rules out.
var errLongDual = errors.New("planner: long Gaussian prefix: factorisation failed")

// dualPrefixOption is the Gaussian strategy X̃(u) for the n-cell prefix
// workload, u found by the climb from base cells (see above). Its L2
// sensitivity is 1 (diag X̃ ≤ 1, with equality at the maximum) and the
// returned error is trace(G X̃⁻¹) per unit noise variance, exact to the
// quadrature's 10⁻⁸. It has no L1 sensitivity: Gaussian noise only.
func dualPrefixOption(ctx context.Context, n, base int) (*colOpt, float64, error) {
	size := min(n, base)
	u, _, cert, err := solveGaussDual(ctx, PrefixGram{Size: size}, 1e-4, &meter{limit: columnWork(size)})
	if err != nil {
		return nil, 0, err
	}
	primal := cert.Primal
	for size < n {
		size = min(size*longDualStep, n)
		u, primal, err = climbDual(ctx, PrefixGram{Size: size}, stretch(u, size), longDualSteps(size))
		if err != nil {
			return nil, 0, err
		}
	}
	o := &colOpt{name: "dual", n: n, l1: math.Inf(1), l2: 1, long: &LongStrategy{Name: "dual", Dual: u}}
	o.once.Do(func() {})
	return o, primal, nil
}

// climbDual runs steps over-relaxed fixed-point steps from u (which it
// overwrites) and returns the best iterate and its error
// max_i X(u)_ii · Σ_i u_i X(u)_ii, the first iterate included.
func climbDual(ctx context.Context, g PrefixGram, u []float64, steps int) ([]float64, float64, error) {
	t, err := gramInverse(g, gaussRidge)
	if err != nil {
		return nil, 0, err
	}
	n := g.N()
	gd := &gaussDual{t: t, g: g, n: n, gdiag: g.Diag()} // for spectrumBounds
	x := make([]float64, n)
	dd := newDualDiag(t, n)
	best, bestU := math.Inf(1), make([]float64, n)
	for step := 0; ; step++ {
		if err := stopped(ctx); err != nil {
			return nil, 0, err
		}
		lmin, lmax := gd.spectrumBounds(u)
		if !dd.fill(x, u, newQuadrature(lmin, lmax, longDualH, longDualTail)) {
			return nil, 0, errLongDual
		}
		sd, mx := 0.0, 0.0
		for i := range x {
			sd += u[i] * x[i]
			mx = math.Max(mx, x[i])
		}
		if e := mx * sd; e < best {
			best = e
			copy(bestU, u)
		}
		if step == steps {
			return bestU, best, nil
		}
		for i := range u {
			u[i] *= math.Pow(x[i], longDualOmega)
		}
		stepTo(u, u)
	}
}

// longDualShares is how many goroutines share a diagonal's quadrature
// nodes. It is fixed, not GOMAXPROCS, so the sums, added share by share in
// order, are the same on every machine.
const longDualShares = 2

// dualDiag computes diag(X(u)) = Σ_k w_k·diag((T + c_k·U)⁻¹), the nodes
// split into longDualShares contiguous shares summed concurrently and then
// in share order. Its buffers (4n floats a share) live across the steps.
type dualDiag struct {
	t     *invStructure
	acc   [longDualShares][]float64
	col   [longDualShares][]float64
	work  [longDualShares][]float64
	valid [longDualShares]bool
}

func newDualDiag(t *invStructure, n int) *dualDiag {
	dd := &dualDiag{t: t}
	for s := range longDualShares {
		dd.acc[s], dd.col[s], dd.work[s] = make([]float64, n), make([]float64, n), make([]float64, 2*n)
	}
	return dd
}

// fill sets x to diag(X(u)) over q; false when a factorisation fails.
func (dd *dualDiag) fill(x, u []float64, q quadrature) bool {
	var wg sync.WaitGroup
	per := (len(q.c) + longDualShares - 1) / longDualShares
	for s := range longDualShares {
		lo, hi := min(s*per, len(q.c)), min((s+1)*per, len(q.c))
		wg.Add(1)
		go func() {
			defer wg.Done()
			acc, col := dd.acc[s], dd.col[s]
			clear(acc)
			dd.valid[s] = false
			for k := lo; k < hi; k++ {
				if !dd.t.shiftedDiagInv(col, q.c[k], u, dd.work[s]) {
					return
				}
				for i := range acc {
					acc[i] += q.w[k] * col[i]
				}
			}
			dd.valid[s] = true
		}()
	}
	wg.Wait()
	clear(x)
	for s := range longDualShares {
		if !dd.valid[s] {
			return false
		}
		for i, v := range dd.acc[s] {
			x[i] += v
		}
	}
	return true
}

// stretch is u resampled to n cells, linear in the relative position
// (i + ½)/len: the next climb size's start.
func stretch(u []float64, n int) []float64 {
	m := len(u)
	out := make([]float64, n)
	for i := range out {
		p := (float64(i)+0.5)*float64(m)/float64(n) - 0.5
		switch j := int(math.Floor(p)); {
		case p <= 0:
			out[i] = u[0]
		case j >= m-1:
			out[i] = u[m-1]
		default:
			f := p - float64(j)
			out[i] = u[j]*(1-f) + u[j+1]*f
		}
	}
	return out
}
