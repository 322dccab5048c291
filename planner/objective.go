package planner

import (
	"context"
	"fmt"
	"math"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
)

// Objective is what a plan minimises.
type Objective int

const (
	// ObjectiveFair (the default) weighs every answer against its own
	// scale: it minimises Σ over the batch's answers of
	//
	//	mean over the answer's groups of Var / v_alone,
	//
	// v_alone the variance the answer would have if it were measured alone
	// at the batch's ε (ρ): the workload row itself, calibrated to its
	// largest absolute value m (a COUNT m = 1, a SUM of incomes up to
	// 500,000 m = 500,000). An answer is an output column of a query (a
	// GROUP BY's column counts once, its groups averaged), so neither a
	// large scale nor many groups lets one answer own the objective. An AVG
	// is one answer S/C whose error is ≈ (Var S + m²·Var C)/C² with m the
	// midpoint of the column's range, so its SUM weighs 1/v_alone and its
	// COUNT m²/v_alone, v_alone being the AVG measured alone (S and C with
	// their best shares: (a_S^⅔ + a_C^⅔)³ for Laplace, (a_S + a_C)² for
	// Gaussian, a_S = max|S|, a_C = m·max|C|, times the unit noise). With
	// Q answers, measuring each alone at ε/Q gives each Q²·v_alone; the
	// objective's optimum is never worse in total, and a shared strategy
	// usually makes every answer better than that fair share.
	ObjectiveFair Objective = iota
	// ObjectiveTotal minimises the total squared error over every answer
	// (each AVG's COUNT weighted by m²): dpproxy's objective before
	// ObjectiveFair, which lets a large-scale answer (a SUM) take the
	// budget from a small one (a COUNT). Kept for comparison.
	ObjectiveTotal
	// ObjectiveMaxVariance minimises the largest variance of any measured
	// answer (of an AVG, its SUM and its COUNT): with an accuracy target
	// (@dp_max_stderr) the least ε meeting it is the ε at which the
	// largest standard error equals it.
	ObjectiveMaxVariance
)

func (o Objective) String() string {
	switch o {
	case ObjectiveFair:
		return "fair"
	case ObjectiveTotal:
		return "total"
	case ObjectiveMaxVariance:
		return "max-variance"
	}
	return fmt.Sprintf("Objective(%d)", int(o))
}

// Describe says in words what the objective's value is, for EXPLAIN.
func (o Objective) Describe() string {
	switch o {
	case ObjectiveFair:
		return "Σ over answers of variance ÷ variance measured alone at this ε (1 per answer is the ideal)"
	case ObjectiveTotal:
		return "total squared error, each AVG's COUNT weighted by its midpoint²"
	case ObjectiveMaxVariance:
		return "largest variance of one answer"
	}
	return o.String()
}

// answerWeights weights each aggregate's error in the objective the
// planner minimises (see Objective); nil means every weight is 1.
// Reported errors stay unweighted.
func (s *space) answerWeights(opt Options) [][]float64 {
	w := s.w
	switch opt.Objective {
	case ObjectiveMaxVariance:
		return nil // chooseMinMax reweights
	case ObjectiveTotal:
		var out [][]float64
		trivial := true
		for _, q := range w.Queries {
			ws := make([]float64, len(q.Aggregates))
			for a := range ws {
				ws[a] = 1
			}
			for _, it := range q.Items {
				m := (it.Lo + it.Hi) / 2
				if m*m == 0 || math.IsInf(m, 0) || math.IsNaN(m) {
					continue
				}
				switch it.Kind {
				case compile.ItemRatio: // AVG = S/N: N·δ ≈ δS − m·δN
					for e := 0; e < q.ExprCount(); e++ {
						ws[q.Agg(it.Den, e)] += m * m
					}
					trivial = false
				case compile.ItemVariance:
					// N·δV ≈ δQ − 2m·δS − m²·δN (Q the SUM of squares, S
					// the SUM, N the COUNT, m the mean, taken as the
					// midpoint of the values' range).
					for e := 0; e < q.ExprCount(); e++ {
						ws[q.Agg(it.Agg, e)] += 4 * m * m
						ws[q.Agg(it.Den, e)] += m * m * m * m
					}
					trivial = false
				}
			}
			out = append(out, ws)
		}
		if trivial {
			return nil
		}
		return out
	}
	maxAbs := s.aggregateMax()
	gauss := opt.Noise == catalog.Gaussian
	alone := func(delta float64) float64 {
		if calibratable(opt, delta) {
			_, _, v := calibrate(opt, delta)
			return v
		}
		if gauss {
			return delta * delta / (2 * opt.Rho)
		}
		return 2 * delta * delta / (opt.Epsilon * opt.Epsilon)
	}
	out := make([][]float64, len(w.Queries))
	for q, qu := range w.Queries {
		ws := make([]float64, len(qu.Aggregates))
		// The answers of an aggregate are its rows that are not zero by
		// construction (each expression group's aggregate has its own).
		rows := func(a int) float64 { return math.Max(1, float64(qu.LiveRows(w, a))) }
		for _, it := range qu.Items {
			for e := 0; e < qu.ExprCount(); e++ {
				switch it.Kind {
				case compile.ItemAgg:
					a := qu.Agg(it.Agg, e)
					if m := maxAbs[q][a]; m > 0 {
						ws[a] += 1 / (rows(a) * alone(m))
					}
				case compile.ItemRatio:
					num, den := qu.Agg(it.Agg, e), qu.Agg(it.Den, e)
					mid := math.Abs(it.Lo+it.Hi) / 2
					if math.IsInf(mid, 0) || math.IsNaN(mid) {
						mid = 0
					}
					as, ac := maxAbs[q][num], mid*maxAbs[q][den]
					delta := as + ac
					if !gauss {
						delta = math.Pow(math.Cbrt(as*as)+math.Cbrt(ac*ac), 1.5)
					}
					if delta > 0 {
						v := rows(den) * alone(delta)
						ws[num] += 1 / v
						ws[den] += mid * mid / v
					}
				}
			}
		}
		// An aggregate no item reads (a variance's parts) still counts as
		// an answer of its own.
		for a := range ws {
			if m := maxAbs[q][a]; ws[a] == 0 && m > 0 {
				ws[a] = 1 / (rows(a) * alone(m))
			}
		}
		out[q] = ws
	}
	return out
}

