package sources

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dpproxy/dpproxy/catalog"

	sqlite "modernc.org/sqlite"
)

// sqliteSource is the embedded default: an SQLite file opened read-only.
// Histograms are counted in Go in one pass, without sorting: straight from
// the file's b-tree when its layout allows (sqlitefile.go), otherwise by a
// Go aggregate function over a plain scan (dpproxy_histogram below).
type sqliteSource struct {
	path string
	db   *sql.DB
	// version is a connection pinned for PRAGMA data_version, which
	// reports changes committed by other connections since this one's
	// last look; versionFree serialises its use (a channel, so waiting
	// honours ctx).
	version     *sql.Conn
	versionFree chan struct{}
	workers     int
	key         string // the unit hash key (units.go)
	// boundBytes caps the bounded file scan's state (sqlite_bound.go).
	boundBytes int64
}

// sqliteDefaultConnections is an SQLite source's pool size unless the
// catalog sets max_connections.
const sqliteDefaultConnections = 2

func openSQLite(ctx context.Context, cfg *catalog.Source, dataDir string) (*sqliteSource, error) {
	path := cfg.Path
	if !filepath.IsAbs(path) {
		path = filepath.Join(dataDir, path)
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("sqlite file %s: %w", path, err)
	}
	registerAggregate()
	registerUnitFunctions()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)&_pragma=query_only(1)")
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	n := cfg.MaxConnections
	if n == 0 {
		n = sqliteDefaultConnections
	}
	db.SetMaxOpenConns(n + 1) // + the pinned version connection
	db.SetMaxIdleConns(n + 1)
	conn, err := db.Conn(ctx)
	if err == nil {
		err = conn.PingContext(ctx)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("connect %s: %w", path, err)
	}
	s := &sqliteSource{path: path, db: db, version: conn, versionFree: make(chan struct{}, 1),
		workers: min(runtime.GOMAXPROCS(0), 4)}
	s.versionFree <- struct{}{}
	return s, nil
}

func (s *sqliteSource) close() error {
	s.version.Close()
	return s.db.Close()
}

// dataVersion is PRAGMA data_version on the pinned connection (it changes
// whenever another connection commits) with the file's size and time, so a
// file replaced by another is a new version too.
func (s *sqliteSource) dataVersion(ctx context.Context) (string, bool, error) {
	select {
	case <-s.versionFree:
	case <-ctx.Done():
		return "", false, ctx.Err()
	}
	defer func() { s.versionFree <- struct{}{} }()
	var v int64
	if err := s.version.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
		return "", false, fmt.Errorf("data version: %w", err)
	}
	fi, err := os.Stat(s.path)
	if err != nil {
		return "", false, fmt.Errorf("data version: %w", err)
	}
	return fmt.Sprintf("%d/%d/%d", v, fi.Size(), fi.ModTime().UnixNano()), true, nil
}

// count builds the histogram inside one read transaction: the file scan
// when the table's layout allows it, the aggregate function otherwise.
func (s *sqliteSource) count(ctx context.Context, t *catalog.Table, cols []*catalog.Column, counts []float64, rows *atomic.Int64) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if t.Unit != nil {
		scan, root, err := s.planBound(ctx, tx, t, cols)
		if err != nil {
			return err
		}
		if scan != nil {
			defer scan.sf.close()
			scan.rows = rows
			err := scan.runBound(ctx, root, counts, s.workers, nil)
			if !errors.Is(err, errFileFormat) {
				return err
			}
			clear(counts)
			rows.Store(0)
		}
		return s.bounded(ctx, tx, t, cols, counts, rows)
	}
	if len(cols) == 0 {
		var n int64
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+sqliteTable(sourceTable(t))).Scan(&n); err != nil {
			return err
		}
		counts[0] = float64(n)
		rows.Add(n)
		return nil
	}
	// The schema read takes the SHARED lock the transaction keeps until
	// Rollback: no writer changes the file while it is read below.
	scan, root, err := s.plan(ctx, tx, t, cols)
	if err != nil {
		return err
	}
	if scan != nil {
		defer scan.sf.close()
		scan.rows = rows
		err := scan.run(ctx, root, counts, s.workers)
		if !errors.Is(err, errFileFormat) {
			return err
		}
		clear(counts)
		rows.Store(0)
	}
	return s.aggregate(ctx, tx, t, cols, counts, rows)
}

