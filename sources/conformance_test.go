package sources

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/internal/testdb"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
)

var (
	pgServer    = testdb.NewLazy(testdb.StartPostgres)
	mariaServer = testdb.NewLazy(testdb.StartMariaDB)
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgServer.Stop()
	mariaServer.Stop()
	chServer.Stop()
	os.Exit(code)
}

// conformanceCatalog declares every column kind and policy. Sources are
// filled in per engine.
const conformanceColumns = `
    columns:
      i_clamp: {type: integer, min: -5, max: 10, width: 3}
      i_other: {type: integer, min: 0, max: 9, out_of_domain: other, null: cell}
      i_drop: {type: integer, min: 1, max: 5, out_of_domain: drop, null: cell}
      f_int: {type: integer, min: 17, max: 90, width: 5, null: cell}
      n_bins: {type: numeric, edges: [-1.5, 0, 0.1, 2.5, 100], out_of_domain: other, null: other}
      n_clamp: {type: numeric, edges: [0, 10, 20]}
      cat: {type: categorical, values: [Male, Female, "Ünïcödé", "a b", "x'y"], out_of_domain: other, null: cell}
      cat_drop: {type: categorical, values: [A, b]}
      t_hours: {type: datetime, min: '2025-01-01 00:00:00', max: '2025-01-02 23:59:59', width: 6h, out_of_domain: other, null: cell}
      t_months: {type: datetime, min: 2024-11-01, max: 2025-04-30, width: 2mo}
      d_weeks: {type: date, min: 2025-01-06, max: 2025-02-20, width: 7d, out_of_domain: drop, null: cell}
`

// conformanceSQLTypes are the columns' types per engine: integers, doubles
// (also for the integer domain f_int: floats in an integer column) and text.
var conformanceSQLTypes = []struct{ name, sqlite, postgres, mysql string }{
	{"i_clamp", "INTEGER", "BIGINT", "BIGINT"},
	{"i_other", "INTEGER", "BIGINT", "BIGINT"},
	{"i_drop", "INTEGER", "BIGINT", "BIGINT"},
	{"f_int", "REAL", "DOUBLE PRECISION", "DOUBLE"},
	{"n_bins", "REAL", "DOUBLE PRECISION", "DOUBLE"},
	{"n_clamp", "REAL", "DOUBLE PRECISION", "DOUBLE"},
	{"cat", "TEXT", "TEXT", "VARCHAR(64)"},
	{"cat_drop", "TEXT", "TEXT", "VARCHAR(64)"},
	{"t_hours", "DATETIME", "TIMESTAMP", "DATETIME(6)"},
	{"t_months", "DATETIME", "TIMESTAMPTZ", "TIMESTAMP(6) NULL"},
	{"d_weeks", "DATE", "DATE", "DATE"},
}

// conformancePools are the values rows draw from: NULLs, out-of-range
// values, exact bin edges, negative numbers, floats in an integer column,
// unicode, mixed case and trailing spaces.
var conformancePools = [][]any{
	{int64(-7), int64(-5), int64(-4), int64(-3), int64(-2), int64(0), int64(1), int64(4), int64(7), int64(9), int64(10), int64(11), int64(100), nil},
	{int64(-1), int64(0), int64(5), int64(9), int64(10), nil},
	{int64(0), int64(1), int64(3), int64(5), int64(6), nil},
	{17.0, 16.99, 21.999, 22.0, 30.5, 89.9, 90.0, 90.5, -3.25, 1e9, nil},
	{-2.0, -1.5, -0.5, 0.0, 0.05, 0.1, 0.1000001, 2.5, 50.0, 100.0, 100.5, nil},
	{-1.0, 0.0, 9.999, 10.0, 20.0, 25.0, nil},
	{"Male", "male", "MALE", "Male ", "Female", "Ünïcödé", "ünïcödé", "a b", "x'y", "other", "", nil},
	{"A", "a", "b", "B", "c", nil},
	{"2024-12-31 23:59:59", "2025-01-01 00:00:00", "2025-01-01 05:59:59.5", "2025-01-01 06:00:00", "2025-01-02 13:14:15", "2025-01-02 23:59:59.999", "2025-01-03 00:00:00", "2030-05-05 05:05:05", nil},
	{"2024-10-31 23:59:59", "2024-11-01 00:00:00", "2024-12-31 23:59:59.25", "2025-01-01 00:00:00", "2025-02-28 12:00:00", "2025-04-30 23:59:59", "2025-05-01 00:00:00", nil},
	{"2025-01-05", "2025-01-06", "2025-01-12", "2025-01-13", "2025-02-16", "2025-02-17", "2025-02-20", "2025-02-21", nil},
}

