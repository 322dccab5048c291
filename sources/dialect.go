package sources

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/dpproxy/dpproxy/catalog"
)

// dialect is what differs between the server engines for the pushed-down
// histogram: quoting, parameters, exact text comparison, integer division
// and how to find the data version. The SQL itself is built once, by
// pushdown, from the catalog's binning methods, so every engine implements
// the same catalog.Column.CellOf.
type dialect interface {
	// ident quotes one identifier.
	ident(name string) string
	// param is the n-th (1-based) bound parameter.
	param(n int) string
	// exactText is an expression whose equality with a text parameter is
	// byte-for-byte equality of col's text (no collation, no padding).
	exactText(col string) string
	// like is col LIKE p as catalog.Like matches it: exactly, character
	// by character; bind binds a parameter and returns its placeholder.
	like(col string, p catalog.Pattern, bind func(any) string) string
	// floorDiv is ⌊(col − min) / width⌋ for col ≥ min: exact for integer
	// columns, IEEE double arithmetic for floating ones.
	floorDiv(col string, min, width int64) string
	// timeBin is a time column's bin index for col within [Min, Max]:
	// whole seconds (or calendar months) since Min, divided by the width.
	// The session's time zone is UTC (see openPostgres, openMySQL).
	timeBin(col string, c *catalog.Column) string
	// defaultVersion is the query whose value changes when the data does
	// ("" when the engine has none: cached histograms then live a TTL).
	defaultVersion() string
	// keyedHash is the engine's keyed hash of vals, an expression ordered
	// as the engine ranks rows (units.go): UnitHash(key, vals...) as its
	// hex digest on MySQL and ClickHouse, PostgresUnitHash on PostgreSQL;
	// key is a bound parameter.
	keyedHash(key string, vals []string) string
}

// utcTime is a dialect without a session time zone (ClickHouse): utc
// converts a time column or a time literal to UTC for the comparisons of
// pushdown.bin.
type utcTime interface {
	utc(expr string) string
}

// boundedTuning is what a server dialect adds to the bounded queries of
// tables with a privacy unit (units.go), which aggregate and sort far more
// than a plain GROUP BY: nothing in it changes an answer.
type boundedTuning interface {
	// materializeCTE is the keyword, with a trailing space, that makes a
	// WITH table computed once rather than inlined into each reference
	// (and, in a parallel plan, recomputed by every worker).
	materializeCTE() string
	// boundedSession are statements run first in a bounded query's
	// transaction: the memory its sorts and hash tables may use before
	// they spill to disk.
	boundedSession() []string
}

// beginBounded runs the dialect's boundedSession statements in tx when t
// has a privacy unit.
func beginBounded(ctx context.Context, tx *sql.Tx, d dialect, t *catalog.Table) error {
	bt, ok := d.(boundedTuning)
	if !ok || t.Unit == nil {
		return nil
	}
	for _, s := range bt.boundedSession() {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("bounded query settings: %w", err)
		}
	}
	return nil
}

// table quotes a possibly qualified source table, part by part:
// "shop.orders" is "shop"."orders", never one name "shop.orders".
func table(d dialect, sourceTable string) string {
	schema, name := splitTable(sourceTable)
	if schema == "" {
		return d.ident(name)
	}
	return d.ident(schema) + "." + d.ident(name)
}

// number writes a catalog number as an SQL literal read as a double.
func number(f float64) string { return strconv.FormatFloat(f, 'e', -1, 64) }

// pushdown is one histogram query: every column binned in SQL by the
// catalog's rules, rows some column drops filtered out, then one GROUP BY
// over the cell indexes, so only domain-sized counts leave the server.
type pushdown struct {
	d    dialect
	t    *catalog.Table
	cols []*catalog.Column
	args []any
	// key is the unit hash key, for tables with a privacy unit.
	key string
}

// from is the row source: the table itself. This is the hook where a
// per-table row filter or a contribution-bounding subquery goes.
func (q *pushdown) from() string {
	if q.t.Join != nil {
		return q.d.ident(joinedName) // unitjoin.go
	}
	return table(q.d, sourceTable(q.t))
}

func (q *pushdown) bind(v any) string {
	q.args = append(q.args, v)
	return q.d.param(len(q.args))
}

