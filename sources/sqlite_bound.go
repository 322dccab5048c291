package sources

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dpproxy/dpproxy/catalog"
)

// Contribution bounding inside the file scan. A table with a privacy unit
// is read in the same one pass over its b-tree as a table without one
// (sqlitefile.go), and the truncation of units.go is applied in Go, with
// the same keyed hash SQL uses (unithash.go), so the histogram is the one
// the SQL path (sqlite_units.go) counts:
//
//   - each scan worker appends every row's unit, hash and internal cell
//     (32 bytes; a text or blob unit's bytes go to the worker's arena) to
//     one of 256 buffers chosen by a keyed hash of the unit, so all of a
//     unit's rows land in one partition: sequential writes, no lookup per
//     row;
//   - each partition (about 1/256 of the rows, so its work stays in
//     cache) is grouped by unit: integer units by a small map and a
//     counting sort of the rows' places, each unit's k rows of least hash
//     taken by a heap of k; text and blob units by sorting each chunk by
//     unit and hash and merging the chunks, each unit's first k rows kept;
//   - per unit, the kept rows are counted into their cells, or, with
//     max_groups g and max_rows_per_group r, counted into the g cells of
//     least cell hash, at most r rows each. Which r rows of a cell are
//     kept does not change the count, so only the rows per cell are needed.
//
// Memory. The buffers hold 32 bytes per row read, in chunks, and counting a
// partition takes 8 more per row of it. How much the scan may
// hold is decided before it starts, from public sizes only: the database
// file's size and the byte cap (Options.BoundBytes). The worst case is
// boundBytesPerFileByte bytes of state per byte of file; a file whose worst
// case exceeds the cap is read in P = ⌈worst / cap⌉ passes, pass p keeping
// only the partitions p modulo P (so each pass holds about 1/P of the
// rows: the keyed partition hash spreads units evenly, unpredictably to
// whoever writes the rows). Every pass reads the whole file and the answer
// is the same; the time grows with P, which depends on the file's size
// alone, as every scan's time does. Past maxBoundParts passes, the SQL path
// bounds instead (its sorter spills to temporary files), with the same
// answer.
//
// The scan leaves to SQL (before reading a row) a unit column whose
// declared type has REAL affinity or that the DDL gives a collation, and
// (when it meets one, abandoning the scan) a unit stored as a
// floating-point value: SQL groups such units by numeric or collated
// equality, which the scan does not reproduce.

// boundBytesPerFileByte bounds the scan's state per byte of database file:
// a row takes at least 8 bytes of file (cell pointer, sizes, rowid, a
// record header of at least two columns) and 32 bytes of buffer, 8 more
// while its partition is counted (its group and its place in the grouped
// order), 40 in all: 5 per byte of file; a text or blob unit adds its
// bytes (which the file holds too) and 5 more: at most 5/8 + 1 per byte.
// Beside that, the partially filled chunks take at most boundFixedBytes.
const boundBytesPerFileByte = 7

// boundFixedBytes bounds the partially filled chunks: one per partition
// and worker (for up to 4 workers).
const boundFixedBytes = 4 * boundRadix * chunkRows * 32

// maxBoundParts is the most passes the scan makes; a file that would need
// more is bounded by the SQL path, whose sorter spills to temporary files.
const maxBoundParts = 16

// DefaultBoundBytes is the default cap on the bounded file scan's state.
const DefaultBoundBytes = 2 << 30

// errScanUnit abandons a bounded scan for SQL (see above).
var errScanUnit = fmt.Errorf("%w: a unit stored as a floating-point value", errFileFormat)

// fieldRef is where a record keeps one column.
type fieldRef struct {
	index int // record position; -1 for the rowid alias
	dflt  any // for records written before the column was added
	real  bool
}

// boundScan is the bounded part of a file scan.
type boundScan struct {
	unit   fieldRef
	hashed []fieldRef // the unit, then every declared column (hashColumns)
	maxIdx int        // the largest record index read
	k0, k1 uint64
	u      *catalog.PrivacyUnit
	// parts is the number of passes (P above); this pass keeps the units
	// whose partition hash is part.
	parts, part uint64
}

// field is one decoded record value.
type field struct {
	st uint64
	b  []byte
}

// boundRadix is the number of partitions of units.
const boundRadix = 256

