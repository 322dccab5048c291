package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/demo"
)

// generatedDemo returns a function that generates a demo table of the given
// size on its first call, once per test binary, and returns its path.
func generatedDemo(rows int) func() (string, error) {
	return sync.OnceValues(func() (string, error) {
		dir, err := os.MkdirTemp("", "dpproxy-demo-")
		if err != nil {
			return "", err
		}
		path := filepath.Join(dir, "demo.sqlite")
		return path, demo.Generate(context.Background(), path, rows)
	})
}

var demoTable = generatedDemo(demo.DefaultRows)

// demoData generates the demo table once per test binary.
func demoData(t testing.TB) string {
	t.Helper()
	path, err := demoTable()
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// startProxy runs a real dpproxy on a free loopback port. yaml, if not
// empty, replaces the demo catalog (its source path may be {{DEMO}}). The
// demo data is in the data directory unless yaml names no demo.sqlite (a
// catalog over other data does not wait for the demo's generation).
func startProxy(t testing.TB, yaml string) (*proxy, string) {
	t.Helper()
	dataDir := t.TempDir()
	var src string
	if yaml == "" || strings.Contains(yaml, "{{DEMO}}") || strings.Contains(yaml, "demo.sqlite") {
		src = demoData(t)
		if err := os.Link(src, filepath.Join(dataDir, "demo.sqlite")); err != nil {
			copyFile(t, src, filepath.Join(dataDir, "demo.sqlite"))
		}
	}
	cf := commonFlags{dataDir: dataDir}
	if yaml != "" {
		cf.config = filepath.Join(dataDir, "catalog.yaml")
		if err := os.WriteFile(cf.config, []byte(strings.ReplaceAll(yaml, "{{DEMO}}", src)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	p, err := start(context.Background(), cf, "127.0.0.1:0", log)
	if err != nil {
		t.Fatal(err)
	}
	go p.front.Start()
	t.Cleanup(p.Close)
	return p, p.front.Addr().String()
}

func copyFile(t testing.TB, from, to string) {
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func connect(t testing.TB, addr, user, pass string, params string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", fmt.Sprintf("%s:%s@tcp(%s)/demo?%s", user, pass, addr, params))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// truth reads the exact answer from the demo SQLite file: only tests may.
func truth(t *testing.T, query string, args ...any) int64 {
	t.Helper()
	return countIn(t, demoData(t), query, args...)
}

// countIn runs a counting query directly on a SQLite file.
func countIn(t *testing.T, path, query string, args ...any) int64 {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int64
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func entries(t *testing.T, p *proxy) []budget.Entry {
	t.Helper()
	es, err := p.ledger.Entries(context.Background(), budget.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// charges drops the limits entries the proxy records at start-up and on
// reload: what is left is one entry per batch (charge or reuse).
func charges(es []budget.Entry) []budget.Entry {
	var out []budget.Entry
	for _, e := range es {
		if e.Kind != budget.KindLimits {
			out = append(out, e)
		}
	}
	return out
}

// within fails t unless got is within 13 standard errors of the truth:
// a Laplace error exceeds z of them with probability exp(−z·√2), about
// 10⁻⁸ at 13 (2·10⁻⁴ at 6, enough to fail a CI run now and then).
func within(t *testing.T, what string, got float64, want int64, stderr float64) {
	t.Helper()
	if stderr <= 0 || math.IsNaN(stderr) {
		t.Fatalf("%s: bad stderr %v", what, stderr)
	}
	if d := math.Abs(got - float64(want)); d > 13*stderr {
		t.Fatalf("%s: %v is %.1f standard errors from the truth %d (stderr %.3g)", what, got, d/stderr, want, stderr)
	}
}

func mysqlCode(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

func TestEndToEndGoDriver(t *testing.T) {
	p, addr := startProxy(t, "")
	db := connect(t, addr, "analyst", "analyst", "multiStatements=true")

	// Browsing is answered from the schema-only tables.
	var table string
	if err := db.QueryRow("SHOW TABLES").Scan(&table); err != nil || table != "adult" {
		t.Fatalf("SHOW TABLES: %q %v", table, err)
	}
	rows, err := db.Query("SHOW COLUMNS FROM adult")
	if err != nil {
		t.Fatal(err)
	}
	ncol := 0
	for rows.Next() {
		ncol++
	}
	rows.Close()
	if ncol != 9 {
		t.Fatalf("SHOW COLUMNS: %d columns, want 9", ncol)
	}
	before := len(entries(t, p))

	// COUNT with a range (quoted literals, as client libraries interpolate them).
	var n int64
	var se float64
	if err := db.QueryRow("SELECT COUNT(*), DP_STDERR(COUNT(*)) FROM adult WHERE age BETWEEN '30' AND '40'").Scan(&n, &se); err != nil {
		t.Fatal(err)
	}
	within(t, "range count", float64(n), truth(t, "SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 40"), se)

	// IN over a categorical column.
	if err := db.QueryRow("SELECT COUNT(*) AS n, DP_STDERR(COUNT(*)) FROM adult WHERE education IN ('Bachelors', 'Masters', 'Doctorate')").Scan(&n, &se); err != nil {
		t.Fatal(err)
	}
	within(t, "IN count", float64(n), truth(t, "SELECT COUNT(*) FROM adult WHERE education IN ('Bachelors', 'Masters', 'Doctorate')"), se)

	// GROUP BY two columns: every domain group, zeros included.
	rows, err = db.Query("SELECT sex, income, COUNT(*) AS n, DP_STDERR(COUNT(*)) FROM adult WHERE age >= 25 GROUP BY sex, income")
	if err != nil {
		t.Fatal(err)
	}
	groups := 0
	for rows.Next() {
		var sex, income string
		if err := rows.Scan(&sex, &income, &n, &se); err != nil {
			t.Fatal(err)
		}
		groups++
		within(t, sex+"/"+income, float64(n), truth(t, "SELECT COUNT(*) FROM adult WHERE age >= 25 AND sex = ? AND income = ?", sex, income), se)
	}
	rows.Close()
	if groups != 4 {
		t.Fatalf("GROUP BY sex, income: %d groups, want 4", groups)
	}

	// A two-statement batch: one measurement, one ledger entry.
	mid := len(entries(t, p))
	rows, err = db.Query("SELECT COUNT(*) FROM adult WHERE sex = 'Female'; SELECT COUNT(*) FROM adult WHERE sex = 'Male'")
	if err != nil {
		t.Fatal(err)
	}
	sets := 0
	for {
		for rows.Next() {
			sets++
		}
		if !rows.NextResultSet() {
			break
		}
	}
	rows.Close()
	if sets != 2 {
		t.Fatalf("batch: %d result rows, want 2", sets)
	}
	if got := len(entries(t, p)) - mid; got != 1 {
		t.Fatalf("batch charged %d entries, want 1", got)
	}
	if got := len(entries(t, p)) - before; got != 4 {
		t.Fatalf("ledger: %d new entries for 4 batches", got)
	}

	// Row access is refused and charges nothing.
	mark := len(entries(t, p))
	_, err = db.Query("SELECT * FROM adult")
	if mysqlCode(err) != 3900 {
		t.Fatalf("SELECT *: %v, want error 3900", err)
	}
	if len(entries(t, p)) != mark {
		t.Fatal("a refused query was charged")
	}
	if err := p.ledger.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
}

const tinyBudget = `
database: demo
sources:
  main: {driver: sqlite, path: "{{DEMO}}"}
tables:
  adult:
    source: main
    noise: laplace
    budget: {total: 10, per_user: 0.3, default_per_query: 0.1}
    columns:
      age: {type: integer, min: 17, max: 90}
      sex: {type: categorical, values: [Female, Male]}
users:
  analyst: {password: analyst, role: analyst}
`

func TestEndToEndBudgetExhausted(t *testing.T) {
	p, addr := startProxy(t, tinyBudget)
	db := connect(t, addr, "analyst", "analyst", "")
	var n int64
	for i := 0; i < 3; i++ {
		if err := db.QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM adult WHERE age > %d", 20+i)).Scan(&n); err != nil {
			t.Fatalf("query %d: %v", i, err)
		}
	}
	err := db.QueryRow("SELECT COUNT(*) FROM adult WHERE age > 40").Scan(&n)
	if mysqlCode(err) != 3901 || !strings.Contains(err.Error(), "remaining") {
		t.Fatalf("4th query: %v, want error 3901 naming what remains", err)
	}
	if got := len(charges(entries(t, p))); got != 3 {
		t.Fatalf("ledger has %d charges, want 3", got)
	}
	// The proxy stays up and browsing still works.
	var table string
	if err := db.QueryRow("SHOW TABLES").Scan(&table); err != nil {
		t.Fatal(err)
	}
}

// mysqlCLI finds the real mysql client; under CI it must be there.
func mysqlCLI(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"mysql", "mariadb"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("the mysql client is not installed (CI installs mariadb-client)")
	}
	t.Skip("mysql client not installed")
	return ""
}

func TestEndToEndMySQLCLI(t *testing.T) {
	bin := mysqlCLI(t)
	p, addr := startProxy(t, "")
	host, port := splitHostPort(addr)
	run := func(sql string) (string, error) { return runCLI(bin, host, port, sql) }
	out, err := run("SHOW TABLES; SHOW COLUMNS FROM adult")
	if err != nil || !strings.Contains(out, "adult") || !strings.Contains(out, "hours_per_week") {
		t.Fatalf("browse: %v\n%s", err, out)
	}
	out, err = run("SELECT COUNT(*) AS n FROM adult WHERE age BETWEEN 30 AND 40")
	if err != nil || !strings.HasPrefix(out, "n\n") {
		t.Fatalf("count: %v\n%s", err, out)
	}
	out, err = run("SELECT sex, income, COUNT(*) FROM adult GROUP BY sex, income")
	if err != nil || strings.Count(out, "\n") != 5 {
		t.Fatalf("group by: %v\n%s", err, out)
	}
	// The CLI splits on ';' itself; with another delimiter it sends both
	// statements in one request, which dpproxy answers as one batch.
	out, err = run("delimiter //\nSELECT COUNT(*) FROM adult WHERE sex='Male'; SELECT COUNT(*) FROM adult WHERE sex='Female' //")
	if err != nil || strings.Count(out, "COUNT(*)") != 2 {
		t.Fatalf("batch: %v\n%s", err, out)
	}
	out, err = run("SELECT * FROM adult")
	if err == nil || !strings.Contains(out, "3900") {
		t.Fatalf("SELECT * should be refused with 3900: %v\n%s", err, out)
	}
	if n := len(charges(entries(t, p))); n != 3 {
		t.Fatalf("ledger: %d charges, want 3", n)
	}
}

// runCLI runs the mysql client in batch mode as user analyst.
func runCLI(bin, host, port, sql string) (string, error) {
	cmd := exec.Command(bin, "-h", host, "-P", port, "-u", "analyst", "-panalyst", "--protocol=tcp", "--batch", "--skip-ssl", "demo", "-e", sql)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// sql_select_limit, as Metabase sets it (`set @@SQL_SELECT_LIMIT=2000`
// through Connector/J's setMaxRows), caps the rows of intercepted SELECTs
// without a LIMIT of their own, as MySQL does, text and prepared
// statements alike; an explicit LIMIT wins. The cap is post-processing: the
// charge is the table's default ε as without it, and SET
// SQL_SELECT_LIMIT=DEFAULT brings back every row (the stored answer, free).
func TestEndToEndSQLSelectLimit(t *testing.T) {
	p, addr := startProxy(t, "")
	ctx := context.Background()
	// Session state belongs to the connection; interpolateParams=false
	// sends the statements with ? as server-side prepared statements.
	conn, err := connect(t, addr, "analyst", "analyst", "interpolateParams=false").Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	exec := func(q string) {
		t.Helper()
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	query := func(q string, args ...any) []string { // the first column of each row
		t.Helper()
		rows, err := conn.QueryContext(ctx, q, args...)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		defer rows.Close()
		text, err := scanText(rows)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range text {
			v := ""
			if r[0] != nil {
				v = *r[0]
			}
			out = append(out, v)
		}
		return out
	}
	const group = "SELECT education, COUNT(*) AS n FROM adult GROUP BY education" // 16 groups

	exec("SET SQL_SELECT_LIMIT=3")
	before := len(entries(t, p))
	if rows := query(group); len(rows) != 3 {
		t.Fatalf("%s under sql_select_limit 3: %d rows, want 3: %v", group, len(rows), rows)
	}
	es := entries(t, p)
	if len(es) != before+1 || es[len(es)-1].Kind != budget.KindCharge || es[len(es)-1].Cost.Epsilon != 0.1 {
		t.Fatalf("ledger after the capped GROUP BY: %+v, want one charge of the default ε 0.1", es[before:])
	}
	cases := []struct {
		sql   string
		args  []any
		rows  int
		first string // first row's first column, when not ""
	}{
		{sql: group + " ORDER BY education DESC", rows: 3, first: "Some-college"},
		{sql: group + " LIMIT 5", rows: 5},
		{sql: "SELECT occupation, COUNT(*) FROM adult WHERE age > ? GROUP BY occupation", args: []any{40}, rows: 3},
		{sql: "SELECT occupation, COUNT(*) FROM adult WHERE age > ? GROUP BY occupation LIMIT 10", args: []any{40}, rows: 10},
		{sql: "SELECT race FROM adult GROUP BY race", rows: 3, first: "White"},
		{sql: "SELECT DISTINCT race FROM adult ORDER BY race DESC", rows: 3, first: "White"},
		{sql: "SELECT `adult`.`race` AS `race` FROM `adult` GROUP BY `adult`.`race` ORDER BY `adult`.`race` ASC LIMIT 1000", rows: 5, first: "Amer-Indian-Eskimo"},
		{sql: "SELECT COUNT(*) FROM adult WHERE 1 <> 1", rows: 1, first: "0"},
	}
	for _, c := range cases {
		rows := query(c.sql, c.args...)
		if len(rows) != c.rows || (c.first != "" && rows[0] != c.first) {
			t.Errorf("%s under sql_select_limit 3: %v, want %d rows starting with %q", c.sql, rows, c.rows, c.first)
		}
	}

	// Metabase's spelling, and 0.
	exec("set @@SQL_SELECT_LIMIT=2")
	if rows := query("SELECT race FROM adult GROUP BY race"); len(rows) != 2 {
		t.Errorf("under @@SQL_SELECT_LIMIT=2: %v, want 2 rows", rows)
	}
	exec("SET SQL_SELECT_LIMIT=0")
	if rows := query(group); len(rows) != 0 {
		t.Errorf("under sql_select_limit 0: %v, want no row", rows)
	}

	exec("SET SQL_SELECT_LIMIT=DEFAULT")
	mark := len(entries(t, p))
	if rows := query(group); len(rows) != 16 {
		t.Fatalf("%s after SET SQL_SELECT_LIMIT=DEFAULT: %d rows, want 16", group, len(rows))
	}
	if es := entries(t, p)[mark:]; len(es) != 1 || es[0].Kind != budget.KindReuse || es[0].Cost.Epsilon != 0 {
		t.Fatalf("the uncapped repeat: %+v, want one free reuse", es)
	}
	if rows := query("SELECT race FROM adult GROUP BY race"); len(rows) != 5 {
		t.Errorf("after DEFAULT: %v, want 5 races", rows)
	}
}
