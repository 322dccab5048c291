package sources

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/internal/testdb"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/selection"
)

func keysCatalog(t testing.TB, path, unit string) *catalog.Catalog {
	t.Helper()
	return keysCatalogSource(t, "main: {driver: sqlite, path: "+path+"}", unit)
}

func keysCatalogSource(t testing.TB, source, unit string) *catalog.Catalog {
	t.Helper()
	y := "database: k\nsources:\n  " + source + "\ntables:\n  e:\n" +
		"    budget: {total: 1, per_user: 1, default_per_query: 0.1}\n" + unit +
		"    columns:\n      ref: {type: text}\n      item: {type: integer, open: true}\n      n: {type: integer, min: 0, max: 3}\n"
	cat, err := catalog.Parse("keys.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// keyRow is one row of the key-selection fixture.
type keyRow struct {
	u    any // int64 or nil
	ref  any // string or nil
	item int64
}

// keyRows are heavy-tailed referrers with NULL units and keys, and keys
// that differ from others only by case or a trailing space, which each
// engine must count apart (exact text).
func keyRows() []keyRow {
	r := rand.New(rand.NewPCG(3, 4))
	var rows []keyRow
	for i := 0; i < 2000; i++ {
		var u any = int64(r.IntN(150))
		if i%97 == 0 {
			u = nil
		}
		var ref any = fmt.Sprintf("site%d.example", int(math.Floor(math.Pow(r.Float64(), 3)*40)))
		switch {
		case i%53 == 0:
			ref = nil
		case i%7 == 0:
			ref = strings.ToUpper(ref.(string)[:1]) + ref.(string)[1:]
		case i%11 == 0:
			ref = ref.(string) + " "
		}
		rows = append(rows, keyRow{u, ref, int64(r.IntN(30))})
	}
	return rows
}

// keyMaxRows is the fixture's max_rows under a unit without max_groups.
const keyMaxRows = 4

// keyHash is an engine's keyed hash as text in the order the engine
// ranks by: UnitHash for MariaDB and ClickHouse, postgresKeyHash for
// PostgreSQL, sqliteKeyHash for SQLite.
type keyHash func(key string, vals ...any) string

// postgresKeyHash is PostgreSQL's PostgresUnitHash as fixed-width hex,
// the sign bit flipped, whose order is the signed order SQL ranks by.
func postgresKeyHash(key string, vals ...any) string {
	return fmt.Sprintf("%016x", uint64(PostgresUnitHash(key, vals...))^1<<63)
}

// sqliteKeyHash is SQLite's UnitHash64 as fixed-width hex, whose order is
// the unsigned order SQL ranks by.
func sqliteKeyHash(key string, vals ...any) string {
	return fmt.Sprintf("%016x", UnitHash64(key, vals...))
}

// wantKeyUnits replays KeyUnits in Go: per unit its distinct keys of
// column col, the g of least keyed hash (hash) kept; g = 0 counts rows (no unit);
// g < 0 (no max_groups) keeps each unit's keyMaxRows rows of least row
// hash (the unit, then ref, item, n in catalog order) and counts their
// distinct keys.
func wantKeyUnits(rows []keyRow, hash keyHash, key, col string, g int) map[string]int64 {
	want := map[string]int64{}
	if g < 0 {
		type hr struct {
			h string
			k any
		}
		per := map[int64][]hr{}
		for _, w := range rows {
			if w.u == nil {
				continue
			}
			u := w.u.(int64)
			var k any = strconv.FormatInt(w.item, 10)
			if col == "ref" {
				k = w.ref
			}
			per[u] = append(per[u], hr{hash(key, u, w.ref, w.item, int64(1)), k})
		}
		for _, l := range per {
			slices.SortFunc(l, func(a, b hr) int { return strings.Compare(a.h, b.h) })
			seen := map[string]bool{}
			for _, x := range l[:min(keyMaxRows, len(l))] {
				if k, ok := x.k.(string); ok && !seen[k] {
					seen[k] = true
					want[k]++
				}
			}
		}
		return want
	}
	per := map[int64]map[string]bool{}
	for _, w := range rows {
		if col == "ref" && w.ref == nil {
			continue
		}
		k := strconv.FormatInt(w.item, 10)
		if col == "ref" {
			k = w.ref.(string)
		}
		if g == 0 {
			want[k]++
			continue
		}
		if w.u == nil {
			continue
		}
		u := w.u.(int64)
		if per[u] == nil {
			per[u] = map[string]bool{}
		}
		per[u][k] = true
	}
	for u, ks := range per {
		type hk struct{ h, k string }
		var l []hk
		for k := range ks {
			// A key is hashed as its text (an integer column's in
			// decimal), as the queries group it.
			l = append(l, hk{hash(key, u, k), k})
		}
		slices.SortFunc(l, func(a, b hk) int {
			if c := strings.Compare(a.h, b.h); c != 0 {
				return c
			}
			return strings.Compare(a.k, b.k)
		})
		for _, x := range l[:min(g, len(l))] {
			want[x.k]++
		}
	}
	return want
}

// checkKeyUnits compares KeyUnits with wantKeyUnits over source (a
// catalog sources entry) for max_groups 1 and 3, for a unit bounded by
// max_rows alone and for row privacy.
func checkKeyUnits(t *testing.T, source string, hash keyHash, rows []keyRow) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, g := range []int{1, 3, -1, 0} {
		unit := ""
		switch {
		case g > 0:
			unit = fmt.Sprintf("    privacy_unit: {column: uid, max_rows: 10, max_groups: %d}\n", g)
		case g < 0:
			unit = fmt.Sprintf("    privacy_unit: {column: uid, max_rows: %d}\n", keyMaxRows)
		}
		cat := keysCatalogSource(t, source, unit)
		set, err := Open(ctx, cat, Options{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		key, err := loadUnitKey(dir)
		if err != nil {
			t.Fatal(err)
		}
		cols := []string{"ref", "item"}
		if g == 0 {
			cols = cols[:1]
		}
		for _, col := range cols {
			want := wantKeyUnits(rows, hash, key, col, g)
			got := map[string]int64{}
			if err := set.KeyUnits(ctx, cat.Table("e"), col, func(k string, n int64) error { got[k] += n; return nil }); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("max_groups %d, %s:\n got %v\nwant %v", g, col, got, want)
			}
		}
		if g == 0 {
			if err := set.KeyUnits(ctx, cat.Table("e"), "n", func(string, int64) error { return nil }); err == nil {
				t.Error("KeyUnits over a declared column")
			}
		}
		set.Close()
	}
}

// KeyUnits counts, per key, the distinct units that hold it after each
// unit keeps its max_groups keys of least keyed hash: checked against Go
// replaying the same hash, for a text and an integer open column, and
// against a plain count per key without a unit.
func TestKeyUnitsSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k.sqlite")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	rows := keyRows()
	loadKeyRows(t, db, "CREATE TABLE e (uid INTEGER, ref TEXT, item INTEGER, n INTEGER)", "INSERT INTO e VALUES (?, ?, ?, 1)", rows)
	db.Close()
	checkKeyUnits(t, "main: {driver: sqlite, path: "+path+"}", sqliteKeyHash, rows)
}

// The same on PostgreSQL: the per-unit bounding in SQL (ROW_NUMBER over
// the keyed hash) against the Go replay.
func TestKeyUnitsPostgres(t *testing.T) {
	srv := pgServer.Get(t)
	ctx := context.Background()
	if err := srv.Exec(ctx, "DROP SCHEMA IF EXISTS keys CASCADE", "CREATE SCHEMA keys"); err != nil {
		t.Fatal(err)
	}
	db, err := srv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows := keyRows()
	loadKeyRows(t, db, "CREATE TABLE keys.e (uid BIGINT, ref TEXT, item BIGINT, n BIGINT)", "INSERT INTO keys.e VALUES ($1, $2, $3, 1)", rows)
	dsn := srv.AdminDSN
	if strings.Contains(dsn, "?") {
		dsn += "&search_path=keys"
	} else {
		dsn += " search_path=keys"
	}
	checkKeyUnits(t, "main: {driver: postgres, dsn: \""+dsn+"\"}", postgresKeyHash, rows)
}

// The same on MariaDB, whose default collation is case-insensitive and
// pads: keys must still be counted apart by their exact text.
func TestKeyUnitsMariaDB(t *testing.T) {
	srv := mariaServer.Get(t)
	ctx := context.Background()
	if err := srv.Exec(ctx, "DROP DATABASE IF EXISTS keysel", "CREATE DATABASE keysel CHARACTER SET utf8mb4"); err != nil {
		t.Fatal(err)
	}
	db, err := srv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows := keyRows()
	loadKeyRows(t, db, "CREATE TABLE keysel.e (uid BIGINT, ref VARCHAR(64), item BIGINT, n BIGINT) CHARACTER SET utf8mb4", "INSERT INTO keysel.e VALUES (?, ?, ?, 1)", rows)
	dsn := fmt.Sprintf("root@unix(%s)/keysel", strings.TrimSuffix(strings.TrimPrefix(srv.AdminDSN, "root@unix("), ")/?multiStatements=true"))
	checkKeyUnits(t, "main: {driver: mysql, dsn: \""+dsn+"\"}", UnitHash, rows)
}

func loadKeyRows(t *testing.T, db *sql.DB, create, insert string, rows []keyRow) {
	t.Helper()
	if _, err := db.Exec(create); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range rows {
		if _, err := tx.Exec(insert, w.u, w.ref, w.item); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkKeySelection times partition selection over a 1,000,000-row
// table with 100,000 distinct keys (each key once, then 900,000 rows of a
// Zipf law over them), row privacy, ε = 1, δ = 10⁻⁶: the pushed-down count
// per key plus one release decision per key, against SQLite's own plain
// GROUP BY of the same column in the same run (ratio = selection / plain),
// and how many keys are released. DPPROXY_BENCH_DIR keeps the file;
// DPPROXY_BENCH_ROWS sets the rows (keys = rows/10), so that
// `dpproxy-bench all` can run it smaller.
func BenchmarkKeySelection(b *testing.B) {
	rows := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("DPPROXY_BENCH_ROWS")); err == nil && v >= 10 {
		rows = v
	}
	keys := rows / 10
	dir := os.Getenv("DPPROXY_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	path := filepath.Join(dir, fmt.Sprintf("keys-%d.sqlite", rows))
	ctx := context.Background()
	if _, err := os.Stat(path); err != nil {
		db, err := sql.Open("sqlite", path)
		if err != nil {
			b.Fatal(err)
		}
		db.Exec("CREATE TABLE e (uid INTEGER, ref TEXT, item INTEGER, n INTEGER)")
		tx, _ := db.Begin()
		st, _ := tx.Prepare("INSERT INTO e (ref) VALUES (?)")
		z := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.07, 1, uint64(keys-1))
		for i := 0; i < rows; i++ {
			k := uint64(i)
			if i >= keys {
				k = z.Uint64()
			}
			if _, err := st.Exec("r" + strconv.FormatUint(k, 36) + ".example.com"); err != nil {
				b.Fatal(err)
			}
		}
		tx.Commit()
		db.Close()
	}
	cat := keysCatalog(b, path, "")
	set, err := Open(ctx, cat, Options{DataDir: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer set.Close()
	m, err := selection.Choose(1, 0, 1e-6, 1)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	var sel, plain time.Duration
	released, distinct := 0, 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		rnd := noise.NewRand()
		released, distinct = 0, 0
		if err := set.KeyUnits(ctx, cat.Table("e"), "ref", func(k string, n int64) error {
			distinct++
			if m.Keep(rnd, n) {
				released++
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		sel += time.Since(start)
		start = time.Now()
		rs, err := raw.QueryContext(ctx, "SELECT ref, COUNT(*) FROM e GROUP BY ref")
		if err != nil {
			b.Fatal(err)
		}
		var k string
		var n int64
		for rs.Next() {
			rs.Scan(&k, &n)
		}
		rs.Close()
		plain += time.Since(start)
	}
	b.ReportMetric(float64(sel)/float64(plain), "selection/plain")
	b.ReportMetric(float64(sel.Milliseconds())/float64(b.N), "selection-ms")
	b.ReportMetric(float64(plain.Milliseconds())/float64(b.N), "plain-ms")
	b.ReportMetric(float64(distinct), "keys")
	b.ReportMetric(float64(released), "released")
}

// The same on ClickHouse, behind a Distributed table with the rows spread
// over the shards at random: LIMIT … BY over the keyed hash against the Go
// replay.
func TestKeyUnitsClickHouse(t *testing.T) {
	srv := chServer.Get(t)
	rows := keyRows()
	var loaded [][]any
	for i, w := range rows {
		loaded = append(loaded, []any{w.u, w.ref, w.item, int64(1), uint64(i)})
	}
	r := rand.New(rand.NewPCG(5, 6))
	chDistributed(t, srv, "keysel", "e", []string{"uid Nullable(Int64)", "ref Nullable(String)", "item Int64", "n Int64", "id UInt64"},
		"id", "rand()", loaded, func(int, []any) int { return r.IntN(testdb.ClickHouseShards) })
	dsn := strings.Replace(srv.AdminDSN, "/default?", "/keysel?", 1)
	if !strings.Contains(dsn, "/keysel?") {
		t.Skipf("cannot name the database in %s", srv.AdminDSN)
	}
	checkKeyUnits(t, "main: {driver: clickhouse, dsn: \""+dsn+"\"}", UnitHash, rows)
}