// aggregateMax is each aggregate's largest absolute value over the cells
// (exact up to maxDenseCells cells, beyond that the bound Σ_terms
// |coef|·Π max|f|, which is exact for the counts and sums of one column).
func (s *space) aggregateMax() [][]float64 {
	w := s.w
	sizes := w.Sizes()
	dense := productCells(sizes) <= maxDenseCells
	out := make([][]float64, len(w.Queries))
	for q, qu := range w.Queries {
		out[q] = make([]float64, len(qu.Aggregates))
		for a, agg := range qu.Aggregates {
			m := 0.0
			if dense {
				for _, v := range Dense(agg, sizes) {
					m = math.Max(m, math.Abs(v))
				}
			} else {
				for _, t := range agg {
					p := math.Abs(t.Coef)
					for _, f := range t.Factors {
						if f == nil {
							continue
						}
						mx := 0.0
						for _, x := range f {
							mx = math.Max(mx, math.Abs(x))
						}
						p *= mx
					}
					m += p
				}
			}
			out[q][a] = m
		}
	}
	return out
}

// minMaxRounds bounds the reweighting rounds of chooseMinMax.
const minMaxRounds = 8

// chooseMinMax minimises the largest per-answer variance. For fixed
// weights on the aggregates Choose minimises a weighted total, and
// max_answers Var = max over weightings of the weighted mean; so the
// planner reweights multiplicatively — each aggregate's weight times its
// largest variance (in the weighted optimum) over the batch's largest —
// for up to minMaxRounds rounds or until the aggregates' maxima agree
// within 1%, and keeps, of every round's finalists, the plan with the
// least largest variance. The first round, with equal weights, is the
// total-error plan, and the fair plan competes too, so the result is never
// worse than either.
func (pl *Planner) chooseMinMax(ctx context.Context, w *compile.Workload, opt Options) (*Plan, error) {
	weights := make([][]float64, len(w.Queries))
	for q, qu := range w.Queries {
		weights[q] = make([]float64, len(qu.Aggregates))
		for a := range weights[q] {
			weights[q][a] = 1
		}
	}
	var best *Plan
	for round := 0; round < minMaxRounds; round++ {
		p, per, err := pl.choose(ctx, w, opt, weights)
		if err != nil {
			return nil, err
		}
		if best == nil || p.MaxVariance < best.MaxVariance*(1-1e-9) {
			best = p
		}
		m := 0.0
		for _, r := range per {
			for _, v := range r {
				m = math.Max(m, v)
			}
		}
		if !(m > 0) {
			break
		}
		balanced := true
		top := 0.0
		for q := range per {
			for a, v := range per[q] {
				if v > 0 {
					balanced = balanced && v >= 0.99*m
					weights[q][a] *= v / m
					top = math.Max(top, weights[q][a])
				}
			}
		}
		if balanced {
			break
		}
		for q := range weights {
			for a := range weights[q] {
				weights[q][a] /= top
			}
		}
	}
	// The fair plan competes too: it sometimes balances answers of
	// different sizes better than reweighting reaches in a few rounds.
	fair := opt
	fair.Objective = ObjectiveFair
	p, _, err := pl.choose(ctx, w, fair, nil)
	if err := stopped(ctx); err != nil {
		return nil, err
	}
	if err == nil && p.MaxVariance < best.MaxVariance*(1-1e-9) {
		p.Options = opt
		best = p
	}
	return best, nil
}

// aggregateMaxVariances is, per query and aggregate, the largest variance
// over its groups.
func aggregateMaxVariances(p *Plan) [][]float64 {
	w := p.Workload
	out := make([][]float64, len(w.Queries))
	for q, qu := range w.Queries {
		out[q] = make([]float64, len(qu.Aggregates))
		group := make([]int, len(qu.GroupCols))
		n := qu.Groups(w)
		for a := range qu.Aggregates {
			m := 0.0
			for g := 0; g < n; g++ {
				if !qu.IsLive(a, g) {
					continue // zero by construction: exact
				}
				qu.GroupCells(w, g, group)
				m = math.Max(m, p.Variance(q, a, group))
			}
			out[q][a] = m
		}
	}
	return out
}

// maxVariance is the largest variance of any answer of the plan.
func maxVariance(p *Plan) float64 {
	m := 0.0
	for _, r := range aggregateMaxVariances(p) {
		for _, v := range r {
			m = math.Max(m, v)
		}
	}
	return m
}
