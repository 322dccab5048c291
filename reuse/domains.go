package reuse

import (
	"slices"
	"sync"

	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/measure"
	"github.com/dpproxy/dpproxy/planner"
)

// Estimation domains. Stored and new measurements are combined into one
// generalised least-squares estimate per domain: a set of the batch's
// columns, dense over their product up to planner.MaxKnownCells cells,
// and above that, up to planner.MaxBlockedCells, solved block by block
// (blocks of cells no measurement row straddles, each at most
// planner.MaxKnownCells). A batch whose product domain is that small is one domain, so
// all its answers come from one estimate. A larger batch (a dashboard
// whose panels group by different columns) gets one domain per maximal
// column set its queries read, each query answered from the first that
// contains its own: time and memory follow the queries' column sets, not
// the product. A query reads no column outside its domain, and every
// batch column a query does not read counts every row (it keeps NULLs in
// a cell, or is the batch's copy with a dropped cell), so the domain's
// histogram is the batch's summed over the other columns, and
// measurements over more columns join it summed over them.

// domain is one estimation domain and the queries answered from it.
type domain struct {
	cols    []int            // batch column indexes, ascending
	mcols   []measure.Column // as the estimate sees them (see withDroppedCells)
	queries []int
	g       *planner.GLS // the stored measurements that join
	// key names the system (its columns, classes and joined
	// measurements) in the policy's cache; solved is its entry there.
	key    string
	solved *solved
	sub    []int                  // the batch columns' sizes
	joined []*measure.Measurement // the stored measurements that join, in order
	// lift maps a cell of the product of cols to the system's: the same
	// cell of a larger domain (a dropped cell), or its class; nil when
	// the same.
	lift func(int) int
	cls  *planner.Classes // nil: the system is over cells
	// vecs are answerVectors per query, computed once: the search for
	// the least ε reads them a dozen times, and over thousands of cells
	// they cost more than the blocks' solves.
	vecsMu sync.Mutex
	vecs   map[int][][]vector
}

// vectors is answerVectors(w, q, d), computed once per query.
func (d *domain) vectors(w *compile.Workload, q int) [][]vector {
	d.vecsMu.Lock()
	defer d.vecsMu.Unlock()
	if v, ok := d.vecs[q]; ok {
		return v
	}
	if d.vecs == nil {
		d.vecs = map[int][][]vector{}
	}
	v := answerVectors(w, q, d)
	d.vecs[q] = v
	return v
}

// cells is the size of the domain's product.
func (d *domain) cells() int {
	n := 1
	for _, c := range d.mcols {
		n *= c.Size
	}
	return n
}

func subset(a, b []int) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// domainsOf splits w into estimation domains holding every stored
// measurement of ms that joins, ready to join recs (the structure of a
// new measurement, or nil); ok is false when some domain has more than
// planner.MaxBlockedCells cells even over classes of cells (see
// planner.Classes: a long column that every measurement, recs and every
// answer read only in coarser units is solved over those units). Each
// domain's stored system comes from c when it holds one over the same
// columns, classes and measurements (c nil: built anew).
func domainsOf(w *compile.Workload, ms, recs []*measure.Measurement, c *Cache) ([]*domain, bool) {
	sizes := w.Sizes()
	all := make([]int, len(w.Columns))
	for j := range all {
		all[j] = j
	}
	var sets [][]int
	if productCells(sizes, all) <= planner.MaxKnownCells {
		sets = [][]int{all}
	} else {
		supports := make([][]int, len(w.Queries))
		for q := range w.Queries {
			supports[q] = w.Queries[q].Support(w)
		}
		for q, s := range supports {
			maximal := true
			for r, o := range supports {
				if r != q && subset(s, o) && (len(o) > len(s) || r < q) {
					maximal = false // contained in a larger set, or equal to an earlier one
					break
				}
			}
			if maximal {
				sets = append(sets, s)
			}
		}
	}
	var out []*domain
	for _, s := range sets {
		out = append(out, &domain{cols: s})
	}
	for q := range w.Queries {
		s := w.Queries[q].Support(w)
		for _, d := range out {
			if subset(s, d.cols) {
				d.queries = append(d.queries, q)
				break
			}
		}
	}
	cols := measureColumns(w)
	for _, d := range out {
		if !d.build(w, cols, ms, recs, c) {
			return nil, false
		}
	}
	return out, true
}

