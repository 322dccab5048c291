package planner

import (
	"fmt"
	"math"
	"slices"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
)

// Planning long columns over the classes of cells the batch tells apart.
//
// Five years of hourly bins are 43,824 cells, but a one-week hourly panel
// reads 168 of them, one per answer, and a year of DATE(ts) reads 8,760 in
// 365 runs of 24 with equal weights. Every candidate the planner scores
// (the workload itself, identity, hierarchical, optimised strategies)
// costs at least O(n) per factor vector of the column, so before
// planning, a long column that no query groups cell by cell is replaced by
// its classes: cells whose values agree in every factor of every term of
// the batch share a class, and cells where every factor is 0 (outside
// every WHERE, and the dropped cell) belong to no class. The batch is
// planned as a workload over the classes (compress.go's algebra, with P
// the r × n partition matrix, a column of zeros for a cell in no class):
//
//   - Workload rows: a factor f on the column is f_r·P, f_r its value per
//     class, since f is constant on each class and 0 outside them.
//   - Sensitivity. A strategy A_r over the classes measures A = A_r·P:
//     column i of A is column c(i) of A_r, or 0 for a cell in no class, so
//     its largest column L1 and L2 norms are A_r's. Equivalently A·x =
//     A_r·(P·x), the histogram summed per class, where each row of the
//     table lies in one cell, hence in at most one class: adding or
//     removing a row (or a privacy unit's rows, already bounded in the
//     histogram) changes P·x by at most what it changes x. The noise is
//     calibrated to A_r's norms, which are A's: nothing changes in the
//     privacy argument of the plan's Kind. The workload itself (Direct) is
//     the same matrix over either domain: its rows are w_r·P.
//   - Error. With D = PPᵀ = diag(class sizes), A⁺ = Pᵀ·D⁻¹·A_r⁺ on the
//     classes' span, and for every row w = w_r·P, w·A⁺·y = w_r·A_r⁺·y and
//     w·(AᵀA)⁺·wᵀ = w_r·(A_rᵀA_r)⁻¹·w_rᵀ: every answer and every variance
//     (hence EXPLAIN's) is the reduced problem's, exactly.
//
// The plan is returned over the batch's own workload (reduction.restore):
// a Direct plan is unchanged (its scale and sensitivity are the reduced
// ones), a Kronecker plan's factor on a reduced column becomes A_r·P with
// the reconstruction Pᵀ·D⁻¹·A_r⁺, kept in class form (expandFactor). Marginal plans
// are not planned over classes: when the reduced batch would consider
// them, or its product domain is over the cell limit, the batch is planned
// as compiled.

// reduceAbove is the shortest column planned over its classes: shorter
// columns keep every cell (their plans, and what EXPLAIN shows of them,
// are as before).
const reduceAbove = longColumn

// reduction maps a batch's workload to the one over the classes of its
// long columns.
type reduction struct {
	w *compile.Workload // the batch as compiled
	// classOf[j] is each cell's class on column j (-1: in no class), nil
	// for a column kept whole; classes[j] is the class count.
	classOf [][]int
	classes []int
}