// bin is the SQL of one column's internal cell index (catalog.Column.CellOf,
// with a dropped value in the column's dropped cell, see strides).
func (q *pushdown) bin(c *catalog.Column) string {
	col := q.d.ident(c.Name)
	cell := func(i int) int {
		if i < 0 {
			return c.Size()
		}
		return i
	}
	var b strings.Builder
	fmt.Fprintf(&b, "CASE WHEN %s IS NULL THEN %d", col, cell(c.NullCell()))
	switch c.Kind {
	case catalog.Categorical:
		if len(c.Patterns) == 0 {
			fmt.Fprintf(&b, " ELSE CASE %s", q.d.exactText(col))
			for i, v := range c.Values {
				fmt.Fprintf(&b, " WHEN %s THEN %d", q.bind(v), i)
			}
			fmt.Fprintf(&b, " ELSE %d END END", cell(c.OtherCell()))
			break
		}
		// A value that is no declared one: the match cell of the
		// patterns it matches.
		b.WriteString(" ELSE ")
		if len(c.Values) > 0 {
			fmt.Fprintf(&b, "CASE %s", q.d.exactText(col))
			for i, v := range c.Values {
				fmt.Fprintf(&b, " WHEN %s THEN %d", q.bind(v), i)
			}
			b.WriteString(" ELSE ")
		}
		fmt.Fprintf(&b, "%d", len(c.Values))
		for i, p := range c.Patterns {
			fmt.Fprintf(&b, " + CASE WHEN %s THEN %d ELSE 0 END", q.d.like(col, p, q.bind), 1<<i)
		}
		if len(c.Values) > 0 {
			b.WriteString(" END")
		}
		b.WriteString(" END")
	case catalog.IntegerRange:
		fmt.Fprintf(&b, " WHEN %s < %d THEN %d WHEN %s > %d THEN %d ELSE %s END",
			col, c.Min, cell(c.LowCell()), col, c.Max, cell(c.HighCell()), q.d.floorDiv(col, c.Min, c.Width))
	case catalog.TimeRange:
		// Literals compare as the column's type: timestamps and dates in
		// the session's UTC.
		tcol, lo, hi := col, "'"+catalog.FormatTime(c.Min, false)+"'", "'"+catalog.FormatTime(c.Max+1, false)+"'"
		if u, ok := q.d.(utcTime); ok {
			tcol, lo, hi = u.utc(tcol), u.utc(lo), u.utc(hi)
		}
		fmt.Fprintf(&b, " WHEN %s < %s THEN %d WHEN %s >= %s THEN %d ELSE %s END",
			tcol, lo, cell(c.LowCell()), tcol, hi, cell(c.HighCell()), q.d.timeBin(col, c))
	default:
		k := len(c.Edges) - 1
		fmt.Fprintf(&b, " WHEN %s < %s THEN %d WHEN %s > %s THEN %d", col, number(c.Edges[0]), cell(c.LowCell()), col, number(c.Edges[k]), cell(c.HighCell()))
		for i := 1; i < k; i++ {
			fmt.Fprintf(&b, " WHEN %s < %s THEN %d", col, number(c.Edges[i]), i-1)
		}
		fmt.Fprintf(&b, " ELSE %d END", k-1)
	}
	return b.String()
}

// sqlPattern is p's pattern as the engines read it: catalog.Like matches
// an escape at the end of the pattern as itself, PostgreSQL refuses it,
// so it is escaped.
func sqlPattern(p catalog.Pattern) string {
	esc := []rune(p.Escape)
	if len(esc) != 1 {
		return p.Text
	}
	rs := []rune(p.Text)
	for i := 0; i < len(rs); i++ {
		if rs[i] == esc[0] {
			if i == len(rs)-1 {
				return p.Text + p.Escape
			}
			i++
		}
	}
	return p.Text
}

// sql is SELECT b0, b1, COUNT(*) FROM (SELECT <bin c0> AS b0, … FROM t) s
// GROUP BY b0, b1.
func (q *pushdown) sql() string {
	if q.t.Unit != nil {
		return q.joined(q.serverBounded(q.key))
	}
	if len(q.cols) == 0 {
		return "SELECT COUNT(*) FROM " + q.from()
	}
	var sel, group []string
	for j, c := range q.cols {
		b := fmt.Sprintf("b%d", j)
		sel = append(sel, q.bin(c)+" AS "+b)
		group = append(group, b)
	}
	return fmt.Sprintf("SELECT %s, COUNT(*) FROM (SELECT %s FROM %s) s GROUP BY %s",
		strings.Join(group, ", "), strings.Join(sel, ", "), q.from(), strings.Join(group, ", "))
}