// build sets up d's system: its columns (with a dropped cell where stored
// measurements have one, else over classes of cells when that is
// smaller), and the stored measurements that join, from c when cached.
func (d *domain) build(w *compile.Workload, cols []measure.Column, ms, recs []*measure.Measurement, c *Cache) bool {
	sizes := w.Sizes()
	sub := make([]int, len(d.cols))
	for k, j := range d.cols {
		d.mcols = append(d.mcols, cols[j])
		sub[k] = sizes[j]
	}
	var lifted bool
	if d.mcols, lifted = withDroppedCells(d.mcols, ms); lifted {
		// Each column's cells keep their index; a dropped cell is last.
		d.lift = cellMap(sub, sizesOf(d.mcols), func(_, i int) int { return i })
	} else if productCells(sub, allOf(len(sub))) > float64(classesAbove) {
		cls := planner.NewClasses(d.mcols)
		for _, q := range d.queries {
			qu := w.Queries[q]
			for _, j := range qu.GroupCols {
				cls.SplitAll(slices.Index(d.cols, j))
			}
			for _, agg := range qu.Aggregates {
				for _, t := range agg {
					for k, j := range d.cols {
						if f := t.Factors[j]; f != nil {
							cls.Split(k, f)
						}
					}
				}
			}
		}
		for _, m := range ms {
			cls.AddMeasurement(m)
		}
		for _, m := range recs {
			cls.AddMeasurement(m)
		}
		if cls.Reduces() {
			d.cls = cls
			d.mcols = cls.Columns()
			d.lift = cellMap(sub, sizesOf(d.mcols), cls.Class)
		}
	}
	g, ok := planner.NewGLS(d.mcols)
	if !ok {
		return false
	}
	// Which measurements join is checked in O(|m|) each (O(n) over a
	// blocked system, where it depends on the blocks those before made);
	// adding them costs O(n²) each, and solving O(n³) (per block): both
	// are cached under the system's key.
	var joined, reduced []*measure.Measurement
	joins := g.Joiner()
	for _, m := range ms {
		if r, ok := d.reduce(m); ok && joins(r) {
			joined, reduced = append(joined, m), append(reduced, r)
		}
	}
	d.sub, d.joined = sub, joined
	keys := systemKeys(d.mcols, d.cls, sub, joined, prefixKeys)
	d.key = keys[0]
	d.solved = c.system(keys, g, reduced)
	d.g = d.solved.g
	return true
}

// classesAbove is the domain size above which the domain is solved over
// classes of cells when they are fewer.
const classesAbove = 256

