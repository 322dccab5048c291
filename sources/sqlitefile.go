package sources

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/dpproxy/dpproxy/catalog"
)

// The embedded path's one-pass count reads the table's b-tree straight from
// the SQLite file (https://www.sqlite.org/fileformat2.html), decoding only
// the binned columns of each record and counting its cell in Go: no sort,
// no per-row call through the SQL engine. The caller holds a read
// transaction on the file for the whole scan (SQLite's SHARED lock), so no
// writer can change a page under it; it is used only for rollback-journal
// databases in UTF-8 and ordinary rowid tables, and the SQL path
// (sqliteAggregate) serves everything else.

// errFileFormat means the file holds something this reader does not
// handle; the caller falls back to SQL.
var errFileFormat = errors.New("sqlite file: unsupported layout")

// sqliteFile is an open database file and its header's geometry.
type sqliteFile struct {
	f        *os.File
	pageSize int
	usable   int   // page size less the reserved bytes at each page's end
	pages    int64 // pages in the file when it was opened
}

func openSQLiteFile(path string) (*sqliteFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	var h [100]byte
	if _, err := f.ReadAt(h[:], 0); err != nil {
		f.Close()
		return nil, err
	}
	if string(h[:16]) != "SQLite format 3\x00" {
		f.Close()
		return nil, fmt.Errorf("%w: not an SQLite 3 file", errFileFormat)
	}
	ps := int(binary.BigEndian.Uint16(h[16:18]))
	if ps == 1 {
		ps = 65536
	}
	enc := binary.BigEndian.Uint32(h[56:60])
	if ps < 512 || ps&(ps-1) != 0 || (enc != 0 && enc != 1) || h[18] == 2 || h[19] == 2 {
		// bad page size, UTF-16 text, or WAL file format
		f.Close()
		return nil, fmt.Errorf("%w: page size %d, encoding %d, WAL %v", errFileFormat, ps, enc, h[18] == 2)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &sqliteFile{f: f, pageSize: ps, usable: ps - int(h[20]), pages: st.Size() / int64(ps)}, nil
}

func (sf *sqliteFile) close() error { return sf.f.Close() }

func (sf *sqliteFile) page(buf []byte, pgno uint32) ([]byte, error) {
	if pgno == 0 {
		return nil, fmt.Errorf("%w: page 0", errFileFormat)
	}
	buf = buf[:sf.pageSize]
	if _, err := sf.f.ReadAt(buf, int64(pgno-1)*int64(sf.pageSize)); err != nil {
		return nil, fmt.Errorf("sqlite file: page %d: %w", pgno, err)
	}
	return buf, nil
}

// headerOffset is where a page's b-tree header starts: after the file
// header on page 1.
func headerOffset(pgno uint32) int {
	if pgno == 1 {
		return 100
	}
	return 0
}

// children lists an interior table page's child pages in key order.
func (sf *sqliteFile) children(p []byte, pgno uint32) ([]uint32, error) {
	h := headerOffset(pgno)
	if p[h] != 0x05 {
		return nil, nil
	}
	n := int(binary.BigEndian.Uint16(p[h+3:]))
	out := make([]uint32, 0, n+1)
	if h+12+2*n > len(p) {
		return nil, fmt.Errorf("%w: cell pointer array out of page", errFileFormat)
	}
	for i := 0; i < n; i++ {
		off := int(binary.BigEndian.Uint16(p[h+12+2*i:]))
		if off+4 > len(p) {
			return nil, fmt.Errorf("%w: cell pointer out of page", errFileFormat)
		}
		out = append(out, binary.BigEndian.Uint32(p[off:]))
	}
	return append(out, binary.BigEndian.Uint32(p[h+8:])), nil
}

// subtrees splits the table rooted at root into at least n subtrees when the
// tree is deep enough, in key order.
func (sf *sqliteFile) subtrees(root uint32, n int) ([]uint32, error) {
	level := []uint32{root}
	buf := make([]byte, sf.pageSize)
	read := int64(0)
	for len(level) < n {
		var next []uint32
		for _, pg := range level {
			// Each page is read at most once in a well-formed tree; more
			// reads mean pages that point in a cycle.
			if read++; read > sf.pages {
				return nil, fmt.Errorf("%w: more page reads than the file has pages", errFileFormat)
			}
			p, err := sf.page(buf, pg)
			if err != nil {
				return nil, err
			}
			kids, err := sf.children(p, pg)
			if err != nil {
				return nil, err
			}
			if kids == nil { // a leaf: the tree is not deeper here
				return level, nil
			}
			next = append(next, kids...)
		}
		level = next
	}
	return level, nil
}

// recordColumn is one binned column: its position in the record (or -1 for
// the rowid of an INTEGER PRIMARY KEY), its default for records written
// before it was added, and its binning.
type recordColumn struct {
	index int
	dflt  any
	col   *catalog.Column
	drop  int // the internal dropped cell: col.Size()
	// Categorical lookup without allocating: m[string(b)].
	values map[string]int
}

func newRecordColumn(index int, dflt any, c *catalog.Column) recordColumn {
	rc := recordColumn{index: index, dflt: dflt, col: c, drop: c.Size()}
	if c.Kind == catalog.Categorical && len(c.Patterns) == 0 {
		rc.values = make(map[string]int, len(c.Values))
		for i, v := range c.Values {
			rc.values[v] = i
		}
	}
	return rc
}

// cellOfInt is catalog.Column.CellOfInt with the integer range inlined.
func (rc *recordColumn) cellOfInt(x int64) int {
	c := rc.col
	if c.Kind == catalog.IntegerRange && x >= c.Min && x <= c.Max {
		return int((x - c.Min) / c.Width)
	}
	return c.CellOfInt(x)
}

func (rc *recordColumn) cellOfText(b []byte) int {
	if rc.values != nil {
		if i, ok := rc.values[string(b)]; ok {
			return i
		}
		return rc.col.OtherCell()
	}
	return rc.col.CellOfText(string(b))
}

// cell bins one record value of serial type st stored in b.
func (rc *recordColumn) cell(st uint64, b []byte) int {
	switch {
	case st == 0:
		return rc.col.NullCell()
	case st <= 6:
		return rc.cellOfInt(intValue(st, b))
	case st == 7:
		return rc.col.CellOfFloat(math.Float64frombits(binary.BigEndian.Uint64(b)))
	case st == 8:
		return rc.cellOfInt(0)
	case st == 9:
		return rc.cellOfInt(1)
	default: // text (odd) or blob (even): both compare as their bytes
		return rc.cellOfText(b)
	}
}

// serialSize is the body size of a value of serial type st.
func serialSize(st uint64) int {
	switch {
	case st >= 12:
		return int((st - 12) / 2)
	case st == 7:
		return 8
	case st >= 1 && st <= 4:
		return int(st)
	case st == 5:
		return 6
	case st == 6:
		return 8
	}
	return 0
}

func intValue(st uint64, b []byte) int64 {
	switch st {
	case 1:
		return int64(int8(b[0]))
	case 2:
		return int64(int16(binary.BigEndian.Uint16(b)))
	case 3:
		return int64(int32(uint32(b[0])<<24|uint32(b[1])<<16|uint32(b[2])<<8) >> 8)
	case 4:
		return int64(int32(binary.BigEndian.Uint32(b)))
	case 5:
		return int64(uint64(binary.BigEndian.Uint16(b))<<48|uint64(binary.BigEndian.Uint32(b[2:]))<<16) >> 16
	}
	return int64(binary.BigEndian.Uint64(b))
}

// varint decodes SQLite's big-endian variable-length integer.
func varint(b []byte) (uint64, int) {
	var v uint64
	for i := 0; i < 8; i++ {
		if i >= len(b) {
			return 0, 0
		}
		v = v<<7 | uint64(b[i]&0x7f)
		if b[i] < 0x80 {
			return v, i + 1
		}
	}
	if len(b) < 9 {
		return 0, 0
	}
	return v<<8 | uint64(b[8]), 9
}

// fileScan counts the rows of one table b-tree into a histogram.
type fileScan struct {
	sf      *sqliteFile
	cols    []recordColumn // in histogram order
	order   []int          // indexes into cols by increasing record index
	strides []int
	rows    *atomic.Int64
	// bound, for a table with a privacy unit, bounds per unit instead of
	// counting each row (sqlite_bound.go).
	bound *boundScan
	// visits counts the pages the workers read. A well-formed table reads
	// each of its pages once, so more visits than the file has pages means
	// pages that point in a cycle: the scan stops instead of looping.
	visits atomic.Int64
}

// visit charges one page read against the file's page count.
func (fs *fileScan) visit() error {
	if fs.visits.Add(1) > fs.sf.pages {
		return fmt.Errorf("%w: more page reads than the file has pages", errFileFormat)
	}
	return nil
}

// run scans the subtrees with the given number of workers and adds every
// row's cell into counts. The workers count into counts itself, viewed as
// uint64 and added to atomically, then turned into float64 in place: no
// per-worker copy of the domain.
func (fs *fileScan) run(ctx context.Context, root uint32, counts []float64, workers int) error {
	trees, err := fs.sf.subtrees(root, 8*workers)
	if err != nil {
		return err
	}
	if workers > len(trees) {
		workers = len(trees)
	}
	work := make(chan uint32, len(trees))
	for _, t := range trees {
		work <- t
	}
	close(work)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	clear(counts)
	shared := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(counts))), len(counts))
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			s := fs.worker(workers > 1)
			for pg := range work {
				if err := s.tree(ctx, pg, shared); err != nil {
					errs[w] = err
					cancel()
					return
				}
			}
		}(w)
	}
	wg.Wait()
	for i, v := range shared {
		counts[i] = float64(v)
	}
	return errors.Join(errs...)
}

