package planner

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/dpproxy/dpproxy/measure"
)

// Blocked systems. Over a domain of more than MaxKnownCells cells, the
// information matrix J = Σ_m P_mᵀA_mᵀA_mP_m/σ_m² is kept block by block:
// two cells are in one block when some measurement row reads both (a
// Kronecker row reads the product of its factors' rows' supports; a
// column the measurement sums over joins all its cells), so J is block
// diagonal and so is its generalised inverse. An hourly identity and
// daily sums over a year of hours are 365 blocks of 24 cells; an hourly
// identity alone is 8,760 blocks of one. Each block is solved as the
// dense system is (Solve), and an answer's variance is the sum over the
// blocks it reads of w_Bᵀ·J_B⁺·w_B: exact, as the dense solve is, with
// time and memory linear in the cells for blocks of bounded size.
//
// A measurement that would link more than MaxKnownCells cells into one
// block (a total over the whole domain, a hierarchy over all of it), or
// make the blocks' solves cost more than maxBlockedWork, does not join
// (Add reports false): the system keeps what it had, and such a
// measurement is combined only over domains small enough to be dense.

// MaxBlockedCells bounds the domain of a blocked system: a year of hourly
// bins (8,760) by a few categories.
const MaxBlockedCells = 65536

// maxBlockedWork bounds Σ over blocks of |B|³, the work of solving a
// blocked system: eight dense solves of MaxKnownCells cells (about 0.1 s
// each).
const maxBlockedWork = 8 * MaxKnownCells * MaxKnownCells * MaxKnownCells

// blocked is a blocked system's structure: the measurements added (as
// terms, in order) and the blocks they make (a union-find over the
// cells). J per block is built from the terms when first needed
// (blocks), and shared by clones until one adds a term.
type blocked struct {
	terms []*term
	// parent is the union-find forest over the cells (-1: no
	// measurement reads the cell); size is a root's block size.
	parent, size []int32
	built        *blockBuild
	memo         *factorMemo // shared by clones
}

func newBlocked(n int) *blocked {
	b := &blocked{parent: make([]int32, n), size: make([]int32, n)}
	for i := range b.parent {
		b.parent[i] = -1
	}
	b.built = &blockBuild{}
	b.memo = &factorMemo{}
	return b
}

func (b *blocked) clone() *blocked {
	return &blocked{terms: slices.Clone(b.terms), parent: slices.Clone(b.parent), size: slices.Clone(b.size), built: b.built, memo: b.memo}
}

// find is s's root, without path compression: clones and concurrent
// readers share nothing they write.
func (b *blocked) find(s int32) int32 {
	for b.parent[s] != s {
		s = b.parent[s]
	}
	return s
}

// term is one measurement as the blocked system sees it: observing
// ⊗_t A_t over T's cells (T the system's columns it reads, in its column
// order), J's contribution w·(⊗ A_tᵀA_t) between cells s, s' at their
// T cells π(s), π(s').
type term struct {
	w       float64
	factors []*sparseFactor // per T column; nil: the identity
	sizes   []int           // per T column, its size
	sCol    []int           // per T column, the system's column
	comp    [][]int32       // per T column, each cell's component of the factor's rows (-1: no row reads it)
	ncomp   []int
}

