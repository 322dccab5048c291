package sources

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/catalog"
)

// KeyUnits is the input of DP partition selection over an open column
// (package selection): one pushed-down query returns, for every non-NULL
// key of column, the number of distinct privacy units that hold it after
// contribution bounding, and fn is called once per key. With a privacy
// unit, each unit keeps the max_groups of its distinct keys of least keyed
// hash (the histograms' bounding hash: UnitHash on MariaDB and ClickHouse,
// PostgresUnitHash on PostgreSQL, UnitHash64 on SQLite), so that one unit
// moves at
// most max_groups counts by one; without max_groups, each unit keeps its
// max_rows rows of least keyed hash, the rows its histograms keep, so it
// moves at most max_rows counts by one (rowBoundedKeys). A row-privacy
// table counts each row as its own unit (max_groups 1), which is a plain
// GROUP BY.
//
// Keys are text (an integer column's in decimal), grouped by their exact
// text. The servers (PostgreSQL, MySQL/MariaDB) order each unit's keys by
// the same keyed hash in SQL (dialect.keyedHash), ClickHouse with LIMIT …
// BY (chSource.keyUnits), SQLite by UnitHash64. Nothing here leaves the
// proxy: the caller releases only the keys that pass selection.
func (s *Set) KeyUnits(ctx context.Context, t *catalog.Table, column string, fn func(key string, units int64) error) error {
	src := s.sources[t.Source]
	if src == nil {
		return fmt.Errorf("table %s: unknown source %q", t.Name, t.Source)
	}
	c := t.Column(column)
	if c == nil || !c.Open {
		return fmt.Errorf("table %s: %q is not an open column", t.Name, column)
	}
	var db *sql.DB
	var q string
	var args []any
	var cancel cancelHook
	switch be := src.be.(type) {
	case *sqliteSource:
		db = be.db
		k, tbl := sqliteIdent(c.Name), sqliteTable(sourceTable(t))
		if t.Unit == nil {
			q = fmt.Sprintf("SELECT %s, COUNT(*) FROM %s WHERE %s IS NOT NULL GROUP BY %s", k, tbl, k, k)
			break
		}
		if t.Unit.MaxGroups < 1 {
			var bind []any
			b := &boundedQuery{t: t, ident: sqliteIdent, table: tbl, raw: []string{c.Name}, hash: func(vals []string) string {
				bind = append(bind, be.key)
				return "dpproxy_unit_hash(?, " + strings.Join(vals, ", ") + ")"
			}}
			q = rowBoundedKeys(b, k)
			args = bind
			break
		}
		u := sqliteIdent(t.Unit.Column)
		q = fmt.Sprintf(`SELECT dpproxy_k, COUNT(*) FROM (
	SELECT dpproxy_k, ROW_NUMBER() OVER (PARTITION BY dpproxy_u ORDER BY dpproxy_unit_hash(?, dpproxy_u, dpproxy_k), dpproxy_k) AS dpproxy_rn
	FROM (SELECT DISTINCT %s AS dpproxy_u, %s AS dpproxy_k FROM %s WHERE %s IS NOT NULL AND %s IS NOT NULL)
) WHERE dpproxy_rn <= ? GROUP BY dpproxy_k`, u, k, tbl, u, k)
		args = []any{be.key, t.Unit.MaxGroups}
	case *chSource:
		return be.keyUnits(ctx, t, c, fn)
	case *server:
		if err := be.boundable(t); err != nil {
			return err
		}
		db, cancel = be.db, be.cancel
		// Keys are grouped by their exact text (no collation, no
		// padding), as histograms bin them: a case-insensitive GROUP BY
		// would merge 'Sales' with 'sales' and could release the variant
		// that one unit holds.
		col := be.d.ident(c.Name)
		k, tbl := be.d.exactText(col), table(be.d, sourceTable(t))
		if t.Unit == nil {
			q = fmt.Sprintf("SELECT %s AS dpproxy_k, COUNT(*) FROM %s WHERE %s IS NOT NULL GROUP BY %s", k, tbl, col, k)
			break
		}
		pd := &pushdown{d: be.d, t: t}
		if t.Unit.MaxGroups < 1 {
			b := &boundedQuery{t: t, ident: be.d.ident, table: tbl, raw: []string{c.Name}, hash: func(vals []string) string { return be.d.keyedHash(pd.bind(be.key), vals) }}
			q = rowBoundedKeys(b, k)
			args = pd.args
			break
		}
		u := be.d.ident(t.Unit.Column)
		hash := be.d.keyedHash(pd.bind(be.key), []string{"dpproxy_u", "dpproxy_k"})
		q = fmt.Sprintf(`SELECT dpproxy_k, COUNT(*) FROM (
	SELECT dpproxy_k, ROW_NUMBER() OVER (PARTITION BY dpproxy_u ORDER BY %s, dpproxy_k) AS dpproxy_rn
	FROM (SELECT DISTINCT %s AS dpproxy_u, %s AS dpproxy_k FROM %s WHERE %s IS NOT NULL AND %s IS NOT NULL) dpproxy_d
) dpproxy_r WHERE dpproxy_rn <= %d GROUP BY dpproxy_k`, hash, u, k, tbl, u, col, t.Unit.MaxGroups)
		args = pd.args
	default:
		return fmt.Errorf("table %s: no partition selection for this source", t.Name)
	}
	err := inReadOnlyTx(ctx, db, cancel, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var key any
			var n int64
			if err := rows.Scan(&key, &n); err != nil {
				return err
			}
			if err := fn(keyText(key), n); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	if err != nil {
		return fmt.Errorf("table %s: key units: %w", t.Name, err)
	}
	return nil
}

// rowBoundedKeys is the count of distinct units per key of a unit table
// without max_groups: each unit keeps its max_rows rows (boundedQuery.kept:
// all of a unit with at most max_rows rows, else those of least keyed
// hash — the rows every histogram of the table keeps), so it holds at most
// max_rows keys. k is the key's expression over the raw column.
func rowBoundedKeys(b *boundedQuery, k string) string {
	col := b.ident(b.raw[0])
	maxRows := b.t.Unit.MaxRows
	return b.heavy(maxRows) + fmt.Sprintf(`SELECT dpproxy_k, COUNT(*) FROM (
	SELECT DISTINCT dpproxy_unit, %s AS dpproxy_k FROM %s WHERE %s IS NOT NULL
) dpproxy_keys GROUP BY dpproxy_k`, k, b.kept(maxRows), col)
}

// keyText is a key's text: strings and bytes as they are, integers in
// decimal, other numbers in Go's shortest form.
func keyText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}
