package sources

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"

	"github.com/dpproxy/dpproxy/catalog"
)

// KeyUnits is the input of DP partition selection over an open column
// (package selection): one pushed-down query returns, for every non-NULL
// key of column, the number of distinct privacy units that hold it after
// contribution bounding, and fn is called once per key. With a privacy
// unit, each unit keeps the max_groups of its distinct keys of least keyed
// hash (UnitHash, as the histograms' bounding), so that one unit moves at
// most max_groups counts by one; a row-privacy table counts each row as
// its own unit (max_groups 1), which is a plain GROUP BY.
//
// Keys are text (an integer column's in decimal). Nothing here leaves the
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
	switch be := src.be.(type) {
	case *sqliteSource:
		db = be.db
		k, tbl := sqliteIdent(c.Name), sqliteTable(sourceTable(t))
		if t.Unit == nil {
			q = fmt.Sprintf("SELECT %s, COUNT(*) FROM %s WHERE %s IS NOT NULL GROUP BY %s", k, tbl, k, k)
			break
		}
		if t.Unit.MaxGroups < 1 {
			return fmt.Errorf("table %s: partition selection needs max_groups", t.Name)
		}
		u := sqliteIdent(t.Unit.Column)
		q = fmt.Sprintf(`SELECT dpproxy_k, COUNT(*) FROM (
	SELECT dpproxy_k, ROW_NUMBER() OVER (PARTITION BY dpproxy_u ORDER BY dpproxy_unit_hash(?, dpproxy_u, dpproxy_k), dpproxy_k) AS dpproxy_rn
	FROM (SELECT DISTINCT %s AS dpproxy_u, %s AS dpproxy_k FROM %s WHERE %s IS NOT NULL AND %s IS NOT NULL)
) WHERE dpproxy_rn <= ? GROUP BY dpproxy_k`, u, k, tbl, u, k)
		args = []any{be.key, t.Unit.MaxGroups}
	case *server:
		if t.Unit != nil {
			return fmt.Errorf("table %s: partition selection under a privacy unit is implemented for SQLite sources only", t.Name)
		}
		db = be.db
		k, tbl := be.d.ident(c.Name), table(be.d, sourceTable(t))
		q = fmt.Sprintf("SELECT %s, COUNT(*) FROM %s WHERE %s IS NOT NULL GROUP BY %s", k, tbl, k, k)
	default:
		return fmt.Errorf("table %s: no partition selection for this source", t.Name)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("table %s: key units: %w", t.Name, err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("table %s: key units: %w", t.Name, err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("table %s: key units: %w", t.Name, err)
	}
	defer rows.Close()
	for rows.Next() {
		var key any
		var n int64
		if err := rows.Scan(&key, &n); err != nil {
			return fmt.Errorf("table %s: key units: %w", t.Name, err)
		}
		if err := fn(keyText(key), n); err != nil {
			return err
		}
	}
	return rows.Err()
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
