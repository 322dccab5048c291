package sources

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/catalog"
)

// Contribution bounding. A table with a privacy unit is counted from itself
// truncated per unit, inside the database, in one query (SQLite does the
// same inside its file scan, sqlite_bound.go):
//
//  1. rows whose unit is NULL are left out (catalog.PrivacyUnit);
//  2. each row gets a keyed hash of its unit and of every declared column's
//     value — its content, not the batch's bins — and each unit keeps its
//     max_rows rows of least hash: ROW_NUMBER() OVER (PARTITION BY unit
//     ORDER BY hash) <= k. This step does not depend on the batch, so every
//     histogram of one data version is a histogram of the same truncated
//     table (the marginal of one is the other; stored answers and reused
//     measurements rely on it). A unit with at most k rows keeps them all
//     whatever their hashes, so the query finds the heavier units first
//     (GROUP BY unit HAVING COUNT(*) > k) and hashes and ranks only their
//     rows; the others' rows are taken as they are. The counts are those
//     of every row with a unit less those of the rows the heavy units drop
//     (minusDropped, weightedRows), so the light units' rows are counted
//     by one plain scan, as a GROUP BY without a unit counts them;
//  3. with max_groups g and max_rows_per_group r, the kept rows are binned,
//     each unit keeps the g cells (of the batch's internal domain) of least
//     keyed hash of (unit, cell) — ROW_NUMBER() OVER (PARTITION BY unit
//     ORDER BY cell hash, cell) <= g, the cell breaking a tie of hashes so
//     that no unit ever keeps g + 1 cells — and in each cell its r rows of
//     least row hash. Only how many rows a cell keeps matters to the
//     count, so the query ranks (unit, cell, rows) aggregates, one per
//     cell, and counts min(rows, r).
//
// A unit's kept rows are a function of its own rows and the key only, never
// of other units, the query's noise or a random() of the database: that is
// what makes the truncation stable (a unit added or removed changes only its
// own kept rows, at most k of them in at most g cells, at most r per cell),
// and the sensitivities of package planner rest on it. The key makes the
// choice unpredictable to whoever writes the data; privacy does not depend
// on its secrecy. It travels to the database as a bound parameter of the
// histogram query, so the database (its logs, its statement statistics)
// can see it.
//
// MariaDB (and ClickHouse) rank by the SHA-256 of the key, then per value
// 0x1f and "N" for NULL or "V" and the value's text (UnitHash: MariaDB's
// SHA2); SQLite, which runs our Go in-process, by a keyed SipHash of the
// same bytes (UnitHash64), in its file scan (sqlite_bound.go) and in SQL
// alike; PostgreSQL by its built-in 64-bit hash_record_extended of the
// values as they are stored, seeded by a hash of the key, with no text
// built per row (PostgresUnitHash). unithash.go says why privacy does not
// rest on the hash. A test can replay each engine's selection in Go.

// UnitKeyFile is the file, in the data directory, holding the key of the
// keyed hash (64 hex digits, mode 0600), generated the first time a catalog
// with a privacy unit is opened.
const UnitKeyFile = "unit-hash.key"

// loadUnitKey reads the data directory's unit key, creating it (0600) when
// it does not exist. A key readable by others is refused.
func loadUnitKey(dataDir string) (string, error) {
	if dataDir == "" {
		return "", errors.New("a table declares a privacy_unit: the data directory (which holds its hash key) must be set")
	}
	path := filepath.Join(dataDir, UnitKeyFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			f.Close()
			return "", err
		}
		key := hex.EncodeToString(b[:])
		_, err := f.WriteString(key + "\n")
		if err2 := f.Close(); err == nil {
			err = err2
		}
		if err != nil {
			return "", fmt.Errorf("unit key %s: %w", path, err)
		}
		return key, nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("unit key %s: %w", path, err)
	}
	return readUnitKeyFile(path)
}

