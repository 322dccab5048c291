package reuse

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/exec"
	"github.com/dpproxy/dpproxy/measure"
	"github.com/dpproxy/dpproxy/planner"
)

// Measurements as the store keeps them: a released plan's answers turned
// into measure.Measurement records (one-row direct records stacked into
// one), and their rows regrouped between domains.

// digest is a short SHA-256 of s: a column's identity in a stored
// measurement (the same digest as the store has always used).
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}

// measureColumns are w's columns as stored measurements name them.
func measureColumns(w *compile.Workload) []measure.Column {
	out := make([]measure.Column, len(w.Columns))
	for j, c := range w.Columns {
		base := *c
		base.DroppedCell = false
		out[j] = measure.Column{Name: c.Name, Def: digest(fmt.Sprintf("%+v", *c)), Size: c.Size(),
			Whole: !c.Drops() || c.DroppedCellIndex() >= 0, Base: digest(fmt.Sprintf("%+v", base)), DroppedCell: c.DroppedCellIndex() >= 0}
	}
	return out
}

// Records describes what plan p measures as stored measurements (with
// their answers when ans is not nil). all reports whether they carry every
// noisy answer of the plan, so that the combination of old and new
// measurements can answer the whole batch.
func Records(w *compile.Workload, p *planner.Plan, ans *exec.Answers) (out []*measure.Measurement, all bool) {
	cols := measureColumns(w)
	sizes := w.Sizes()
	scale := func(num, den uint64) string { return fmt.Sprintf("%d/%d", num, den) }
	switch p.Kind {
	case planner.Kronecker:
		return []*measure.Measurement{kroneckerRecord(p, cols, ans, scale(p.NoiseNum, p.NoiseDen))}, true
	case planner.Direct:
		all = true
		for q, qu := range w.Queries {
			first := len(out) // this query's records start here
			for a, agg := range qu.Aggregates {
				nnum, nden, v := p.NoiseNum, p.NoiseDen, p.NoiseVariance
				if p.AggNoise != nil {
					n := p.AggNoise[q][a]
					nnum, nden, v = n.NoiseNum, n.NoiseDen, n.Variance
				}
				if nnum == 0 || !anyLive(qu, a) {
					continue // zero by construction: exact, nothing to store
				}
				if len(agg) != 1 || agg[0].Coef == 0 || !(v > 0) {
					all = false
					continue
				}
				term, k := agg[0], p.Scale[q][a]
				m, ok := directRecord(w, p, cols, q, a, term, nnum, nden, v/(k*k*term.Coef*term.Coef), ans)
				if !ok {
					all = false
					continue
				}
				out = append(out, m)
			}
			out = append(out[:first], stackRows(out[first:])...)
		}
		return out, all
	case planner.Marginal:
		// One measurement per block, over the block's columns: a marginal
		// block is the identity on each, a residual block n_j·I − J.
		for bi, b := range p.Marginals.Blocks {
			m := &measure.Measurement{Strategy: p.Name, Noise: string(p.Options.Noise), Scale: scale(b.NoiseNum, b.NoiseDen), Variance: b.NoiseVariance}
			for _, j := range b.Cols {
				n := sizes[j]
				m.Columns, m.Rows = append(m.Columns, cols[j]), append(m.Rows, n)
				if !b.Residual {
					m.Factors = append(m.Factors, nil)
					continue
				}
				c := make([]float64, n*n)
				for i := range c {
					c[i] = -1
				}
				for i := 0; i < n; i++ {
					c[i*n+i] += float64(n)
				}
				m.Factors = append(m.Factors, c)
			}
			if ans != nil {
				if bi >= len(ans.Blocks) {
					return nil, false
				}
				m.Answers = ans.Blocks[bi]
			}
			out = append(out, m)
		}
		return out, len(out) > 0
	}
	return nil, false
}