// termOf is m as the blocked system sees it, at weight, with its
// answers contracted to T's rows (nil without answers or without
// withAnswers); ok is false when m cannot join (see GLS).
func (g *GLS) termOf(m *measure.Measurement, weight float64, withAnswers bool) (t *term, y []float64, ok bool) {
	m = g.embed(m)
	inT := make([]int, len(g.Columns)) // system column -> index in m.Columns, -1 if absent
	keep := make([]bool, len(m.Columns))
	sysCol := make([]int, len(m.Columns))
	for k, c := range g.Columns {
		inT[k] = -1
		for i, mc := range m.Columns {
			if mc.Name == c.Name {
				if mc.Def != c.Def || mc.Size != c.Size {
					return nil, nil, false
				}
				inT[k], keep[i], sysCol[i] = i, true, k
			}
		}
		if inT[k] < 0 && !c.Whole {
			return nil, nil, false
		}
	}
	_, rows, contracted, variance, ok := marginalise(m, keep)
	if !ok || !(variance > 0) {
		return nil, nil, false
	}
	t = &term{w: weight / variance}
	var shape []int
	for i, mc := range m.Columns {
		if !keep[i] {
			continue
		}
		f, comp, k := g.blk.memo.factor(m, i)
		t.factors, t.sizes, t.sCol = append(t.factors, f), append(t.sizes, mc.Size), append(t.sCol, sysCol[i])
		t.comp, t.ncomp = append(t.comp, comp), append(t.ncomp, k)
		shape = append(shape, rows[i])
	}
	if withAnswers && contracted != nil {
		y = contracted
		for k, f := range t.factors {
			y, shape = f.applyT(y, shape, k)
			shape[k] = t.sizes[k]
		}
	}
	return t, y, true
}

// cellCoords fills coords with cell s's coordinate in each system column.
func (g *GLS) cellCoords(s int, coords []int) {
	for k := len(g.sizes) - 1; k >= 0; k-- {
		coords[k] = s % g.sizes[k]
		s /= g.sizes[k]
	}
}

// link is b's forest with t's rows joined: ok is false, with capped,
// when a block would pass MaxKnownCells cells or the blocks' work
// maxBlockedWork; largest is the largest block.
func (g *GLS) link(b *blocked, t *term, capped bool) (parent, size []int32, largest int, ok bool) {
	parent, size = slices.Clone(b.parent), slices.Clone(b.size)
	find := func(s int32) int32 {
		for parent[s] != s {
			s = parent[s]
		}
		return s
	}
	keys := 1
	for _, k := range t.ncomp {
		keys *= k
	}
	first := make([]int32, keys)
	for i := range first {
		first[i] = -1
	}
	coords := make([]int, len(g.sizes))
	for s := 0; s < g.n; s++ {
		g.cellCoords(s, coords)
		key := 0
		for k, col := range t.sCol {
			c := t.comp[k][coords[col]]
			if c < 0 {
				key = -1
				break
			}
			key = key*t.ncomp[k] + int(c)
		}
		if key < 0 {
			continue
		}
		if parent[s] < 0 {
			parent[s], size[s] = int32(s), 1
		}
		if first[key] < 0 {
			first[key] = int32(s)
			continue
		}
		a, r := find(int32(s)), find(first[key])
		if a == r {
			continue
		}
		if size[a] > size[r] || (size[a] == size[r] && a < r) {
			a, r = r, a
		}
		parent[a], size[r] = r, size[r]+size[a]
	}
	work := 0.0
	for s, p := range parent {
		if p == int32(s) {
			largest = max(largest, int(size[s]))
			work += math.Pow(float64(size[s]), 3)
		}
	}
	if capped && (largest > MaxKnownCells || work > maxBlockedWork) {
		return nil, nil, largest, false
	}
	return parent, size, largest, true
}

// addBlocked is add for a blocked system.
func (g *GLS) addBlocked(m *measure.Measurement, weight float64, apply bool) bool {
	t, y, ok := g.termOf(m, weight, apply)
	if !ok {
		return false
	}
	parent, size, _, ok := g.link(g.blk, t, true)
	if !ok || !apply {
		return ok
	}
	if y != nil {
		coords := make([]int, len(g.sizes))
		for s := 0; s < g.n; s++ {
			g.cellCoords(s, coords)
			idx := 0
			for k, col := range t.sCol {
				idx = idx*t.sizes[k] + coords[col]
			}
			g.b[s] += t.w * y[idx]
		}
	}
	g.blk.terms = append(g.blk.terms, t)
	g.blk.parent, g.blk.size = parent, size
	g.blk.built = g.blk.built.next()
	g.Used = append(g.Used, m.ID)
	return true
}

