package planner

import (
	"math"
	"slices"
	"strings"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
)

// maxEnumerate bounds exhaustive search over per-column choices; beyond it
// the planner does coordinate descent.
const maxEnumerate = 4096

// searchKronecker visits candidate per-column choices and returns the
// choices by strategy name and the best choice found.
func (s *space) searchKronecker(fam catalog.NoiseFamily, visit func([]int)) (map[string][]int, []int) {
	byName := map[string][]int{}
	var best []int
	bestScore := math.Inf(1)
	seen := func(c []int) {
		cp := slices.Clone(c)
		name := s.kronName(cp)
		if _, ok := byName[name]; ok {
			return
		}
		byName[name] = cp
		visit(cp)
		if v := s.score(cp, fam); v < bestScore {
			bestScore, best = v, cp
		}
	}
	total := 1
	for _, cs := range s.cols {
		total *= len(cs.options)
		if total > maxEnumerate {
			break
		}
	}
	d := len(s.cols)
	if total <= maxEnumerate {
		c := make([]int, d)
		var rec func(j int)
		rec = func(j int) {
			if j == d {
				seen(c)
				return
			}
			for o := range s.cols[j].options {
				c[j] = o
				rec(j + 1)
			}
		}
		rec(0)
		return byName, best
	}
	// Coordinate descent from the all-identity choice.
	c := make([]int, d)
	cur := s.score(c, fam)
	seen(c)
	for sweep := 0; sweep < 4; sweep++ {
		improved := false
		for j := 0; j < d; j++ {
			for o := range s.cols[j].options {
				old := c[j]
				c[j] = o
				if v := s.score(c, fam); v < cur {
					cur, improved = v, true
					seen(c)
				} else {
					c[j] = old
				}
			}
		}
		if !improved {
			break
		}
	}
	return byName, best
}

func (s *space) score(c []int, fam catalog.NoiseFamily) float64 {
	sens, unit := s.kronError(c, fam)
	return sens * sens * unit
}

func (s *space) kronName(c []int) string {
	parts := make([]string, len(c))
	for j, o := range c {
		parts[j] = s.w.Columns[j].Name + ":" + s.cols[j].options[o].name
	}
	return "kron(" + strings.Join(parts, " ⊗ ") + ")"
}

// kronError returns the sensitivity of ⊗A_j and the total error per unit
// noise variance: Σ over every workload row w of w(AᵀA)⁺wᵀ. For a query
// grouped on a set of columns, the rows are agg∘e_g over the groups g, and
// Σ_g (agg∘e_g)ᵀ(⊗G_j)(agg∘e_g) factors over columns into bilinear forms
// (ungrouped columns) and diagonal forms (grouped ones).
func (s *space) kronError(c []int, fam catalog.NoiseFamily) (float64, float64) {
	sens, _, unit := s.kronErrors(c, fam)
	return sens, unit
}

// kronErrors is kronError with both the unweighted error (what is
// reported) and the weighted one (what is minimised; see answerWeights).
func (s *space) kronErrors(c []int, fam catalog.NoiseFamily) (sens, unit, weighted float64) {
	sens = 1.0
	for j, o := range c {
		sens *= s.cols[j].options[o].sens(fam == catalog.Gaussian)
	}
	for q, qu := range s.w.Queries {
		for a, agg := range qu.Aggregates {
			sum := 0.0
			for t := range agg {
				for u := range agg {
					p := agg[t].Coef * agg[u].Coef
					for j, o := range c {
						ct := s.cols[j]
						x, y := s.idx[q][a][t][j], s.idx[q][a][u][j]
						if s.grouped[q][j] {
							p *= ct.diag[o][x][y]
						} else {
							p *= ct.bil[o][x][y]
						}
					}
					sum += p
				}
			}
			unit += sum
			weighted += s.wt(q, a) * sum
		}
	}
	return sens, unit, weighted
}

// kronApply returns the function that sets a plan to the Kronecker
// product c: its error forms and, unless the plan is light, its factors'
// matrices.
func (s *space) kronApply(c []int) func(p *Plan) error {
	return func(p *Plan) error {
		p.Kind = Kronecker
		p.diags = make([][]float64, len(c))
		p.forms = s.pairForms(c)
		for j, o := range c {
			p.diags[j] = s.cols[j].options[o].diag
		}
		if p.light {
			return nil // the error forms only: no matrices
		}
		p.Factors = make([]*ColumnStrategy, len(c))
		for j, o := range c {
			opt := s.cols[j].options[o]
			cs, err := opt.strategy()
			if err != nil {
				return err
			}
			p.Factors[j] = cs
			p.Grid *= cs.Grid
		}
		return nil
	}
}