// timeColumns are the positions of the time columns in a row.
var timeColumns = []int{8, 9, 10}

// asUnixSeconds stores every other time of the rows as SQLite's other
// storage, an integer (or, with a fraction, real) number of Unix seconds.
func asUnixSeconds(rows [][]any) [][]any {
	out := make([][]any, len(rows))
	for i, r := range rows {
		out[i] = append([]any(nil), r...)
		if i%2 == 0 {
			continue
		}
		for _, j := range timeColumns {
			s, ok := r[j].(string)
			if !ok {
				continue
			}
			t, err := time.Parse("2006-01-02 15:04:05.999999999", s)
			if err != nil {
				t, _ = time.Parse(time.DateOnly, s)
			}
			if t.Nanosecond() != 0 {
				out[i][j] = float64(t.UnixNano()) / 1e9
			} else {
				out[i][j] = t.Unix()
			}
		}
	}
	return out
}

func conformanceRows(n int) [][]any {
	r := rand.New(rand.NewPCG(11, 17))
	rows := make([][]any, n)
	for i := range rows {
		row := make([]any, len(conformancePools))
		for j, pool := range conformancePools {
			row[j] = pool[r.IntN(len(pool))]
		}
		rows[i] = row
	}
	return rows
}

// reference is the brute-force histogram: catalog.Column.CellOf per value.
func reference(tab *catalog.Table, cols []*catalog.Column, rows [][]any) []float64 {
	n := 1
	for _, c := range cols {
		n *= c.Size()
	}
	out := make([]float64, n)
	pos := map[string]int{}
	for j, c := range tab.Columns {
		pos[c.Name] = j
	}
rows:
	for _, row := range rows {
		idx := 0
		for _, c := range cols {
			cell := c.CellOf(row[pos[c.Name]])
			if cell < 0 {
				continue rows
			}
			idx = idx*c.Size() + cell
		}
		out[idx]++
	}
	return out
}