func allOf(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// reduce is m as d's system sees it: over d's classes of cells, when it
// has them.
func (d *domain) reduce(m *measure.Measurement) (*measure.Measurement, bool) {
	if d.cls == nil {
		return m, true
	}
	return d.cls.Reduce(m)
}

// reduceAll is reduce of each of ms that reduces.
func (d *domain) reduceAll(ms []*measure.Measurement) []*measure.Measurement {
	var out []*measure.Measurement
	for _, m := range ms {
		if r, ok := d.reduce(m); ok {
			out = append(out, r)
		}
	}
	return out
}

// blocked reports whether d's system is solved block by block.
func (d *domain) blocked() bool { return d.cells() > planner.MaxKnownCells }

// cellMap maps a cell of the product of sizes to a cell of the product of
// to: coordinate i of column j becomes index(j, i).
func cellMap(sizes, to []int, index func(j, i int) int) func(int) int {
	coords := make([]int, len(sizes))
	return func(c int) int {
		for j := len(sizes) - 1; j >= 0; j-- {
			coords[j] = c % sizes[j]
			c /= sizes[j]
		}
		out := 0
		for j := range sizes {
			out = out*to[j] + index(j, coords[j])
		}
		return out
	}
}

func sizesOf(cols []measure.Column) []int {
	out := make([]int, len(cols))
	for j, c := range cols {
		out[j] = c.Size
	}
	return out
}

// withDroppedCells is cols with every column that drops rows replaced by
// its copy with a dropped cell when some stored measurement has that copy
// (measured in a batch where some query did not read it): the batch's
// histogram is then Estimated over the larger domain, the dropped cell a
// nuisance no answer reads, so those measurements join. lifted reports
// whether any column was replaced.
func withDroppedCells(cols []measure.Column, ms []*measure.Measurement) (out []measure.Column, lifted bool) {
	out = slices.Clone(cols)
	for j, c := range out {
		if c.Whole || c.Base == "" {
			continue
		}
	search:
		for _, m := range ms {
			for _, mc := range m.Columns {
				if mc.Name == c.Name && mc.Base == c.Base && mc.DroppedCell && mc.Size == c.Size+1 {
					out[j] = mc
					lifted = true
					break search
				}
			}
		}
	}
	return out, lifted
}

func productCells(sizes, cols []int) float64 {
	n := 1.0
	for _, j := range cols {
		n *= float64(sizes[j])
	}
	return n
}

// combination is a domain's system with new records added at some
// weight, solved: recs are the indexes of the records that joined.
type combination struct {
	g    *planner.GLS
	est  *planner.Estimate // nil when not solvable
	recs []int
}

// estimate answers w's queries from each domain's stored measurements and
// recs (each added at weight f; recs that do not join a domain add
// nothing to it). A query's answers are nil where its domain does not
// identify them; all reports whether every query's are identified. used
// lists the stored measurements that joined. With recs, combos are the
// domains' combined systems; prior, when given, are combinations with
// the same structure (scored before measuring), whose factorisations
// serve when the information matrices are equal bit for bit. pens, when
// given, are the domains' pencils with recs (nil where a domain has
// none): a domain with one is answered from it at f, variances only, and
// its combination left out of combos.
func estimate(w *compile.Workload, doms []*domain, recs []*measure.Measurement, f float64, prior []*combination, pens []*planner.Pencil) (es *Estimated, used []int64, all bool, combos []*combination) {
	es = &Estimated{Vals: make([][][]float64, len(w.Queries)), Vars: make([][][]float64, len(w.Queries))}
	all = true
	for i, d := range doms {
		used = append(used, d.g.Used...)
		var est *planner.Estimate
		switch {
		case len(recs) == 0:
			est = d.solved.estimate()
		case i < len(pens) && pens[i] != nil:
			est = pens[i].At(f)
			combos = append(combos, &combination{})
		default:
			cb := &combination{g: d.g.Clone()}
			for k, r := range recs {
				if r, ok := d.reduce(r); ok && cb.g.Add(r, f) {
					cb.recs = append(cb.recs, k)
				}
			}
			switch {
			case cb.g.Empty():
			case i < len(prior) && prior[i] != nil && prior[i].est != nil && cb.g.Equal(prior[i].g):
				cb.est = cb.g.Refit(prior[i].est)
			default:
				cb.est, _ = cb.g.Solve()
			}
			est = cb.est
			combos = append(combos, cb)
		}
		for _, q := range d.queries {
			if est == nil {
				all = false
				continue
			}
			vals, vars, ok := queryFromEstimate(w, q, est, d)
			if !ok {
				all = false
				continue
			}
			es.Vals[q], es.Vars[q] = vals, vars
		}
	}
	slices.Sort(used)
	return es, slices.Compact(used), all, combos
}

// queryFromEstimate answers query q's aggregates from est, the estimate
// over domain d: per aggregate, per plain group, the value and its exact
// variance; ok is false when some answer that is not zero by construction
// is not identified.
func queryFromEstimate(w *compile.Workload, q int, est *planner.Estimate, d *domain) (vals, vars [][]float64, ok bool) {
	qu := w.Queries[q]
	for a, groups := range d.vectors(w, q) {
		v, vr := make([]float64, len(groups)), make([]float64, len(groups))
		for g, av := range groups {
			if !qu.IsLive(a, g) || len(av.cells) == 0 {
				continue
			}
			x, variance, ok := est.Answer(av.cells, av.ws)
			if !ok {
				return nil, nil, false
			}
			v[g], vr[g] = x, variance
		}
		vals, vars = append(vals, v), append(vars, vr)
	}
	return vals, vars, true
}

// vector is one answer as a linear function of the system's cells: the
// cells it reads and their weights.
type vector struct {
	cells []int
	ws    []float64
}

// answerVectors is every answer of query q over domain d's system, per
// aggregate, per plain group (no cells: zero by construction).
func answerVectors(w *compile.Workload, q int, d *domain) [][]vector {
	all := w.Sizes()
	qu := w.Queries[q]
	sizes := make([]int, len(d.cols))
	pos := make([]int, len(qu.GroupCols)) // the group columns' positions in d.cols
	n := 1
	for k, j := range d.cols {
		sizes[k] = all[j]
		n *= all[j]
	}
	for i, j := range qu.GroupCols {
		pos[i] = slices.Index(d.cols, j)
	}
	coords := make([]int, len(sizes))
	groupOf := make([]int, n) // the plain group of every cell
	for c := 0; c < n; c++ {
		r := c
		for k := len(sizes) - 1; k >= 0; k-- {
			coords[k] = r % sizes[k]
			r /= sizes[k]
		}
		g := 0
		for i, j := range qu.GroupCols {
			g = g*all[j] + coords[pos[i]]
		}
		groupOf[c] = g
	}
	groups := qu.Groups(w)
	var out [][]vector
	for _, agg := range qu.Aggregates {
		on := make(compile.Linear, len(agg)) // the aggregate over d's columns
		for i, t := range agg {
			nt := compile.Term{Coef: t.Coef, Factors: make([]compile.Factor, len(d.cols))}
			for k, j := range d.cols {
				nt.Factors[k] = t.Factors[j]
			}
			on[i] = nt
		}
		nz, xs := nonZero(on, sizes, n)
		cells := make([][]int, groups)
		ws := make([][]float64, groups)
		var seen map[[2]int]bool // over classes, each (group, class) once
		if d.cls != nil {
			seen = map[[2]int]bool{}
		}
		for i, c := range nz {
			if x := xs[i]; x != 0 {
				g := groupOf[c]
				if d.lift != nil {
					c = d.lift(c)
				}
				if seen != nil {
					if seen[[2]int{g, c}] {
						continue
					}
					seen[[2]int{g, c}] = true
				}
				cells[g] = append(cells[g], c)
				ws[g] = append(ws[g], x)
			}
		}
		vs := make([]vector, groups)
		for g := range vs {
			vs[g] = vector{cells[g], ws[g]}
		}
		out = append(out, vs)
	}
	return out
}

// nonZero is planner.Dense(l, sizes)'s entries that are not zero (some
// may be, where terms cancel), by cell ascending, bit for bit: over a
// long column an answer reads few cells (a day of a year of hours), and
// a dense vector per answer cost more than the search that reads them.
// Terms whose supports are a large part of the n cells are summed
// densely.
func nonZero(l compile.Linear, sizes []int, n int) (cells []int, xs []float64) {
	support := 0.0
	for _, t := range l {
		s := 1.0
		for j, f := range t.Factors {
			if f == nil {
				s *= float64(sizes[j])
				continue
			}
			k := 0
			for _, x := range f {
				if x != 0 {
					k++
				}
			}
			s *= float64(k)
		}
		support += s
	}
	if len(l) > 1 && support*8 > float64(n) || support > float64(n) {
		for c, x := range planner.Dense(l, sizes) {
			cells, xs = append(cells, c), append(xs, x)
		}
		return cells, xs
	}
	sum := map[int]float64{} // several terms: summed in their order, as Dense does
	for _, t := range l {
		cells, xs = termEntries(t, sizes, cells[:0], xs[:0])
		if len(l) == 1 {
			return cells, xs
		}
		for i, c := range cells {
			sum[c] += xs[i]
		}
	}
	cells, xs = cells[:0], xs[:0]
	for c := range sum {
		cells = append(cells, c)
	}
	slices.Sort(cells)
	for _, c := range cells {
		xs = append(xs, sum[c])
	}
	return cells, xs
}

// termEntries appends t's entries on its support (each factor's non-zero
// coordinates; nil: all), by cell ascending: coef·f_0[i_0]·…·f_d[i_d]
// multiplied from the last column to the first, as planner.Dense does.
func termEntries(t compile.Term, sizes []int, cells []int, xs []float64) ([]int, []float64) {
	var walk func(j, cell int)
	d := len(sizes)
	idx := make([]int, d)
	value := func() float64 {
		v := t.Coef
		for j := d - 1; j >= 0; j-- {
			if f := t.Factors[j]; f != nil {
				v = f[idx[j]] * v
			}
		}
		return v
	}
	walk = func(j, cell int) {
		if j == d {
			cells, xs = append(cells, cell), append(xs, value())
			return
		}
		f := t.Factors[j]
		for i := 0; i < sizes[j]; i++ {
			if f != nil && f[i] == 0 {
				continue
			}
			idx[j] = i
			walk(j+1, cell*sizes[j]+i)
		}
	}
	walk(0, 0)
	return cells, xs
}
