package planner

import (
	"slices"
	"sync"

	"github.com/dpproxy/dpproxy/measure"
)

// Factors by column, for blocked systems (known_blocks.go): which cells
// a factor's rows join, its Gram matrix's entries on demand, and Aᵀ
// applied along one mode, each without forming an n × n matrix over a
// long column.

// sparseFactor is a factor (rows × n) by column: column c's non-zeros
// are row[start[c]:start[c+1]], ascending, with values val.
type sparseFactor struct {
	rows, n int
	start   []int32
	row     []int32
	val     []float64
}

// sparseFactorOf is factor i of m by column (nil: the identity). The
// one place the blocked system reads a measurement's factors: another
// representation of them needs one edit here.
func sparseFactorOf(m *measure.Measurement, i int) *sparseFactor {
	f, rows, n := m.Factors[i], m.Rows[i], m.Columns[i].Size
	if f == nil {
		return nil
	}
	if m.InClassForm(i) {
		return sparseClassForm(m.Classes[i], f, rows, m.ClassCount(i))
	}
	sf := &sparseFactor{rows: rows, n: n, start: make([]int32, n+1)}
	for r := 0; r < rows; r++ {
		for c, v := range f[r*n : (r+1)*n] {
			if v != 0 {
				sf.start[c+1]++
			}
		}
	}
	for c := 0; c < n; c++ {
		sf.start[c+1] += sf.start[c]
	}
	sf.row, sf.val = make([]int32, sf.start[n]), make([]float64, sf.start[n])
	next := slices.Clone(sf.start[:n])
	for r := 0; r < rows; r++ {
		for c, v := range f[r*n : (r+1)*n] {
			if v != 0 {
				sf.row[next[c]], sf.val[next[c]] = int32(r), v
				next[c]++
			}
		}
	}
	return sf
}

// sparseClassForm is a factor in class form (measure's classform.go:
// cell i's column is class of[i]'s column of f, rows × k, or zero when
// of[i] is -1) by column, in O(cells + rows × k).
func sparseClassForm(of measure.ClassMap, f []float64, rows, k int) *sparseFactor {
	n := len(of)
	// Each class's non-zero rows, ascending.
	classRows := make([][]int32, k)
	for r := 0; r < rows; r++ {
		for c, v := range f[r*k : (r+1)*k] {
			if v != 0 {
				classRows[c] = append(classRows[c], int32(r))
			}
		}
	}
	sf := &sparseFactor{rows: rows, n: n, start: make([]int32, n+1)}
	for c, cl := range of {
		sf.start[c+1] = sf.start[c]
		if cl >= 0 {
			sf.start[c+1] += int32(len(classRows[cl]))
		}
	}
	sf.row, sf.val = make([]int32, sf.start[n]), make([]float64, sf.start[n])
	for c, cl := range of {
		if cl < 0 {
			continue
		}
		at := sf.start[c]
		for t, r := range classRows[cl] {
			sf.row[int(at)+t], sf.val[int(at)+t] = r, f[int(r)*k+int(cl)]
		}
	}
	return sf
}

// factorMemo keeps the last few factors read by column, with their
// components: a search for the least ε adds the same new measurement's
// factors (a day's rows over a year of hours: 3 million entries) a dozen
// times at other weights. A factor is known by its backing array, which
// is never written in place once a measurement holds it, its length and
// its rows.
type factorMemo struct {
	mu      sync.Mutex
	entries [8]memoEntry
	next    int
}

type memoEntry struct {
	first      *float64
	len, rows  int
	f          *sparseFactor
	comp       []int32
	components int
}

// factor is factor i of m by column and its components (see
// sparseFactor.components; the identity's are its cells).
func (fm *factorMemo) factor(m *measure.Measurement, i int) (*sparseFactor, []int32, int) {
	raw, n := m.Factors[i], m.Columns[i].Size
	if raw == nil {
		comp := make([]int32, n)
		for c := range comp {
			comp[c] = int32(c)
		}
		return nil, comp, n
	}
	if len(raw) == 0 {
		f := sparseFactorOf(m, i)
		comp, k := f.components()
		return f, comp, k
	}
	fm.mu.Lock()
	for _, e := range fm.entries {
		if e.first == &raw[0] && e.len == len(raw) && e.rows == m.Rows[i] {
			fm.mu.Unlock()
			return e.f, e.comp, e.components
		}
	}
	fm.mu.Unlock()
	f := sparseFactorOf(m, i)
	comp, k := f.components()
	fm.mu.Lock()
	fm.entries[fm.next] = memoEntry{first: &raw[0], len: len(raw), rows: m.Rows[i], f: f, comp: comp, components: k}
	fm.next = (fm.next + 1) % len(fm.entries)
	fm.mu.Unlock()
	return f, comp, k
}

// components labels each cell of f's columns by the component of the
// graph joining the cells a row reads (-1: no row reads it).
func (f *sparseFactor) components() ([]int32, int) {
	parent := make([]int32, f.n)
	for c := range parent {
		parent[c] = int32(c)
	}
	find := func(c int32) int32 {
		for parent[c] != c {
			parent[c] = parent[parent[c]]
			c = parent[c]
		}
		return c
	}
	firstOfRow := make([]int32, f.rows)
	for r := range firstOfRow {
		firstOfRow[r] = -1
	}
	for c := 0; c < f.n; c++ {
		for _, r := range f.row[f.start[c]:f.start[c+1]] {
			if firstOfRow[r] < 0 {
				firstOfRow[r] = int32(c)
				continue
			}
			if a, b := find(int32(c)), find(firstOfRow[r]); a != b {
				parent[a] = b
			}
		}
	}
	out, ids := make([]int32, f.n), map[int32]int32{}
	for c := range out {
		if f.start[c] == f.start[c+1] {
			out[c] = -1
			continue
		}
		root := find(int32(c))
		id, ok := ids[root]
		if !ok {
			id = int32(len(ids))
			ids[root] = id
		}
		out[c] = id
	}
	return out, len(ids)
}

// dot is (AᵀA)[c, d], summed over the rows in ascending order as gram
// sums them.
func (f *sparseFactor) dot(c, d int) float64 {
	if f == nil {
		if c == d {
			return 1
		}
		return 0
	}
	i, iEnd, k, kEnd := f.start[c], f.start[c+1], f.start[d], f.start[d+1]
	v := 0.0
	for i < iEnd && k < kEnd {
		switch ri, rk := f.row[i], f.row[k]; {
		case ri < rk:
			i++
		case ri > rk:
			k++
		default:
			v += f.val[i] * f.val[k]
			i, k = i+1, k+1
		}
	}
	return v
}

// applyT applies Aᵀ to tensor t along mode j (as modeApplyT does, adding
// each output's terms in the same order).
func (f *sparseFactor) applyT(t []float64, shape []int, j int) ([]float64, []int) {
	if f == nil {
		return t, shape
	}
	left, right := 1, 1
	for k := 0; k < j; k++ {
		left *= shape[k]
	}
	for k := j + 1; k < len(shape); k++ {
		right *= shape[k]
	}
	rows, n := shape[j], f.n
	out := make([]float64, left*n*right)
	for l := 0; l < left; l++ {
		for c := 0; c < n; c++ {
			dst := out[(l*n+c)*right : (l*n+c+1)*right]
			for e := f.start[c]; e < f.start[c+1]; e++ {
				i, v := int(f.row[e]), f.val[e]
				src := t[(l*rows+i)*right : (l*rows+i+1)*right]
				for r := range dst {
					dst[r] += v * src[r]
				}
			}
		}
	}
	ns := slices.Clone(shape)
	ns[j] = n
	return out, ns
}
