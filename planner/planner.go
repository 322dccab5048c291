package planner

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/noise"
)

// Kind is the family of a chosen strategy.
type Kind int

const (
	// Direct measures every workload row itself (the workload as strategy):
	// each answer is its own noisy measurement.
	Direct Kind = iota
	// Kronecker measures A = A_1 ⊗ … ⊗ A_d and reconstructs the histogram by
	// least squares, x̂ = A⁺y; every answer is w·x̂.
	Kronecker
)

// Options are the privacy parameters of one batch.
type Options struct {
	Noise   catalog.NoiseFamily
	Epsilon float64 // Laplace: ε of the whole batch
	Rho     float64 // Gaussian: ρ of the whole batch
}

// Candidate is a strategy the planner considered, with its expected total
// squared error (summed over every answer of the batch) at the batch's ε or ρ.
type Candidate struct {
	Name              string
	Sensitivity       float64
	TotalSquaredError float64
}

// Plan is a chosen strategy with its noise calibration. Every answer's
// expected squared error is known from the plan alone.
type Plan struct {
	Workload *compile.Workload
	Options  Options
	Kind     Kind
	Name     string
	// Factors are the per-column matrices of a Kronecker plan.
	Factors []*ColumnStrategy
	// Scale[q][a] is the integer factor a Direct plan multiplies row (q, a) by
	// so that its measurement is integer; the answer divides it back out.
	Scale [][]float64
	// Sensitivity is Δ₁ (Laplace) or Δ₂ (Gaussian) of the measured matrix.
	Sensitivity float64
	// NoiseNum/NoiseDen is the Laplace scale t = Δ₁/ε, or the Gaussian
	// variance parameter σ² = Δ₂²/(2ρ), rounded up to a rational.
	NoiseNum, NoiseDen uint64
	// NoiseVariance is the exact variance of one discrete noise draw.
	NoiseVariance float64
	Candidates    []Candidate

	forms [][]*pairForms // Kronecker: per query, per aggregate
}

// TotalSquaredError is the expected sum of squared errors over every answer.
func (p *Plan) TotalSquaredError() float64 {
	for _, c := range p.Candidates {
		if c.Name == p.Name {
			return c.TotalSquaredError
		}
	}
	return math.NaN()
}

// Variance is the exact expected squared error of aggregate a of query q in
// the group whose cell indexes (one per group column) are group.
func (p *Plan) Variance(q, a int, group []int) float64 {
	if p.Kind == Direct {
		k := p.Scale[q][a]
		return p.NoiseVariance / (k * k)
	}
	return p.NoiseVariance * p.forms[q][a].at(p, group)
}