// Largest is the number of cells of the largest system Solve factors:
// all n of a dense system, the largest block of a blocked one.
func (g *GLS) Largest() int {
	if g.blk == nil {
		return g.n
	}
	n := 0
	for s, p := range g.blk.parent {
		if p == int32(s) {
			n = max(n, int(g.blk.size[s]))
		}
	}
	return n
}

// Work is about the work of solving g, in cells³: n³ for a dense system,
// Σ|B|³ over a blocked one's blocks.
func (g *GLS) Work() float64 {
	if g.blk == nil {
		return math.Pow(float64(g.n), 3)
	}
	w := 0.0
	for s, p := range g.blk.parent {
		if p == int32(s) {
			w += math.Pow(float64(g.blk.size[s]), 3)
		}
	}
	return w
}

// SizeWith is Largest and Work of g with ms added (those that cannot
// join otherwise skipped), with no bound on the blocks: what a system
// combining them would have to solve. It adds nothing to g.
func (g *GLS) SizeWith(ms []*measure.Measurement) (largest int, work float64) {
	if g.blk == nil {
		return g.Largest(), g.Work()
	}
	cp := *g
	cp.blk = g.blk.clone()
	for _, m := range ms {
		if m.Valid() != nil {
			continue
		}
		t, _, ok := g.termOf(m, 1, false)
		if !ok {
			continue
		}
		cp.blk.parent, cp.blk.size, _, _ = g.link(cp.blk, t, false)
	}
	return cp.Largest(), cp.Work()
}

// Joiner returns a function reporting, for each measurement in turn,
// whether Add would add it after those it already said join: which
// measurements join a blocked system depends on the blocks those before
// them made. It adds nothing to g.
func (g *GLS) Joiner() func(m *measure.Measurement) bool {
	if g.blk == nil {
		return g.Joins
	}
	b := g.blk.clone()
	return func(m *measure.Measurement) bool {
		if m.Valid() != nil {
			return false
		}
		t, _, ok := g.termOf(m, 1, false)
		if !ok {
			return false
		}
		parent, size, _, ok := g.link(b, t, true)
		if ok {
			b.parent, b.size = parent, size
		}
		return ok
	}
}

// bytes is about the memory b holds, with its blocks' J once built.
func (b *blocked) bytes() int64 {
	n := int64(len(b.parent)) * 8
	for s, p := range b.parent {
		if p == int32(s) {
			n += int64(b.size[s]) * int64(b.size[s]) * 8
		}
	}
	for _, t := range b.terms {
		for k, f := range t.factors {
			n += int64(len(t.comp[k])) * 4
			if f != nil {
				n += int64(len(f.val))*12 + int64(len(f.start))*4
			}
		}
	}
	return n
}

// blockBuild is a blocked system's blocks and their J, built once.
type blockBuild struct {
	once  sync.Once
	cells [][]int     // per block, its cells ascending; blocks by first cell
	of    []int32     // per cell, its block (-1: none)
	at    []int32     // per cell, its index in its block
	j     [][]float64 // per block, J_B's upper triangle, row-major
	// base, when set, is a finished build of the first base.terms terms:
	// blocks only merge as terms are added, so each of its blocks lies in
	// one of these, and its J is where these start (dropped once built).
	base  *blockBuild
	terms int // how many terms J holds
	done  atomic.Bool
}

// next is the build of a system with one more term than bb's: from bb
// when bb is finished (the search for the least ε adds a new
// measurement to a stored system that is), else from bb's own base.
func (bb *blockBuild) next() *blockBuild {
	if bb.done.Load() {
		return &blockBuild{base: bb}
	}
	return &blockBuild{base: bb.base}
}

