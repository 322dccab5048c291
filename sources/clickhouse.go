package sources

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/dpproxy/dpproxy/catalog"
)

// clickhouseDialect is ClickHouse's dialect, over the native protocol
// (github.com/ClickHouse/clickhouse-go/v2), for ClickHouse 18.16 and later:
// no window functions, so contribution bounding is LIMIT k BY unit (see
// chQuery.bounded).
//
// ClickHouse has no session time zone before 23.x: a DateTime is an
// instant, shown and parsed in the server's (or the column's) zone. Every
// time value the histogram reads or compares is therefore converted with
// toDateTime(…, 'UTC'): a DateTime keeps its instant, a Date becomes its
// midnight in UTC, a literal is parsed in UTC.
type clickhouseDialect struct{}

var (
	_ dialect = clickhouseDialect{}
	_ utcTime = clickhouseDialect{}
)

func (clickhouseDialect) ident(name string) string {
	return "`" + strings.NewReplacer(`\`, `\\`, "`", "\\`").Replace(name) + "`"
}

// param is clickhouse-go's positional placeholder: the driver binds values
// into the text (quoted and escaped) before sending it; 18.16 has no
// server-side parameters.
func (clickhouseDialect) param(int) string { return "?" }

// exactText: ClickHouse compares String by bytes, with no collation.
func (clickhouseDialect) exactText(col string) string { return "toString(" + col + ")" }

// like: ClickHouse's LIKE has no ESCAPE clause (a backslash escapes % _
// and itself) and compares bytes, no collation; p is rewritten into that
// form (clickhouseLikePattern).
func (clickhouseDialect) like(col string, p catalog.Pattern, bind func(any) string) string {
	return "like(toString(" + col + "), " + bind(clickhouseLikePattern(p)) + ")"
}

// clickhouseLikePattern is p with backslash escapes, matching what
// catalog.Like matches: p's escape character and the character after it
// become that character, escaped if it is a wildcard or a backslash; a
// backslash that escapes nothing in p is doubled; an escape character at
// the end of the pattern stands for itself.
func clickhouseLikePattern(p catalog.Pattern) string {
	esc := rune(-1)
	if rs := []rune(p.Escape); len(rs) == 1 {
		esc = rs[0]
	}
	lit := func(b *strings.Builder, r rune) {
		if r == '%' || r == '_' || r == '\\' {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	var b strings.Builder
	rs := []rune(p.Text)
	for i := 0; i < len(rs); i++ {
		switch r := rs[i]; {
		case r == esc && i+1 < len(rs):
			i++
			lit(&b, rs[i])
		case r == esc || r == '\\':
			lit(&b, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// floorDiv: '/' is always floating division in ClickHouse; the quotient is
// at most the column's number of bins, exact in a double for integers.
func (clickhouseDialect) floorDiv(col string, min, width int64) string {
	return fmt.Sprintf("toInt64(floor((%s - %d) / %d))", col, min, width)
}

// utc is a time column's value (or a time literal) as a DateTime in UTC.
func (clickhouseDialect) utc(expr string) string { return "toDateTime(" + expr + ", 'UTC')" }

func (d clickhouseDialect) timeBin(col string, c *catalog.Column) string {
	t := d.utc(col)
	if c.Months > 0 {
		m := time.Unix(c.Min, 0).UTC()
		return fmt.Sprintf("intDiv((toInt64(toYear(%s)) - %d) * 12 + toInt64(toMonth(%s)) - %d, %d)", t, m.Year(), t, int(m.Month()), c.Months)
	}
	return fmt.Sprintf("intDiv(toInt64(toUnixTimestamp(%s)) - %d, %d)", t, c.Min, c.Width)
}

// defaultVersion: ClickHouse has no one number that moves with every
// write across a cluster (system.parts is per server). Without the
// catalog's version_query, a histogram lives its cache_ttl; the README's
// version_query sums the parts of every shard.
func (clickhouseDialect) defaultVersion() string { return "" }

// keyedHash is SHA256 (FixedString(32), ordered bytewise as its hex) of
// the text. The key is a literal, not a parameter (see chQuery.key).
func (clickhouseDialect) keyedHash(key string, vals []string) string {
	parts := []string{key}
	for _, v := range vals {
		parts = append(parts, `'\x1F'`, hashText(v, "concat('V', toString("+v+"))"))
	}
	return "SHA256(concat(" + strings.Join(parts, ", ") + "))"
}

// chDefaultConnections is a ClickHouse source's pool size unless the
// catalog sets max_connections.
const chDefaultConnections = 4

// chSource is a ClickHouse source: a bounded pool of read-only sessions
// over the native protocol.
type chSource struct {
	db      *sql.DB
	version string // the data-version query ("" for none)
	key     string // the unit hash key (units.go)
}

// chSettings are every query's settings: readonly 2 (SELECT only, settings
// still changeable, as the per-shard bounding needs).
var chSettings = clickhouse.Settings{"readonly": 2}

func openClickHouse(ctx context.Context, dsn string, maxConns int) (*chSource, error) {
	opt, err := clickhouse.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("cannot parse the dsn (%s)", redact(err.Error(), dsn))
	}
	if opt.Protocol != clickhouse.Native {
		return nil, fmt.Errorf("the dsn must use ClickHouse's native protocol (clickhouse://host:9000/db), not HTTP")
	}
	if maxConns == 0 {
		maxConns = chDefaultConnections
	}
	// + one for data-version queries. The driver sends ClickHouse's Cancel
	// packet when a query's context ends, so a cancelled histogram stops on
	// the server (and on every shard it reads).
	opt.MaxOpenConns = maxConns + 1
	opt.MaxIdleConns = maxConns + 1
	if opt.Settings == nil {
		opt.Settings = clickhouse.Settings{}
	}
	for k, v := range chSettings {
		opt.Settings[k] = v
	}
	if opt.ClientInfo.Products == nil {
		opt.ClientInfo.Products = append(opt.ClientInfo.Products, struct{ Name, Version string }{"dpproxy", ""})
	}
	db := clickhouse.OpenDB(opt)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect: %s", redact(err.Error(), dsn, opt.Auth.Password))
	}
	return &chSource{db: db}, nil
}

func (s *chSource) close() error { return s.db.Close() }

func (s *chSource) rowReader() (*sql.DB, func(string) string) {
	return s.db, clickhouseDialect{}.ident
}

func (s *chSource) dataVersion(ctx context.Context) (string, bool, error) {
	if s.version == "" {
		return "", false, nil
	}
	var v sql.NullString
	err := s.db.QueryRowContext(ctx, s.version).Scan(&v)
	if err == sql.ErrNoRows || err == nil && !v.Valid {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("data version: %w", err)
	}
	return v.String, true, nil
}

// count runs the histogram query; a table sharded by its privacy unit is
// bounded on each shard (see chQuery.bounded).
func (s *chSource) count(ctx context.Context, t *catalog.Table, cols []*catalog.Column, counts []float64, rows *atomic.Int64) error {
	q := &chQuery{pushdown: pushdown{d: clickhouseDialect{}, t: t, cols: cols}, key: s.key}
	text := q.sql()
	if q.perShard {
		ctx = clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"distributed_group_by_no_merge": 1}))
	}
	r, err := s.db.QueryContext(ctx, text, q.args...)
	if err != nil {
		return err
	}
	return scanCounts(r, cols, counts, rows)
}

// chQuery is a ClickHouse histogram query: the pushdown's bins, and for a
// table with a privacy unit, the truncation by LIMIT … BY.
type chQuery struct {
	pushdown
	key string
	// pairs asks for the distinct (unit, internal cell) pairs of the
	// bounded rows, ordered by unit (Set.UnitCells), instead of counts.
	pairs bool
	// perShard is set by sql when the bounding runs on each shard.
	perShard bool
}

// sql is the histogram query. Cells and counts are cast to Int64 (the
// driver scans ClickHouse's unsigned and Nullable results only into their
// own Go types).
func (q *chQuery) sql() string {
	if q.t.Unit != nil {
		return q.bounded()
	}
	if len(q.cols) == 0 {
		return "SELECT toInt64(count()) FROM " + q.from()
	}
	sel, outs, group := q.bins()
	return fmt.Sprintf("SELECT %s, toInt64(count()) FROM (SELECT %s FROM %s) GROUP BY %s",
		strings.Join(outs, ", "), strings.Join(sel, ", "), q.from(), strings.Join(group, ", "))
}

// bins are the select list of the binned columns (dpproxy_b0, …: an alias
// in ClickHouse is visible in the whole level, so it must not be a column's
// name), their Int64 outputs and the group keys.
func (q *chQuery) bins() (sel, outs, group []string) {
	for j, c := range q.cols {
		b := fmt.Sprintf("dpproxy_b%d", j)
		sel = append(sel, q.bin(c)+" AS "+b)
		outs = append(outs, "toInt64(assumeNotNull("+b+"))")
		group = append(group, b)
	}
	return sel, outs, group
}

// hash is the dialect's keyed hash with the key as a literal: parameters
// are bound in textual order, and the hash appears in levels of the query
// written before the bins' parameters. The key is hex digits (loadUnitKey),
// so the literal needs no escaping; like a parameter, it is in the text the
// server sees.
func (q *chQuery) hash(vals []string) string {
	if _, err := hex.DecodeString(q.key); err != nil || q.key == "" {
		panic("sources: the unit key is not hex")
	}
	return clickhouseDialect{}.keyedHash("'"+q.key+"'", vals)
}

// bounded is the histogram of a table with a privacy unit, truncated as
// units.go says, without window functions (ClickHouse 18.16 has none):
//
//  1. the innermost level reads the table, bins every row, hashes it, and
//     keeps each unit's k rows of least hash: ORDER BY hash LIMIT k BY unit;
//  2. with max_rows_per_group r, each (unit, cell) keeps its r rows of
//     least hash: LIMIT r BY unit, cells;
//  3. with max_groups g, the kept rows are counted per (unit, cell) and each
//     unit keeps its g cells of least cell hash: LIMIT g BY unit;
//  4. the outermost level counts (or sums) per cell.
//
// Over a Distributed table the innermost level is the one its shards run.
// By default they send it their rows at ClickHouse's "mergeable" stage and
// the initiator merges them before LIMIT k BY: the bound is global, exact
// whatever the sharding, and every non-NULL unit's rows cross the network.
// When the catalog declares the table sharded by its unit (shard_key is the
// unit column), every unit's rows are on one shard, so the innermost level
// runs whole on each shard (distributed_group_by_no_merge = 1), and only
// each unit's k kept rows, as bin numbers, reach the initiator. On a table
// that is not Distributed the setting changes nothing.
//
// Ties in the row hash are rows equal in every hashed column, hence in
// every bin: which of them is kept changes no count. Steps 2–4 run on the
// initiator, over rows already bounded.
func (q *chQuery) bounded() string {
	u := q.t.Unit
	id := q.d.ident
	unit := id(u.Column)
	q.perShard = q.t.ShardKey != "" && strings.EqualFold(q.t.ShardKey, u.Column)
	var vals []string
	for _, name := range hashColumns(q.t) {
		v := id(name)
		if c := q.t.Column(name); c != nil && c.Kind == catalog.TimeRange {
			v = clickhouseDialect{}.utc(v)
		}
		vals = append(vals, v)
	}
	rowHash := q.hash(vals)
	k := u.MaxRows
	if len(q.cols) == 0 {
		k = min(u.MaxRows, u.PerCell())
		inner := fmt.Sprintf("SELECT assumeNotNull(%s) AS dpproxy_unit, %s AS dpproxy_hash FROM %s WHERE %s IS NOT NULL ORDER BY dpproxy_hash LIMIT %d BY dpproxy_unit",
			unit, rowHash, q.from(), unit, k)
		if q.pairs {
			return "SELECT DISTINCT dpproxy_unit, toInt64(0) FROM (" + inner + ") ORDER BY dpproxy_unit"
		}
		return "SELECT toInt64(count()) FROM (" + inner + ")"
	}
	sel, outs, group := q.bins()
	keys := strings.Join(group, ", ")
	st := strides(q.cols)
	terms := make([]string, len(group))
	for j, b := range group {
		terms[j] = fmt.Sprintf("%s * %d", b, st[j])
	}
	cell := "toInt64(" + strings.Join(terms, " + ") + ")"
	inner := fmt.Sprintf("SELECT %s, assumeNotNull(%s) AS dpproxy_unit, %s AS dpproxy_hash FROM %s WHERE %s IS NOT NULL ORDER BY dpproxy_hash LIMIT %d BY dpproxy_unit",
		strings.Join(sel, ", "), unit, rowHash, q.from(), unit, k)
	if !u.CellBounded() {
		if q.pairs {
			return fmt.Sprintf("SELECT DISTINCT dpproxy_unit, %s FROM (%s) ORDER BY dpproxy_unit", cell, inner)
		}
		return fmt.Sprintf("SELECT %s, toInt64(count()) FROM (%s) GROUP BY %s", strings.Join(outs, ", "), inner, keys)
	}
	g, r := u.MaxGroups, u.MaxRowsPerGroup
	if g == 0 {
		g = u.MaxRows
	}
	if r == 0 {
		r = u.MaxRows
	}
	cellHash := q.hash([]string{"'cell'", "dpproxy_unit", cell})
	perCell := fmt.Sprintf("SELECT %[1]s, dpproxy_unit, dpproxy_hash FROM (%[2]s) ORDER BY dpproxy_hash LIMIT %[3]d BY dpproxy_unit, %[1]s", keys, inner, r)
	cells := fmt.Sprintf("SELECT %[1]s, dpproxy_unit, count() AS dpproxy_n, %[2]s AS dpproxy_cell_hash FROM (%[3]s) GROUP BY %[1]s, dpproxy_unit ORDER BY dpproxy_cell_hash LIMIT %[4]d BY dpproxy_unit",
		keys, cellHash, perCell, g)
	if q.pairs {
		return fmt.Sprintf("SELECT dpproxy_unit, %s FROM (%s) ORDER BY dpproxy_unit", cell, cells)
	}
	return fmt.Sprintf("SELECT %s, toInt64(sum(dpproxy_n)) FROM (%s) GROUP BY %s", strings.Join(outs, ", "), cells, keys)
}

// unitCells is Set.UnitCells for ClickHouse: the distinct (unit, cell)
// pairs of the bounded rows, streamed in unit order.
func (s *chSource) unitCells(ctx context.Context, t *catalog.Table, cols []*catalog.Column, fn func(cells []int) error) error {
	q := &chQuery{pushdown: pushdown{d: clickhouseDialect{}, t: t, cols: cols}, key: s.key, pairs: true}
	text := q.sql()
	if q.perShard {
		ctx = clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"distributed_group_by_no_merge": 1}))
	}
	rows, err := s.db.QueryContext(ctx, text, q.args...)
	if err != nil {
		return fmt.Errorf("table %s: unit cells: %w", t.Name, err)
	}
	defer rows.Close()
	return groupUnitCells(rows, int64(cells(cols)), t.Name, fn)
}

