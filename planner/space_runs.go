package planner

import (
	"math"
	"slices"
)

// Interval factors. Most factors a column's workload holds are a constant
// over one run of cells: a prefix (a quantile's CDF, a cumulative chart),
// a range, a bucket of a time column, a single cell. The bilinear forms
// uᵀGv of addOption sum c·h[i] over v's run, in ascending i; for runs
// that start at the same cell with the same constant those sums are the
// running sums of one pass, read off where each run ends. So the k
// prefixes of a k-cell quantile cost O(k) per u instead of O(k²), and
// each form is the same sum, added in the same order, as the per-vector
// loop gives: the same to the bit (plans hash their matrices).

// runGroup is the interval factors that start at the same cell with the
// same constant, by where they end.
type runGroup struct {
	lo   int
	c    float64
	vecs []int // factor indexes, ascending by hi
	hi   []int // where each ends (inclusive), ascending
}

// runs splits cs's factors into groups of interval factors and the others
// (which addOption sums over their support), computed once per column.
func (cs *columnSpace) runs() ([]runGroup, []int) {
	if cs.runsDone {
		return cs.runGroups, cs.irregular
	}
	cs.runsDone = true
	lo, hi := make([]int, len(cs.support)), make([]int, len(cs.support))
	for v, sup := range cs.support {
		lo[v], hi[v] = 0, -1
		if len(sup) > 0 {
			lo[v], hi[v] = sup[0], sup[len(sup)-1]
		}
	}
	var inRun []bool
	cs.runGroups, inRun = constantRuns(cs.full, lo, hi)
	for v, in := range inRun {
		if !in {
			cs.irregular = append(cs.irregular, v)
		}
	}
	return cs.runGroups, cs.irregular
}

// nonZeroRange is f's first and last non-zero index (lo > hi when f is
// all zeros).
func nonZeroRange(f []float64) (lo, hi int) {
	lo, hi = len(f), -1
	for i, x := range f {
		if x != 0 {
			lo = min(lo, i)
			hi = i
		}
	}
	return lo, hi
}

// constantRuns groups the vectors that are one constant c on their range
// of non-zero cells [lo[v], hi[v]] (so zero outside it and nowhere zero
// inside) by where they start and their constant, each group ascending by
// where its vectors end; inRun reports which vectors are in a group.
// Shared by addOption's forms (runForms) and LowRankGram.MulVec.
func constantRuns(vecs [][]float64, lo, hi []int) (groups []runGroup, inRun []bool) {
	type key struct {
		lo int
		c  uint64
	}
	at := map[key]int{}
	inRun = make([]bool, len(vecs))
	for v, f := range vecs {
		if lo[v] > hi[v] {
			continue
		}
		c, constant := f[lo[v]], true
		for _, x := range f[lo[v] : hi[v]+1] {
			if x != c {
				constant = false
				break
			}
		}
		if !constant {
			continue
		}
		k := key{lo[v], math.Float64bits(c)}
		g, seen := at[k]
		if !seen {
			g = len(groups)
			at[k] = g
			groups = append(groups, runGroup{lo: lo[v], c: c})
		}
		groups[g].vecs = append(groups[g].vecs, v)
		inRun[v] = true
	}
	for g := range groups {
		rg := &groups[g]
		slices.SortStableFunc(rg.vecs, func(a, b int) int { return hi[a] - hi[b] })
		rg.hi = make([]int, len(rg.vecs))
		for i, v := range rg.vecs {
			rg.hi[i] = hi[v]
		}
	}
	return groups, inRun
}

// runForms sets, for every interval factor v, b[v][u] = Σ_{i∈v} c·h[i]
// and d[u][v] = Σ_{i∈v} c·ug[i], by one running sum per group.
func runForms(groups []runGroup, u int, h, ug []float64, b, d [][]float64) {
	for _, g := range groups {
		bx, dx := 0.0, 0.0
		i := g.lo
		for x, v := range g.vecs {
			for ; i <= g.hi[x]; i++ {
				bx += g.c * h[i]
				dx += g.c * ug[i]
			}
			b[v][u] = bx
			d[u][v] = dx
		}
	}
}