// blocks builds, once, g's blocks and their J: each term's entries
// between two cells of a block, w·Π_t (A_tᵀA_t)[π_t(s), π_t(s')], added
// in the order the terms were (the dense system's entries, bit for bit).
func (g *GLS) blocks() *blockBuild {
	bb, b := g.blk.built, g.blk
	bb.once.Do(func() {
		bb.of, bb.at = make([]int32, g.n), make([]int32, g.n)
		blockOfRoot := map[int32]int32{}
		for s := range bb.of {
			bb.of[s] = -1
			if b.parent[s] < 0 {
				continue
			}
			root := b.find(int32(s))
			id, ok := blockOfRoot[root]
			if !ok {
				id = int32(len(bb.cells))
				blockOfRoot[root] = id
				bb.cells = append(bb.cells, nil)
			}
			bb.of[s], bb.at[s] = id, int32(len(bb.cells[id]))
			bb.cells[id] = append(bb.cells[id], s)
		}
		bb.j = make([][]float64, len(bb.cells))
		for i, cells := range bb.cells {
			bb.j[i] = make([]float64, len(cells)*len(cells))
		}
		from := 0
		if base := bb.base; base != nil {
			// The same sums in the same order as from nothing: the base's
			// entries hold the first terms', and its blocks' pairs are the
			// only ones those terms reach.
			from = base.terms
			for ob, ocells := range base.cells {
				on, nj := len(ocells), bb.j[bb.of[ocells[0]]]
				nb := int(math.Sqrt(float64(len(nj))) + 0.5)
				for op, s := range ocells {
					lp := int(bb.at[s])
					for oq := op; oq < on; oq++ {
						nj[lp*nb+int(bb.at[ocells[oq]])] = base.j[ob][op*on+oq]
					}
				}
			}
			bb.base = nil
		}
		scratch := make([][]int32, len(g.sizes)) // per column, a coordinate's index in the block (-1: none)
		for k, n := range g.sizes {
			scratch[k] = make([]int32, n)
			for i := range scratch[k] {
				scratch[k][i] = -1
			}
		}
		for _, t := range b.terms[from:] {
			for i, cells := range bb.cells {
				g.addTermToBlock(t, cells, bb.j[i], scratch)
			}
		}
		bb.terms = len(b.terms)
		bb.done.Store(true)
	})
	return bb
}

// addTermToBlock adds t's entries between the cells of one block to its
// J (upper triangle, row-major), reading each factor's gram only on the
// coordinates the block has. scratch is all -1 per column, and left so.
func (g *GLS) addTermToBlock(t *term, cells []int, j []float64, scratch [][]int32) {
	nb := len(cells)
	local := make([][]int32, len(t.sCol)) // per T column, each cell's index among the block's coordinates (-1: unread)
	grams := make([][]float64, len(t.sCol))
	stride := make([]int32, len(t.sCol))
	at := make([]int, nb*len(g.sizes)) // each cell's coordinates
	for p, s := range cells {
		g.cellCoords(s, at[p*len(g.sizes):(p+1)*len(g.sizes)])
	}
	for k, col := range t.sCol {
		local[k] = make([]int32, nb)
		index := scratch[col]
		var uniq []int
		for p := range cells {
			c := at[p*len(g.sizes)+col]
			if t.comp[k][c] < 0 {
				local[k][p] = -1
				continue
			}
			id := index[c]
			if id < 0 {
				id = int32(len(uniq))
				index[c] = id
				uniq = append(uniq, c)
			}
			local[k][p] = id
		}
		for _, c := range uniq {
			index[c] = -1
		}
		u := len(uniq)
		gm := make([]float64, u*u)
		for a := 0; a < u; a++ {
			for c := a; c < u; c++ {
				v := t.factors[k].dot(uniq[a], uniq[c])
				gm[a*u+c], gm[c*u+a] = v, v
			}
		}
		grams[k], stride[k] = gm, int32(u)
	}
	for p := 0; p < nb; p++ {
	pairs:
		for q := p; q < nb; q++ {
			v := 1.0
			for k := range t.sCol {
				lp, lq := local[k][p], local[k][q]
				if lp < 0 || lq < 0 {
					continue pairs
				}
				v *= grams[k][lp*stride[k]+lq]
			}
			if v != 0 {
				j[p*nb+q] += t.w * v
			}
		}
	}
}