// Choose picks the least-error strategy for w under opt.
func Choose(w *compile.Workload, opt Options) (*Plan, error) {
	if err := opt.validate(); err != nil {
		return nil, err
	}
	s := newSpace(w)
	best := &Plan{Workload: w, Options: opt}
	bestErr := math.Inf(1)
	consider := func(name string, sens, unitErr float64) {
		if math.IsInf(unitErr, 0) || math.IsNaN(unitErr) {
			return
		}
		num, den, v := calibrate(opt, sens)
		total := v * unitErr
		best.Candidates = append(best.Candidates, Candidate{Name: name, Sensitivity: sens, TotalSquaredError: total})
		if total < bestErr {
			bestErr = total
			best.Name, best.Sensitivity, best.NoiseNum, best.NoiseDen, best.NoiseVariance = name, sens, num, den, v
		}
	}

	// The workload itself.
	scale, sens, rows, ok := s.direct(opt.Noise)
	if ok {
		unit := 0.0
		for q := range w.Queries {
			for a := range w.Queries[q].Aggregates {
				unit += float64(rows[q]) / (scale[q][a] * scale[q][a])
			}
		}
		consider("workload", sens, unit)
	}
	directName := "workload"

	// Kronecker products of per-column strategies.
	choice, err := s.searchKronecker(opt.Noise, func(c []int) {
		sens, unit := s.kronError(c, opt.Noise)
		consider(s.kronName(c), sens, unit)
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(best.Candidates, func(a, b Candidate) int {
		switch {
		case a.TotalSquaredError < b.TotalSquaredError:
			return -1
		case a.TotalSquaredError > b.TotalSquaredError:
			return 1
		}
		return 0
	})
	if len(best.Candidates) > 12 {
		keep := best.Candidates[:12]
		best.Candidates = keep
	}
	if best.Name == "" {
		return nil, fmt.Errorf("planner: no strategy answers this workload")
	}
	if best.Name == directName {
		best.Kind, best.Scale = Direct, scale
		return best, nil
	}
	best.Kind = Kronecker
	c := choice[best.Name]
	best.Factors = make([]*ColumnStrategy, len(c))
	for j, o := range c {
		best.Factors[j] = s.cols[j].options[o]
	}
	best.forms = s.pairForms(c)
	return best, nil
}

func (o Options) validate() error {
	switch o.Noise {
	case catalog.Laplace:
		if !(o.Epsilon > 0) || math.IsInf(o.Epsilon, 0) {
			return fmt.Errorf("planner: ε must be positive, got %v", o.Epsilon)
		}
	case catalog.Gaussian:
		if !(o.Rho > 0) || math.IsInf(o.Rho, 0) {
			return fmt.Errorf("planner: ρ must be positive, got %v", o.Rho)
		}
	default:
		return fmt.Errorf("planner: unknown noise family %q", o.Noise)
	}
	return nil
}

// calibrate returns the noise parameter for sensitivity sens, rounded up to
// a rational (more noise is always safe), and one draw's exact variance.
//
// Laplace: t = Δ₁/ε gives ε-DP (discrete Laplace, Canonne–Kamath–Steinke 2020).
// Gaussian: σ² = Δ₂²/(2ρ) gives ρ-zCDP (discrete Gaussian, same paper, Thm 14).
func calibrate(o Options, sens float64) (num, den uint64, variance float64) {
	if o.Noise == catalog.Laplace {
		num, den = noise.RationalAtLeast(sens / o.Epsilon)
		return num, den, noise.DiscreteLaplaceVariance(float64(num) / float64(den))
	}
	num, den = noise.RationalAtLeast(sens * sens / (2 * o.Rho))
	return num, den, noise.DiscreteGaussianVariance(float64(num) / float64(den))
}

// space holds, per column, the candidate strategies and the distinct
// factor vectors the workload uses on that column, with their error forms
// precomputed so a Kronecker candidate is evaluated in O(terms²·columns).
type space struct {
	w    *compile.Workload
	cols []*columnSpace
	// idx[q][a][t][j] is the index of term t's factor on column j in cols[j].vecs.
	idx [][][][]int
}

type columnSpace struct {
	n       int
	vecs    [][]float64 // distinct factors (nil = ones)
	options []*ColumnStrategy
	bil     [][][]float64 // [option][u][v] = uᵀ G v
	diag    [][][]float64 // [option][u][v] = Σ u_i v_i G_ii
}

func newSpace(w *compile.Workload) *space {
	s := &space{w: w}
	sizes := w.Sizes()
	for j := range w.Columns {
		s.cols = append(s.cols, &columnSpace{n: sizes[j]})
	}
	vecIndex := func(j int, f compile.Factor) int {
		cs := s.cols[j]
		for i, v := range cs.vecs {
			if (v == nil) == (f == nil) && (v == nil || slices.Equal(v, f)) {
				return i
			}
		}
		cs.vecs = append(cs.vecs, f)
		return len(cs.vecs) - 1
	}
	for _, q := range w.Queries {
		var qi [][][]int
		for _, agg := range q.Aggregates {
			var ai [][]int
			for _, t := range agg {
				ti := make([]int, len(t.Factors))
				for j, f := range t.Factors {
					ti[j] = vecIndex(j, f)
				}
				ai = append(ai, ti)
			}
			qi = append(qi, ai)
		}
		s.idx = append(s.idx, qi)
	}
	for j, cs := range s.cols {
		cs.options = columnOptions(cs.n, s.columnWorkload(j))
		for _, o := range cs.options {
			k := len(cs.vecs)
			b, d := make([][]float64, k), make([][]float64, k)
			for u := 0; u < k; u++ {
				b[u], d[u] = make([]float64, k), make([]float64, k)
				for v := 0; v < k; v++ {
					b[u][v] = o.bilinear(cs.vecs[u], cs.vecs[v])
					d[u][v] = o.diagonal(cs.vecs[u], cs.vecs[v])
				}
			}
			cs.bil = append(cs.bil, b)
			cs.diag = append(cs.diag, d)
		}
	}
	return s
}

// columnWorkload is the set of integer rows column j must answer: each
// distinct factor used where j is not grouped, and each single cell where
// it is. Nil when that set is no smaller than the identity.
func (s *space) columnWorkload(j int) [][]float64 {
	n := s.cols[j].n
	var rows [][]float64
	cellNeeded := make([]bool, n)
	add := func(v []float64) {
		for _, r := range rows {
			if slices.Equal(r, v) {
				return
			}
		}
		rows = append(rows, v)
	}
	for q, qu := range s.w.Queries {
		grouped := slices.Contains(qu.GroupCols, j)
		for a := range qu.Aggregates {
			for _, ti := range s.idx[q][a] {
				f := s.cols[j].vecs[ti[j]]
				if grouped {
					for i := 0; i < n; i++ {
						if f == nil || f[i] != 0 {
							cellNeeded[i] = true
						}
					}
					continue
				}
				v := make([]float64, n)
				for i := range v {
					v[i] = 1
					if f != nil {
						v[i] = f[i]
					}
				}
				k, ok := integerScale(v)
				if !ok {
					return nil
				}
				for i := range v {
					v[i] *= k
				}
				add(v)
			}
		}
	}
	for i, need := range cellNeeded {
		if need {
			e := make([]float64, n)
			e[i] = 1
			add(e)
		}
	}
	if len(rows) >= n {
		return nil
	}
	return rows
}

func columnOptions(n int, workloadRows [][]float64) []*ColumnStrategy {
	var out []*ColumnStrategy
	add := func(cs *ColumnStrategy, err error) {
		if err == nil {
			out = append(out, cs)
		}
	}
	add(Identity(n))
	for _, b := range []int{2, 4, 8, 16} {
		if n > b {
			add(Hierarchical(n, b))
		}
	}
	if n > 2 {
		add(Wavelet(n))
	}
	if workloadRows != nil {
		add(Rows("workload", n, workloadRows))
	}
	return out
}

// maxEnumerate bounds exhaustive search over per-column choices; beyond it
// the planner does coordinate descent.
const maxEnumerate = 4096

// searchKronecker visits candidate per-column choices and returns the
// choices by strategy name.
func (s *space) searchKronecker(fam catalog.NoiseFamily, visit func([]int)) (map[string][]int, error) {
	byName := map[string][]int{}
	seen := func(c []int) {
		cp := slices.Clone(c)
		name := s.kronName(cp)
		if _, ok := byName[name]; ok {
			return
		}
		byName[name] = cp
		visit(cp)
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
		return byName, nil
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
	return byName, nil
}

func (s *space) score(c []int, fam catalog.NoiseFamily) float64 {
	sens, unit := s.kronError(c, fam)
	return sens * sens * unit
}

func (s *space) kronName(c []int) string {
	parts := make([]string, len(c))
	for j, o := range c {
		parts[j] = s.w.Columns[j].Name + ":" + s.cols[j].options[o].Name
	}
	return "kron(" + strings.Join(parts, " ⊗ ") + ")"
}

// kronError returns the sensitivity of ⊗A_j and the total error per unit
// noise variance: Σ over every workload row w of w(AᵀA)⁺wᵀ.
func (s *space) kronError(c []int, fam catalog.NoiseFamily) (float64, float64) {
	sens := 1.0
	for j, o := range c {
		cs := s.cols[j].options[o]
		if fam == catalog.Gaussian {
			sens *= cs.L2
		} else {
			sens *= cs.L1
		}
	}
	unit := 0.0
	for q, qu := range s.w.Queries {
		for a, agg := range qu.Aggregates {
			for t := range agg {
				for u := range agg {
					p := agg[t].Coef * agg[u].Coef
					for j, o := range c {
						ct := s.cols[j]
						x, y := s.idx[q][a][t][j], s.idx[q][a][u][j]
						if slices.Contains(qu.GroupCols, j) {
							p *= ct.diag[o][x][y]
						} else {
							p *= ct.bil[o][x][y]
						}
					}
					unit += p
				}
			}
		}
	}
	return sens, unit
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
						if !slices.Contains(qu.GroupCols, j) {
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

func (pf *pairForms) at(p *Plan, group []int) float64 {
	qu := p.Workload.Queries[pf.q]
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
				x *= vt * vu * p.Factors[j].Gram.At(i, i)
			}
			v += x
		}
	}
	return v
}

// integerScale finds the smallest k ≤ 64 such that k·v is integer.
func integerScale(v []float64) (float64, bool) {
	for k := 1.0; k <= 64; k++ {
		ok := true
		for _, x := range v {
			if y := k * x; math.Abs(y-math.Round(y)) > 1e-9 {
				ok = false
				break
			}
		}
		if ok {
			return k, true
		}
	}
	return 0, false
}

// maxDenseCells bounds exact enumeration of the product domain when
// computing the direct strategy's sensitivity; beyond it a safe upper bound
// is used.
const maxDenseCells = 1 << 22

// direct computes, for measuring the workload rows themselves, each
// aggregate's integer scale, the sensitivity, and each query's group count.
// Within one query the groups partition the cells, so a cell's column norm
// sums over aggregates and queries only.
func (s *space) direct(fam catalog.NoiseFamily) (scale [][]float64, sens float64, rows []int, ok bool) {
	w := s.w
	sizes := w.Sizes()
	n := w.Cells()
	var acc []float64
	if n <= maxDenseCells {
		acc = make([]float64, n)
	}
	bound := 0.0
	for _, q := range w.Queries {
		rows = append(rows, q.Groups(w))
		var qs []float64
		for _, agg := range q.Aggregates {
			if acc != nil {
				vals := Dense(agg, sizes)
				k, good := integerScale(vals)
				if !good {
					return nil, 0, nil, false
				}
				qs = append(qs, k)
				for i, v := range vals {
					if fam == catalog.Gaussian {
						acc[i] += k * k * v * v
					} else {
						acc[i] += k * math.Abs(v)
					}
				}
				continue
			}
			// Large domain: scale from the factors, bound from term maxima.
			k := 1.0
			m := 0.0
			for _, t := range agg {
				p := math.Abs(t.Coef)
				for _, f := range t.Factors {
					if f != nil {
						fk, good := integerScale(f)
						if !good {
							return nil, 0, nil, false
						}
						k = math.Max(k, fk)
						mx := 0.0
						for _, x := range f {
							mx = math.Max(mx, math.Abs(x))
						}
						p *= mx
					}
				}
				m += p
			}
			qs = append(qs, k)
			if fam == catalog.Gaussian {
				bound += k * k * m * m
			} else {
				bound += k * m
			}
		}
		scale = append(scale, qs)
	}
	if acc != nil {
		for _, v := range acc {
			bound = math.Max(bound, v)
		}
		if fam == catalog.Gaussian {
			bound = math.Sqrt(bound)
		}
	} else if fam == catalog.Gaussian {
		bound = math.Sqrt(bound)
	}
	if bound == 0 {
		bound = 1 // every row is identically zero; any positive calibration is safe
	}
	return scale, bound, rows, true
}

// Dense expands a structured linear query over the product domain
// (row-major, last column fastest).
func Dense(l compile.Linear, sizes []int) []float64 {
	n := 1
	for _, s := range sizes {
		n *= s
	}
	out := make([]float64, n)
	cell := make([]int, len(sizes))
	for i := 0; i < n; i++ {
		out[i] = l.Eval(cell)
		for j := len(sizes) - 1; j >= 0; j-- {
			cell[j]++
			if cell[j] < sizes[j] {
				break
			}
			cell[j] = 0
		}
	}
	return out
}