// boundWorker is one scan worker's decoding and row buffers.
type boundWorker struct {
	bs     *boundScan
	id     uint32
	fields []field
	buf    []byte
	key    []byte
	parts  [boundRadix][][]unitRow // chunks of growing size, up to chunkRows
	arena  []byte                  // text and blob units: tag, 4-byte length, bytes
}

// unitRow is one row read: its unit, hash and internal cell.
type unitRow struct {
	u    uint64 // an integer unit, or the keyed hash of a text or blob one
	h    uint64 // the row's keyed hash
	cell int32
	w    uint32 // the worker whose arena holds sref
	sref uint32 // 0 for an integer unit; else 1 + the unit's offset in the arena
}

// partition is a unit's partition from its u.
func (bs *boundScan) partition(u uint64) uint64 {
	// splitmix64's finalizer of the keyed value: an even split.
	z := u ^ bs.k1
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return (z ^ z>>31) >> 56
}

// intUnit is the buffer and row head of an integer unit's row, or nil when
// this pass leaves its partition.
func (w *boundWorker) intUnit(v int64) (*[][]unitRow, unitRow) {
	p := w.bs.partition(uint64(v))
	if w.bs.parts > 1 && p%w.bs.parts != w.bs.part {
		return nil, unitRow{}
	}
	return &w.parts[p], unitRow{u: uint64(v)}
}

