package compile

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/parser"
)

// maxTabulate bounds the cell tuples one expression is evaluated on: the
// product of the domains of the columns it reads.
const maxTabulate = 1 << 20

// maxWork bounds the cell tuples a whole batch evaluates expressions on,
// so that no statement keeps the proxy busy for long.
const maxWork = 1 << 23

// maxIndicators bounds the entries of the expression groups' indicators a
// batch compiles (each group's is dense over the cells the expression
// reads): 2²⁷ entries, 1 GiB. DATE(ts) over five years of hourly bins is
// 1,826 × 43,824 = 80M entries and answers in about a second; over a year
// of minutes it would be 365 × 525,600 = 192M, and 4,096 groups over 2²⁰
// cells 32 GiB, which would take the proxy down rather than answer.
const maxIndicators = 1 << 27

// enumerate calls f on every cell tuple of the batch columns cols
// (increasing axis indexes), row-major, last column fastest, with the
// tuple's position i and whether one of its cells is a dropped cell.
func (c *compiler) enumerate(cols []int, what string, f func(i int, en env, dropped bool) error) (int, error) {
	n := 1
	sizes := make([]int, len(cols))
	for k, j := range cols {
		sizes[k] = c.w.Columns[j].Size()
		n *= sizes[k]
		if n > maxTabulate {
			var names []string
			for _, j := range cols {
				names = append(names, c.w.Columns[j].Name)
			}
			return 0, parser.Errorf(parser.CodeDPRefused, "%s reads %s, whose domains together have more than %d cells; write it over fewer or smaller columns", what, strings.Join(names, ", "), maxTabulate)
		}
	}
	c.work += n
	if c.work > maxWork {
		return 0, parser.Errorf(parser.CodeDPRefused, "the batch evaluates its expressions on more than %d cell tuples of the domain; split it, or write its expressions over fewer columns", maxWork)
	}
	idx := make([]int, len(cols))
	en := env{}
	for i := 0; i < n; i++ {
		dropped := false
		for k, j := range cols {
			dropped = dropped || c.cells[j][idx[k]].Kind == catalog.CellDropped
			en[c.w.Columns[j].Name] = c.vals[j][idx[k]]
		}
		if err := f(i, en, dropped); err != nil {
			if what == "" {
				return 0, err // raw: the caller explains
			}
			return 0, c.explainSplit(what, err)
		}
		for k := len(cols) - 1; k >= 0; k-- {
			idx[k]++
			if idx[k] < sizes[k] {
				break
			}
			idx[k] = 0
		}
	}
	return n, nil
}

// tabulate evaluates f on every cell tuple of the batch columns cols
// (see enumerate). Tuples with a dropped cell get 0: every query that
// reads the column weighs them 0.
func (c *compiler) tabulate(cols []int, what string, f func(en env) (float64, error)) ([]float64, error) {
	var out []float64
	n := 1
	for _, j := range cols {
		n *= c.w.Columns[j].Size()
	}
	if n <= maxTabulate {
		out = make([]float64, n)
	}
	_, err := c.enumerate(cols, what, func(i int, en env, dropped bool) error {
		if dropped {
			return nil
		}
		v, err := f(en)
		out[i] = v
		return err
	})
	return out, err
}

// explainSplit turns a splitError into the refusal that names the bin and
// the edges to use instead.
func (c *compiler) explainSplit(what string, err error) error {
	var se *splitError
	if !errors.As(err, &se) {
		return err
	}
	col := c.w.Table.Column(se.col)
	if col == nil || se.cell < 0 || se.cell >= len(col.Cells()) {
		return parser.Errorf(parser.CodeDPRefused, "%s is not constant on the rows of one domain cell; the histogram cannot answer it", what)
	}
	cell := col.Cells()[se.cell]
	if col.Kind == catalog.TimeRange {
		return parser.Errorf(parser.CodeDPRefused, "%s is finer than the bins of %s (width %s): it splits the bin [%s, %s); group by buckets of %s or coarser and bound times on bin edges (bins start at %s, every %s)",
			what, col.Name, col.FormatWidth(), catalog.FormatTime(int64(cell.Lo), col.DateOnly), catalog.FormatTime(int64(cell.Hi), col.DateOnly),
			col.FormatWidth(), catalog.FormatTime(col.Min, col.DateOnly), col.FormatWidth())
	}
	return parser.Errorf(parser.CodeDPRefused, "%s splits the bin [%s, %s) of %s; the histogram cannot answer it. Use bin edges (%s)", what, fmtNum(cell.Lo), fmtNum(cell.Hi), col.Name, edgeList(col))
}

