package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/planner"
)

// Session variables that set the privacy of the next batches.
const (
	VarEpsilon   = "dp_epsilon"    // ε of a batch
	VarRho       = "dp_rho"        // ρ of a batch on a Gaussian table (instead of ε)
	VarMaxStderr = "dp_max_stderr" // accuracy target: the least ε whose answers all have at most this standard error
)

// OptionRange is the closed interval a numeric privacy option must lie in.
type OptionRange struct{ Min, Max float64 }

// Contains reports whether Min ≤ v ≤ Max (false for NaN).
func (r OptionRange) Contains(v float64) bool { return v >= r.Min && v <= r.Max }

func (r OptionRange) String() string { return fmt.Sprintf("[%g, %g]", r.Min, r.Max) }

// The documented ranges of the session's privacy options (README: Session
// privacy options). They lie well inside what the exact samplers accept:
// the smallest ε gives a discrete Laplace scale Δ₁·10⁶, far below
// noise.MaxScale = 2⁶⁴ for every sensitivity the planner builds. The
// largest keep every noise variance the planner weighs representable (a
// discrete Laplace of scale 1/ε has variance about 2·e^(−ε), which float64
// loses past ε ≈ 700) — and no one spends ε = 100 on one query. A batch
// whose strategies would still need a scale beyond noise.MaxScale (tiny ρ
// with a large Gaussian sensitivity) is refused when planned (see
// planner.ErrScale).
var (
	EpsilonRange   = OptionRange{1e-6, 100}
	RhoRange       = OptionRange{1e-12, 100}
	MaxStderrRange = OptionRange{1e-6, 1e15}
)

// optionRanges maps each session variable to its range.
var optionRanges = map[string]OptionRange{VarEpsilon: EpsilonRange, VarRho: RhoRange, VarMaxStderr: MaxStderrRange}

// CheckOption validates a value assigned to a session variable (name
// without '@', any case): nil (NULL, which unsets it) and variables that
// are not privacy options are fine; a privacy option must be a number in
// its range. The MySQL front calls it when a SET assigns one, so a bad
// value is refused at once; batches check again (a value can be assigned
// in other ways). The error is a 3900 refusal naming the range.
func CheckOption(name string, value any) error {
	name = strings.ToLower(strings.TrimPrefix(name, "@"))
	r, ok := optionRanges[name]
	if !ok || value == nil {
		return nil
	}
	f, good := toFloat(value)
	if !good || !r.Contains(f) {
		return parser.Errorf(parser.CodeDPRefused, "@%s must be a number in %v, got %v", name, r, value)
	}
	return nil
}

// sessionFloat reads a numeric session variable; ok is false when unset or
// NULL. A value outside the variable's range is refused (see CheckOption).
func sessionFloat(s *Session, name string) (float64, bool, error) {
	if s.UserVar == nil {
		return 0, false, nil
	}
	v, ok := s.UserVar(name)
	if !ok || v == nil {
		return 0, false, nil
	}
	if err := CheckOption(name, v); err != nil {
		return 0, false, err
	}
	f, _ := toFloat(v)
	return f, true, nil
}

// maxEpsilon is the most one batch of this user may spend on t (0: no cap
// beyond the budgets).
func maxEpsilon(u *catalog.User, t *catalog.Table) float64 {
	m := t.Budget.MaxPerQuery
	if u != nil && u.MaxEpsilon > 0 && (m == 0 || u.MaxEpsilon < m) {
		m = u.MaxEpsilon
	}
	return m
}

// defaultEpsilon is the ε of a batch when the session sets nothing.
func defaultEpsilon(u *catalog.User, t *catalog.Table) float64 {
	if u != nil && u.DefaultEpsilon > 0 {
		return u.DefaultEpsilon
	}
	return t.Budget.DefaultPerQuery
}