// effectiveGram is column j's Gram matrix with the other columns' choices
// in c fixed: kronError is linear in column j's form G_j = (A_jᵀA_j)⁻¹,
//
//	unit = Σ_{q,a,t,s} c_t c_s Π_{l≠j} F_l(t,s) · F_j(t,s),
//
// with F_j(t,s) = u_tjᵀG_j u_sj (column j not grouped in q) or
// Σ_i u_tj,i u_sj,i (G_j)_ii (grouped), so unit = trace(G_j^eff·G_j) with
//
//	G_j^eff = Σ K_uv u·vᵀ + diag(Σ K'_uv u∘v),
//
// K collecting the weights c_t c_s Π_{l≠j}F_l of the pairs whose factors
// on column j are (u, v). The Gram is low rank (the column's distinct
// factors) plus diagonal (its group-by terms). For the optimiser's
// objective the other columns' sensitivities are a constant factor.
func (s *space) effectiveGram(j int, c []int, gauss bool) *LowRankGram {
	cs := s.cols[j]
	k := len(cs.vecs)
	K := make([][]float64, k)
	for u := range K {
		K[u] = make([]float64, k)
	}
	var dg []float64
	for q, qu := range s.w.Queries {
		for a, agg := range qu.Aggregates {
			for t := range agg {
				for u := range agg {
					p := s.wt(q, a) * agg[t].Coef * agg[u].Coef
					for l, o := range c {
						if l == j {
							continue
						}
						cl := s.cols[l]
						x, y := s.idx[q][a][t][l], s.idx[q][a][u][l]
						if s.grouped[q][l] {
							p *= cl.diag[o][x][y]
						} else {
							p *= cl.bil[o][x][y]
						}
					}
					if p == 0 {
						continue
					}
					x, y := s.idx[q][a][t][j], s.idx[q][a][u][j]
					if s.grouped[q][j] {
						if dg == nil {
							dg = make([]float64, cs.n)
						}
						fx, fy := cs.full[x], cs.full[y]
						for i := range dg {
							dg[i] += p * fx[i] * fy[i]
						}
					} else {
						K[x][y] += p
					}
				}
			}
		}
	}
	// Normalise (the optimum is scale-invariant) so equal shapes share a key.
	scale := 0.0
	for u := range K {
		for v := range K[u] {
			scale = math.Max(scale, math.Abs(K[u][v]))
		}
	}
	for _, x := range dg {
		scale = math.Max(scale, math.Abs(x))
	}
	if scale > 0 {
		for u := range K {
			for v := range K[u] {
				K[u][v] = roundSig(K[u][v] / scale)
			}
		}
		for i := range dg {
			dg[i] = roundSig(dg[i] / scale)
		}
	}
	return NewLowRankGram(cs.n, cs.vecs, K, dg)
}

// roundSig rounds to 12 significant digits, so effective Grams that differ
// only by floating-point noise share a cache key.
func roundSig(x float64) float64 {
	if x == 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		return x
	}
	e := math.Floor(math.Log10(math.Abs(x)))
	p := math.Pow(10, 11-e)
	return math.Round(x*p) / p
}

// worthOptimising reports whether column j's workload can gain from an
// optimised strategy: the column is long enough (≥ 8 cells) and its
// effective workload is neither a single vector (measured best by itself)
// nor one cell per row, by grouping or by its factors (measured best by
// the identity).
func (s *space) worthOptimising(j int) bool {
	cs := s.cols[j]
	if cs.n < 8 || cs.oneCell {
		// Every row reads at most one cell of j (every query groups by
		// it, or a DATE(ts) group over the classes of hours): the
		// identity is optimal for it (readsOneCell). Optimising would only
		// cost time (a GROUP BY ts over a month of five years of hours
		// took seconds expanding it).
		return false
	}
	grouped := false
	for q := range s.w.Queries {
		grouped = grouped || s.grouped[q][j]
	}
	nonOnes := 0
	for _, v := range cs.vecs {
		if v != nil {
			nonOnes++
		}
	}
	if grouped {
		return nonOnes > 0
	}
	return len(cs.vecs) > 2
}

// pairForms holds, for one (query, aggregate) of a Kronecker plan, what is
// needed to evaluate one group's variance: the product over non-grouped
// columns for each pair of terms.
type pairForms struct {
	q, a  int
	coefK [][]float64
}

func (s *space) pairForms(c []int) [][]*pairForms {
	out := make([][]*pairForms, len(s.w.Queries))
	for q, qu := range s.w.Queries {
		for a, agg := range qu.Aggregates {
			pf := &pairForms{q: q, a: a, coefK: make([][]float64, len(agg))}
			for t := range agg {
				pf.coefK[t] = make([]float64, len(agg))
				for u := range agg {
					p := agg[t].Coef * agg[u].Coef
					for j, o := range c {
						if !s.grouped[q][j] {
							p *= s.cols[j].bil[o][s.idx[q][a][t][j]][s.idx[q][a][u][j]]
						}
					}
					pf.coefK[t][u] = p
				}
			}
			out[q] = append(out[q], pf)
		}
	}
	return out
}

// at evaluates the form for one group, with diags[j] the diagonal of
// column j's error form.
func (pf *pairForms) at(w *compile.Workload, diags [][]float64, group []int) float64 {
	qu := w.Queries[pf.q]
	agg := qu.Aggregates[pf.a]
	v := 0.0
	for t := range agg {
		for u := range agg {
			x := pf.coefK[t][u]
			for gi, j := range qu.GroupCols {
				i := group[gi]
				ft, fu := agg[t].Factors[j], agg[u].Factors[j]
				vt, vu := 1.0, 1.0
				if ft != nil {
					vt = ft[i]
				}
				if fu != nil {
					vu = fu[i]
				}
				x *= vt * vu * diags[j][i]
			}
			v += x
		}
	}
	return v
}