// plan decides whether the file scan can count t: a rowid table of the main
// schema, in a rollback-journal UTF-8 database, whose binned columns are
// stored in its records. It returns nil to use SQL.
func (s *sqliteSource) plan(ctx context.Context, tx *sql.Tx, t *catalog.Table, cols []*catalog.Column) (*fileScan, uint32, error) {
	return s.planWith(ctx, tx, t, cols, nil)
}

// planWith is plan with a further check of the table's columns and DDL
// (false: use SQL).
func (s *sqliteSource) planWith(ctx context.Context, tx *sql.Tx, t *catalog.Table, cols []*catalog.Column, bound func(info map[string]columnInfo, ddl string) bool) (*fileScan, uint32, error) {
	schema, name := splitTable(sourceTable(t))
	var typ, ddl string
	var root int64
	err := tx.QueryRowContext(ctx, "SELECT type, rootpage, COALESCE(sql, '') FROM sqlite_schema WHERE name = ? COLLATE NOCASE", name).Scan(&typ, &root, &ddl)
	if errors.Is(err, sql.ErrNoRows) || schema != "" && !strings.EqualFold(schema, "main") {
		return nil, 0, nil // views, attached schemas and the like: SQL knows them
	}
	if err != nil {
		return nil, 0, err
	}
	var mode string
	if err := tx.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return nil, 0, err
	}
	up := strings.ToUpper(ddl)
	if typ != "table" || root <= 0 || strings.EqualFold(mode, "wal") || strings.Contains(up, "WITHOUT ROWID") || strings.Contains(up, "VIRTUAL TABLE") {
		return nil, 0, nil
	}
	info, err := tableInfo(ctx, tx, name)
	if err != nil || info == nil {
		return nil, 0, err
	}
	if bound != nil {
		if !bound(info, ddl) {
			return nil, 0, nil
		}
	}
	scan := &fileScan{strides: strides(cols)}
	for _, c := range cols {
		ci, ok := info[strings.ToLower(c.Name)]
		if !ok {
			return nil, 0, nil // let SQL report the unknown column
		}
		if !ci.stored {
			return nil, 0, nil
		}
		scan.cols = append(scan.cols, newRecordColumn(ci.index, ci.dflt, c))
	}
	scan.order = make([]int, len(cols))
	for j := range scan.order {
		scan.order[j] = j
	}
	sort.SliceStable(scan.order, func(a, b int) bool { return scan.cols[scan.order[a]].index < scan.cols[scan.order[b]].index })
	sf, err := openSQLiteFile(s.path)
	if errors.Is(err, errFileFormat) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	scan.sf = sf
	return scan, uint32(root), nil
}

type columnInfo struct {
	index  int // record position; -1 for the rowid alias
	dflt   any
	typ    string // the declared type
	stored bool   // false when the scan cannot read it (generated, hidden, odd default)
}