// kroneckerRecord is the one measurement a Kronecker plan makes: its
// factors row by row (nil for an identity), a long column's in class form
// when that is smaller (see setFactor).
func kroneckerRecord(p *planner.Plan, cols []measure.Column, ans *exec.Answers, scale string) *measure.Measurement {
	m := &measure.Measurement{Strategy: p.Name, Columns: cols, Noise: string(p.Options.Noise), Scale: scale, Variance: p.NoiseVariance}
	m.Factors = make([][]float64, len(p.Factors))
	for j, f := range p.Factors {
		r, n := f.A.Dims()
		m.Rows = append(m.Rows, r)
		if isIdentity(f) {
			continue
		}
		if f.Classes != nil {
			setClassFactor(m, j, f)
			continue
		}
		raw := f.A.RawMatrix()
		rows := make([][]float64, r)
		for i := range rows {
			rows[i] = raw.Data[i*raw.Stride : i*raw.Stride+n]
		}
		setFactor(m, j, rows)
	}
	if ans != nil {
		m.Answers = ans.Raw
	}
	return m
}

// stackRows merges runs of one-row direct records that differ only in
// one column's factor (the aggregates of a GROUP BY expression: one per
// day of a DATE(ts) over hourly bins) into one record whose factor on that
// column has a row per aggregate: the same release, one stored
// measurement instead of hundreds. The one-row records share their
// factors with the workload (365 of 43,824 cells for that DATE(ts)); a
// stacked run over a long column is kept in class form (see setFactor),
// never built over cells.
func stackRows(recs []*measure.Measurement) []*measure.Measurement {
	var out []*measure.Measurement
	var cur *measure.Measurement
	var rows [][]float64 // the rows of cur's stacked factor, shared
	j := -1              // the column cur stacks along
	flush := func() {
		if j >= 0 {
			setFactor(cur, j, rows)
		}
	}
	for _, m := range recs {
		if cur != nil {
			if k, ok := stackable(cur, m, j); ok {
				if j < 0 {
					rows = [][]float64{cur.Factors[k]}
				}
				rows = append(rows, m.Factors[k][:m.Columns[k].Size])
				cur.Rows[k]++
				if cur.Answers != nil {
					cur.Answers = append(cur.Answers, m.Answers...)
				}
				j = k
				continue
			}
		}
		flush()
		cp := *m
		cp.Factors = slices.Clone(m.Factors)
		cp.Rows = slices.Clone(m.Rows)
		cp.Answers = slices.Clone(m.Answers)
		cur, j, rows = &cp, -1, nil
		out = append(out, cur)
	}
	flush()
	return out
}

// classFormAbove is the shortest column whose factors records keep in
// class form when that is smaller: a column longer than the largest
// system of stored measurements solved over cells (planner.MaxKnownCells)
// is only ever read over classes (planner.Classes), so the form changes
// what a record holds, not which batches it serves.
const classFormAbove = planner.MaxKnownCells

// setFactor sets m's factor on column j to rows (each over the column's
// cells): in class form when the column is long, the factor has fewer
// rows than cells and fewer classes than cells (a day of hours), else
// over cells. Over cells it would be rows × cells: 128 MB for a year of
// days over five years of hours. A factor of fewer rows than cells cannot
// be summed over (it has not full column rank), and a long column cannot
// be kept over cells, so consumers that only read factors over cells
// (planner.GLS, whose Check rejects class form) lose nothing.
func setFactor(m *measure.Measurement, j int, rows [][]float64) {
	n := m.Columns[j].Size
	if n > classFormAbove && len(rows) < n {
		if of, f, ok := measure.InClasses(rows, n); ok && len(f) < len(rows)*n {
			if m.Classes == nil {
				m.Classes = make([]measure.ClassMap, len(m.Columns))
			}
			m.Factors[j], m.Classes[j] = f, of
			return
		}
	}
	data := make([]float64, 0, len(rows)*n)
	for _, r := range rows {
		data = append(data, r[:n]...)
	}
	m.Factors[j] = data
}

