package sources

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dpproxy/dpproxy/catalog"

	sqlite "modernc.org/sqlite"
)

// The SQL path of SQLite's contribution bounding (units.go), for what the
// bounded file scan (sqlite_bound.go) leaves to SQL: WAL databases, views,
// WITHOUT ROWID tables, collated or REAL unit columns, files past the scan's
// byte cap. SQLite's window functions rank each unit's rows by the keyed
// hash (dpproxy_unit_hash, a Go function: UnitHash64), a Go function bins
// each kept row into its internal cell (dpproxy_cell, catalog.Column.CellOf
// as the file scan does), and a GROUP BY counts the cells. The ranking
// sorts by unit; SQLite's sorter keeps at most its cache in memory and
// spills the rest to temporary files, so memory stays bounded (by SQLite's
// cache_size and the domain-sized counts) whatever the number of rows or
// units, at many times the file scan's cost. It gives the file scan's
// histogram exactly (TestBoundedScanMatchesSQL).

// bounded counts t truncated per unit.
func (s *sqliteSource) bounded(ctx context.Context, tx *sql.Tx, t *catalog.Table, cols []*catalog.Column, counts []float64, rows *atomic.Int64) error {
	q, args := s.boundedQuery(t, cols, false)
	r, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer r.Close()
	for r.Next() {
		if len(cols) == 0 {
			var n int64
			if err := r.Scan(&n); err != nil {
				return err
			}
			counts[0] = float64(n)
			rows.Add(n)
			continue
		}
		var cell, n int64
		if err := r.Scan(&cell, &n); err != nil {
			return err
		}
		if cell < 0 || cell >= int64(len(counts)) {
			return fmt.Errorf("cell %d out of range", cell)
		}
		counts[cell] += float64(n)
		rows.Add(n)
	}
	return r.Err()
}

// boundedQuery is the SQLite text and arguments of the bounded histogram
// (or, with pairs, of the distinct (unit, cell) pairs).
func (s *sqliteSource) boundedQuery(t *catalog.Table, cols []*catalog.Column, pairs bool) (string, []any) {
	var args []any
	bind := func(v any) string { args = append(args, v); return "?" }
	b := &boundedQuery{t: t, ident: sqliteIdent, table: sqliteTable(sourceTable(t)), pairs: pairs}
	if t.Join != nil {
		b.table = sqliteIdent(joinedName) // unitjoin.go
	}
	b.hash = func(vals []string) string {
		return "dpproxy_unit_hash(" + bind(s.key) + ", " + strings.Join(vals, ", ") + ")"
	}
	var names []string
	for _, c := range cols {
		b.raw = append(b.raw, c.Name)
		names = append(names, sqliteIdent(c.Name))
	}
	if len(cols) > 0 {
		spec, _ := json.Marshal(cols) // catalog columns always encode
		b.outs = []string{"dpproxy_c"}
		b.bins = func() []string {
			return []string{"dpproxy_cell(" + bind(string(spec)) + ", " + strings.Join(names, ", ") + ")"}
		}
		b.cellOf = func(outs []string) string { return outs[0] }
	}
	return withJoined(t, sqliteIdent, sqliteTable, b.sql()), args
}

var registerUnitOnce sync.Once

// cellSpecs caches parsed dpproxy_cell specifications (one per batch shape;
// cleared when it grows past cellSpecLimit).
var cellSpecs struct {
	sync.Mutex
	m map[string]*cellSpec
}

const cellSpecLimit = 256

type cellSpec struct {
	cols    []recordColumn
	strides []int
}

func parseCellSpec(spec string, n int) (*cellSpec, error) {
	cellSpecs.Lock()
	defer cellSpecs.Unlock()
	if cs := cellSpecs.m[spec]; cs != nil {
		return cs, nil
	}
	var cols []*catalog.Column
	if json.Unmarshal([]byte(spec), &cols) != nil || len(cols) != n {
		return nil, errors.New("dpproxy_cell: bad column specification")
	}
	cs := &cellSpec{strides: strides(cols)}
	for _, c := range cols {
		cs.cols = append(cs.cols, newRecordColumn(0, nil, c))
	}
	if cellSpecs.m == nil || len(cellSpecs.m) >= cellSpecLimit {
		cellSpecs.m = map[string]*cellSpec{}
	}
	cellSpecs.m[spec] = cs
	return cs, nil
}

// registerUnitFunctions registers dpproxy_unit_hash(key, v…) (UnitHash64,
// as an integer of the same order: unithash.go)
// and dpproxy_cell(spec, c…) (the row's internal cell index) with the
// SQLite driver, once per process; both are deterministic and keep no
// state between rows beyond the parsed specification.
func registerUnitFunctions() {
	registerUnitOnce.Do(func() {
		// Arguments are volatile views (no copy per row, and text with a
		// NUL byte hashed whole, as the file scan reads it).
		sqlite.MustRegisterFunction("dpproxy_unit_hash", &sqlite.FunctionImpl{
			NArgs: -1, Deterministic: true, VolatileArgs: true,
			Scalar: func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
				if len(args) < 1 {
					return nil, errors.New("dpproxy_unit_hash: no key")
				}
				key, ok := args[0].(string)
				if !ok {
					return nil, errors.New("dpproxy_unit_hash: the key is not text")
				}
				k0, k1 := sipKeyCached(key)
				buf := make([]byte, 0, 128)
				for _, v := range args[1:] {
					buf = appendHashValue(buf, v)
				}
				return sqlOrder(siphash24(k0, k1, buf)), nil
			},
		})
		sqlite.MustRegisterDeterministicScalarFunction("dpproxy_cell", -1, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
			spec, ok := args[0].(string)
			if !ok {
				return nil, errors.New("dpproxy_cell: bad column specification")
			}
			cs, err := parseCellSpec(spec, len(args)-1)
			if err != nil {
				return nil, err
			}
			idx := 0
			for j := range cs.cols {
				var c int
				switch v := args[j+1].(type) {
				case int64:
					c = cs.cols[j].cellOfInt(v)
				case string:
					c = cs.cols[j].cellOfText([]byte(v))
				default:
					c = cs.cols[j].col.CellOf(v)
				}
				if c < 0 {
					c = cs.cols[j].drop
				}
				idx += c * cs.strides[j]
			}
			return int64(idx), nil
		})
	})
}