// strUnit is intUnit for a text ('t') or blob ('b') unit.
func (w *boundWorker) strUnit(tag byte, b []byte) (*[][]unitRow, unitRow) {
	w.key = append(append(w.key[:0], tag), b...)
	u := siphash24(w.bs.k1, w.bs.k0, w.key)
	p := w.bs.partition(u)
	if w.bs.parts > 1 && p%w.bs.parts != w.bs.part {
		return nil, unitRow{}
	}
	off := len(w.arena)
	w.arena = append(w.arena, tag, 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(w.arena[off+1:], uint32(len(b)))
	w.arena = append(w.arena, b...)
	return &w.parts[p], unitRow{u: u, w: w.id, sref: uint32(off) + 1}
}

// chunkRows is the largest chunk of a partition's buffer: chunks start at
// 64 rows and double, so a buffer's slack is at most one chunk, and no
// copy is made as it grows.
const chunkRows = 4096

func appendRow(dst *[][]unitRow, r unitRow) {
	cs := *dst
	if n := len(cs); n == 0 || len(cs[n-1]) == cap(cs[n-1]) {
		size := 64
		if n > 0 {
			size = min(2*cap(cs[n-1]), chunkRows)
		}
		cs = append(cs, make([]unitRow, 0, size))
		*dst = cs
	}
	cs[len(cs)-1] = append(cs[len(cs)-1], r)
}

// unitKey is a text or blob unit's tag and bytes (nil for an integer unit).
func unitKey(ws []*boundWorker, r *unitRow) []byte {
	if r.sref == 0 {
		return nil
	}
	a := ws[r.w].arena
	off := int(r.sref - 1)
	n := int(binary.LittleEndian.Uint32(a[off+1:]))
	return a[off : off+5+n]
}

// compareUnits orders rows by unit (integers before text and blobs of the
// same u, which then compare by their bytes), then by row hash.
func compareUnits(ws []*boundWorker, a, b *unitRow) int {
	if a.u != b.u {
		return cmp.Compare(a.u, b.u)
	}
	if (a.sref == 0) != (b.sref == 0) {
		if a.sref == 0 {
			return -1
		}
		return 1
	}
	if a.sref != 0 && (a.w != b.w || a.sref != b.sref) {
		if c := bytes.Compare(unitKey(ws, a), unitKey(ws, b)); c != 0 {
			return c
		}
	}
	return cmp.Compare(a.h, b.h)
}

// sameUnit reports whether two rows are of one unit.
func sameUnit(ws []*boundWorker, a, b *unitRow) bool {
	if a.u != b.u || (a.sref == 0) != (b.sref == 0) {
		return false
	}
	return a.sref == 0 || a.w == b.w && a.sref == b.sref || bytes.Equal(unitKey(ws, a), unitKey(ws, b))
}

// decode splits a record into its first maxIdx+1 fields; it returns how
// many the record holds, and false if it is malformed.
func (w *boundWorker) decode(rec []byte) (int, bool) {
	hdrLen, k := varint(rec)
	if k == 0 || int(hdrLen) > len(rec) || int(hdrLen) < k {
		return 0, false
	}
	hdr := rec[k:hdrLen]
	body := int(hdrLen)
	n := 0
	for n <= w.bs.maxIdx && len(hdr) > 0 {
		st, m := varint(hdr)
		if m == 0 {
			return 0, false
		}
		hdr = hdr[m:]
		size := serialSize(st)
		if body+size > len(rec) {
			return 0, false
		}
		w.fields[n] = field{st, rec[body : body+size]}
		body += size
		n++
	}
	return n, true
}

// appendField appends the hashed bytes of one column of the decoded record,
// as the SQL function sees the value: integers in decimal (as reals under
// REAL affinity, which stores integral reals as integers), reals as Go's
// shortest 'g', text and blobs as their bytes.
func appendField(buf []byte, f fieldRef, fields []field, n int, rowid int64) []byte {
	if f.index < 0 {
		return strconv.AppendInt(append(buf, 0x1f, 'V'), rowid, 10)
	}
	if f.index >= n {
		return appendHashValue(buf, f.dflt)
	}
	fd := fields[f.index]
	switch st := fd.st; {
	case st == 0:
		return append(buf, 0x1f, 'N')
	case st <= 6 || st == 8 || st == 9:
		v := int64(st - 8) // 8 → 0, 9 → 1
		if st <= 6 {
			v = intValue(st, fd.b)
		}
		if f.real {
			return strconv.AppendFloat(append(buf, 0x1f, 'V'), float64(v), 'g', -1, 64)
		}
		return strconv.AppendInt(append(buf, 0x1f, 'V'), v, 10)
	case st == 7:
		return strconv.AppendFloat(append(buf, 0x1f, 'V'), math.Float64frombits(binary.BigEndian.Uint64(fd.b)), 'g', -1, 64)
	default:
		return append(append(buf, 0x1f, 'V'), fd.b...)
	}
}

// row reads one record into the worker's row buffers.
func (w *boundWorker) row(s *scanWorker, rec []byte, rowid int64) error {
	n, ok := w.decode(rec)
	if !ok {
		return fmt.Errorf("%w: bad record", errFileFormat)
	}
	bs := w.bs
	// The unit.
	var dst *[][]unitRow
	var head unitRow
	uf := bs.unit
	switch {
	case uf.index < 0:
		dst, head = w.intUnit(rowid)
	case uf.index >= n:
		switch v := uf.dflt.(type) {
		case nil:
			return nil
		case int64:
			dst, head = w.intUnit(v)
		case string:
			dst, head = w.strUnit('t', []byte(v))
		default:
			return errScanUnit
		}
	default:
		fd := w.fields[uf.index]
		switch st := fd.st; {
		case st == 0:
			return nil // a NULL unit: left out
		case st <= 6 || st == 8 || st == 9:
			v := int64(st - 8)
			if st <= 6 {
				v = intValue(st, fd.b)
			}
			dst, head = w.intUnit(v)
		case st == 7:
			return errScanUnit
		case st%2 == 1:
			dst, head = w.strUnit('t', fd.b)
		default:
			dst, head = w.strUnit('b', fd.b)
		}
	}
	if dst == nil {
		return nil // another pass's unit
	}
	// The cell.
	fs := s.fs
	idx := 0
	for j := range fs.cols {
		rc := &fs.cols[j]
		var c int
		switch {
		case rc.index < 0:
			c = rc.cellOfInt(rowid)
		case rc.index >= n:
			c = rc.col.CellOf(rc.dflt)
		default:
			c = rc.cell(w.fields[rc.index].st, w.fields[rc.index].b)
		}
		if c < 0 {
			c = rc.drop
		}
		idx += c * fs.strides[j]
	}
	// The hash.
	buf := w.buf[:0]
	for _, f := range bs.hashed {
		buf = appendField(buf, f, w.fields, n, rowid)
	}
	w.buf = buf
	head.h = siphash24(bs.k0, bs.k1, buf)
	head.cell = int32(idx)
	appendRow(dst, head)
	return nil
}

// runBound scans the table with the given number of workers, bounds every
// unit and counts the kept rows into counts (internal cells), in bs.parts
// passes. With pairs, it calls pairs with each unit's kept cells instead.
func (fs *fileScan) runBound(ctx context.Context, root uint32, counts []float64, workers int, pairs func([]int) error) error {
	clear(counts)
	parts := max(fs.bound.parts, 1)
	for p := uint64(0); p < parts; p++ {
		fs.bound.part = p
		if err := fs.boundPass(ctx, root, counts, workers, pairs); err != nil {
			return err
		}
	}
	return nil
}

// boundPass is one pass of runBound: the units of partitions bs.part
// modulo bs.parts.
func (fs *fileScan) boundPass(ctx context.Context, root uint32, counts []float64, workers int, pairs func([]int) error) error {
	bs := fs.bound
	fs.visits.Store(0) // each pass reads each page once
	trees, err := fs.sf.subtrees(root, 8*workers)
	if err != nil {
		return err
	}
	workers = max(1, min(workers, len(trees)))
	work := make(chan uint32, len(trees))
	for _, t := range trees {
		work <- t
	}
	close(work)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ws := make([]*scanWorker, workers)
	bws := make([]*boundWorker, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range ws {
		s := fs.worker(false)
		s.bound = &boundWorker{bs: bs, id: uint32(i), fields: make([]field, bs.maxIdx+1), buf: make([]byte, 0, 256)}
		ws[i], bws[i] = s, s.bound
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for pg := range work {
				if err := ws[i].tree(ctx, pg, nil); err != nil {
					errs[i] = err
					cancel()
					return
				}
			}
		}(i)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		if errors.Is(err, errScanUnit) {
			return errScanUnit
		}
		return err
	}
	// The partitions, sorted and counted by the same workers.
	next := make(chan int, boundRadix)
	for p := range boundRadix {
		next <- p
	}
	close(next)
	local := make([][]float64, workers)
	var mu sync.Mutex // pairs is called by one worker at a time
	for i := range workers {
		local[i] = make([]float64, len(counts))
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c := &unitCounter{bs: bs, counts: local[i]}
			if pairs != nil {
				c.pairs = func(cs []int) error { mu.Lock(); defer mu.Unlock(); return pairs(cs) }
			}
			var lists [][]unitRow
			for p := range next {
				if err := ctx.Err(); err != nil {
					errs[i] = err
					return
				}
				lists = lists[:0]
				for _, bw := range bws {
					lists = append(lists, bw.parts[p]...)
				}
				if err := c.partition(bws, lists); err != nil {
					errs[i] = err
					cancel()
					return
				}
				for _, bw := range bws {
					bw.parts[p] = nil
				}
			}
		}(i)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, l := range local {
		for j, x := range l {
			counts[j] += x
		}
	}
	return nil
}

// unitCounter turns sorted rows into the truncated histogram (see the file
// comment), or hands each unit's kept cells to pairs.
type unitCounter struct {
	bs     *boundScan
	counts []float64
	pairs  func([]int) error
	runs   []cellRun
	buf    []byte
	cells  []int
	kept   []unitRow
	group  []unitRow
	// partitionInts' buffers
	groups map[uint64]int32
	ends   []int32
	gids   []int32
	order  []uint32
	sel    []unitRow
}

type cellRun struct {
	cell int32
	n    int
	h    uint64
}

// partition counts one partition: each chunk sorted in place by unit and
// hash, the chunks merged, each unit's first k rows kept. A partition of
// integer units alone goes to partitionInts.
func (c *unitCounter) partition(ws []*boundWorker, lists [][]unitRow) error {
	ints := true
	for _, l := range lists {
		for i := range l {
			if l[i].sref != 0 {
				ints = false
				break
			}
		}
	}
	if ints {
		return c.partitionInts(ws, lists)
	}
	order := func(a, b unitRow) int {
		if a.u != b.u {
			return cmp.Compare(a.u, b.u)
		}
		if a.sref == 0 && b.sref == 0 {
			return cmp.Compare(a.h, b.h)
		}
		return compareUnits(ws, &a, &b)
	}
	for _, l := range lists {
		slices.SortFunc(l, order)
	}
	k := int(c.bs.u.MaxRows)
	heads := make([]int, len(lists))
	var cur unitRow
	kept := c.group[:0]
	for {
		best := -1
		for w, l := range lists {
			if heads[w] < len(l) && (best < 0 || order(l[heads[w]], lists[best][heads[best]]) < 0) {
				best = w
			}
		}
		if best < 0 {
			break
		}
		r := lists[best][heads[best]]
		heads[best]++
		if len(kept) > 0 && sameUnit(ws, &cur, &r) {
			if len(kept) < k {
				kept = append(kept, r)
			}
			continue
		}
		if len(kept) > 0 {
			if err := c.unit(ws, kept); err != nil {
				return err
			}
		}
		cur, kept = r, append(kept[:0], r)
	}
	c.group = kept
	if len(kept) > 0 {
		return c.unit(ws, kept)
	}
	return nil
}

// partitionInts is partition for integer units: grouped by a map (it fits
// in cache) and a counting sort of the rows' places, each unit's k rows of
// least hash selected by a heap.
func (c *unitCounter) partitionInts(ws []*boundWorker, lists [][]unitRow) error {
	if c.groups == nil {
		c.groups = map[uint64]int32{}
	}
	clear(c.groups)
	c.ends = c.ends[:0]
	c.gids = c.gids[:0]
	for _, l := range lists {
		for i := range l {
			g, ok := c.groups[l[i].u]
			if !ok {
				g = int32(len(c.ends))
				c.groups[l[i].u] = g
				c.ends = append(c.ends, 0)
			}
			c.ends[g]++
			c.gids = append(c.gids, g)
		}
	}
	// Counting sort by group: ends[g] becomes the end of group g's rows.
	n := 0
	for g, x := range c.ends {
		n += int(x)
		c.ends[g] = int32(n)
	}
	// The scatter writes each row's place (list << 12 | index: a chunk
	// holds at most chunkRows = 4096 rows), not the row: 4 bytes a row.
	c.order = slices.Grow(c.order[:0], n)[:n]
	j := len(c.gids)
	for w := len(lists) - 1; w >= 0; w-- {
		for i := len(lists[w]) - 1; i >= 0; i-- {
			j--
			g := c.gids[j]
			c.ends[g]--
			c.order[c.ends[g]] = uint32(w)<<12 | uint32(i)
		}
	}
	k := int(c.bs.u.MaxRows)
	for g, start := range c.ends {
		end := n
		if g+1 < len(c.ends) {
			end = int(c.ends[g+1])
		}
		// The k rows of least hash, by a max-heap of k.
		kept := c.sel[:0]
		for _, at := range c.order[start:end] {
			r := lists[at>>12][at&(chunkRows-1)]
			if len(kept) < k {
				kept = append(kept, r)
				if len(kept) == k {
					for i := k/2 - 1; i >= 0; i-- {
						siftDown(kept, i)
					}
				}
			} else if r.h < kept[0].h {
				kept[0] = r
				siftDown(kept, 0)
			}
		}
		c.sel = kept
		if err := c.unit(ws, kept); err != nil {
			return err
		}
	}
	return nil
}

// siftDown restores a max-heap by hash below i.
func siftDown(h []unitRow, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		if r := l + 1; r < len(h) && h[r].h > h[l].h {
			l = r
		}
		if h[i].h >= h[l].h {
			return
		}
		h[i], h[l] = h[l], h[i]
		i = l
	}
}