// setClassFactor sets m's factor on column j to f, a strategy in class
// form, exactly as setFactor would from its rows over the cells, without
// building them: the classes of cells with equal, not all-zero columns,
// numbered in order of their first cell, and the factor over them — or,
// when setFactor would keep the factor over cells, the rows over cells.
func setClassFactor(m *measure.Measurement, j int, f *planner.ColumnStrategy) {
	rows, k := f.A.Dims()
	n := m.Columns[j].Size
	raw := f.A.RawMatrix()
	over := make([][]float64, rows) // the rows over f's classes
	for i := range over {
		over[i] = raw.Data[i*raw.Stride : i*raw.Stride+k]
	}
	if n == len(f.Classes) && n > classFormAbove && rows < n {
		if ofClass, fc, ok := measure.InClasses(over, k); ok {
			// Compose cell → plan class → class, renumbered by first cell.
			of := make(measure.ClassMap, n)
			renum := map[int32]int32{}
			var order []int32 // the classes, by first cell
			for i, c := range f.Classes {
				of[i] = -1
				if c < 0 || ofClass[c] < 0 {
					continue
				}
				id, seen := renum[ofClass[c]]
				if !seen {
					id = int32(len(order))
					renum[ofClass[c]] = id
					order = append(order, ofClass[c])
				}
				of[i] = id
			}
			kc := len(fc) / max(rows, 1)
			if len(order) == kc && len(fc) < rows*n {
				factor := make([]float64, len(fc))
				for r := 0; r < rows; r++ {
					for id, old := range order {
						factor[r*kc+id] = fc[r*kc+int(old)]
					}
				}
				if m.Classes == nil {
					m.Classes = make([]measure.ClassMap, len(m.Columns))
				}
				m.Factors[j], m.Classes[j] = factor, of
				return
			}
		}
	}
	cells, _ := f.CellMatrices()
	craw := cells.RawMatrix()
	full := make([][]float64, rows)
	for i := range full {
		full[i] = craw.Data[i*craw.Stride : i*craw.Stride+len(f.Classes)]
	}
	setFactor(m, j, full)
}

// stackable reports the column along which m (one row) can be stacked
// under cur: both over the same columns, with the same noise, one answer
// per row, and factors equal on every column but k (j when cur is stacked
// already, whose factor then has several rows).
func stackable(cur, m *measure.Measurement, j int) (k int, ok bool) {
	if len(cur.Columns) != len(m.Columns) || cur.Variance != m.Variance || cur.Noise != m.Noise || cur.Scale != m.Scale || m.Cells() != 1 || (cur.Answers == nil) != (m.Answers == nil) {
		return -1, false
	}
	k = -1
	for i, c := range cur.Columns {
		if c != m.Columns[i] || m.Factors[i] == nil || cur.Factors[i] == nil {
			return -1, false
		}
		if i != j && cur.Rows[i] != 1 {
			return -1, false
		}
		if i == j || !slices.Equal(cur.Factors[i], m.Factors[i]) {
			if k >= 0 {
				return -1, false
			}
			k = i
		}
	}
	return k, k >= 0 && (j < 0 || k == j)
}

func anyLive(qu *compile.Query, a int) bool {
	if qu.Live == nil || qu.Live[a] == nil {
		return true
	}
	return slices.Contains(qu.Live[a], true)
}

func isIdentity(f *planner.ColumnStrategy) bool {
	if f.Classes != nil {
		return false // planned over classes: fewer classes than cells
	}
	r, n := f.A.Dims()
	if r != n {
		return false
	}
	for i := 0; i < r; i++ {
		for c := 0; c < n; c++ {
			want := 0.0
			if i == c {
				want = 1
			}
			if f.A.At(i, c) != want {
				return false
			}
		}
	}
	return true
}

// regroup reorders v, row-major over the columns from (in that order), to
// row-major over the same columns in to's order.
func regroup(v []float64, from, to []int, sizes []int) []float64 {
	out := make([]float64, len(v))
	pos := make([]int, len(to)) // position in from of to[k]
	for k, j := range to {
		pos[k] = slices.Index(from, j)
	}
	coords := make([]int, len(from))
	for i := range out {
		r := i
		for k := len(to) - 1; k >= 0; k-- {
			coords[pos[k]] = r % sizes[to[k]]
			r /= sizes[to[k]]
		}
		src := 0
		for k, j := range from {
			src = src*sizes[j] + coords[k]
		}
		out[i] = v[src]
	}
	return out
}

// maxLiveClassEntries bounds a long grouped column's factor in class form
// (its live cells squared): a grouped column restricted by a WHERE on it
// is measured at its live cells only, and past this bound (a year of
// hours in one GROUP BY ts) the record is left out, as one the store
// could not combine: its domain is over planner.MaxKnownCells classes.
const maxLiveClassEntries = 1 << 22

