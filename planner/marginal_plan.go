package planner

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/catalog"
)

// MarginalStrategy measures a weighted union of marginals: for each set S
// of the workload's columns (a bitmask, bit j for column j) the marginal
// of the histogram on S — one row per combination of S's cells, summing
// over the other columns — multiplied by the integer weight k_S.
//
// Sensitivity: a cell lies in exactly one row of each block, with
// coefficient k_S, so the largest column norm is Δ₁ = Σ_S k_S (Laplace) or
// Δ₂ = √Σ_S k_S² (Gaussian); changing one row of the table moves one cell
// by one, so the measurement moves by at most Δ in that norm.
//
// Error: with P0 = J/n and P1 = I − P0 per column and E_T = ⊗_{j∈T}P1
// ⊗_{j∉T}P0, AᵀA = Σ_T λ_T E_T with λ_T = Σ_{S⊇T} k_S² Π_{j∉S} n_j (see
// marginals.go), so least squares is x̂ = Σ_{λ_T>0} E_T·Aᵀy/λ_T and an
// answer w has variance σ²·Σ_T w·E_T·wᵀ/λ_T — computed factor by factor,
// never over the product domain's N × N matrices.
type MarginalStrategy struct {
	Sets    []uint
	Weights []float64 // integer k_S ≥ 1, parallel to Sets
	// Lambda[T] is AᵀA's eigenvalue on E_T, for every T ⊆ the columns.
	Lambda []float64
}

// marginalForms holds what one E_T contributes to every answer's variance.
type marginalForms struct {
	lambda float64
	forms  [][]*pairForms // per query, per aggregate
	diags  [][]float64    // per column: diag of P0 or P1
}

// maxMarginalColumns bounds the columns of a marginal candidate: planning
// costs O(4^d).
const maxMarginalColumns = 10

// supports returns the maximal column sets the workload's queries touch
// (grouped columns, and columns where some term is not constant ones): a
// union of marginals on them answers every query. Nil when one set covers
// every query, where a marginal strategy is a Kronecker one.
func (s *space) supports() []uint {
	d := len(s.cols)
	if d < 2 || d > maxMarginalColumns {
		return nil
	}
	var sets []uint
	for q, qu := range s.w.Queries {
		if !qu.Measured() {
			continue // answered exactly from the domain: nothing to support
		}
		var m uint
		for j := 0; j < d; j++ {
			if s.grouped[q][j] {
				m |= 1 << j
			}
		}
		for a := range qu.Aggregates {
			for _, ti := range s.idx[q][a] {
				for j, x := range ti {
					if s.cols[j].vecs[x] != nil {
						m |= 1 << j
					}
				}
			}
		}
		if !slices.Contains(sets, m) {
			sets = append(sets, m)
		}
	}
	var maximal []uint
	for _, a := range sets {
		covered := false
		for _, b := range sets {
			if a != b && a&b == a {
				covered = true
				break
			}
		}
		if !covered {
			maximal = append(maximal, a)
		}
	}
	if len(maximal) < 2 {
		return nil
	}
	slices.Sort(maximal)
	return maximal
}

// projectionOption is P0 = J/n (upper) or P1 = I − J/n as a column "form":
// marginal plans evaluate w·E_T·wᵀ with the same bilinear and diagonal
// machinery as Kronecker ones.
func projectionOption(n int, upper bool) *colOpt {
	d := make([]float64, n)
	for i := range d {
		d[i] = 1 - 1/float64(n)
		if !upper {
			d[i] = 1 / float64(n)
		}
	}
	return &colOpt{name: fmt.Sprintf("P%d", map[bool]int{false: 0, true: 1}[upper]), n: n, diag: d,
		mul: func(dst, v []float64) {
			mean := 0.0
			for _, x := range v {
				mean += x
			}
			mean /= float64(n)
			for i := range dst {
				if upper {
					dst[i] = v[i] - mean
				} else {
					dst[i] = mean
				}
			}
		}}
}

// marginalCoefficients returns, for every T, coef_T = Σ_w w·E_T·wᵀ over
// the workload's answers (and the same with answerWeights' weights, which
// the weights are optimised for), and the column choices (projection options) of
// each T. Components outside every support are zero by construction (a
// column a query does not touch contributes 1ᵀP1·1 = 0) and are set so
// exactly rather than left to rounding.
func (s *space) marginalCoefficients(sets []uint) (coef, weighted []float64, choice [][]int) {
	d := len(s.cols)
	p0, p1 := make([]int, d), make([]int, d)
	for j, cs := range s.cols {
		p0[j] = s.addOption(j, projectionOption(cs.n, false))
		p1[j] = s.addOption(j, projectionOption(cs.n, true))
	}
	coef, weighted = make([]float64, 1<<d), make([]float64, 1<<d)
	choice = make([][]int, 1<<d)
	for t := range coef {
		c := make([]int, d)
		for j := range c {
			c[j] = p0[j]
			if t&(1<<j) != 0 {
				c[j] = p1[j]
			}
		}
		choice[t] = c
		inside := false
		for _, m := range sets {
			inside = inside || uint(t)&m == uint(t)
		}
		if !inside {
			continue
		}
		_, unit, wu := s.kronErrors(c, catalog.Laplace)
		coef[t], weighted[t] = math.Max(unit, 0), math.Max(wu, 0)
	}
	return coef, weighted, choice
}

