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

// The SQLite path of contribution bounding (units.go) runs as SQL, not in
// the file scan: SQLite's window functions rank each unit's rows by the
// keyed hash (dpproxy_unit_hash, a Go function), a Go function bins each
// kept row into its internal cell (dpproxy_cell, catalog.Column.CellOf as
// the file scan does), and a GROUP BY counts the cells. The ranking sorts
// by unit; SQLite's sorter keeps at most its cache in memory and spills
// the rest to temporary files, so memory stays bounded (by SQLite's
// cache_size and the domain-sized counts) whatever the number of rows or
// units, at the cost of the one-pass count without sorting that row-level
// tables get.

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

// registerUnitFunctions registers dpproxy_unit_hash(key, v…) (UnitHash)
// and dpproxy_cell(spec, c…) (the row's internal cell index) with the
// SQLite driver, once per process; both are deterministic and keep no
// state between rows beyond the parsed specification.
func registerUnitFunctions() {
	registerUnitOnce.Do(func() {
		sqlite.MustRegisterDeterministicScalarFunction("dpproxy_unit_hash", -1, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
			if len(args) < 1 {
				return nil, errors.New("dpproxy_unit_hash: no key")
			}
			key, ok := args[0].(string)
			if !ok {
				return nil, errors.New("dpproxy_unit_hash: the key is not text")
			}
			vals := make([]any, len(args)-1)
			for i, v := range args[1:] {
				vals[i] = v
			}
			return UnitHash(key, vals...), nil
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
