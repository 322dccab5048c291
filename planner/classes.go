package planner

import (
	"math"

	"github.com/dpproxy/dpproxy/measure"
)

// Classes partitions each column of a GLS system into classes of cells
// that every measurement and every answer treats alike: each factor row
// and each answer's weight vector on the column is constant on a class.
// The system is then solved over the classes: with P the partition matrix
// (P[c][i] = 1 when cell i is in class c), a factor A constant on classes
// is A = A_c·P, so A·x = A_c·(P·x), and an answer w = w_c·P is
// w·x = w_c·(P·x): every measurement observes, and every answer asks
// about, only the histogram summed per class, and the generalised
// least-squares estimate and variance over the classes are exactly those
// over the cells. A year of hourly bins that only daily measurements and
// daily, weekly or monthly answers touch is 365 classes, not 8,760 cells.
//
// Classes are numbered in the order of their first cell, so a column
// whose cells are all apart is the identity partition.
type Classes struct {
	cols []measure.Column
	of   [][]int32 // per column, each cell's class
	k    []int     // per column, the number of classes
	zero []int32   // Split's scratch: each old class's new class for value 0
}

// NewClasses starts with every column's cells in one class.
func NewClasses(cols []measure.Column) *Classes {
	c := &Classes{cols: cols, of: make([][]int32, len(cols)), k: make([]int, len(cols))}
	for j, col := range cols {
		c.of[j] = make([]int32, col.Size)
		c.k[j] = 1
	}
	return c
}

// Split refines column j's classes by v (one value per cell): cells that
// differ in v are apart.
func (c *Classes) Split(j int, v []float64) {
	of := c.of[j]
	if c.k[j] == len(of) || len(v) != len(of) {
		return
	}
	type key struct {
		class int32
		bits  uint64
	}
	// The vectors of time buckets are mostly zero (a day of five years of
	// hours): a cell's new class for value 0 is looked up by its old class
	// in a slice, only the non-zero values in a map.
	if cap(c.zero) < c.k[j] {
		c.zero = make([]int32, c.k[j])
	}
	zero := c.zero[:c.k[j]]
	for i := range zero {
		zero[i] = -1
	}
	ids := map[key]int32{}
	next := int32(0)
	for i, x := range v {
		if x == 0 {
			id := zero[of[i]]
			if id < 0 {
				id, next = next, next+1
				zero[of[i]] = id
			}
			of[i] = id
			continue
		}
		k := key{of[i], math.Float64bits(x)}
		id, ok := ids[k]
		if !ok {
			id, next = next, next+1
			ids[k] = id
		}
		of[i] = id
	}
	c.k[j] = int(next)
}

// SplitAll sets every cell of column j apart (a GROUP BY of the column).
func (c *Classes) SplitAll(j int) {
	for i := range c.of[j] {
		c.of[j][i] = int32(i)
	}
	c.k[j] = len(c.of[j])
}

// column is the index among c's columns of a measurement's column mc, or
// -1 when it is none of them (another column, or the same column
// otherwise defined); embedded reports that mc is the plain version of a
// column with a dropped cell (see GLS.embed), whose factors read zero
// there.
func (c *Classes) column(mc measure.Column) (j int, embedded bool) {
	for j, col := range c.cols {
		if col.Name != mc.Name {
			continue
		}
		if col.Def == mc.Def && col.Size == mc.Size {
			return j, false
		}
		if col.DroppedCell && !mc.DroppedCell && col.Base != "" && col.Base == mc.Base && mc.Size == col.Size-1 {
			return j, true
		}
	}
	return -1, false
}

// row is row r of factor f (rows × n over mc's cells; nil the identity)
// over c's column of size size: padded with a zero for the dropped cell
// when embedded.
func row(f []float64, r, n, size int) []float64 {
	out := make([]float64, size)
	if f == nil {
		out[r] = 1
		return out
	}
	copy(out, f[r*n:(r+1)*n])
	return out
}

// AddMeasurement refines the classes by every row of m's factors on c's
// columns.
func (c *Classes) AddMeasurement(m *measure.Measurement) {
	for i, mc := range m.Columns {
		j, embedded := c.column(mc)
		if j < 0 || i >= len(m.Factors) || i >= len(m.Rows) {
			continue
		}
		n, f := mc.Size, m.Factors[i]
		switch {
		case m.InClassForm(i):
			c.splitByClasses(j, m.Classes[i])
			continue
		case f == nil && !embedded:
			c.SplitAll(j)
			continue
		case f != nil && len(f) != m.Rows[i]*n:
			continue
		}
		for r := 0; r < m.Rows[i] && c.k[j] < c.cols[j].Size; r++ {
			if embedded {
				c.Split(j, row(f, r, n, c.cols[j].Size))
			} else {
				c.Split(j, f[r*n:(r+1)*n])
			}
		}
	}
}