// unit counts one unit's kept rows.
func (c *unitCounter) unit(ws []*boundWorker, kept []unitRow) error {
	u := c.bs.u
	g, r := int(u.Groups()), int(u.PerCell())
	if !u.CellBounded() && len(c.counts) <= 1 && c.pairs == nil {
		c.counts[0] += float64(min(len(kept), r))
		return nil
	}
	c.kept = append(c.kept[:0], kept...)
	slices.SortFunc(c.kept, func(a, b unitRow) int { return int(a.cell) - int(b.cell) })
	runs := c.runs[:0]
	for _, e := range c.kept {
		if n := len(runs); n > 0 && runs[n-1].cell == e.cell {
			runs[n-1].n++
		} else {
			runs = append(runs, cellRun{cell: e.cell, n: 1})
		}
	}
	if u.CellBounded() && len(runs) > g {
		for j := range runs {
			buf := appendHashValue(c.buf[:0], "cell")
			if key := unitKey(ws, &kept[0]); key == nil {
				buf = appendHashValue(buf, int64(kept[0].u))
			} else {
				buf = append(append(buf, 0x1f, 'V'), key[5:]...)
			}
			c.buf = appendHashValue(buf, int64(runs[j].cell))
			runs[j].h = siphash24(c.bs.k0, c.bs.k1, c.buf)
		}
		slices.SortFunc(runs, func(a, b cellRun) int { return cmp.Compare(a.h, b.h) })
		runs = runs[:g]
	}
	c.runs = runs
	if c.pairs != nil {
		c.cells = c.cells[:0]
		for _, x := range runs {
			c.cells = append(c.cells, int(x.cell))
		}
		return c.pairs(c.cells)
	}
	for _, x := range runs {
		c.counts[x.cell] += float64(min(x.n, r))
	}
	return nil
}

