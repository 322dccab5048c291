package planner

import (
	"math"
	"slices"

	"github.com/dpproxy/dpproxy/compile"
)

// aggregates is the number of measured aggregates of the batch.
func (s *space) aggregates() int {
	n := 0
	for _, q := range s.w.Queries {
		n += len(q.Aggregates)
	}
	return n
}

// space holds, per column, the candidate strategies and the distinct
// factor vectors the workload uses on that column, with their error forms
// precomputed so a Kronecker candidate is evaluated in O(terms²·columns).
type space struct {
	w    *compile.Workload
	cols []*columnSpace
	// idx[q][a][t][j] is the index of term t's factor on column j in cols[j].vecs.
	idx [][][][]int
	// grouped[q][j] reports whether query q groups by column j.
	grouped [][]bool
	// weight[q][a] is aggregate a's weight in the planning objective (see
	// answerWeights); nil when every weight is 1.
	weight [][]float64
	// reduced[j] reports that column j is the classes of a long column's
	// cells (reduce.go); nil when none is.
	reduced []bool
}

// wt is aggregate a of query q's weight.
func (s *space) wt(q, a int) float64 {
	if s.weight == nil {
		return 1
	}
	return s.weight[q][a]
}

type columnSpace struct {
	n       int
	vecs    [][]float64 // distinct factors (nil = ones)
	full    [][]float64 // the same with nil expanded
	support [][]int     // the indexes where each full vector is non-zero
	// The factors that are a constant over one run of cells, grouped
	// for addOption, and the others (space_runs.go); set by runs.
	runGroups []runGroup
	irregular []int
	runsDone  bool
	// oneCell: every row reads at most one cell of the column, so the
	// identity is its only option (readsOneCell).
	oneCell bool
	options []*colOpt
	bil     [][][]float64 // [option][u][v] = uᵀ G v, G = (AᵀA)⁻¹
	diag    [][][]float64 // [option][u][v] = Σ u_i v_i G_ii
}

func newSpace(w *compile.Workload) *space {
	s := &space{w: w}
	sizes := w.Sizes()
	for j := range w.Columns {
		s.cols = append(s.cols, &columnSpace{n: sizes[j]})
	}
	seen := make([]vecSet, len(w.Columns))
	vecIndex := func(j int, f compile.Factor) int {
		cs := s.cols[j]
		i, added := seen[j].index(cs.vecs, f)
		if added {
			cs.vecs = append(cs.vecs, f)
		}
		return i
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
		g := make([]bool, len(w.Columns))
		for _, j := range q.GroupCols {
			g[j] = true
		}
		s.grouped = append(s.grouped, g)
	}
	for j, cs := range s.cols {
		for _, v := range cs.vecs {
			if v == nil {
				v = ones(cs.n)
			}
			cs.full = append(cs.full, v)
			cs.support = append(cs.support, nonZeros(v))
		}
		cs.oneCell = s.readsOneCell(j)
		if cs.oneCell {
			// The identity is optimal for the column (see readsOneCell):
			// no other option can win, and each costs O(k²) forms.
			s.addOption(j, identityOpt(cs.n))
			continue
		}
		for _, o := range columnOptions(cs.n, func() [][]float64 { return s.columnWorkload(j) }) {
			s.addOption(j, o)
		}
	}
	return s
}

// readsOneCell reports whether every row of the workload reads at most
// one cell of column j: every query groups by j, or each of its
// aggregates' terms have their factors on j non-zero at one common cell
// at most (a DATE(ts) group over the classes of hours is one class). Then
// each row is w = e_i ⊗ v, its error under a Kronecker strategy is
// ((A_jᵀA_j)⁻¹)_ii times v's (a non-negative form), and for any A_j with
// columns of norm at most 1, ((A_jᵀA_j)⁻¹)_ii ≥ 1/‖a_i‖₂² ≥ 1/‖a_i‖₁² ≥ 1,
// the identity's: the identity is optimal for the column whatever the
// other columns' strategies.
func (s *space) readsOneCell(j int) bool {
	cs := s.cols[j]
	for q := range s.w.Queries {
		if s.grouped[q][j] {
			continue
		}
		for _, terms := range s.idx[q] {
			cell := -1
			for _, vi := range terms {
				for _, i := range cs.support[vi[j]] {
					if cell >= 0 && i != cell {
						return false
					}
					cell = i
				}
			}
		}
	}
	return true
}

