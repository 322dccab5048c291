package planner

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/catalog"
)

// GramPlan is the outcome of planning a workload given by its Gram matrix.
type GramPlan struct {
	Options Options
	// Candidates lists every strategy tried, least error first.
	Candidates []Candidate
	// Factors are the best candidate's per-column strategies (Kronecker
	// workloads; nil for marginal ones). A long column's entry is nil and
	// its strategy is in Long.
	Factors []*ColumnStrategy
	// Long[j] is column j's structured strategy when it is longer than
	// longColumn (nil otherwise, and nil when no column is).
	Long []*LongStrategy
	// SVDBound is the lower bound (Σσ(W))²/N on the error per unit noise
	// variance of any strategy with unit sensitivity (see SVDBound).
	SVDBound float64
	// Seconds is the total planning time.
	Seconds float64
}

// Best is the least-error candidate.
func (p *GramPlan) Best() Candidate { return p.Candidates[0] }

// colEval is one column option with its error on the column's Gram and
// the time it took to build and evaluate.
type colEval struct {
	opt     *colOpt
	err     float64 // trace(G·(AᵀA)⁻¹)
	seconds float64
	gap     float64
}

// traceWith is trace(G·(AᵀA)⁻¹) through the option's error form.
func traceWith(g Gram, o *colOpt) float64 {
	if o.cs != nil && o.cs.Gram != nil {
		return traceProduct(g, o.cs.Gram)
	}
	if o.cs != nil && o.cs.gramFactor != nil {
		return traceFactor(g, o.cs.gramFactor)
	}
	n := g.N()
	if o.name == "identity" {
		s := 0.0
		for _, v := range g.Diag() {
			s += v
		}
		return s
	}
	e := make([]float64, n)
	col := make([]float64, n)
	gcol := make([]float64, n)
	s := 0.0
	for i := 0; i < n; i++ {
		e[i] = 1
		o.mul(col, e)
		e[i] = 0
		g.MulVec(gcol, col)
		s += gcol[i]
	}
	return s
}

// fixedOptions are the integer strategies tried on every column: identity,
// hierarchical with branching 2, 4, 8, 16 and (for n ≤ maxDenseOption) the
// Haar wavelet, whose error form is only available densely.
func fixedOptions(n int) []*colOpt {
	out := []*colOpt{identityOpt(n)}
	for _, b := range []int{2, 4, 8, 16} {
		if n > b {
			out = append(out, hierOpt(n, b))
		}
	}
	if n > 2 && n <= maxDenseOption {
		if cs, err := Wavelet(n); err == nil {
			out = append(out, optFromStrategy(cs))
		}
	}
	return out
}

// maxDenseOption bounds the column size for options built densely
// (O(n³)); longer columns use only the structured ones.
const maxDenseOption = 512

// ChooseKronecker plans the workload whose Gram matrix is ⊗_j grams[j] —
// a product of per-column workloads such as all 2D ranges — trying, per
// column, the integer families and the optimised strategy (Laplace:
// p-Identity; Gaussian: the certified convex optimum), and the Kronecker
// products of each family across columns plus the best per-column mix.
// Errors factor: trace(⊗G_j (⊗A_jᵀA_j)⁻¹) = Π_j trace(G_j(A_jᵀA_j)⁻¹).
// Each column's optimiser runs within columnWork(n). A cancelled ctx stops
// it with an error wrapping ctx.Err().
func (pl *Planner) ChooseKronecker(ctx context.Context, grams []Gram, opt Options) (*GramPlan, error) {
	if err := opt.validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	gauss := opt.Noise == catalog.Gaussian
	plan := &GramPlan{Options: opt}
	var err error
	if plan.SVDBound, err = SVDBound(grams...); err != nil {
		return nil, err
	}
	cols := make([][]colEval, len(grams))
	for j, g := range grams {
		if cols[j], err = pl.evalColumn(ctx, g, opt.Noise); err != nil {
			return nil, err
		}
	}
	// Uniform families.
	for _, o := range cols[0] {
		choice := make([]colEval, len(grams))
		ok := true
		for j := range grams {
			k := slices.IndexFunc(cols[j], func(c colEval) bool { return c.opt.name == o.opt.name })
			if k < 0 {
				ok = false
				break
			}
			choice[j] = cols[j][k]
		}
		if ok {
			plan.addProduct(choice)
		}
	}
	// Per-column best (the product's error factors, so this is optimal
	// over the options up to the discreteness of the noise).
	best := make([]colEval, len(grams))
	for j := range grams {
		bv := math.Inf(1)
		for _, c := range cols[j] {
			s := c.opt.sens(gauss)
			if v := s * s * c.err; v < bv {
				bv, best[j] = v, c
			}
		}
	}
	plan.addProduct(best)
	slices.SortStableFunc(plan.Candidates, func(a, b Candidate) int {
		return cmp.Compare(a.TotalSquaredError, b.TotalSquaredError)
	})
	// Materialise the best candidate's factors.
	bestName := plan.Candidates[0].Name
	for j := range grams {
		var pick *colOpt
		for _, c := range cols[j] {
			cand := c.opt.name
			if len(grams) == 1 && cand == bestName || strings.Contains(bestName, cand) && (len(grams) == 1 || matchesFactor(bestName, j, cand)) {
				pick = c.opt
				break
			}
		}
		if pick == nil {
			return nil, fmt.Errorf("planner: lost the factors of %s", bestName)
		}
		if pick.long != nil {
			if plan.Long == nil {
				plan.Long = make([]*LongStrategy, len(grams))
			}
			plan.Long[j] = pick.long
			plan.Factors = append(plan.Factors, nil)
			continue
		}
		cs, err := pick.strategy()
		if err != nil {
			return nil, err
		}
		plan.Factors = append(plan.Factors, cs)
	}
	plan.Seconds = time.Since(start).Seconds()
	return plan, nil
}