// equal reports whether two blocked systems have the same blocks and J,
// bit for bit.
func (bb *blockBuild) equal(o *blockBuild) bool {
	if len(bb.cells) != len(o.cells) {
		return false
	}
	for i := range bb.cells {
		if !slices.Equal(bb.cells[i], o.cells[i]) || !slices.Equal(bb.j[i], o.j[i]) {
			return false
		}
	}
	return true
}

// quad is wᵀJw over the blocks (see GLS.Quad).
func (bb *blockBuild) quad(cells []int, w []float64) float64 {
	v := 0.0
	for k, c := range cells {
		b := bb.of[c]
		if b < 0 {
			continue
		}
		nb := len(bb.cells[b])
		for l, c2 := range cells {
			if bb.of[c2] != b {
				continue
			}
			i, j := min(bb.at[c], bb.at[c2]), max(bb.at[c], bb.at[c2])
			v += w[k] * w[l] * bb.j[b][int(i)*nb+int(j)]
		}
	}
	return v
}

// solveBlocks is Solve for a blocked system: each block factored as the
// dense system is.
func (g *GLS) solveBlocks() (*Estimate, bool) {
	bb := g.blocks()
	est := &Estimate{n: g.n, Used: g.Used, blocks: bb, parts: make([]*Estimate, len(bb.cells))}
	any := false
	for i, cells := range bb.cells {
		if p, ok := solveSym(len(cells), slices.Clone(bb.j[i])); ok {
			est.parts[i], any = p, true
		}
	}
	if !any {
		return nil, false
	}
	est.X = est.applyBlocks(g.b)
	return est, true
}

// applyBlocks is G·b block by block (zero on cells no block identifies).
func (e *Estimate) applyBlocks(b []float64) []float64 {
	x := make([]float64, e.n)
	for i, p := range e.parts {
		if p == nil {
			continue
		}
		cells := e.blocks.cells[i]
		bb := make([]float64, len(cells))
		for k, c := range cells {
			bb[k] = b[c]
		}
		for k, v := range p.apply(bb) {
			x[cells[k]] = v
		}
	}
	return x
}

// answerBlocks is Answer for a blocked estimate: the sum over the blocks
// w reads of each block's answer (their noises independent), not
// identified when some block's is not, or w reads a cell no
// measurement does (beyond the tolerance the dense test allows).
func (e *Estimate) answerBlocks(cells []int, w []float64, norm float64) (value, variance float64, ok bool) {
	bb := e.blocks
	var order []int32
	byBlock := map[int32][]int{} // block -> indexes into cells
	for k, c := range cells {
		b := bb.of[c]
		if b < 0 || e.parts[b] == nil {
			if w[k]*w[k] > 1e-9*norm {
				return 0, math.Inf(1), false
			}
			continue
		}
		if _, seen := byBlock[b]; !seen {
			order = append(order, b)
		}
		byBlock[b] = append(byBlock[b], k)
	}
	for _, b := range order {
		ks := byBlock[b]
		lc, lw := make([]int, len(ks)), make([]float64, len(ks))
		for i, k := range ks {
			lc[i], lw[i] = int(bb.at[cells[k]]), w[k]
		}
		_, vr, ok := e.parts[b].answer(lc, lw, norm, nil)
		if !ok {
			return 0, math.Inf(1), false
		}
		variance += vr
	}
	for k, c := range cells {
		value += w[k] * e.X[c]
	}
	return value, variance, true
}

// covBlocks is CovAt for a blocked estimate: zero across blocks.
func (e *Estimate) covBlocks(i, j int) float64 {
	bb := e.blocks
	b := bb.of[i]
	if b < 0 || bb.of[j] != b || e.parts[b] == nil {
		return 0
	}
	return e.parts[b].CovAt(int(bb.at[i]), int(bb.at[j]))
}

// blocksBytes is Bytes for a blocked estimate.
func (e *Estimate) blocksBytes() int64 {
	n := int64(len(e.X)+2*e.n)*8 + int64(len(e.Used))*8
	for _, p := range e.parts {
		if p != nil {
			n += p.Bytes()
		}
	}
	return n
}