// scanWorker holds one goroutine's buffers.
type scanWorker struct {
	fs       *fileScan
	atomic   bool     // other workers count into the same array
	pages    [][]byte // one buffer per tree level
	overflow []byte
	ovPage   []byte
	bound    *boundWorker // rows go to the unit table, not counts
}

func (fs *fileScan) worker(atomic bool) *scanWorker {
	return &scanWorker{fs: fs, atomic: atomic, ovPage: make([]byte, fs.sf.pageSize)}
}

func (s *scanWorker) buffer(depth int) []byte {
	for len(s.pages) <= depth {
		s.pages = append(s.pages, make([]byte, s.fs.sf.pageSize))
	}
	return s.pages[depth]
}

// maxPayload bounds one record's size: SQLite's own limit on a row
// (SQLITE_MAX_LENGTH) is 10⁹ bytes by default and at most 2³¹ − 1.
const maxPayload = 1<<31 - 1

// maxDepth bounds the b-tree depth (SQLite's own limit is 20), so a damaged
// file whose pages point in a cycle ends in an error.
const maxDepth = 40

func (s *scanWorker) tree(ctx context.Context, pgno uint32, counts []uint64) error {
	return s.walk(ctx, pgno, 0, counts)
}

func (s *scanWorker) walk(ctx context.Context, pgno uint32, depth int, counts []uint64) error {
	if depth > maxDepth {
		return fmt.Errorf("%w: b-tree deeper than %d", errFileFormat, maxDepth)
	}
	if err := s.fs.visit(); err != nil {
		return err
	}
	p, err := s.fs.sf.page(s.buffer(depth), pgno)
	if err != nil {
		return err
	}
	h := headerOffset(pgno)
	switch p[h] {
	case 0x05:
		kids, err := s.fs.sf.children(p, pgno)
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		for _, k := range kids {
			if err := s.walk(ctx, k, depth+1, counts); err != nil {
				return err
			}
		}
		return nil
	case 0x0d:
		return s.leaf(p, h, counts)
	}
	return fmt.Errorf("%w: page %d has type %#x in a table b-tree", errFileFormat, pgno, p[h])
}