// splitByClasses refines column j's classes by a measurement factor's
// class form over its cells (a plain column's, of one cell fewer when j
// has a dropped cell, which is then in no class). The form's classes are
// the cells whose columns in the factor are equal and not zero, so this
// splits j exactly as the factor's rows would one by one, in O(cells)
// instead of O(rows × cells).
func (c *Classes) splitByClasses(j int, of measure.ClassMap) {
	v := make([]float64, c.cols[j].Size)
	for i, cl := range of {
		v[i] = float64(cl) + 1
	}
	c.Split(j, v)
}

// Cells is the number of cells of the classes' product (+Inf past 2⁶²).
func (c *Classes) Cells() float64 {
	n := 1.0
	for _, k := range c.k {
		n *= float64(k)
	}
	return n
}

// Reduces reports whether some column has fewer classes than cells.
func (c *Classes) Reduces() bool {
	for j, k := range c.k {
		if k < len(c.of[j]) {
			return true
		}
	}
	return false
}

// Columns are the columns over classes: the same names, sizes the class
// counts, and definitions that only measurements reduced by c match.
func (c *Classes) Columns() []measure.Column {
	out := make([]measure.Column, len(c.cols))
	for j, col := range c.cols {
		out[j] = col
		if c.k[j] < col.Size {
			out[j].Def += "|classes"
			out[j].Base = ""
			out[j].DroppedCell = false
			out[j].Size = c.k[j]
		}
	}
	return out
}

// Class is the class of cell i of column j.
func (c *Classes) Class(j, i int) int { return int(c.of[j][i]) }

// Reduce returns m over the classes: each factor on one of c's reduced
// columns read at one cell per class. ok is false when some factor is not
// constant on the classes (m was not among those that refined them).
func (c *Classes) Reduce(m *measure.Measurement) (*measure.Measurement, bool) {
	var out *measure.Measurement
	for i, mc := range m.Columns {
		j, embedded := c.column(mc)
		if j < 0 || c.k[j] == c.cols[j].Size {
			continue
		}
		n, f, rows := mc.Size, m.Factors[i], m.Rows[i]
		if f == nil && !embedded {
			return nil, false // the identity tells every cell apart
		}
		size, k := c.cols[j].Size, c.k[j]
		if out == nil {
			cp := *m
			cp.Columns = append([]measure.Column(nil), m.Columns...)
			cp.Factors = append([][]float64(nil), m.Factors...)
			cp.Classes = append([]measure.ClassMap(nil), m.Classes...)
			out = &cp
		}
		if m.InClassForm(i) {
			red, ok := c.reduceClassForm(j, m, i)
			if !ok {
				return nil, false
			}
			out.Columns[i], out.Factors[i], out.Classes[i] = c.Columns()[j], red, nil
			continue
		}
		red := make([]float64, rows*k)
		seen := make([]bool, k)
		for r := 0; r < rows; r++ {
			v := f
			if embedded || f == nil {
				v = row(f, r, n, size)
			} else {
				v = f[r*n : (r+1)*n]
			}
			clear(seen)
			for cell, x := range v {
				cl := int(c.of[j][cell])
				if !seen[cl] {
					red[r*k+cl], seen[cl] = x, true
				} else if red[r*k+cl] != x {
					return nil, false
				}
			}
		}
		out.Columns[i] = c.Columns()[j]
		out.Factors[i] = red
	}
	if out == nil {
		return m, true
	}
	return out, true
}

// reduceClassForm is factor i of m, in class form, over column j's
// classes, in O(cells + rows × classes); ok is false when some class of j
// spans two of the form's classes (or one and cells in none), where the
// factor over cells is not constant (the form's classes are cells with
// equal, non-zero columns).
func (c *Classes) reduceClassForm(j int, m *measure.Measurement, i int) ([]float64, bool) {
	of, f, rows, mk := m.Classes[i], m.Factors[i], m.Rows[i], m.ClassCount(i)
	k := c.k[j]
	const unseen = -2
	form := make([]int32, k) // each class's class in the form (-1: none)
	for cl := range form {
		form[cl] = unseen
	}
	for cell, cl := range c.of[j] {
		fc := int32(-1) // a dropped cell, past the form's cells, is in none
		if cell < len(of) {
			fc = of[cell]
		}
		switch form[cl] {
		case unseen:
			form[cl] = fc
		case fc:
		default:
			return nil, false
		}
	}
	red := make([]float64, rows*k)
	for r := 0; r < rows; r++ {
		for cl, fc := range form {
			if fc >= 0 {
				red[r*k+cl] = f[r*mk+int(fc)]
			}
		}
	}
	return red, true
}