// ReadUnitKey reads dataDir's unit key without creating one: "" when
// there is none (dpproxy state migrate copies it into shared state).
func ReadUnitKey(dataDir string) (string, error) {
	path := filepath.Join(dataDir, UnitKeyFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return readUnitKeyFile(path)
}

// readUnitKeyFile reads and checks a unit key file; one readable by
// others is refused.
func readUnitKeyFile(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("unit key %s: %w", path, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("unit key %s: mode %v lets others read it; chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("unit key %s: %w", path, err)
	}
	key := strings.TrimSpace(string(b))
	if raw, err := hex.DecodeString(key); err != nil || len(raw) < 16 {
		return "", fmt.Errorf("unit key %s: not a key of at least 32 hex digits", path)
	}
	return key, nil
}

// UnitHash is the keyed hash of values as MariaDB and ClickHouse compute
// it (see above): the lower-case hex SHA-256 of key, then per value 0x1f
// and "N" for NULL or "V" and its text. Integers are written in decimal,
// text as it is; tests replay those engines' selection with it.
func UnitHash(key string, vals ...any) string {
	h := sha256.New()
	h.Write([]byte(key))
	for _, v := range vals {
		h.Write([]byte{0x1f})
		if v == nil {
			h.Write([]byte{'N'})
			continue
		}
		h.Write([]byte{'V'})
		switch v := v.(type) {
		case string:
			h.Write([]byte(v))
		case []byte:
			h.Write(v)
		case int64:
			h.Write([]byte(strconv.FormatInt(v, 10)))
		case int:
			h.Write([]byte(strconv.Itoa(v)))
		case float64:
			h.Write([]byte(strconv.FormatFloat(v, 'g', -1, 64)))
		default:
			fmt.Fprint(h, v)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// hashColumns are the columns a row's hash covers: the unit and every
// declared column, in catalog order, whatever the batch bins.
func hashColumns(t *catalog.Table) []string {
	out := []string{t.Unit.Column}
	for _, c := range t.Columns {
		out = append(out, c.Name)
	}
	return out
}

// boundedQuery builds the histogram query of a table with a privacy unit.
// Bins are the output cell expressions over the raw columns (one per
// column for the servers; one combined cell index for SQLite), combined is
// the SQL of the internal cell index from the bins' aliases (used for
// max_groups / max_rows_per_group), hash the dialect's keyed hash of SQL
// values (binding the key), bind a parameter. Parameters are bound in
// textual order (MySQL's ? are positional).
type boundedQuery struct {
	t      *catalog.Table
	ident  func(string) string
	hash   func(vals []string) string
	raw    []string                // raw column names read
	bins   func() (exprs []string) // bound when called, in order
	outs   []string                // the bins' aliases
	cellOf func(outs []string) string
	table  string
	// pairs asks for the distinct (unit, internal cell) pairs of the
	// bounded rows, ordered by unit, instead of the counts per cell.
	pairs bool
	// materialize is the dialect's keyword (with a trailing space) that
	// makes the WITH table of heavy units computed once ("" for none).
	materialize string
}

// rawList is the raw columns read, quoted, each followed by ", ".
func (b *boundedQuery) rawList() string {
	var raw []string
	seen := map[string]bool{}
	for _, c := range b.raw {
		if !seen[c] {
			seen[c] = true
			raw = append(raw, b.ident(c))
		}
	}
	out := strings.Join(raw, ", ")
	if out != "" {
		out += ", "
	}
	return out
}

// heavy is a WITH clause, to put before a statement that reads kept,
// naming the units with more than k rows (dpproxy_heavy).
func (b *boundedQuery) heavy(k int64) string {
	unit := b.ident(b.t.Unit.Column)
	return fmt.Sprintf("WITH dpproxy_heavy AS "+b.materialize+"(SELECT %[1]s AS dpproxy_unit FROM %[2]s WHERE %[1]s IS NOT NULL GROUP BY %[1]s HAVING COUNT(*) > %[3]d) ", unit, b.table, k)
}

// kept is step 2 of the package comment: a derived table (dpproxy_kept)
// of the rows each unit keeps, with the raw columns and dpproxy_unit —
// all rows of a unit with at most k rows, without a hash or a sort, and
// the k of least keyed hash of a heavier one (named by heavy(k)). It binds
// the hash key when called.
func (b *boundedQuery) kept(k int64) string {
	rawList := b.rawList()
	unit := b.ident(b.t.Unit.Column)
	// NOT IN, not NOT EXISTS: PostgreSQL then probes a hashed subplan
	// instead of sorting the table for a merge anti-join (the heavy units
	// are never NULL).
	light := fmt.Sprintf("SELECT %[1]s%[2]s AS dpproxy_unit FROM %[3]s WHERE %[2]s IS NOT NULL AND %[2]s NOT IN (SELECT dpproxy_unit FROM dpproxy_heavy)", rawList, unit, b.table)
	return fmt.Sprintf("(%s UNION ALL SELECT %sdpproxy_unit FROM (%s) dpproxy_ranked WHERE dpproxy_rn <= %d) dpproxy_kept", light, rawList, b.ranked(), k)
}

// ranked is a derived table's query: the heavy units' rows (named by
// heavy) with the raw columns, dpproxy_unit and dpproxy_rn, each row's
// rank in its unit by keyed hash. It binds the hash key when called.
func (b *boundedQuery) ranked() string {
	rawList := b.rawList()
	unit := b.ident(b.t.Unit.Column)
	var vals []string
	for _, c := range hashColumns(b.t) {
		vals = append(vals, b.ident(c))
	}
	hashed := fmt.Sprintf("SELECT %s%s AS dpproxy_unit, %s AS dpproxy_hash FROM %s WHERE %s IN (SELECT dpproxy_unit FROM dpproxy_heavy)", rawList, unit, b.hash(vals), b.table, unit)
	return fmt.Sprintf("SELECT %sdpproxy_unit, ROW_NUMBER() OVER (PARTITION BY dpproxy_unit ORDER BY dpproxy_hash) AS dpproxy_rn FROM (%s) dpproxy_hashed", rawList, hashed)
}

// minusDropped is the histogram of kept rows as the histogram of every row
// with a unit less that of the rows the heavy units drop (rank > k): the
// same counts as a GROUP BY over kept, but the rows of the light units —
// nearly all of them — are counted by the plain GROUP BY's single scan,
// with neither a filter on dpproxy_heavy nor a derived table of kept rows
// between the scan and the count (MariaDB materialises such a UNION ALL
// to a temporary table, and computes a WITH table once per reference).
// sel are the bins' select expressions (bound when called, in order);
// with no bins it is the one count.
func (b *boundedQuery) minusDropped(k int64, sel func() string) string {
	unit := b.ident(b.t.Unit.Column)
	if len(b.outs) == 0 {
		return fmt.Sprintf("SELECT SUM(dpproxy_n) FROM (SELECT COUNT(*) AS dpproxy_n FROM %[1]s WHERE %[2]s IS NOT NULL UNION ALL "+
			"SELECT -COUNT(*) FROM (%[3]s) dpproxy_ranked WHERE dpproxy_rn > %[4]d) dpproxy_parts", b.table, unit, b.ranked(), k)
	}
	outs := strings.Join(b.outs, ", ")
	all := sel()
	dropped := sel()
	return fmt.Sprintf("SELECT %[1]s, SUM(dpproxy_n) FROM ("+
		"SELECT %[1]s, COUNT(*) AS dpproxy_n FROM (SELECT %[2]s FROM %[3]s WHERE %[4]s IS NOT NULL) dpproxy_all GROUP BY %[1]s UNION ALL "+
		"SELECT %[1]s, -COUNT(*) FROM (SELECT %[5]s FROM (%[6]s) dpproxy_ranked WHERE dpproxy_rn > %[7]d) dpproxy_dropped GROUP BY %[1]s"+
		") dpproxy_parts GROUP BY %[1]s", outs, all, b.table, unit, dropped, b.ranked(), k)
}

// binSelect is the bins' select list, each AS its alias; it binds the
// bins' parameters when called.
func (b *boundedQuery) binSelect() string {
	bins := b.bins()
	sel := make([]string, len(bins))
	for j, e := range bins {
		sel[j] = e + " AS " + b.outs[j]
	}
	return strings.Join(sel, ", ")
}

// sql writes the query; see the package comment above for its steps.
func (b *boundedQuery) sql() string {
	u := b.t.Unit
	k := u.MaxRows
	if len(b.outs) == 0 {
		k = min(u.MaxRows, u.PerCell())
	}
	heavy := b.heavy(k)
	kept := func() string { return b.kept(k) }
	if len(b.outs) == 0 {
		if b.pairs {
			return heavy + fmt.Sprintf("SELECT DISTINCT dpproxy_unit, 0 FROM %s ORDER BY dpproxy_unit", kept())
		}
		return heavy + b.minusDropped(k, nil)
	}
	outs := strings.Join(b.outs, ", ")
	if !u.CellBounded() {
		if !b.pairs {
			return heavy + b.minusDropped(k, b.binSelect)
		}
		return heavy + fmt.Sprintf("SELECT DISTINCT dpproxy_unit, %s AS dpproxy_cell FROM (SELECT %s, dpproxy_unit FROM %s) dpproxy_binned ORDER BY dpproxy_unit",
			b.cellOf(b.outs), b.binSelect(), kept())
	}
	cellHash := b.hash([]string{"'cell'", "dpproxy_unit", "dpproxy_cell"})
	weighted := b.weightedRows(k)
	g, r := u.MaxGroups, u.MaxRowsPerGroup
	if g == 0 {
		g = u.MaxRows
	}
	if r == 0 {
		r = u.MaxRows
	}
	// Which r rows of a cell a unit keeps does not change the count, so the
	// kept rows are first aggregated to (unit, cell, rows) and only those
	// pairs are ranked: min(rows, r) of each of a unit's g cells of least
	// cell hash. (Ranking every row by (unit, cell) as well cost 16× more.)
	// A pair's kept rows are counted as its rows less its dropped rows
	// (weightedRows), and pairs left with none are not pairs of kept rows.
	head, tail := "SELECT %[1]s, SUM(CASE WHEN dpproxy_n < %[6]d THEN dpproxy_n ELSE %[6]d END) FROM (", " GROUP BY %[1]s"
	if b.pairs {
		head, tail = "SELECT dpproxy_unit, dpproxy_cell FROM (", " ORDER BY dpproxy_unit"
	}
	return heavy + fmt.Sprintf(head+
		"SELECT %[1]s, dpproxy_unit, dpproxy_cell, dpproxy_n, ROW_NUMBER() OVER (PARTITION BY dpproxy_unit ORDER BY %[2]s, dpproxy_cell) AS dpproxy_g FROM ("+
		"SELECT %[1]s, %[3]s AS dpproxy_cell, dpproxy_unit, dpproxy_n FROM ("+
		"SELECT %[1]s, dpproxy_unit, SUM(dpproxy_w) AS dpproxy_n FROM %[4]s"+
		" GROUP BY %[1]s, dpproxy_unit HAVING SUM(dpproxy_w) > 0) dpproxy_pairs) dpproxy_cells) dpproxy_bounded WHERE dpproxy_g <= %[5]d"+tail,
		outs, cellHash, b.cellOf(b.outs), weighted, g, r)
}

// weightedRows is a derived table (dpproxy_binned) of the bins (as their
// aliases), dpproxy_unit and a weight dpproxy_w: every row with a unit
// weighing 1 and every row a heavy unit drops (minusDropped) again
// weighing −1, so that the weights of a (cell, unit) pair sum to its kept
// rows. It binds the bins' parameters and the hash key when called.
func (b *boundedQuery) weightedRows(k int64) string {
	unit := b.ident(b.t.Unit.Column)
	all := b.binSelect()
	dropped := b.binSelect()
	return fmt.Sprintf("(SELECT %[1]s, %[2]s AS dpproxy_unit, 1 AS dpproxy_w FROM %[3]s WHERE %[2]s IS NOT NULL UNION ALL "+
		"SELECT %[4]s, dpproxy_unit, -1 FROM (%[5]s) dpproxy_ranked WHERE dpproxy_rn > %[6]d) dpproxy_binned", all, unit, b.table, dropped, b.ranked(), k)
}

// serverBounded is the pushdown's bounded query for PostgreSQL and MySQL:
// one bin per column (pushdown.bin), the internal cell index Σ b_j·s_j.
func (q *pushdown) serverBounded(key string) string { return q.serverBoundedQuery(key, false) }

// serverBoundedPairs is the distinct (unit, cell) pairs query (UnitCells).
func (q *pushdown) serverBoundedPairs() string { return q.serverBoundedQuery(q.key, true) }

func (q *pushdown) serverBoundedQuery(key string, pairs bool) string {
	st := strides(q.cols)
	b := &boundedQuery{t: q.t, ident: q.d.ident, table: q.from(), pairs: pairs}
	if bt, ok := q.d.(boundedTuning); ok {
		b.materialize = bt.materializeCTE()
	}
	b.hash = func(vals []string) string { return q.d.keyedHash(q.bind(key), vals) }
	for j, c := range q.cols {
		b.raw = append(b.raw, c.Name)
		b.outs = append(b.outs, fmt.Sprintf("b%d", j))
	}
	b.bins = func() []string {
		out := make([]string, len(q.cols))
		for j, c := range q.cols {
			out[j] = q.bin(c)
		}
		return out
	}
	b.cellOf = func(outs []string) string {
		terms := make([]string, len(outs))
		for j, o := range outs {
			terms[j] = fmt.Sprintf("%s * %d", o, st[j])
		}
		return strings.Join(terms, " + ")
	}
	return b.sql()
}

// hashText is the NULL-aware text of one hashed value for the servers'
// keyed hash: 'N' for NULL, else 'V' and the text.
func hashText(v, text string) string {
	return fmt.Sprintf("CASE WHEN %s IS NULL THEN 'N' ELSE %s END", v, text)
}

// UnitCells calls fn with each unit's internal cells (over cols, with each
// column's dropped cell last, as Histogram counts them internally) after
// contribution bounding: the distinct cells its kept rows lie in, at most
// max_groups of them (max_rows without it). The pairs are distinct (unit,
// cell) pairs pushed down and streamed ordered by unit, so the proxy holds
// one unit's cells at a time, never a unit's value beyond comparing it with
// the previous row's. It is how COUNT(DISTINCT <unit>) is counted
// (exec.CountDistinct). SQLite's file scan hands over each unit's cells
// from its unit table instead (sqlite_bound.go), in no particular order of
// units.
func (s *Set) UnitCells(ctx context.Context, t *catalog.Table, cols []*catalog.Column, fn func(cells []int) error) error {
	if t.Unit == nil {
		return fmt.Errorf("table %s declares no privacy unit", t.Name)
	}
	src := s.sources[t.Source]
	if src == nil {
		return fmt.Errorf("table %s: unknown source %q", t.Name, t.Source)
	}
	n := cells(cols)
	var db *sql.DB
	var q string
	var args []any
	var cancel cancelHook
	var d dialect
	switch be := src.be.(type) {
	case *sqliteSource:
		done, err := be.unitCellsScan(ctx, t, cols, fn)
		if done || err != nil {
			return err
		}
		db = be.db
		q, args = be.boundedQuery(t, cols, true)
	case *chSource:
		return be.unitCells(ctx, t, cols, fn)
	case *server:
		if err := be.boundable(t); err != nil {
			return err
		}
		db, cancel, d = be.db, be.cancel, be.d
		pd := &pushdown{d: be.d, t: t, cols: cols, key: be.key}
		q = pd.joined(pd.serverBoundedPairs())
		args = pd.args
	default:
		return fmt.Errorf("table %s: no unit cells for this source", t.Name)
	}
	err := inReadOnlyTx(ctx, db, cancel, func(tx *sql.Tx) error {
		if d != nil {
			if err := beginBounded(ctx, tx, d, t); err != nil {
				return err
			}
		}
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		return groupUnitCells(rows, int64(n), t.Name, fn)
	})
	if err != nil {
		return fmt.Errorf("table %s: unit cells: %w", t.Name, err)
	}
	return nil
}