// addOption appends o to column j's options (or finds it) with its error
// forms, and returns its index.
func (s *space) addOption(j int, o *colOpt) int {
	cs := s.cols[j]
	for i, x := range cs.options {
		if x == o {
			return i
		}
	}
	k := len(cs.vecs)
	b, d := make([][]float64, k), make([][]float64, k)
	h := make([]float64, cs.n)
	for u := 0; u < k; u++ {
		b[u], d[u] = make([]float64, k), make([]float64, k)
	}
	// The factors of time buckets and expression groups are sparse (an
	// hour, a day of a year of hourly bins): every sum runs over a
	// vector's support, so a column of k factors costs k products with
	// (AᵀA)⁻¹ plus k·Σ|support| instead of k²·n.
	// Interval factors (prefixes, ranges, buckets) are summed by running
	// sums instead (runForms), to the same bits.
	groups, irregular := cs.runs()
	ug := make([]float64, cs.n) // u∘diag(G), zero outside u's support
	for u := 0; u < k; u++ {
		fu := cs.full[u]
		o.mul(h, fu)
		for _, i := range cs.support[u] {
			ug[i] = fu[i] * o.diag[i]
		}
		runForms(groups, u, h, ug, b, d)
		for _, v := range irregular {
			fv := cs.full[v]
			bx, dx := 0.0, 0.0
			for _, i := range cs.support[v] {
				bx += fv[i] * h[i]
				dx += fv[i] * ug[i]
			}
			b[v][u] = bx
			d[u][v] = dx
		}
		for _, i := range cs.support[u] {
			ug[i] = 0
		}
	}
	// Symmetrise the bilinear forms (uᵀGv = vᵀGu in exact arithmetic).
	for u := 0; u < k; u++ {
		for v := u + 1; v < k; v++ {
			m := 0.5 * (b[u][v] + b[v][u])
			b[u][v], b[v][u] = m, m
		}
	}
	cs.options = append(cs.options, o)
	cs.bil = append(cs.bil, b)
	cs.diag = append(cs.diag, d)
	return len(cs.options) - 1
}

// columnWorkload is the set of integer rows column j must answer: each
// distinct factor used where j is not grouped, and each single cell where
// it is. Nil when that set is no smaller than the identity.
func (s *space) columnWorkload(j int) [][]float64 {
	n := s.cols[j].n
	var rows [][]float64
	cellNeeded := make([]bool, n)
	var seen vecSet
	add := func(v []float64) {
		if _, added := seen.index(rows, v); added {
			rows = append(rows, v)
		}
	}
	for q, qu := range s.w.Queries {
		grouped := s.grouped[q][j]
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
				if len(rows) >= n {
					return nil
				}
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

// columnOptions are the integer strategies for a column: identity,
// hierarchical (b = 2, 4, 8, 16), the Haar wavelet and the column's own
// workload rows (the last two built densely, so only up to maxDenseOption
// cells). The workload rows are asked for only then: a longer column
// grouped cell by cell would build a unit vector of its length per cell
// it needs.
func columnOptions(n int, workloadRows func() [][]float64) []*colOpt {
	out := fixedOptions(n)
	if n > maxDenseOption {
		return out
	}
	if rows := workloadRows(); rows != nil {
		if cs, err := Rows("workload", n, rows); err == nil {
			out = append(out, optFromStrategy(cs))
		}
	}
	return out
}

// nonZeros lists the indexes where v is non-zero.
func nonZeros(v []float64) []int {
	var out []int
	for i, x := range v {
		if x != 0 {
			out = append(out, i)
		}
	}
	return out
}

// vecSet finds a vector among the distinct ones listed so far by hash, so
// that k vectors of length n are deduplicated in O(k·n), not O(k²·n).
type vecSet struct {
	byHash map[uint64][]int
}

// index returns v's index in list (nil is its own vector), or len(list)
// and true when v is new; the caller then appends it.
func (s *vecSet) index(list [][]float64, v []float64) (int, bool) {
	if s.byHash == nil {
		s.byHash = map[uint64][]int{}
	}
	h := uint64(1469598103934665603)
	if v == nil {
		h = 0
	}
	// Over the non-zero entries only (−0 among the zeros, as it compares):
	// the factors of time buckets are mostly zeros.
	for i, x := range v {
		if x != 0 {
			h = (h ^ uint64(i)) * 1099511628211
			h = (h ^ math.Float64bits(x)) * 1099511628211
		}
	}
	h = (h ^ uint64(len(v))) * 1099511628211
	for _, i := range s.byHash[h] {
		u := list[i]
		if (u == nil) == (v == nil) && (u == nil || slices.Equal(u, v)) {
			return i, false
		}
	}
	s.byHash[h] = append(s.byHash[h], len(list))
	return len(list), true
}