// options returns the batch's privacy parameters: @dp_max_stderr first (the
// least ε meeting the target, found from the plan before anything is
// spent; the plan is returned too, and must be the one measured), else
// @dp_rho on Gaussian tables, else @dp_epsilon, else the user's or the
// table's default; all capped by the per-query maximum.
func (e *Engine) options(ctx context.Context, s *Session, t *catalog.Table, w *compile.Workload) (planner.Options, budget.Cost, *planner.Plan, error) {
	u := e.cat.User(s.User)
	target, hasTarget, err := sessionFloat(s, VarMaxStderr)
	if err != nil {
		return planner.Options{}, budget.Cost{}, nil, err
	}
	rho, hasRho, err := sessionFloat(s, VarRho)
	if err != nil {
		return planner.Options{}, budget.Cost{}, nil, err
	}
	eps, hasEps, err := sessionFloat(s, VarEpsilon)
	if err != nil {
		return planner.Options{}, budget.Cost{}, nil, err
	}
	if !hasEps {
		eps = defaultEpsilon(u, t)
	}
	var opt planner.Options
	var plan *planner.Plan
	switch {
	case hasTarget:
		plan, err = e.forTarget(ctx, t, w, target)
		if err != nil {
			return planner.Options{}, budget.Cost{}, nil, err
		}
		opt = plan.Options
	case t.Noise == catalog.Gaussian && hasRho:
		opt = planner.Options{Noise: catalog.Gaussian, Rho: rho}
	case t.Noise == catalog.Gaussian:
		opt = planner.Options{Noise: catalog.Gaussian, Rho: budget.RhoForEpsilon(eps, t.Budget.Delta)}
	default:
		opt = planner.Options{Noise: catalog.Laplace, Epsilon: eps}
	}
	opt.MaxCells = float64(t.MaxCells)        // the catalog's bound on the histograms a plan counts
	opt.Unit = planner.ContributionOf(t.Unit) // ε and ρ are per unit; the planner calibrates at row level
	// A default from the catalog, or the ρ of a default ε, must meet the
	// ranges too (forTarget keeps a target's inside them).
	switch {
	case hasTarget:
	case opt.Noise == catalog.Laplace && !EpsilonRange.Contains(opt.Epsilon):
		return planner.Options{}, budget.Cost{}, nil, parser.Errorf(parser.CodeDPRefused, "ε = %g (the default for user '%s' on table %s) is outside %v; set @dp_epsilon", opt.Epsilon, s.User, t.Name, EpsilonRange)
	case opt.Noise == catalog.Gaussian && !RhoRange.Contains(opt.Rho):
		return planner.Options{}, budget.Cost{}, nil, parser.Errorf(parser.CodeDPRefused, "ρ = %g (from ε = %g at δ = %g on table %s) is outside %v; set @dp_rho or @dp_epsilon", opt.Rho, eps, t.Budget.Delta, t.Name, RhoRange)
	}
	cost := budget.Cost{Epsilon: opt.Epsilon, Rho: opt.Rho}
	spend := budget.EpsilonFor(cost, t.Budget.Delta)
	if m := maxEpsilon(u, t); m > 0 && spend > m*(1+1e-9) {
		how := fmt.Sprintf("ε = %.6g", spend)
		switch {
		case hasTarget:
			how = fmt.Sprintf("@dp_max_stderr = %g needs ε = %.6g, which", target, spend)
		case t.Noise == catalog.Gaussian && hasRho:
			// @dp_rho applies (and so is named) on Gaussian tables only.
			how = fmt.Sprintf("@dp_rho = %g is ε = %.6g at δ = %g, which", rho, spend, t.Budget.Delta)
		default:
			how += ","
		}
		return planner.Options{}, budget.Cost{}, nil, parser.Errorf(parser.CodeDPRefused, "%s exceeds the per-query maximum ε = %g on table %s; lower it (SET @dp_epsilon = ...)", how, m, t.Name)
	}
	return opt, cost, plan, nil
}

// forTarget plans for the accuracy target: the strategy that minimises
// the largest per-answer variance and the least ε (ρ) at which every
// measured answer's expected standard error is at most target
// (planner.ForTarget), within the option's range: a target that needs more
// than its largest value is refused; one the smallest meets is planned at
// the smallest (more accurate than asked, at a negligible cost).
func (e *Engine) forTarget(ctx context.Context, t *catalog.Table, w *compile.Workload, target float64) (*planner.Plan, error) {
	p, err := e.planner.ForTarget(ctx, w, planner.Options{Noise: t.Noise, Objective: planner.ObjectiveMaxVariance, MaxCells: float64(t.MaxCells), Unit: planner.ContributionOf(t.Unit)}, target)
	if err != nil {
		return nil, e.planError(err)
	}
	if p.MaxVariance == 0 && p.Options.Epsilon+p.Options.Rho == 1 {
		// Zero at the reference ε = 1 (ρ = 1) where the search starts, not
		// a variance so small that float64 lost it.
		return nil, parser.Errorf(parser.CodeDPRefused, "@dp_max_stderr: the batch has no noisy answer to size")
	}
	name, x, r := "ε", p.Options.Epsilon, EpsilonRange
	if t.Noise == catalog.Gaussian {
		name, x, r = "ρ", p.Options.Rho, RhoRange
	}
	switch {
	case x > r.Max:
		// Past the range the search may overshoot (the discrete noise's
		// variance falls faster than 1/ε²): the largest value may do.
		o := p.Options
		if t.Noise == catalog.Gaussian {
			o.Rho = r.Max
		} else {
			o.Epsilon = r.Max
		}
		at, err := e.choose(ctx, w, o)
		if err != nil {
			return nil, err
		}
		if sd := math.Sqrt(at.MaxVariance); sd > target {
			return nil, parser.Errorf(parser.CodeDPRefused, "@dp_max_stderr = %g cannot be met: at the largest supported %s = %g this batch's expected standard error is %.6g", target, name, r.Max, sd)
		}
		return at, nil
	case x < r.Min:
		o := p.Options
		if t.Noise == catalog.Gaussian {
			o.Rho = r.Min
		} else {
			o.Epsilon = r.Min
		}
		return e.choose(ctx, w, o)
	}
	return p, nil
}

// choose plans w under opt. A privacy parameter too small for every
// strategy's sensitivity (a noise scale beyond noise.MaxScale) is refused
// with 3900: it depends only on the query, the domain and the option.
func (e *Engine) choose(ctx context.Context, w *compile.Workload, opt planner.Options) (*planner.Plan, error) {
	p, err := e.planner.Choose(ctx, w, opt)
	if errors.Is(err, planner.ErrScale) {
		what := fmt.Sprintf("ε = %g", opt.Epsilon)
		if opt.Noise == catalog.Gaussian {
			what = fmt.Sprintf("ρ = %g", opt.Rho)
		}
		return nil, parser.Errorf(parser.CodeDPRefused, "%s is too small for this batch: every strategy's sensitivity would need a noise scale of 2^64 or more; raise it", what)
	}
	if err != nil {
		return nil, e.planError(err)
	}
	return p, nil
}
