package planner

import (
	"context"
	"math"
)

// projOpts are projLBFGS's settings.
type projOpts struct {
	maxIter  int
	memory   int
	relTol   float64 // stop when the relative decrease over `patience` iterations is below this
	patience int
	upper    float64 // upper bound on every variable (0: none)
	evalCost float64 // estimated work of one evaluation of fg
	work     *meter  // charged for every evaluation and step; nil: no limit
}

// projLBFGS minimises f over the box [0, upper]ⁿ with a projected
// limited-memory BFGS method: variables at the bound whose gradient pushes
// outward are frozen for the step, the two-loop recursion gives a
// quasi-Newton direction on the rest, and a backtracking (Armijo) search
// runs along the projected path P(x + αd). It is the bound-constrained
// counterpart of gonum's optimize.LBFGS, which has no bounds.
//
// fg returns f(x) and writes ∇f(x) into grad. x is updated in place; the
// best value found is returned with the number of evaluations. The run
// stops at its tolerance, after maxIter iterations, or when o.work is
// spent (each evaluation costs o.evalCost, each step its own O(memory·n)),
// so where it stops depends on the problem alone. A cancelled ctx stops it
// with an error (the caller must not use x then).
//
// It is one function of some 195 lines on purpose: one iteration's state
// (x, its gradient and value, the free set, the memory pairs) flows through
// the direction (the two-loop recursion), the projected line search and
// the memory update, in the textbook's order; split, each part would take
// and return most of that state.
func projLBFGS(ctx context.Context, fg func(x, grad []float64) float64, x []float64, o projOpts) (float64, int, error) {
	n := len(x)
	if o.memory == 0 {
		o.memory = 12
	}
	if o.patience == 0 {
		o.patience = 10
	}
	ub := math.Inf(1)
	if o.upper > 0 {
		ub = o.upper
	}
	clamp := func(v float64) float64 { return math.Min(math.Max(v, 0), ub) }
	for i := range x {
		x[i] = clamp(x[i])
	}
	work := o.work
	if work == nil {
		work = &meter{limit: math.Inf(1)}
	}
	g := make([]float64, n)
	f := fg(x, g)
	evals := 1
	work.spend(o.evalCost)
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return f, evals, nil
	}
	type pair struct {
		s, y []float64
		rho  float64
	}
	var mem []pair
	d := make([]float64, n)
	xn := make([]float64, n)
	gn := make([]float64, n)
	alpha := make([]float64, o.memory)
	free := make([]bool, n)
	hist := []float64{f}
	for it := 0; it < o.maxIter; it++ {
		if err := stopped(ctx); err != nil {
			return f, evals, err
		}
		if work.done() {
			break
		}
		work.spend(float64((4*len(mem) + 12) * n))
		// Free variables.
		for i := range x {
			free[i] = !(x[i] <= 0 && g[i] > 0) && !(x[i] >= ub && g[i] < 0)
		}
		for i := range d {
			if free[i] {
				d[i] = -g[i]
			} else {
				d[i] = 0
			}
		}
		// Two-loop recursion on the free subspace.
		for j := len(mem) - 1; j >= 0; j-- {
			p := mem[j]
			a := 0.0
			for i := range d {
				if free[i] {
					a += p.s[i] * d[i]
				}
			}
			a *= p.rho
			alpha[j] = a
			for i := range d {
				if free[i] {
					d[i] -= a * p.y[i]
				}
			}
		}
		gamma := 1.0
		if len(mem) > 0 {
			p := mem[len(mem)-1]
			gamma = 1 / (p.rho * dot(p.y, p.y))
		} else {
			gn2 := 0.0
			for i := range d {
				gn2 += d[i] * d[i]
			}
			// First step: move the largest coordinate by about 1% of the scale of x.
			xs := 0.0
			for _, v := range x {
				xs = math.Max(xs, math.Abs(v))
			}
			if gn2 > 0 {
				gamma = 0.01 * math.Max(xs, 1) / math.Sqrt(gn2)
			}
		}
		for i := range d {
			d[i] *= gamma
		}
		for j := 0; j < len(mem); j++ {
			p := mem[j]
			b := 0.0
			for i := range d {
				if free[i] {
					b += p.y[i] * d[i]
				}
			}
			b *= p.rho
			for i := range d {
				if free[i] {
					d[i] += (alpha[j] - b) * p.s[i]
				}
			}
		}
		for i := range d {
			if !free[i] {
				d[i] = 0
			}
		}
		gd := dot(g, d)
		if !(gd < 0) {
			// Not a descent direction: restart from steepest descent.
			mem = mem[:0]
			for i := range d {
				if free[i] {
					d[i] = -g[i]
				}
			}
			gd = dot(g, d)
			if !(gd < 0) {
				break
			}
		}
		// Backtracking along the projected path.
		step := 1.0
		var fn float64
		accepted := false
		for ls := 0; ls < 30; ls++ {
			if ls > 0 {
				if err := stopped(ctx); err != nil {
					return f, evals, err
				}
			}
			for i := range x {
				xn[i] = clamp(x[i] + step*d[i])
			}
			fn = fg(xn, gn)
			evals++
			work.spend(o.evalCost)
			dec := 0.0
			for i := range x {
				dec += g[i] * (xn[i] - x[i])
			}
			if fn <= f+1e-4*dec && !math.IsNaN(fn) {
				accepted = true
				break
			}
			if math.IsInf(fn, 1) || math.IsNaN(fn) {
				step *= 0.1
			} else {
				// Quadratic interpolation, safeguarded.
				den := 2 * (fn - f - step*gd)
				ns := 0.5 * step
				if den > 0 {
					ns = math.Min(math.Max(-gd*step*step/den, 0.1*step), 0.5*step)
				}
				step = ns
			}
		}
		if !accepted {
			if len(mem) == 0 {
				break
			}
			mem = mem[:0]
			continue
		}
		s := make([]float64, n)
		y := make([]float64, n)
		for i := range x {
			s[i] = xn[i] - x[i]
			y[i] = gn[i] - g[i]
		}
		sy := dot(s, y)
		if sy > 1e-12*math.Sqrt(dot(s, s)*dot(y, y)) {
			if len(mem) == o.memory {
				copy(mem, mem[1:])
				mem = mem[:o.memory-1]
			}
			mem = append(mem, pair{s, y, 1 / sy})
		}
		copy(x, xn)
		copy(g, gn)
		f = fn
		hist = append(hist, f)
		if k := len(hist) - 1 - o.patience; k >= 0 && hist[k]-f <= o.relTol*math.Abs(f) {
			break
		}
	}
	return f, evals, nil
}