// evalColumn evaluates the integer families and the optimised strategy
// (within columnWork(n)) on one column's Gram.
//
// A prefix column longer than longColumn is evaluated on structured
// strategies only (evalLongPrefix), never as n×n matrices.
func (pl *Planner) evalColumn(ctx context.Context, g Gram, fam catalog.NoiseFamily) ([]colEval, error) {
	var out []colEval
	n := g.N()
	if _, prefix := g.(PrefixGram); prefix && n > longColumn {
		return pl.evalLongPrefix(ctx, n, fam)
	}
	for _, o := range fixedOptions(n) {
		if err := stopped(ctx); err != nil {
			return nil, err
		}
		t0 := time.Now()
		e := traceWith(g, o)
		out = append(out, colEval{opt: o, err: e, seconds: time.Since(t0).Seconds()})
	}
	t0 := time.Now()
	if err := stopped(ctx); err != nil {
		return nil, err
	}
	o, info, err := pl.optimised(ctx, g, fam, columnWork(n))
	if err != nil {
		return nil, err
	}
	if o != nil {
		ce := colEval{opt: o, err: traceWith(g, o), seconds: time.Since(t0).Seconds()}
		if info.cert != nil {
			ce.gap = info.cert.Gap
		}
		if info.seconds == 0 {
			ce.seconds = time.Since(t0).Seconds()
		}
		out = append(out, ce)
	}
	return out, nil
}

// addProduct adds the Kronecker product of one option per column as a
// candidate, unless a candidate of its name is in already. Its error is
// the product of the columns' errors.
func (p *GramPlan) addProduct(choice []colEval) {
	opt := p.Options
	gauss := opt.Noise == catalog.Gaussian
	sens, unit, secs, gap := 1.0, 1.0, 0.0, 0.0
	names := make([]string, len(choice))
	for j, c := range choice {
		sens *= c.opt.sens(gauss)
		unit *= c.err
		secs += c.seconds
		names[j] = c.opt.name
		if c.gap > 0 {
			gap = (1+gap)*(1+c.gap) - 1
		}
	}
	name := names[0]
	if len(names) > 1 {
		name = "kron(" + strings.Join(names, " ⊗ ") + ")"
	}
	for _, c := range p.Candidates {
		if c.Name == name {
			return
		}
	}
	_, _, v := calibrate(opt, sens)
	p.Candidates = append(p.Candidates, Candidate{
		Name: name, Sensitivity: sens, TotalSquaredError: v * unit,
		Unit: sens * sens * unit, Seconds: secs, Gap: gap,
	})
}

// matchesFactor reports whether the j-th factor of "kron(a ⊗ b ⊗ ...)" is name.
func matchesFactor(kron string, j int, name string) bool {
	inner := strings.TrimSuffix(strings.TrimPrefix(kron, "kron("), ")")
	parts := strings.Split(inner, " ⊗ ")
	return j < len(parts) && parts[j] == name
}