// scanCounts reads the GROUP BY's rows into counts.
func scanCounts(rows *sql.Rows, cols []*catalog.Column, counts []float64, seen *atomic.Int64) error {
	defer rows.Close()
	if len(cols) == 0 {
		var n int64
		if rows.Next() {
			if err := rows.Scan(&n); err != nil {
				return err
			}
		}
		counts[0] = float64(n)
		seen.Add(n)
		return rows.Err()
	}
	st := strides(cols)
	dest := make([]any, len(cols)+1)
	cell := make([]int64, len(cols))
	var n int64
	for j := range cols {
		dest[j] = &cell[j]
	}
	dest[len(cols)] = &n
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		idx := 0
		for j, c := range cols {
			if cell[j] < 0 || cell[j] > int64(c.Size()) {
				return fmt.Errorf("cell %d out of range for column %s", cell[j], c.Name)
			}
			idx += int(cell[j]) * st[j]
		}
		counts[idx] += float64(n)
		seen.Add(n)
	}
	return rows.Err()
}

// server is a PostgreSQL or MySQL source: a bounded pool of read-only
// sessions and a dialect.
type server struct {
	db      *sql.DB
	d       dialect
	version string // the data-version query ("" for none)
	key     string // the unit hash key (units.go)
	// cancel stops a running query on the server when ctx ends (MySQL
	// needs KILL QUERY from another session; pgx sends PostgreSQL's
	// cancel request itself).
	cancel cancelHook
	// unitsErr, when not nil, is why this server cannot bound a privacy
	// unit's contributions (an older PostgreSQL): every bounded query and
	// partition selection of a table with a unit returns it.
	unitsErr error
}

// boundable is s.unitsErr for a table with a privacy unit, else nil.
func (s *server) boundable(t *catalog.Table) error {
	if t.Unit == nil || s.unitsErr == nil {
		return nil
	}
	return fmt.Errorf("table %s: %w", t.Name, s.unitsErr)
}

func (s *server) close() error { return s.db.Close() }

// cancelHook arms an engine's query cancellation on a connection while ctx
// lasts (server.cancel); stop disarms it.
type cancelHook func(ctx context.Context, conn *sql.Conn) (stop func(), err error)

// inReadOnlyTx runs f in a read-only transaction on one connection of db,
// with cancel (when not nil) armed on that connection for the duration:
// how every pushed-down histogram, unit-cell and key query reads a server.
func inReadOnlyTx(ctx context.Context, db *sql.DB, cancel cancelHook, f func(*sql.Tx) error) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if cancel != nil {
		stop, err := cancel(ctx, conn)
		if err != nil {
			return err
		}
		defer stop()
	}
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	return f(tx)
}

// groupUnitCells streams the (unit, cell) rows of a bounded query, in unit
// order, to fn as each unit's list of cells (n cells in all).
func groupUnitCells(rows *sql.Rows, n int64, table string, fn func(cells []int) error) error {
	var cur, prev sql.RawBytes
	var unit []int
	first := true
	for rows.Next() {
		var cell int64
		if err := rows.Scan(&cur, &cell); err != nil {
			return err
		}
		if cell < 0 || cell >= n {
			return fmt.Errorf("table %s: cell %d out of range", table, cell)
		}
		if !first && string(cur) != string(prev) {
			if err := fn(unit); err != nil {
				return err
			}
			unit = unit[:0]
		}
		first = false
		prev = append(prev[:0], cur...)
		unit = append(unit, int(cell))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if !first {
		return fn(unit)
	}
	return nil
}

func (s *server) dataVersion(ctx context.Context) (string, bool, error) {
	if s.version == "" {
		return "", false, nil
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return "", false, fmt.Errorf("data version: %w", err)
	}
	defer conn.Close()
	if s.cancel != nil {
		stop, err := s.cancel(ctx, conn)
		if err != nil {
			return "", false, fmt.Errorf("data version: %w", err)
		}
		defer stop()
	}
	var v sql.NullString
	err = conn.QueryRowContext(ctx, s.version).Scan(&v)
	if err == sql.ErrNoRows || err == nil && !v.Valid {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("data version: %w", err)
	}
	return v.String, true, nil
}

// count runs the pushed-down GROUP BY in a read-only transaction.
func (s *server) count(ctx context.Context, t *catalog.Table, cols []*catalog.Column, counts []float64, rows *atomic.Int64) error {
	if err := s.boundable(t); err != nil {
		return err
	}
	q := &pushdown{d: s.d, t: t, cols: cols, key: s.key}
	text := q.sql()
	return inReadOnlyTx(ctx, s.db, s.cancel, func(tx *sql.Tx) error {
		if err := beginBounded(ctx, tx, s.d, t); err != nil {
			return err
		}
		r, err := tx.QueryContext(ctx, text, q.args...)
		if err != nil {
			return err
		}
		return scanCounts(r, cols, counts, rows)
	})
}
