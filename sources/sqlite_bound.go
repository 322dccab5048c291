package sources

import (
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
//   - each scan worker keeps, per unit, the at most k rows of least hash
//     it has seen (their hash and internal cell: 16 bytes each), as a
//     max-heap once it holds k;
//   - the workers' tables are merged (the k least of a union are the k
//     least of the parts' k least);
//   - per unit, the kept rows are counted into their cells, or, with
//     max_groups g and max_rows_per_group r, counted into the g cells of
//     least cell hash, at most r rows each. Which r rows of a cell are
//     kept does not change the count, so only the rows per cell are needed.
//
// Memory. The per-unit tables grow with the units and their kept rows, at
// most one entry per row read. How much the scan may hold is decided before
// it starts, from public sizes only: the database file's size and the byte
// cap (Options.BoundBytes). The worst case is every row its own unit, at
// most boundBytesPerFileByte bytes of state per byte of file; a file whose
// worst case exceeds the cap is read in P = ⌈worst / cap⌉ passes, pass p
// keeping only the units whose keyed hash is p modulo P (so each pass holds
// about 1/P of the state: the key makes the split unpredictable to whoever
// writes the rows, and a heavy unit holds only k entries whatever its
// rows). Every pass reads the whole file and the answer is the same; the
// time grows with P, which depends on the file's size alone, as every
// scan's time does. Past maxBoundParts passes, the SQL path bounds
// instead (its sorter spills to temporary files), with the same answer.
//
// The scan leaves to SQL (before reading a row) a unit column whose
// declared type has REAL affinity or that the DDL gives a collation, and
// (when it meets one, abandoning the scan) a unit stored as a
// floating-point value: SQL groups such units by numeric or collated
// equality, which the scan does not reproduce.

// boundBytesPerFileByte bounds the scan's state per byte of database file:
// a row takes at least 8 bytes of file (cell pointer, sizes, rowid, a
// record header of at least two columns) and at most about 150 bytes of
// state when it is its own unit (a map slot, a unit's record, one 16-byte
// entry, with the slack of doubling growth).
const boundBytesPerFileByte = 20

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

// keeps reports whether this pass keeps an integer unit.
func (bs *boundScan) keepsInt(v int64) bool {
	if bs.parts <= 1 {
		return true
	}
	// splitmix64's finalizer of the keyed value: an even split.
	z := uint64(v) ^ bs.k1
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return (z^z>>31)%bs.parts == bs.part
}

// keepsStr reports whether this pass keeps a text or blob unit.
func (bs *boundScan) keepsStr(tag byte, b []byte) bool {
	if bs.parts <= 1 {
		return true
	}
	var tmp [64]byte
	return siphash24(bs.k1, bs.k0, append(append(tmp[:0], tag), b...))%bs.parts == bs.part
}

// field is one decoded record value.
type field struct {
	st uint64
	b  []byte
}

// boundWorker is one worker's decoding buffers and unit table.
type boundWorker struct {
	bs     *boundScan
	fields []field
	buf    []byte
	units  unitTable
}

// unitTable is one worker's kept rows per unit.
type unitTable struct {
	k     int
	ints  map[int64]int32
	strs  map[string]int32
	units []unitState
}

// unitState is one unit's kept rows: unsorted while fewer than k, a
// max-heap by hash from k on.
type unitState struct {
	ents []keptRow
	key  string // text ('t') or blob ('b') units: the tag, then the bytes
	ikey int64  // integer units
}

type keptRow struct {
	h    uint64
	cell int32
}

func newUnitTable(k int) unitTable {
	return unitTable{k: k, ints: map[int64]int32{}, strs: map[string]int32{}}
}

func (t *unitTable) intUnit(v int64) *unitState {
	i, ok := t.ints[v]
	if !ok {
		i = int32(len(t.units))
		t.ints[v] = i
		t.units = append(t.units, unitState{ikey: v})
	}
	return &t.units[i]
}

func (t *unitTable) strUnit(tag byte, b []byte) *unitState {
	var tmp [64]byte
	key := append(append(tmp[:0], tag), b...)
	i, ok := t.strs[string(key)] // no allocation for the lookup
	if !ok {
		i = int32(len(t.units))
		s := string(key)
		t.strs[s] = i
		t.units = append(t.units, unitState{key: s})
	}
	return &t.units[i]
}

// add offers one row to a unit.
func (t *unitTable) add(u *unitState, r keptRow) {
	if len(u.ents) < t.k {
		u.ents = append(u.ents, r)
		if len(u.ents) == t.k {
			for i := t.k/2 - 1; i >= 0; i-- {
				siftDown(u.ents, i)
			}
		}
		return
	}
	if r.h < u.ents[0].h {
		u.ents[0] = r
		siftDown(u.ents, 0)
	}
}

func siftDown(h []keptRow, i int) {
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

// merge adds o's kept rows into t.
func (t *unitTable) merge(o *unitTable) {
	for i := range o.units {
		s := &o.units[i]
		var u *unitState
		if s.key == "" {
			u = t.intUnit(s.ikey)
		} else {
			u = t.strUnit(s.key[0], []byte(s.key[1:]))
		}
		for _, r := range s.ents {
			t.add(u, r)
		}
	}
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

// row reads one record into the worker's unit table.
func (w *boundWorker) row(s *scanWorker, rec []byte, rowid int64) error {
	n, ok := w.decode(rec)
	if !ok {
		return fmt.Errorf("%w: bad record", errFileFormat)
	}
	bs := w.bs
	// The unit.
	var u *unitState
	uf := bs.unit
	switch {
	case uf.index < 0:
		if !bs.keepsInt(rowid) {
			return nil
		}
		u = w.units.intUnit(rowid)
	case uf.index >= n:
		switch v := uf.dflt.(type) {
		case nil:
			return nil
		case int64:
			if !bs.keepsInt(v) {
				return nil
			}
			u = w.units.intUnit(v)
		case string:
			if !bs.keepsStr('t', []byte(v)) {
				return nil
			}
			u = w.units.strUnit('t', []byte(v))
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
			if !bs.keepsInt(v) {
				return nil
			}
			u = w.units.intUnit(v)
		case st == 7:
			return errScanUnit
		default:
			tag := byte('b')
			if st%2 == 1 {
				tag = 't'
			}
			if !bs.keepsStr(tag, fd.b) {
				return nil
			}
			u = w.units.strUnit(tag, fd.b)
		}
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
	w.units.add(u, keptRow{siphash24(bs.k0, bs.k1, buf), int32(idx)})
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

// boundPass is one pass of runBound: the units of partition bs.part.
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
	k := int(bs.u.MaxRows)
	ws := make([]*scanWorker, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range ws {
		s := fs.worker(false)
		s.bound = &boundWorker{bs: bs, fields: make([]field, bs.maxIdx+1), buf: make([]byte, 0, 256), units: newUnitTable(k)}
		ws[i] = s
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
	t := &ws[0].bound.units
	for _, s := range ws[1:] {
		if err := ctx.Err(); err != nil {
			return err
		}
		t.merge(&s.bound.units)
		s.bound.units = unitTable{}
	}
	return bs.count(ctx, t, counts, pairs)
}

// count turns the kept rows into the truncated histogram (see the file
// comment), or hands each unit's kept cells to pairs.
func (bs *boundScan) count(ctx context.Context, t *unitTable, counts []float64, pairs func([]int) error) error {
	u := bs.u
	g, r := int(u.Groups()), int(u.PerCell())
	type cellRun struct {
		cell int32
		n    int
		h    uint64
	}
	var runs []cellRun
	var buf []byte
	var cells []int
	for i := range t.units {
		if i%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		s := &t.units[i]
		if !u.CellBounded() && len(counts) <= 1 && pairs == nil {
			counts[0] += float64(min(len(s.ents), r))
			continue
		}
		slices.SortFunc(s.ents, func(a, b keptRow) int { return int(a.cell) - int(b.cell) })
		runs = runs[:0]
		for _, e := range s.ents {
			if n := len(runs); n > 0 && runs[n-1].cell == e.cell {
				runs[n-1].n++
			} else {
				runs = append(runs, cellRun{cell: e.cell, n: 1})
			}
		}
		if u.CellBounded() && len(runs) > g {
			for j := range runs {
				buf = appendHashValue(buf[:0], "cell")
				if s.key == "" {
					buf = appendHashValue(buf, s.ikey)
				} else {
					buf = append(append(buf, 0x1f, 'V'), s.key[1:]...)
				}
				buf = appendHashValue(buf, int64(runs[j].cell))
				runs[j].h = siphash24(bs.k0, bs.k1, buf)
			}
			slices.SortFunc(runs, func(a, b cellRun) int {
				if a.h < b.h {
					return -1
				}
				if a.h > b.h {
					return 1
				}
				return 0
			})
			runs = runs[:g]
		}
		if pairs != nil {
			cells = cells[:0]
			for _, c := range runs {
				cells = append(cells, int(c.cell))
			}
			if err := pairs(cells); err != nil {
				return err
			}
			continue
		}
		for _, c := range runs {
			counts[c.cell] += float64(min(c.n, r))
		}
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
	worst := size * boundBytesPerFileByte
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