// keyUnits is Set.KeyUnits for ClickHouse, with the bounding of the other
// engines (keys.go) written with LIMIT … BY, as chQuery.bounded does: with
// max_groups, each unit's distinct keys ordered by the keyed hash of (unit,
// key), then the key, LIMIT max_groups BY unit; without it, each unit's
// max_rows rows of least row hash (the rows its histograms keep) and their
// distinct keys. The bounding runs on the initiator over a Distributed
// table (no per-shard setting): exact whatever the sharding.
func (s *chSource) keyUnits(ctx context.Context, t *catalog.Table, c *catalog.Column, fn func(key string, units int64) error) error {
	d := clickhouseDialect{}
	q := &chQuery{pushdown: pushdown{d: d, t: t}, key: s.key}
	col := d.ident(c.Name)
	k := d.exactText(col)
	var text string
	switch {
	case t.Unit == nil:
		text = fmt.Sprintf("SELECT %s AS dpproxy_k, toInt64(count()) FROM %s WHERE %s IS NOT NULL GROUP BY dpproxy_k", k, q.from(), col)
	case t.Unit.MaxGroups >= 1:
		u := d.ident(t.Unit.Column)
		text = fmt.Sprintf("SELECT dpproxy_k, toInt64(count()) FROM ("+
			"SELECT dpproxy_u, dpproxy_k FROM ("+
			"SELECT DISTINCT assumeNotNull(%s) AS dpproxy_u, assumeNotNull(%s) AS dpproxy_k FROM %s WHERE %s IS NOT NULL AND %s IS NOT NULL"+
			") ORDER BY %s, dpproxy_k LIMIT %d BY dpproxy_u) GROUP BY dpproxy_k",
			u, k, q.from(), u, col, q.hash([]string{"dpproxy_u", "dpproxy_k"}), t.Unit.MaxGroups)
	default:
		u := d.ident(t.Unit.Column)
		var vals []string
		for _, name := range hashColumns(t) {
			v := d.ident(name)
			if hc := t.Column(name); hc != nil && hc.Kind == catalog.TimeRange {
				v = d.utc(v)
			}
			vals = append(vals, v)
		}
		inner := fmt.Sprintf("SELECT assumeNotNull(%s) AS dpproxy_unit, %s AS dpproxy_c, %s AS dpproxy_hash FROM %s WHERE %s IS NOT NULL ORDER BY dpproxy_hash LIMIT %d BY dpproxy_unit",
			u, col, q.hash(vals), q.from(), u, t.Unit.MaxRows)
		text = fmt.Sprintf("SELECT dpproxy_k, toInt64(count()) FROM (SELECT DISTINCT dpproxy_unit, %s AS dpproxy_k FROM (%s) WHERE dpproxy_c IS NOT NULL) GROUP BY dpproxy_k",
			d.exactText("dpproxy_c"), inner)
	}
	rows, err := s.db.QueryContext(ctx, text, q.args...)
	if err != nil {
		return fmt.Errorf("table %s: key units: %w", t.Name, err)
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var n int64
		if err := rows.Scan(&key, &n); err != nil {
			return fmt.Errorf("table %s: key units: %w", t.Name, err)
		}
		if err := fn(key, n); err != nil {
			return err
		}
	}
	return rows.Err()
}