// marginalCandidate is one weighting of a union of marginals.
type marginalCandidate struct {
	name    string
	sets    []uint
	weights []float64
	lambda  []float64
	sens    float64
	unit    float64 // Σ_T coef_T/λ_T: the error per unit noise variance
	// weighted is unit with answerWeights' weights: what Choose minimises.
	weighted float64
}

// marginalCandidates plans unions of marginals for a workload whose
// queries touch different column sets: the supports themselves with equal
// weights, and weights over every subset optimised for the workload
// (OPT_M's objective with the workload's own coefficients), rounded to
// integers with no increase in sensitivity.
func (s *space) marginalCandidates(fam catalog.NoiseFamily, deadline time.Time) ([]marginalCandidate, []float64, [][]int) {
	sets := s.supports()
	if sets == nil {
		return nil, nil, nil
	}
	sizes := s.w.Sizes()
	coef, wcoef, choice := s.marginalCoefficients(sets)
	a := newMarginalAlgebraCoef(sizes, wcoef)
	unweighted := newMarginalAlgebraCoef(sizes, coef)
	l2 := fam == catalog.Gaussian
	m := 1 << a.d
	build := func(prefix string, v []float64) (marginalCandidate, bool) {
		c := marginalCandidate{lambda: a.lambda(v)}
		c.unit, c.weighted = unweighted.unit(c.lambda), a.unit(c.lambda)
		if math.IsInf(c.unit, 0) || math.IsNaN(c.unit) || math.IsInf(c.weighted, 0) || math.IsNaN(c.weighted) {
			return c, false
		}
		var parts []string
		for t := 0; t < m; t++ {
			if v[t] == 0 {
				continue
			}
			c.sets = append(c.sets, uint(t))
			c.weights = append(c.weights, v[t])
			var cols []string
			for j := range s.cols {
				if t&(1<<j) != 0 {
					cols = append(cols, s.w.Columns[j].Name)
				}
			}
			if len(cols) == 0 {
				cols = []string{"total"}
			}
			part := strings.Join(cols, "×")
			if prefix != "marginals" {
				part += fmt.Sprintf(":%g", v[t])
			}
			parts = append(parts, part)
		}
		if c.sens = weightNorm(c.weights, l2); l2 {
			c.sens = math.Sqrt(c.sens)
		}
		c.name = prefix + "(" + strings.Join(parts, ", ") + ")"
		return c, true
	}
	var out []marginalCandidate
	eq := make([]float64, m)
	for _, t := range sets {
		eq[t] = 1
	}
	if c, ok := build("marginals", eq); ok {
		out = append(out, c)
	}
	v := a.optimiseWeights(sets, l2, deadline)
	k := roundMarginalWeights(a, v, l2)
	if c, ok := build("opt-marginals", k); ok {
		// A common factor of the weights changes nothing (Δ and √λ scale
		// together): divide it out so the weights read small.
		g := 0.0
		for _, x := range c.weights {
			g = gcd(g, x)
		}
		if g > 1 {
			for i := range c.weights {
				c.weights[i] /= g
			}
			for i := range k {
				k[i] /= g
			}
			c, _ = build("opt-marginals", k)
		}
		if !slices.Equal(k, eq) { // the optimum may be the equal weighting itself
			out = append(out, c)
		}
	}
	return out, coef, choice
}

// roundMarginalWeights rounds optimised weights (Δ(v) = 1) to integers on
// the coarsest grid whose objective is within 0.1% of the finest grid's:
// the objective is flat near its optimum, and small weights read better
// in a strategy's name and the ledger.
func roundMarginalWeights(a *marginalAlgebra, v []float64, l2 bool) []float64 {
	finest := float64(gridLaplace)
	if l2 {
		finest = gridGauss
	}
	objective := func(k []float64) float64 {
		d := weightNorm(k, l2) // Δ₂², or Δ₁ to be squared
		if !l2 {
			d *= d
		}
		return d * a.unit(a.lambda(k))
	}
	best := roundColumn(v, finest, l2, -1)
	target := objective(best) * (1 + 1e-3)
	for res := 4.0; res < finest; res *= 2 {
		k := roundColumn(v, res, l2, -1)
		if objective(k) <= target {
			return k
		}
	}
	return best
}

func gcd(a, b float64) float64 {
	for b != 0 {
		a, b = b, math.Mod(a, b)
	}
	return a
}

// marginalPlanForms prepares the per-answer variance forms of a chosen
// marginal candidate: one set of pair forms per E_T with λ_T > 0 that any
// answer has a component on.
func (s *space) marginalPlanForms(c marginalCandidate, coef []float64, choice [][]int) []marginalForms {
	var out []marginalForms
	for t, lam := range c.lambda {
		if lam <= 0 || coef[t] == 0 {
			continue
		}
		mf := marginalForms{lambda: lam, forms: s.pairForms(choice[t])}
		for j, o := range choice[t] {
			mf.diags = append(mf.diags, s.cols[j].options[o].diag)
		}
		out = append(out, mf)
	}
	return out
}