// reduceLong returns w over the classes of its long columns and the
// reduction, or nil when no column gets fewer cells.
func reduceLong(w *compile.Workload) (*compile.Workload, *reduction) {
	red := &reduction{w: w, classOf: make([][]int, len(w.Columns)), classes: make([]int, len(w.Columns))}
	some := false
	for j, c := range w.Columns {
		n := c.Size()
		if n <= reduceAbove || groupedBy(w, j) {
			continue
		}
		classOf, r := cellClasses(w, j, n)
		if r == 0 || r >= n {
			continue
		}
		red.classOf[j], red.classes[j], some = classOf, r, true
	}
	if !some {
		return nil, nil
	}
	rw := *w
	rw.Columns = slices.Clone(w.Columns)
	for j, c := range w.Columns {
		if red.classOf[j] == nil {
			continue
		}
		r := red.classes[j]
		rw.Columns[j] = &catalog.Column{Name: fmt.Sprintf("%s[%d classes]", c.Name, r), Kind: catalog.IntegerRange, Min: 0, Max: int64(r - 1), Width: 1}
	}
	reps := make([][]int, len(w.Columns))
	for j, classOf := range red.classOf {
		if classOf == nil {
			continue
		}
		reps[j] = make([]int, red.classes[j])
		for i := len(classOf) - 1; i >= 0; i-- {
			if c := classOf[i]; c >= 0 {
				reps[j][c] = i
			}
		}
	}
	// Factors shared between terms (and queries) stay shared.
	reduced := map[*float64][]float64{}
	rw.Queries = make([]*compile.Query, len(w.Queries))
	for q, qu := range w.Queries {
		cp := *qu
		cp.Aggregates = make([]compile.Linear, len(qu.Aggregates))
		for a, agg := range qu.Aggregates {
			terms := make(compile.Linear, len(agg))
			for t, term := range agg {
				fs := slices.Clone(term.Factors)
				for j, f := range fs {
					if f == nil || reps[j] == nil {
						continue
					}
					fr, ok := reduced[&f[0]]
					if !ok {
						fr = make([]float64, len(reps[j]))
						for c, i := range reps[j] {
							fr[c] = f[i]
						}
						reduced[&f[0]] = fr
					}
					fs[j] = fr
				}
				terms[t] = compile.Term{Coef: term.Coef, Factors: fs}
			}
			cp.Aggregates[a] = terms
		}
		rw.Queries[q] = &cp
	}
	return &rw, red
}

// groupedBy reports whether some query of w groups by column j cell by
// cell (its groups are the column's cells: nothing to merge).
func groupedBy(w *compile.Workload, j int) bool {
	for _, q := range w.Queries {
		if slices.Contains(q.GroupCols, j) {
			return true
		}
	}
	return false
}

// cellClasses partitions column j's n cells by their values in every
// factor of w on the column, in order of first cell; a cell where every
// factor is 0 gets -1 (an all-ones factor puts every cell in a class).
// The factors of time buckets are sparse, so a cell's signature is the
// list of its non-zero (factor, value) pairs, built in one pass per
// distinct factor.
func cellClasses(w *compile.Workload, j, n int) ([]int, int) {
	var distinct [][]float64
	var seen vecSet
	ones := false
	for _, q := range w.Queries {
		for _, agg := range q.Aggregates {
			for _, t := range agg {
				f := t.Factors[j]
				if f == nil {
					ones = true
					continue
				}
				if _, added := seen.index(distinct, f); added {
					distinct = append(distinct, f)
				}
			}
		}
	}
	type entry struct {
		f int
		v float64
	}
	sig := make([][]entry, n)
	hash := make([]uint64, n)
	for k, f := range distinct {
		for i, v := range f {
			if v != 0 {
				sig[i] = append(sig[i], entry{k, v})
				hash[i] = (hash[i]^uint64(k)*0x9e3779b97f4a7c15^math.Float64bits(v+0))*1099511628211 + 1
			}
		}
	}
	same := func(rep, i int) bool { return slices.Equal(sig[rep], sig[i]) }
	return hashClasses(hash, same, func(i int) cellClass {
		if len(sig[i]) == 0 && !ones {
			return classNone
		}
		return classShared
	})
}

// restore sets a plan made over the reduced workload to the batch's own
// (see the comment at the top of the file).
func (red *reduction) restore(p *Plan) {
	p.Workload = red.w
	if p.Kind != Kronecker || p.Factors == nil {
		return
	}
	for j, classOf := range red.classOf {
		if classOf != nil {
			p.Factors[j] = expandFactor(p.Factors[j], classOf)
		}
	}
}

// expandFactor is cs, a strategy over r classes, over the column's cells
// in class form (ColumnStrategy.Classes): A = A_r·P and A⁺ = Pᵀ·D⁻¹·A_r⁺,
// kept as A_r, A_r⁺ and the class map, never as m × n matrices. The n × n
// error form is never built either: the plan's variances are the reduced
// plan's forms.
func expandFactor(cs *ColumnStrategy, classOf []int) *ColumnStrategy {
	return &ColumnStrategy{Name: cs.Name, A: cs.A, Pinv: cs.Pinv, L1: cs.L1, L2: cs.L2, Grid: cs.Grid, Classes: classOf}
}