func (s *scanWorker) leaf(p []byte, h int, counts []uint64) error {
	sf := s.fs.sf
	n := int(binary.BigEndian.Uint16(p[h+3:]))
	u := sf.usable
	maxLocal := u - 35
	minLocal := (u-12)*32/255 - 23
	if h+8+2*n > len(p) {
		return fmt.Errorf("%w: cell pointer array out of page", errFileFormat)
	}
	for i := 0; i < n; i++ {
		off := int(binary.BigEndian.Uint16(p[h+8+2*i:]))
		if off >= len(p) {
			return fmt.Errorf("%w: cell pointer out of page", errFileFormat)
		}
		size, k := varint(p[off:])
		if k == 0 {
			return fmt.Errorf("%w: bad cell", errFileFormat)
		}
		off += k
		rowid, k := varint(p[off:])
		if k == 0 {
			return fmt.Errorf("%w: bad cell", errFileFormat)
		}
		off += k
		if size > maxPayload {
			return fmt.Errorf("%w: payload of %d bytes", errFileFormat, size)
		}
		var payload []byte
		if int(size) <= maxLocal {
			if off+int(size) > len(p) {
				return fmt.Errorf("%w: payload out of page", errFileFormat)
			}
			payload = p[off : off+int(size)]
		} else {
			local := minLocal + (int(size)-minLocal)%(u-4)
			if local > maxLocal {
				local = minLocal
			}
			var err error
			if payload, err = s.spill(p, off, local, int(size)); err != nil {
				return err
			}
		}
		if s.bound != nil {
			if err := s.bound.row(s, payload, int64(rowid)); err != nil {
				return err
			}
			continue
		}
		idx, ok := s.record(payload, int64(rowid))
		if !ok {
			return fmt.Errorf("%w: bad record", errFileFormat)
		}
		if s.atomic {
			atomic.AddUint64(&counts[idx], 1)
		} else {
			counts[idx]++
		}
	}
	s.fs.rows.Add(int64(n))
	return nil
}

