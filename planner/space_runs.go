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
	type key struct {
		lo int
		c  uint64
	}
	at := map[key]int{}
	for v, sup := range cs.support {
		lo, c, ok := interval(cs.full[v], sup)
		if !ok {
			cs.irregular = append(cs.irregular, v)
			continue
		}
		k := key{lo, math.Float64bits(c)}
		g, seen := at[k]
		if !seen {
			g = len(cs.runGroups)
			at[k] = g
			cs.runGroups = append(cs.runGroups, runGroup{lo: lo, c: c})
		}
		cs.runGroups[g].vecs = append(cs.runGroups[g].vecs, v)
		cs.runGroups[g].hi = append(cs.runGroups[g].hi, sup[len(sup)-1])
	}
	for g := range cs.runGroups {
		rg := &cs.runGroups[g]
		order := make([]int, len(rg.vecs))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return rg.hi[a] - rg.hi[b] })
		vecs, hi := make([]int, len(order)), make([]int, len(order))
		for i, o := range order {
			vecs[i], hi[i] = rg.vecs[o], rg.hi[o]
		}
		rg.vecs, rg.hi = vecs, hi
	}
	return cs.runGroups, cs.irregular
}

// interval reports whether f is one constant c on a run of cells starting
// at lo and zero elsewhere (sup: its non-zero indexes, ascending).
func interval(f []float64, sup []int) (lo int, c float64, ok bool) {
	if len(sup) == 0 || sup[len(sup)-1]-sup[0] != len(sup)-1 {
		return 0, 0, false
	}
	c = f[sup[0]]
	for _, i := range sup {
		if f[i] != c {
			return 0, 0, false
		}
	}
	return sup[0], c, true
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