// tableInfo maps each column name to where records keep it. It returns nil
// when some column is generated or hidden: records then skip columns.
func tableInfo(ctx context.Context, tx *sql.Tx, name string) (map[string]columnInfo, error) {
	rows, err := tx.QueryContext(ctx, "SELECT cid, name, type, dflt_value, pk, hidden FROM pragma_table_xinfo(?)", name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]columnInfo{}
	pks := 0
	var alias string
	for rows.Next() {
		var cid, pk, hidden int
		var col, typ string
		var dflt sql.NullString
		if err := rows.Scan(&cid, &col, &typ, &dflt, &pk, &hidden); err != nil {
			return nil, err
		}
		if hidden != 0 {
			return nil, rows.Close()
		}
		ci := columnInfo{index: cid, stored: true, typ: typ}
		if dflt.Valid {
			ci.dflt, ci.stored = literal(dflt.String, typ)
		}
		if pk > 0 {
			pks++
			if strings.EqualFold(strings.TrimSpace(typ), "INTEGER") {
				alias = strings.ToLower(col)
			}
		}
		out[strings.ToLower(col)] = ci
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if pks == 1 && alias != "" {
		ci := out[alias]
		ci.index = -1
		out[alias] = ci
	}
	return out, nil
}

// literal reads a column default as SQLite stores it in table_info: a
// number, a quoted string (only for text columns, whose affinity keeps it
// as text) or NULL. Anything else (expressions, CURRENT_TIMESTAMP) is not
// read by the file scan.
func literal(s, typ string) (any, bool) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "NULL") {
		return nil, true
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i, true
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return f, true
	}
	up := strings.ToUpper(typ)
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' && (strings.Contains(up, "CHAR") || strings.Contains(up, "CLOB") || strings.Contains(up, "TEXT")) {
		return strings.ReplaceAll(s[1:len(s)-1], "''", "'"), true
	}
	return nil, false
}

// splitTable splits "schema.table".
func splitTable(s string) (schema, table string) {
	if i := strings.IndexByte(s, '.'); i >= 0 {
		return s[:i], s[i+1:]
	}
	return "", s
}

func sqliteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// sqliteTable quotes a possibly qualified table name part by part.
func sqliteTable(s string) string {
	schema, name := splitTable(s)
	if schema == "" {
		return sqliteIdent(name)
	}
	return sqliteIdent(schema) + "." + sqliteIdent(name)
}

// aggregate counts with a Go aggregate function over a plain scan:
// SELECT dpproxy_histogram(spec, c1, c2, …) FROM t. SQLite hands every row
// to the function, which bins it with catalog.Column.CellOf and counts it;
// no sort, and the counts come back as one blob.
func (s *sqliteSource) aggregate(ctx context.Context, tx *sql.Tx, t *catalog.Table, cols []*catalog.Column, counts []float64, rows *atomic.Int64) error {
	spec, err := json.Marshal(cols)
	if err != nil {
		return err
	}
	names := make([]string, len(cols))
	for j, c := range cols {
		names[j] = sqliteIdent(c.Name)
	}
	q := fmt.Sprintf("SELECT dpproxy_histogram(?, %s) FROM %s", strings.Join(names, ", "), sqliteTable(sourceTable(t)))
	var blob []byte
	if err := tx.QueryRowContext(ctx, q, string(spec)).Scan(&blob); err != nil {
		return err
	}
	if blob == nil {
		return nil // no rows
	}
	if len(blob) != 8*(len(counts)+1) {
		return fmt.Errorf("histogram blob of %d bytes for %d cells", len(blob), len(counts))
	}
	for i := range counts {
		counts[i] = float64(binary.LittleEndian.Uint64(blob[8*i:]))
	}
	rows.Add(int64(binary.LittleEndian.Uint64(blob[8*len(counts):])))
	return nil
}

var registerOnce sync.Once

// registerAggregate registers dpproxy_histogram with the SQLite driver
// (driver-wide, once per process; the function keeps no state between
// queries).
func registerAggregate() {
	registerOnce.Do(func() {
		sqlite.MustRegisterFunction("dpproxy_histogram", &sqlite.FunctionImpl{
			NArgs:        -1,
			VolatileArgs: true, // Step keeps nothing of its arguments
			MakeAggregate: func(sqlite.FunctionContext) (sqlite.AggregateFunction, error) {
				return &histogramAggregate{}, nil
			},
		})
	})
}

// histogramAggregate is one evaluation of dpproxy_histogram.
type histogramAggregate struct {
	cols    []recordColumn
	strides []int
	counts  []uint64
	rows    uint64
	err     error
}