// directRecord is the record of aggregate a of query q in direct plan p,
// its one term term measured with noise num/den of the given variance per
// unit coefficient; ok is false when it is left out (maxLiveClassEntries).
func directRecord(w *compile.Workload, p *planner.Plan, cols []measure.Column, q, a int, term compile.Term, nnum, nden uint64, variance float64, ans *exec.Answers) (*measure.Measurement, bool) {
	qu, sizes := w.Queries[q], w.Sizes()
	m := &measure.Measurement{Strategy: p.Name, Noise: string(p.Options.Noise), Scale: fmt.Sprintf("%d/%d", nnum, nden), Variance: variance}
	var grouped []int            // sorted group columns
	var live [][]int             // per grouped column, the rows kept (nil: all)
	var forms []measure.ClassMap // per record column, its class form (nil: over cells)
	for j := range w.Columns {
		group := slices.Contains(qu.GroupCols, j)
		f := term.Factors[j]
		if !group && f == nil && cols[j].Whole {
			continue // summed over: the measurement does not see the column
		}
		m.Columns = append(m.Columns, cols[j])
		forms = append(forms, nil)
		n := sizes[j]
		switch {
		case group && f == nil:
			m.Factors, m.Rows = append(m.Factors, nil), append(m.Rows, n)
		case group && n > classFormAbove:
			// A long column grouped cell by cell under a WHERE on it
			// (GROUP BY ts over a month of five years of hours): its
			// rows outside the WHERE are zero, measured by nothing, so
			// the record keeps the live ones, in class form (each live
			// cell its own class), never the n × n diagonal.
			cells := nonZeroCells(f)
			if len(cells) == 0 || len(cells)*len(cells) > maxLiveClassEntries {
				return nil, false
			}
			of := make(measure.ClassMap, n)
			for i := range of {
				of[i] = -1
			}
			d := make([]float64, len(cells)*len(cells))
			for r, i := range cells {
				of[i] = int32(r)
				d[r*len(cells)+r] = f[i]
			}
			m.Factors, m.Rows = append(m.Factors, d), append(m.Rows, len(cells))
			forms[len(forms)-1] = of
			grouped, live = append(grouped, j), append(live, cells)
			continue
		case group:
			d := make([]float64, n*n)
			for i := 0; i < n; i++ {
				d[i*n+i] = f[i]
			}
			m.Factors, m.Rows = append(m.Factors, d), append(m.Rows, n)
		case f == nil:
			ones := make([]float64, n)
			for i := range ones {
				ones[i] = 1
			}
			m.Factors, m.Rows = append(m.Factors, ones), append(m.Rows, 1)
		default:
			// Shared, not copied (see stackRows): records are
			// never written in place.
			m.Factors, m.Rows = append(m.Factors, f), append(m.Rows, 1)
		}
		if group {
			grouped, live = append(grouped, j), append(live, nil)
		}
	}
	if slices.ContainsFunc(forms, func(c measure.ClassMap) bool { return c != nil }) {
		m.Classes = forms
	}
	if ans != nil {
		m.Answers = liveRows(regroup(ans.Values[q][a], qu.GroupCols, grouped, sizes), grouped, live, sizes)
		for i := range m.Answers {
			m.Answers[i] /= term.Coef
		}
	}
	return m, true
}

// nonZeroCells lists the cells where f is not zero.
func nonZeroCells(f []float64) []int {
	var out []int
	for i, x := range f {
		if x != 0 {
			out = append(out, i)
		}
	}
	return out
}

// liveRows keeps, of v (row-major over the grouped columns' sizes), the
// rows whose cell on each grouped column k is among live[k] (nil: every
// cell), in order.
func liveRows(v []float64, grouped []int, live [][]int, sizes []int) []float64 {
	if !slices.ContainsFunc(live, func(l []int) bool { return l != nil }) {
		return v
	}
	idx := []int{0} // offsets in v of the kept rows so far, over the columns seen
	for k, j := range grouped {
		cells := live[k]
		if cells == nil {
			cells = make([]int, sizes[j])
			for i := range cells {
				cells[i] = i
			}
		}
		next := make([]int, 0, len(idx)*len(cells))
		for _, o := range idx {
			for _, i := range cells {
				next = append(next, o*sizes[j]+i)
			}
		}
		idx = next
	}
	out := make([]float64, len(idx))
	for r, o := range idx {
		out[r] = v[o]
	}
	return out
}
