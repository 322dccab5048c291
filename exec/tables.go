package exec

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/planner"
)

// Counter counts a table's rows over some of its columns: the histogram
// over the product of cols' domains (row-major, last column fastest). It
// is all exec needs from a source; a marginal plan asks for one histogram
// per column set, never the product of every column the batch touches.
type Counter interface {
	Histogram(ctx context.Context, t *catalog.Table, cols []*catalog.Column) ([]float64, error)
}

// Counts is what a plan measures: the histogram over the product domain
// of the workload's columns (Product), or, for a plan measured in marginal
// space (planner.Plan.Tables), one histogram per table, parallel to Tables.
type Counts struct {
	Product []float64
	Tables  [][]float64
}

// Fetch counts what plan p measures, and checks before anything is charged
// that every count is a non-negative integer small enough for the exact
// integer arithmetic of the measurement.
func Fetch(ctx context.Context, p *planner.Plan, c Counter) (*Counts, error) {
	w := p.Workload
	if p.Tables == nil {
		x, err := c.Histogram(ctx, w.Table, w.Columns)
		if err != nil {
			return nil, err
		}
		if len(x) != w.Cells() {
			return nil, fmt.Errorf("exec: histogram has %d cells, workload %d", len(x), w.Cells())
		}
		return &Counts{Product: x}, nil
	}
	sizes := w.Sizes()
	out := &Counts{}
	for _, cols := range p.Tables {
		cs := make([]*catalog.Column, len(cols))
		for i, j := range cols {
			cs[i] = w.Columns[j]
		}
		x, err := c.Histogram(ctx, w.Table, cs)
		if err != nil {
			return nil, err
		}
		if want := cellsOf(sizes, cols); len(x) != want {
			return nil, fmt.Errorf("exec: histogram over %v has %d cells, want %d", cols, len(x), want)
		}
		if _, err := countTotal(x); err != nil {
			return nil, err
		}
		out.Tables = append(out.Tables, x)
	}
	if p.Kind == planner.Marginal {
		if _, err := marginalTables(p, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// countsFromProduct derives a plan's tables from the product histogram.
func countsFromProduct(p *planner.Plan, x []float64) *Counts {
	c := &Counts{Product: x}
	if p.Tables == nil {
		return c
	}
	sizes := p.Workload.Sizes()
	all := make([]int, len(sizes))
	for j := range all {
		all[j] = j
	}
	for _, cols := range p.Tables {
		c.Tables = append(c.Tables, sumTo(x, all, sizes, cols))
	}
	return c
}

func cellsOf(sizes []int, cols []int) int {
	n := 1
	for _, j := range cols {
		n *= sizes[j]
	}
	return n
}

func subSizes(sizes []int, cols []int) []int {
	out := make([]int, len(cols))
	for i, j := range cols {
		out[i] = sizes[j]
	}
	return out
}

// countTotal checks that x holds non-negative integer counts whose total
// stays below 2⁵³, so that every partial sum is exact in float64.
func countTotal(x []float64) (float64, error) {
	total := 0.0
	for _, v := range x {
		if v != math.Trunc(v) || v < 0 || math.IsInf(v, 0) {
			return 0, fmt.Errorf("exec: histogram cell %v is not a count", v)
		}
		total += v
	}
	if total >= 1<<53 {
		return 0, fmt.Errorf("exec: histogram total %v too large for exact measurement", total)
	}
	return total, nil
}

// sumTo sums a tensor over columns from (ascending, with the workload's
// sizes) down to the columns to (a subset, ascending). Sums of counts are
// exact.
func sumTo(x []float64, from []int, sizes []int, to []int) []float64 {
	cur, shape := x, subSizes(sizes, from)
	for i := len(from) - 1; i >= 0; i-- {
		if !slices.Contains(to, from[i]) {
			cur, shape = contractMode(cur, shape, i, nil)
		}
	}
	if len(cur) == len(x) && &cur[0] == &x[0] {
		cur = slices.Clone(cur) // never hand out the cached histogram itself
	}
	return cur
}

// tableFor finds a counted table whose columns include cols and sums it
// down to cols.
func tableFor(p *planner.Plan, c *Counts, cols []int) ([]float64, error) {
	sizes := p.Workload.Sizes()
	for i, tc := range p.Tables {
		if isSubset(cols, tc) {
			return sumTo(c.Tables[i], tc, sizes, cols), nil
		}
	}
	return nil, fmt.Errorf("exec: no counted table covers columns %v", cols)
}

func isSubset(a, b []int) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// contractOn evaluates aggregate l of query q per group on m, a tensor
// over only the columns cols (a superset of q's support, ascending): l's
// factors outside cols are all ones and were summed away already.
func contractOn(l compile.Linear, q *compile.Query, m []float64, sizes []int, cols []int) []float64 {
	pos := make(map[int]int, len(cols))
	for i, j := range cols {
		pos[j] = i
	}
	rl := restrict(l, cols)
	groups := make([]int, len(q.GroupCols))
	for i, j := range q.GroupCols {
		groups[i] = pos[j]
	}
	return Contract(rl, m, subSizes(sizes, cols), groups)
}