func (h *histogramAggregate) Step(_ *sqlite.FunctionContext, args []driver.Value) error {
	if h.err != nil {
		return h.err
	}
	if h.cols == nil {
		spec, ok := args[0].(string)
		var cols []*catalog.Column
		if !ok || json.Unmarshal([]byte(spec), &cols) != nil || len(cols) != len(args)-1 {
			h.err = errors.New("dpproxy_histogram: bad column specification")
			return h.err
		}
		for _, c := range cols {
			h.cols = append(h.cols, newRecordColumn(0, nil, c))
		}
		h.strides = strides(cols)
		h.counts = make([]uint64, cells(cols))
	}
	h.rows++
	idx := 0
	for j := range h.cols {
		var c int
		switch v := args[j+1].(type) {
		case int64:
			c = h.cols[j].cellOfInt(v)
		case string:
			c = h.cols[j].cellOfText([]byte(v))
		default:
			c = h.cols[j].col.CellOf(v)
		}
		if c < 0 {
			c = h.cols[j].drop
		}
		idx += c * h.strides[j]
	}
	h.counts[idx]++
	return nil
}

func (h *histogramAggregate) WindowInverse(*sqlite.FunctionContext, []driver.Value) error {
	return errors.New("dpproxy_histogram is not a window function")
}

// WindowValue returns the counts, then the number of rows read, as
// little-endian 64-bit integers (NULL when no row was read).
func (h *histogramAggregate) WindowValue(*sqlite.FunctionContext) (driver.Value, error) {
	if h.err != nil || h.counts == nil {
		return nil, h.err
	}
	out := make([]byte, 8*(len(h.counts)+1))
	for i, c := range h.counts {
		binary.LittleEndian.PutUint64(out[8*i:], c)
	}
	binary.LittleEndian.PutUint64(out[8*len(h.counts):], h.rows)
	return out, nil
}

func (h *histogramAggregate) Final(*sqlite.FunctionContext) {}

// Internally, a histogram gives every column one more cell, after its
// domain, that holds the rows its policy drops. Summing a column away then
// keeps every row (a cached histogram over more columns holds the exact
// histogram over fewer), and Set strips those cells before returning.

// strides are the row-major multipliers of the internal product domain
// (last column fastest).
func strides(cols []*catalog.Column) []int {
	s := make([]int, len(cols))
	n := 1
	for j := len(cols) - 1; j >= 0; j-- {
		s[j] = n
		n *= cols[j].Size() + 1
	}
	return s
}

// internalSizes are the axes of the internal domain.
func internalSizes(cols []*catalog.Column) []int {
	s := make([]int, len(cols))
	for j, c := range cols {
		s[j] = c.Size() + 1
	}
	return s
}

// cells is the size of the internal domain.
func cells(cols []*catalog.Column) int {
	n := 1
	for _, c := range cols {
		n *= c.Size() + 1
	}
	return n
}

// strip drops the internal dropped cells: the histogram over the declared
// product domain, as callers see it.
func strip(internal []float64, cols []*catalog.Column) []float64 {
	n := 1
	for _, c := range cols {
		n *= c.Size()
	}
	out := make([]float64, n)
	if len(cols) == 0 {
		copy(out, internal)
		return out
	}
	last := cols[len(cols)-1].Size()
	isz := internalSizes(cols)
	idx := make([]int, len(cols)-1)
	src, dst := 0, 0
	for dst < n {
		copy(out[dst:dst+last], internal[src:src+last])
		dst += last
		src += last + 1
		// advance the leading axes, skipping their dropped cells
		for i := len(idx) - 1; i >= 0; i-- {
			idx[i]++
			if idx[i] < isz[i]-1 {
				break
			}
			// skip the dropped slice of axis i
			stride := 1
			for k := i + 1; k < len(isz); k++ {
				stride *= isz[k]
			}
			src += stride
			idx[i] = 0
		}
	}
	return out
}