func conformanceCatalog(t testing.TB, source, sourceTable string) *catalog.Catalog {
	t.Helper()
	y := "database: conf\nsources:\n  " + source + "\ntables:\n  t:\n    source_table: " + sourceTable +
		"\n    budget: {total: 1, per_user: 1, default_per_query: 0.1}\n" + conformanceColumns
	cat, err := catalog.Parse("conformance.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// load creates table name with the conformance columns and rows through db.
func load(t testing.TB, db *sql.DB, engine, name string, rows [][]any) {
	t.Helper()
	var defs, marks []string
	for i, c := range conformanceSQLTypes {
		typ := map[string]string{"sqlite": c.sqlite, "postgres": c.postgres, "mysql": c.mysql}[engine]
		defs = append(defs, c.name+" "+typ)
		if engine == "postgres" {
			marks = append(marks, fmt.Sprintf("$%d", i+1))
		} else {
			marks = append(marks, "?")
		}
	}
	suffix := ""
	if engine == "mysql" {
		suffix = " CHARACTER SET utf8mb4"
	}
	if _, err := db.Exec("CREATE TABLE " + name + " (" + strings.Join(defs, ", ") + ")" + suffix); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	ins := "INSERT INTO " + name + " VALUES (" + strings.Join(marks, ", ") + ")"
	for _, r := range rows {
		if _, err := tx.Exec(ins, r...); err != nil {
			t.Fatalf("%s: %v", ins, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// checkConformance compares every single column, every pair and the whole
// product with the brute-force count.
func checkConformance(t *testing.T, cat *catalog.Catalog, rows [][]any) {
	ctx := context.Background()
	set, err := Open(ctx, cat, Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	tab := cat.Table("t")
	var sets [][]*catalog.Column
	for i, a := range tab.Columns {
		sets = append(sets, []*catalog.Column{a})
		for _, b := range tab.Columns[i+1:] {
			sets = append(sets, []*catalog.Column{a, b})
		}
	}
	// The whole product of the non-time columns, and of the time columns
	// with two others (the product of all is too large to count here).
	n := len(tab.Columns) - len(timeColumns)
	sets = append(sets, tab.Columns[:n], append([]*catalog.Column{tab.Columns[0], tab.Columns[6]}, tab.Columns[n:]...), nil)
	// A batch's copies of open columns tested with LIKE (engine/open.go):
	// a text column and an integer one, each value not named by a literal
	// in the cell of the patterns it matches; NULL in the NULL cell.
	for _, pc := range likeColumns {
		sets = append(sets, []*catalog.Column{pc}, []*catalog.Column{pc, tab.Columns[0]})
	}
	for _, cols := range sets {
		got, err := set.Histogram(ctx, tab, cols)
		if err != nil {
			t.Fatalf("%v: %v", cols, err)
		}
		want := reference(tab, cols, rows)
		if len(got) != len(want) {
			t.Fatalf("%v: %d cells, want %d", cols, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%v: cell %d: got %v, want %v", cols, i, got[i], want[i])
			}
		}
	}
}

// likeColumns are open columns as a batch sees them with LIKE patterns:
// case, accents, trailing spaces, quotes, _ and an escape (also at the
// end of a pattern, where it matches itself).
var likeColumns = []*catalog.Column{
	{Name: "cat", Kind: catalog.Categorical, Values: []string{"Male", "x'y"}, OpenCopy: true, Null: catalog.PolicyCell, OutOfDomain: catalog.PolicyOther,
		Patterns: []catalog.Pattern{{Text: "%ale", Escape: `\`}, {Text: "_ b", Escape: `\`}, {Text: "%ü%", Escape: `\`}, {Text: "M%", Escape: `\`}, {Text: "x!'%", Escape: "!"}, {Text: "%e!", Escape: "!"}}},
	{Name: "cat_drop", Kind: catalog.Categorical, OpenCopy: true, Null: catalog.PolicyOther, OutOfDomain: catalog.PolicyOther,
		Patterns: []catalog.Pattern{{Text: "a", Escape: `\`}, {Text: "%", Escape: `\`}, {Text: "_%", Escape: `\`}}},
	{Name: "i_other", Kind: catalog.Categorical, Values: []string{"5"}, OpenCopy: true, Null: catalog.PolicyCell, OutOfDomain: catalog.PolicyOther,
		Patterns: []catalog.Pattern{{Text: "1%", Escape: `\`}, {Text: "-%", Escape: `\`}, {Text: "%9", Escape: `\`}}},
}

const conformanceRowCount = 600

func TestConformanceSQLite(t *testing.T) {
	rows := asUnixSeconds(conformanceRows(conformanceRowCount))
	for _, mode := range []string{"delete", "wal"} { // the file scan; the aggregate function
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "c.sqlite")
			db, err := sql.Open("sqlite", path+"?_pragma=journal_mode("+mode+")")
			if err != nil {
				t.Fatal(err)
			}
			load(t, db, "sqlite", "conf", rows)
			db.Close()
			checkConformance(t, conformanceCatalog(t, "main: {driver: sqlite, path: "+path+"}", "conf"), rows)
		})
	}
}

func TestConformancePostgres(t *testing.T) {
	srv := pgServer.Get(t)
	ctx := context.Background()
	if err := srv.Exec(ctx, "DROP SCHEMA IF EXISTS conf CASCADE", "CREATE SCHEMA conf"); err != nil {
		t.Fatal(err)
	}
	db, err := srv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows := conformanceRows(conformanceRowCount)
	load(t, db, "postgres", "conf.t1", rows)
	// The proxy's sessions read times in UTC whatever the server's default
	// (the rows were written in UTC; t_months is a timestamptz).
	var dbName string
	if err := db.QueryRow("SELECT current_database()").Scan(&dbName); err != nil {
		t.Fatal(err)
	}
	if err := srv.Exec(ctx, "ALTER DATABASE "+dbName+" SET timezone TO 'America/New_York'"); err != nil {
		t.Fatal(err)
	}
	defer srv.Exec(ctx, "ALTER DATABASE "+dbName+" RESET timezone")
	// A qualified source_table is quoted part by part ("conf"."t1").
	checkConformance(t, conformanceCatalog(t, "main: {driver: postgres, dsn: \""+srv.AdminDSN+"\"}", "conf.t1"), rows)
}

func TestConformanceMariaDB(t *testing.T) {
	srv := mariaServer.Get(t)
	ctx := context.Background()
	if err := srv.Exec(ctx, "DROP DATABASE IF EXISTS conf", "CREATE DATABASE conf CHARACTER SET utf8mb4"); err != nil {
		t.Fatal(err)
	}
	db, err := srv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows := conformanceRows(conformanceRowCount)
	load(t, db, "mysql", "conf.t1", rows)
	// The proxy's sessions read TIMESTAMP values in UTC whatever the
	// server's default (the rows were written in UTC).
	if err := srv.Exec(ctx, "SET GLOBAL time_zone = '+05:00'"); err != nil {
		t.Fatal(err)
	}
	defer srv.Exec(ctx, "SET GLOBAL time_zone = 'SYSTEM'")
	dsn := fmt.Sprintf("root@unix(%s)/conf", strings.TrimSuffix(strings.TrimPrefix(srv.AdminDSN, "root@unix("), ")/?multiStatements=true"))
	checkConformance(t, conformanceCatalog(t, "main: {driver: mysql, dsn: \""+dsn+"\"}", "conf.t1"), rows)
}

// A request whose context ends stops its query on the server too
// (PostgreSQL's cancel request, MySQL's KILL QUERY), not only on the
// client's side; here the query is a version_query that sleeps.
func TestCancelStopsServerQuery(t *testing.T) {
	for _, tc := range []struct {
		name, sleep, running string
		srv                  *testdb.Lazy
	}{
		{"postgres", "SELECT pg_sleep(60)::text", "SELECT COUNT(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(60)%' AND state = 'active' AND pid <> pg_backend_pid()", pgServer},
		{"mariadb", "SELECT SLEEP(60)", "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE '%SLEEP(60)%' AND ID <> CONNECTION_ID()", mariaServer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := tc.srv.Get(t)
			driver, dsn := "postgres", srv.AdminDSN
			if srv.Driver == "mysql" {
				driver = "mysql"
				dsn = strings.TrimSuffix(dsn, "?multiStatements=true") + "mysql"
			}
			cat := conformanceCatalog(t, "main: {driver: "+driver+", dsn: \""+dsn+"\", version_query: \""+tc.sleep+"\"}", "t")
			set, err := Open(context.Background(), cat, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer set.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			start := time.Now()
			if _, err := set.Histogram(ctx, cat.Table("t"), nil); err == nil {
				t.Fatal("a sleeping version query succeeded")
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("cancelled after %v", d)
			}
			db, err := srv.Open()
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			deadline := time.Now().Add(10 * time.Second)
			for {
				var n int
				if err := db.QueryRow(tc.running).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d sleeping queries still run on the server", n)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}
