package engine

import (
	"fmt"
	"math"

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

// sessionFloat reads a numeric session variable; ok is false when unset or NULL.
func sessionFloat(s *Session, name string) (float64, bool, error) {
	if s.UserVar == nil {
		return 0, false, nil
	}
	v, ok := s.UserVar(name)
	if !ok || v == nil {
		return 0, false, nil
	}
	f, good := toFloat(v)
	if !good || !(f > 0) || math.IsInf(f, 0) {
		return 0, false, parser.Errorf(parser.CodeDPRefused, "@%s must be a positive number, got %v", name, v)
	}
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
func (e *Engine) options(s *Session, t *catalog.Table, w *compile.Workload) (planner.Options, budget.Cost, *planner.Plan, error) {
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
		plan, err = e.forTarget(t, w, target)
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
	opt.MaxCells = float64(t.MaxCells) // the catalog's bound on the histograms a plan counts
	cost := budget.Cost{Epsilon: opt.Epsilon, Rho: opt.Rho}
	spend := budget.EpsilonFor(cost, t.Budget.Delta)
	if m := maxEpsilon(u, t); m > 0 && spend > m*(1+1e-9) {
		how := fmt.Sprintf("ε = %.6g", spend)
		switch {
		case hasTarget:
			how = fmt.Sprintf("@dp_max_stderr = %g needs ε = %.6g, which", target, spend)
		case hasRho:
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
// (planner.ForTarget).
func (e *Engine) forTarget(t *catalog.Table, w *compile.Workload, target float64) (*planner.Plan, error) {
	p, err := e.planner.ForTarget(w, planner.Options{Noise: t.Noise, Objective: planner.ObjectiveMaxVariance, MaxCells: float64(t.MaxCells)}, target)
	if err != nil {
		return nil, e.planError(err)
	}
	if p.MaxVariance == 0 {
		return nil, parser.Errorf(parser.CodeDPRefused, "@dp_max_stderr: the batch has no noisy answer to size")
	}
	return p, nil
}