// unitCellsScan is UnitCells by the bounded file scan; done is false when
// the scan leaves the table to SQL (and fn was not called).
func (s *sqliteSource) unitCellsScan(ctx context.Context, t *catalog.Table, cols []*catalog.Column, fn func(cells []int) error) (done bool, err error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	scan, root, err := s.planBound(ctx, tx, t, cols)
	if scan == nil || err != nil {
		return false, err
	}
	defer scan.sf.close()
	var rows atomic.Int64
	scan.rows = &rows
	called := false
	err = scan.runBound(ctx, root, make([]float64, cells(cols)), s.workers, func(cs []int) error {
		called = true
		return fn(cs)
	})
	if errors.Is(err, errFileFormat) && !called {
		return false, nil
	}
	return true, err
}

// planBound is plan for a table with a privacy unit: the file scan, in as
// many passes as the byte cap needs (see above), when its layout allows,
// the unit column is neither REAL nor collated, and every hashed column is
// stored in the records; nil to use SQL.
func (s *sqliteSource) planBound(ctx context.Context, tx *sql.Tx, t *catalog.Table, cols []*catalog.Column) (*fileScan, uint32, error) {
	var bs *boundScan
	check := func(info map[string]columnInfo, ddl string) bool {
		if strings.Contains(strings.ToUpper(ddl), "COLLATE") {
			return false
		}
		ref := func(name string) (fieldRef, bool) {
			ci, ok := info[strings.ToLower(name)]
			if !ok || !ci.stored {
				return fieldRef{}, false
			}
			return fieldRef{index: ci.index, dflt: ci.dflt, real: realAffinity(ci.typ)}, true
		}
		unit, ok := ref(t.Unit.Column)
		if !ok || unit.real {
			return false
		}
		bs = &boundScan{unit: unit, u: t.Unit}
		for _, c := range hashColumns(t) {
			f, ok := ref(c)
			if !ok {
				return false
			}
			bs.hashed = append(bs.hashed, f)
			bs.maxIdx = max(bs.maxIdx, f.index)
		}
		for _, c := range cols {
			f, ok := ref(c.Name)
			if !ok {
				return false
			}
			bs.maxIdx = max(bs.maxIdx, f.index)
		}
		return true
	}
	scan, root, err := s.planWith(ctx, tx, t, cols, check)
	if scan == nil || err != nil {
		return nil, 0, err
	}
	limit := s.boundBytes
	if limit <= 0 {
		limit = DefaultBoundBytes
	}
	bs.parts = boundParts(scan.sf.pages*int64(scan.sf.pageSize), limit)
	if bs.parts > maxBoundParts {
		scan.sf.close()
		return nil, 0, nil
	}
	bs.k0, bs.k1 = sipKey(s.key)
	scan.bound = bs
	return scan, root, nil
}

// boundParts is the number of passes for a file of size bytes under the
// cap limit (see above).
func boundParts(size, limit int64) uint64 {
	worst := size*boundBytesPerFileByte + boundFixedBytes
	return uint64(max(1, (worst+limit-1)/limit))
}

// realAffinity reports whether a declared type has REAL affinity
// (https://www.sqlite.org/datatype3.html, 3.1).
func realAffinity(typ string) bool {
	up := strings.ToUpper(typ)
	if strings.Contains(up, "INT") || strings.Contains(up, "CHAR") || strings.Contains(up, "CLOB") || strings.Contains(up, "TEXT") || strings.Contains(up, "BLOB") {
		return false
	}
	return strings.Contains(up, "REAL") || strings.Contains(up, "FLOA") || strings.Contains(up, "DOUB")
}