// spill assembles a payload that overflows its page.
func (s *scanWorker) spill(p []byte, off, local, size int) ([]byte, error) {
	if off+local+4 > len(p) {
		return nil, fmt.Errorf("%w: overflow pointer out of page", errFileFormat)
	}
	s.overflow = append(s.overflow[:0], p[off:off+local]...)
	next := binary.BigEndian.Uint32(p[off+local:])
	for hops := 0; len(s.overflow) < size; hops++ {
		if next == 0 || hops > size {
			return nil, fmt.Errorf("%w: broken overflow chain", errFileFormat)
		}
		op, err := s.fs.sf.page(s.ovPage, next)
		if err != nil {
			return nil, err
		}
		if err := s.fs.visit(); err != nil {
			return nil, err
		}
		next = binary.BigEndian.Uint32(op[:4])
		chunk := op[4:s.fs.sf.usable]
		if rest := size - len(s.overflow); len(chunk) > rest {
			chunk = chunk[:rest]
		}
		s.overflow = append(s.overflow, chunk...)
	}
	return s.overflow, nil
}

// record returns the (internal) histogram cell of one record, and false if
// the record is malformed.
func (s *scanWorker) record(rec []byte, rowid int64) (int, bool) {
	fs := s.fs
	hdrLen, k := varint(rec)
	if k == 0 || int(hdrLen) > len(rec) || int(hdrLen) < k {
		return 0, false
	}
	hdr := rec[k:hdrLen]
	body := int(hdrLen)
	col := 0 // record index of the next serial type
	idx := 0
	next := 0 // position in fs.order
	cells := [16]int{}
	var cellOf []int
	if len(fs.cols) <= len(cells) {
		cellOf = cells[:len(fs.cols)]
	} else {
		cellOf = make([]int, len(fs.cols))
	}
	// The INTEGER PRIMARY KEY and columns past the record's end.
	for next < len(fs.order) && fs.cols[fs.order[next]].index < 0 {
		j := fs.order[next]
		cellOf[j] = fs.cols[j].cellOfInt(rowid)
		next++
	}
	for next < len(fs.order) && len(hdr) > 0 {
		st, n := varint(hdr)
		if n == 0 {
			return 0, false
		}
		hdr = hdr[n:]
		size := serialSize(st)
		if size < 0 || size > len(rec)-body {
			return 0, false
		}
		for next < len(fs.order) && fs.cols[fs.order[next]].index == col {
			j := fs.order[next]
			if body+size > len(rec) {
				return 0, false
			}
			cellOf[j] = fs.cols[j].cell(st, rec[body:body+size])
			next++
		}
		body += size
		col++
	}
	for ; next < len(fs.order); next++ { // added by ALTER TABLE after this record was written
		j := fs.order[next]
		cellOf[j] = fs.cols[j].col.CellOf(fs.cols[j].dflt)
	}
	for j, c := range cellOf {
		if c < 0 {
			c = fs.cols[j].drop
		}
		idx += c * fs.strides[j]
	}
	return idx, true
}