// toLinear writes a table over the batch columns cols as a structured
// linear query: a sum of Kronecker terms, built by splitting the table
// along the axis with the fewest distinct slices, recursively.
func (c *compiler) toLinear(cols []int, vals []float64) (Linear, error) {
	d := len(c.w.Columns)
	sizes := make([]int, len(cols))
	for k, j := range cols {
		sizes[k] = c.w.Columns[j].Size()
	}
	var out Linear
	for _, t := range decompose(sizes, vals) {
		term := Term{Coef: t.coef, Factors: make([]Factor, d)}
		for k, j := range cols {
			term.Factors[j] = canonical(t.factors[k])
		}
		out = append(out, term)
		if len(out) > maxTerms {
			return nil, parser.Errorf(parser.CodeDPRefused, "an expression over several columns needs more than %d product terms; split the query or use fewer columns per expression", maxTerms)
		}
	}
	return simplify(out), nil
}

type localTerm struct {
	coef    float64
	factors [][]float64
}

// decompose writes vals (over the product of sizes, row-major) as a sum of
// outer products, skipping zero slices.
func decompose(sizes []int, vals []float64) []localTerm {
	allZero := true
	for _, v := range vals {
		if v != 0 {
			allZero = false
			break
		}
	}
	if allZero {
		return nil
	}
	switch len(sizes) {
	case 0:
		return []localTerm{{coef: vals[0]}}
	case 1:
		return []localTerm{{coef: 1, factors: [][]float64{slices.Clone(vals)}}}
	}
	// The axis whose slices take the fewest distinct values.
	best, bestN := 0, math.MaxInt
	for a := range sizes {
		seen := map[string]bool{}
		for i := 0; i < sizes[a]; i++ {
			seen[sliceKey(sliceAxis(sizes, vals, a, i))] = true
		}
		if len(seen) < bestN {
			best, bestN = a, len(seen)
		}
	}
	rest := append(slices.Clone(sizes[:best]), sizes[best+1:]...)
	type group struct {
		ind   []float64
		slice []float64
	}
	var groups []*group
	byKey := map[string]*group{}
	for i := 0; i < sizes[best]; i++ {
		s := sliceAxis(sizes, vals, best, i)
		k := sliceKey(s)
		g, ok := byKey[k]
		if !ok {
			g = &group{ind: make([]float64, sizes[best]), slice: s}
			byKey[k] = g
			groups = append(groups, g)
		}
		g.ind[i] = 1
	}
	var out []localTerm
	for _, g := range groups {
		for _, t := range decompose(rest, g.slice) {
			f := make([][]float64, 0, len(sizes))
			f = append(f, t.factors[:best]...)
			f = append(f, g.ind)
			f = append(f, t.factors[best:]...)
			out = append(out, localTerm{coef: t.coef, factors: f})
		}
	}
	return out
}

// sliceAxis is the sub-table at index i of axis a.
func sliceAxis(sizes []int, vals []float64, a, i int) []float64 {
	inner := 1
	for _, s := range sizes[a+1:] {
		inner *= s
	}
	outer := len(vals) / (inner * sizes[a])
	out := make([]float64, 0, outer*inner)
	for o := 0; o < outer; o++ {
		base := (o*sizes[a] + i) * inner
		out = append(out, vals[base:base+inner]...)
	}
	return out
}

func sliceKey(s []float64) string {
	var b strings.Builder
	for _, v := range s {
		fmt.Fprintf(&b, "%g,", v)
	}
	return b.String()
}
