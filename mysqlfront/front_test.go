package mysqlfront

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/big"
	"net"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	vtmysql "github.com/dolthub/vitess/go/mysql"
	gomysql "github.com/go-sql-driver/mysql"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/engine"
	"github.com/dpproxy/dpproxy/parser"
)

func TestMain(m *testing.M) {
	// The driver logs broken connections (the disconnect tests make some).
	_ = gomysql.SetLogger(log.New(io.Discard, "", 0))
	code := m.Run()
	stopFuzzFront()
	os.Exit(code)
}

// ---- test double for the engine ----

// adultQuery: a SELECT or EXPLAIN reading table adult (possibly qualified,
// backquoted, after leading comments). SHOW COLUMNS FROM adult and
// information_schema queries naming 'adult' are not intercepted.
var adultQuery = regexp.MustCompile("(?is)^\\s*(/\\*.*?\\*/\\s*)*(select|explain)\\b.*\\bfrom\\s+(`?demo`?\\.)?`?adult`?(\\s|;|$)")

type call struct {
	stmts  []string
	user   string
	connID uint32
	eps    any
	epsOK  bool
	mode   any
	modeOK bool
	// limit is the session's sql_select_limit; limitOK false: none.
	limit   uint64
	limitOK bool
}

// fakeBackend stands in for engine.Engine: it intercepts statements reading
// adult, answers COUNT(*) with a fixed count, AVG with a float, GROUP BY sex
// with labelled rows, refuses SELECT * with 3900, fails with a secret-bearing
// plain error on "boom", panics on "panic", and blocks on "slow" until
// release is closed.
type fakeBackend struct {
	mu      sync.Mutex
	calls   []call
	slow    chan struct{} // closed when a "slow" statement starts
	release chan struct{}
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{slow: make(chan struct{}), release: make(chan struct{})}
}

func (f *fakeBackend) Intercepts(stmt string) bool { return adultQuery.MatchString(stmt) }

func (f *fakeBackend) Answer(ctx context.Context, s *engine.Session, stmts []string) ([]*engine.Result, error) {
	c := call{stmts: append([]string(nil), stmts...), user: s.User, connID: s.ConnID}
	if s.UserVar != nil {
		c.eps, c.epsOK = s.UserVar("dp_epsilon")
		c.mode, c.modeOK = s.UserVar("DP_Mode")
	}
	if s.SelectLimit != nil {
		c.limit, c.limitOK = s.SelectLimit()
	}
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()

	var out []*engine.Result
	for _, st := range stmts {
		low := strings.ToLower(st)
		switch {
		case strings.Contains(low, "boom"):
			return nil, errors.New("secret: 4242 rows for Alice")
		case strings.Contains(low, "panic"):
			panic("backend bug")
		case strings.Contains(low, "slow"):
			close(f.slow)
			select {
			case <-f.release:
			case <-ctx.Done(): // KILL QUERY
				return nil, ctx.Err()
			}
			out = append(out, &engine.Result{Columns: []engine.Column{{Name: "COUNT(*)", Type: engine.TypeInt64}}, Rows: [][]any{{int64(1)}}})
		case regexp.MustCompile(`^select\s+\*`).MatchString(low):
			return nil, parser.Errorf(parser.CodeDPRefused, "SELECT * would expose rows; dpproxy answers aggregates")
		case strings.Contains(low, "group by sex"):
			out = append(out, &engine.Result{
				Columns: []engine.Column{{Name: "sex", Type: engine.TypeString}, {Name: "n", Type: engine.TypeInt64}},
				Rows:    [][]any{{"Female", int64(10)}, {"Male", int64(20)}, {nil, int64(3)}},
			})
		case strings.Contains(low, "avg("):
			out = append(out, &engine.Result{Columns: []engine.Column{{Name: "AVG(age)", Type: engine.TypeFloat64}}, Rows: [][]any{{38.25}}})
		case strings.Contains(low, "count(*)"):
			name := "COUNT(*)"
			if m := regexp.MustCompile(`(?i)count\(\*\)\s+as\s+(\w+)`).FindStringSubmatch(st); m != nil {
				name = m[1]
			}
			out = append(out, &engine.Result{Columns: []engine.Column{{Name: name, Type: engine.TypeInt64}}, Rows: [][]any{{int64(1234)}}})
		default:
			return nil, parser.Errorf(parser.CodeNotSupported, "not supported: %s", st)
		}
	}
	return out, nil
}

func (f *fakeBackend) Calls() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

// ---- harness ----

func nativeHash(password string) string {
	h1 := sha1.Sum([]byte(password))
	h2 := sha1.Sum(h1[:])
	return "*" + strings.ToUpper(hex.EncodeToString(h2[:]))
}

func testCatalog() *catalog.Catalog {
	return &catalog.Catalog{
		Database: "demo",
		Tables: []*catalog.Table{{
			Name: "adult",
			Columns: []*catalog.Column{
				{Name: "age", Kind: catalog.IntegerRange, Min: 17, Max: 90, Width: 1},
				{Name: "sex", Kind: catalog.Categorical, Values: []string{"Female", "Male"}},
				{Name: "hours", Kind: catalog.Binned, Edges: []float64{0, 20, 40, 60, 100}},
			},
		}},
		Users: []*catalog.User{
			{Name: "analyst", PasswordHash: nativeHash("analyst"), Role: catalog.RoleAnalyst},
			{Name: "bob", PasswordHash: nativeHash("bob"), Role: catalog.RoleAnalyst},
			{Name: "auditor", PasswordHash: strings.ToLower(nativeHash("audit pw")), Role: catalog.RoleAuditor},
		},
	}
}

type harness struct {
	t    testing.TB
	srv  *Server
	fb   *fakeBackend
	addr string
}

func start(t *testing.T) *harness {
	t.Helper()
	return startWith(t, nil)
}

// startWith starts a server whose configuration edit may change.
func startWith(t testing.TB, edit func(*Config)) *harness {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var w io.Writer = io.Discard
	if os.Getenv("DPPROXY_TEST_LOG") != "" {
		w = os.Stderr
	}
	fb := newFakeBackend()
	cfg := Config{
		Catalog:  testCatalog(),
		Backend:  fb,
		Listener: l,
		Version:  "8.0.33-dpproxy",
		Logger:   slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if edit != nil {
		edit(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Start() }()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return &harness{t: t, srv: srv, fb: fb, addr: srv.Addr().String()}
}

// db opens a pool; params is the DSN query string (without '?').
func (h *harness) db(user, password, params string) *sql.DB {
	h.t.Helper()
	dsn := fmt.Sprintf("%s:%s@tcp(%s)/demo?timeout=5s", user, password, h.addr)
	if params != "" {
		dsn += "&" + params
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { db.Close() })
	return db
}

func (h *harness) analyst(params string) *sql.DB { return h.db("analyst", "analyst", params) }

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return c
}

func mysqlErr(t *testing.T, err error) *gomysql.MySQLError {
	t.Helper()
	var me *gomysql.MySQLError
	if !errors.As(err, &me) {
		t.Fatalf("want a *mysql.MySQLError, got %T: %v", err, err)
	}
	return me
}

func queryStrings(t *testing.T, db interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, q string, args ...any) [][]string {
	t.Helper()
	rows, err := db.QueryContext(ctx(t), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out [][]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			if v.Valid {
				row[i] = v.String
			} else {
				row[i] = "NULL"
			}
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

// ---- tests ----

func TestLogin(t *testing.T) {
	h := start(t)
	if err := h.analyst("").PingContext(ctx(t)); err != nil {
		t.Fatalf("analyst login: %v", err)
	}
	if err := h.db("auditor", "audit pw", "").PingContext(ctx(t)); err != nil {
		t.Fatalf("auditor login (lower-case hash in catalog): %v", err)
	}
	for _, c := range []struct{ user, pw string }{{"analyst", "wrong"}, {"analyst", ""}, {"nobody", "analyst"}, {"root", ""}} {
		err := h.db(c.user, c.pw, "").PingContext(ctx(t))
		if err == nil {
			t.Fatalf("%s/%q: login succeeded", c.user, c.pw)
		}
		if me := mysqlErr(t, err); me.Number != 1045 {
			t.Fatalf("%s/%q: error %d %v, want 1045", c.user, c.pw, me.Number, me)
		}
	}
}

func TestMetadataAnsweredByGMS(t *testing.T) {
	h := start(t)
	db := h.analyst("")
	check := func(q string, want [][]string) {
		t.Helper()
		got := queryStrings(t, db, q)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s:\n got %v\nwant %v", q, got, want)
		}
	}
	check("SHOW TABLES", [][]string{{"adult"}})
	check("SELECT @@version_comment LIMIT 1", [][]string{{VersionComment}})
	check("SELECT @@version", [][]string{{"8.0.33-dpproxy"}})
	check("SELECT DATABASE()", [][]string{{"demo"}})
	check("SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.columns WHERE table_schema = 'demo' AND table_name = 'adult' ORDER BY ordinal_position",
		[][]string{{"age", "bigint"}, {"sex", "varchar"}, {"hours", "double"}})
	check("SELECT 1 + 1", [][]string{{"2"}})

	got := queryStrings(t, db, "SHOW COLUMNS FROM adult")
	if len(got) != 3 || got[0][0] != "age" || got[0][1] != "bigint" || got[1][1] != "varchar(255)" || got[2][1] != "double" {
		t.Errorf("SHOW COLUMNS FROM adult: %v", got)
	}
	dbs := queryStrings(t, db, "SHOW DATABASES")
	if s := fmt.Sprint(dbs); !strings.Contains(s, "demo") {
		t.Errorf("SHOW DATABASES: %v", dbs)
	}
	// GMS lists "mysql" to everybody, but its tables stay closed.
	for _, q := range []string{"SELECT User, authentication_string FROM mysql.user", "SELECT * FROM mysql.db"} {
		if _, err := db.QueryContext(ctx(t), q); err == nil {
			t.Errorf("%s: allowed", q)
		}
	}
	for _, stmt := range []string{"SET NAMES utf8mb4", "SET autocommit = 1", "USE demo", "ROLLBACK", "SET @x = 1"} {
		if _, err := db.ExecContext(ctx(t), stmt); err != nil {
			t.Errorf("%s: %v", stmt, err)
		}
	}
	// The schema-only database is read-only for everybody.
	for _, stmt := range []string{"INSERT INTO demo.adult (age) VALUES (40)", "CREATE TABLE demo.t (x int)", "DROP TABLE demo.adult",
		"SET GLOBAL max_connections = 1", "CREATE USER x IDENTIFIED BY 'x'", "GRANT ALL ON *.* TO analyst"} {
		if _, err := db.ExecContext(ctx(t), stmt); err == nil {
			t.Errorf("%s succeeded", stmt)
		}
	}
	if n := len(h.fb.Calls()); n != 0 {
		t.Errorf("backend called %d times for metadata", n)
	}
}

func TestInterceptedResults(t *testing.T) {
	h := start(t)
	db := h.analyst("")

	rows, err := db.QueryContext(ctx(t), "SELECT COUNT(*) FROM adult WHERE age > 30")
	if err != nil {
		t.Fatal(err)
	}
	cts, err := rows.ColumnTypes()
	if err != nil {
		t.Fatal(err)
	}
	if len(cts) != 1 || cts[0].Name() != "COUNT(*)" || cts[0].DatabaseTypeName() != "BIGINT" {
		t.Fatalf("columns: %v %v", cts[0].Name(), cts[0].DatabaseTypeName())
	}
	var n int64
	if !rows.Next() {
		t.Fatal("no row")
	}
	if err := rows.Scan(&n); err != nil || n != 1234 {
		t.Fatalf("scan: %v %d", err, n)
	}
	rows.Close()

	var avg float64
	if err := db.QueryRowContext(ctx(t), "/* BI tool */ SELECT AVG(age) FROM `demo`.`adult`").Scan(&avg); err != nil || avg != 38.25 {
		t.Fatalf("AVG: %v %v", err, avg)
	}
	rows, err = db.QueryContext(ctx(t), "SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex")
	if err != nil {
		t.Fatal(err)
	}
	cts, _ = rows.ColumnTypes()
	if cts[0].Name() != "sex" || cts[0].DatabaseTypeName() != "VARCHAR" || cts[1].Name() != "n" {
		t.Fatalf("columns: %s %s %s", cts[0].Name(), cts[0].DatabaseTypeName(), cts[1].Name())
	}
	rows.Close()
	if got := fmt.Sprint(queryStrings(t, db, "SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex")); got != "[[Female 10] [Male 20] [NULL 3]]" {
		t.Fatalf("GROUP BY: %s", got)
	}
	calls := h.fb.Calls()
	if len(calls) != 4 || calls[0].stmts[0] != "SELECT COUNT(*) FROM adult WHERE age > 30" || calls[0].user != "analyst" || calls[0].connID == 0 {
		t.Fatalf("calls: %+v", calls)
	}
}

func TestErrors(t *testing.T) {
	h := start(t)
	db := h.analyst("")
	db.SetMaxOpenConns(1) // the same connection survives every error

	_, err := db.QueryContext(ctx(t), "SELECT * FROM adult")
	me := mysqlErr(t, err)
	if me.Number != 3900 || string(me.SQLState[:]) != "HY000" || !strings.Contains(me.Message, "SELECT *") {
		t.Fatalf("SELECT *: %d %s %q", me.Number, me.SQLState, me.Message)
	}
	_, err = db.QueryContext(ctx(t), "SELECT COUNT(*) FROM adult WHERE sex = 'boom'")
	me = mysqlErr(t, err)
	if me.Number != 3902 || strings.Contains(me.Message, "secret") || strings.Contains(me.Message, "4242") {
		t.Fatalf("plain error: %d %q", me.Number, me.Message)
	}
	_, err = db.QueryContext(ctx(t), "SELECT COUNT(*) FROM adult WHERE sex = 'panic'")
	if me = mysqlErr(t, err); me.Number != 3902 {
		t.Fatalf("panic: %d %q", me.Number, me.Message)
	}
	_, err = db.QueryContext(ctx(t), "SELECT MIN(age) FROM adult")
	me = mysqlErr(t, err)
	if me.Number != 1235 || string(me.SQLState[:]) != "42000" {
		t.Fatalf("not supported: %d %s", me.Number, me.SQLState)
	}
	// Two statements without CLIENT_MULTI_STATEMENTS: MySQL's syntax
	// error at the second, not a 3902.
	_, err = db.QueryContext(ctx(t), "SELECT COUNT(*) FROM adult WHERE sex = 'Male'; SELECT COUNT(*) FROM adult")
	if me = mysqlErr(t, err); me.Number != 1064 || !strings.HasSuffix(me.Message, "near 'SELECT COUNT(*) FROM adult' at line 1") {
		t.Fatalf("two statements: %d %q", me.Number, me.Message)
	}
	_, err = db.ExecContext(ctx(t), "PREPARE s FROM 'SELECT COUNT(*) FROM adult'")
	if me = mysqlErr(t, err); me.Number != 1235 {
		t.Fatalf("SQL PREPARE: %d %q", me.Number, me.Message)
	}
	var one int
	if err := db.QueryRowContext(ctx(t), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("connection unusable after errors: %v", err)
	}
}

func TestMultiStatementBatch(t *testing.T) {
	h := start(t)
	db := h.analyst("multiStatements=true")
	db.SetMaxOpenConns(1)

	rows, err := db.QueryContext(ctx(t), "SELECT COUNT(*) FROM adult; SELECT COUNT(*) AS males FROM adult WHERE sex = 'Male';")
	if err != nil {
		t.Fatal(err)
	}
	var sets []string
	for {
		cols, _ := rows.Columns()
		for rows.Next() {
			var n int64
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			sets = append(sets, fmt.Sprintf("%s=%d", cols[0], n))
		}
		if !rows.NextResultSet() {
			break
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if fmt.Sprint(sets) != "[COUNT(*)=1234 males=1234]" {
		t.Fatalf("result sets: %v", sets)
	}
	calls := h.fb.Calls()
	if len(calls) != 1 || len(calls[0].stmts) != 2 || calls[0].stmts[1] != "SELECT COUNT(*) AS males FROM adult WHERE sex = 'Male'" {
		t.Fatalf("want one Answer call with 2 statements, got %+v", calls)
	}

	// Mixed: GMS, a batch of two, GMS again.
	rows, err = db.QueryContext(ctx(t), "SELECT 7; SELECT COUNT(*) FROM adult; SELECT AVG(age) FROM adult; SELECT 'tail'")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			got = append(got, s)
		}
		if !rows.NextResultSet() {
			break
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if fmt.Sprint(got) != "[7 1234 38.25 tail]" {
		t.Fatalf("mixed: %v", got)
	}
	if calls := h.fb.Calls(); len(calls) != 2 || len(calls[1].stmts) != 2 {
		t.Fatalf("mixed: calls %+v", calls)
	}

	// An error ends the request; the connection stays in sync.
	rows, err = db.QueryContext(ctx(t), "SELECT 1; SELECT * FROM adult; SELECT 3")
	if err == nil {
		for rows.NextResultSet() {
		}
		err = rows.Err()
		rows.Close()
	}
	if me := mysqlErr(t, err); me.Number != 3900 {
		t.Fatalf("error in a batch: %v", err)
	}
	var s string
	if err := db.QueryRowContext(ctx(t), "SELECT 'in sync'").Scan(&s); err != nil || s != "in sync" {
		t.Fatalf("after error: %v %q", err, s)
	}
	if _, err := db.ExecContext(ctx(t), "SET @a = 1; SET @b = 2"); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx(t), "SELECT @a + @b").Scan(&s); err != nil || s != "3" {
		t.Fatalf("SET; SET: %v %q", err, s)
	}
}

func TestPreparedStatements(t *testing.T) {
	h := start(t)
	for _, params := range []string{"interpolateParams=false", "interpolateParams=true"} {
		db := h.analyst(params)
		var n int64
		if err := db.QueryRowContext(ctx(t), "SELECT COUNT(*) FROM adult WHERE age > ?", 30).Scan(&n); err != nil || n != 1234 {
			t.Fatalf("%s: %v %d", params, err, n)
		}
		if err := db.QueryRowContext(ctx(t), "SELECT COUNT(*) FROM adult WHERE sex = ? AND hours BETWEEN ? AND ? -- why?", "O'Brien\\", -1.5, nil).Scan(&n); err != nil || n != 1234 {
			t.Fatalf("%s: %v %d", params, err, n)
		}
		stmt, err := db.PrepareContext(ctx(t), "SELECT AVG(age) FROM adult WHERE sex = ?")
		if err != nil {
			t.Fatal(err)
		}
		var avg float64
		for range 2 {
			if err := stmt.QueryRowContext(ctx(t), "Male").Scan(&avg); err != nil || avg != 38.25 {
				t.Fatalf("%s: stmt: %v %v", params, err, avg)
			}
		}
		stmt.Close()
		// Not intercepted: GMS prepares it.
		if err := db.QueryRowContext(ctx(t), "SELECT ? + 1", 41).Scan(&n); err != nil || n != 42 {
			t.Fatalf("%s: GMS prepared: %v %d", params, err, n)
		}
		_, err = db.QueryContext(ctx(t), "SELECT * FROM adult WHERE age = ?", 40)
		if me := mysqlErr(t, err); me.Number != 3900 {
			t.Fatalf("%s: %v", params, err)
		}
	}
	var texts []string
	for _, c := range h.fb.Calls() {
		texts = append(texts, c.stmts...)
	}
	want := []string{
		"SELECT COUNT(*) FROM adult WHERE age > 30",
		`SELECT COUNT(*) FROM adult WHERE sex = 'O\'Brien\\' AND hours BETWEEN -1.5 AND NULL -- why?`,
		"SELECT AVG(age) FROM adult WHERE sex = 'Male'",
	}
	for i, w := range want {
		if texts[i] != w {
			t.Errorf("binary protocol statement %d:\n got %s\nwant %s", i, texts[i], w)
		}
	}
}

func TestUserVariables(t *testing.T) {
	h := start(t)
	db := h.analyst("multiStatements=true")
	conn, err := db.Conn(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	if _, err := conn.ExecContext(ctx(t), "SELECT COUNT(*) FROM adult"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx(t), "SET @dp_epsilon = 0.2"); err != nil {
		t.Fatal(err)
	}
	if got := queryStrings(t, conn, "SELECT @dp_epsilon"); fmt.Sprint(got) != "[[0.2]]" {
		t.Fatalf("SELECT @dp_epsilon: %v", got)
	}
	if _, err := conn.ExecContext(ctx(t), "SET @dp_mode = 'fast'; SELECT COUNT(*) FROM adult"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx(t), "SET @dp_epsilon = 1, @dp_mode = NULL"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx(t), "SELECT COUNT(*) FROM adult WHERE age = ?", 50); err != nil {
		t.Fatal(err)
	}
	calls := h.fb.Calls()
	if len(calls) != 3 {
		t.Fatalf("calls: %+v", calls)
	}
	if calls[0].epsOK || calls[0].modeOK {
		t.Errorf("before SET: %+v", calls[0])
	}
	if eps, ok := calls[1].eps.(float64); !ok || !calls[1].epsOK || eps != 0.2 {
		t.Errorf("@dp_epsilon = %#v (ok %v), want float64 0.2", calls[1].eps, calls[1].epsOK)
	}
	if calls[1].mode != "fast" || !calls[1].modeOK {
		t.Errorf("@dp_mode = %#v (ok %v)", calls[1].mode, calls[1].modeOK)
	}
	if calls[2].eps != float64(1) || calls[2].mode != nil || !calls[2].modeOK {
		t.Errorf("after SET @dp_epsilon = 1, @dp_mode = NULL: %#v %#v %v", calls[2].eps, calls[2].mode, calls[2].modeOK)
	}
	if calls[0].connID != calls[2].connID {
		t.Errorf("conn ids %d, %d", calls[0].connID, calls[2].connID)
	}
}

// The backend reads the session's sql_select_limit: none at the default
// (GMS's 2147483647) or at MySQL's default written out
// (18446744073709551615, which GMS keeps as -1), else the value SET,
// however spelled.
func TestSelectLimitReachesBackend(t *testing.T) {
	h := start(t)
	conn, err := h.analyst("interpolateParams=false").Conn(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cases := []struct {
		set   string // "" for none
		limit uint64
		ok    bool
	}{
		{"", 0, false},
		{"SET SQL_SELECT_LIMIT=3", 3, true},
		{"set @@SQL_SELECT_LIMIT=2000", 2000, true},
		{"SET SESSION sql_select_limit = 0", 0, true},
		{"SET @@session.sql_select_limit = 18446744073709551615", 0, false},
		{"SET sql_select_limit = 9223372036854775808", 0, false},
		{"SET sql_select_limit = 9223372036854775807", 9223372036854775807, true},
		{"SET SQL_SELECT_LIMIT=DEFAULT", 0, false},
		{"SET sql_select_limit = 7", 7, true},
		{"SET sql_select_limit = 2147483647", 0, false},
	}
	for _, c := range cases {
		if c.set != "" {
			if _, err := conn.ExecContext(ctx(t), c.set); err != nil {
				t.Fatalf("%s: %v", c.set, err)
			}
		}
		// Text protocol, then a server-side prepared statement.
		for _, q := range []struct {
			sql  string
			args []any
		}{{"SELECT COUNT(*) FROM adult", nil}, {"SELECT COUNT(*) FROM adult WHERE age = ?", []any{50}}} {
			n := len(h.fb.Calls())
			rows, err := conn.QueryContext(ctx(t), q.sql, q.args...)
			if err != nil {
				t.Fatalf("after %q, %s: %v", c.set, q.sql, err)
			}
			rows.Close()
			calls := h.fb.Calls()
			if len(calls) != n+1 {
				t.Fatalf("after %q, %s: %d backend calls", c.set, q.sql, len(calls)-n)
			}
			if got := calls[n]; got.limit != c.limit || got.limitOK != c.ok {
				t.Errorf("after %q, %s: SelectLimit() = %d, %v; want %d, %v", c.set, q.sql, got.limit, got.limitOK, c.limit, c.ok)
			}
		}
	}
}

func TestClientDisconnectMidQuery(t *testing.T) {
	h := start(t)
	db := h.analyst("")
	c, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := db.QueryContext(c, "SELECT COUNT(*) FROM adult WHERE sex = 'slow'")
		errc <- err
	}()
	select {
	case <-h.fb.slow:
	case <-time.After(5 * time.Second):
		t.Fatal("backend never reached")
	}
	cancel() // the driver closes the connection
	if err := <-errc; err == nil {
		t.Fatal("cancelled query succeeded")
	}
	close(h.fb.release) // the server now writes to a closed connection
	// The session's place is freed when vitess's handler of the connection
	// ends, after the answer was written and the closed socket seen.
	waitAdmission(t, h.srv, func(_, sessions int) bool { return sessions == 0 })

	var n int64
	if err := h.analyst("").QueryRowContext(ctx(t), "SELECT COUNT(*) FROM adult").Scan(&n); err != nil || n != 1234 {
		t.Fatalf("after disconnect: %v %d", err, n)
	}
}

func TestBadInput(t *testing.T) {
	h := start(t)
	// Garbage instead of a handshake response, and a half-open connection.
	for _, junk := range [][]byte{{0xff, 0xff, 0xff, 0x01, 0x00}, []byte("GET / HTTP/1.0\r\n\r\n"), {}} {
		c, err := net.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 512)
		_, _ = c.Read(buf) // server greeting
		_, _ = c.Write(junk)
		c.Close()
	}
	db := h.analyst("multiStatements=true")
	for _, q := range []string{"SELECT COUNT(*) FROM adult WHERE sex = 'unterminated", ";", "  ", "SELECT COUNT(*) FROM adult; ;; -- nothing"} {
		rows, err := db.QueryContext(ctx(t), q)
		if err == nil {
			for rows.NextResultSet() {
			}
			rows.Close()
		}
	}
	var n int64
	if err := db.QueryRowContext(ctx(t), "SELECT COUNT(*) FROM adult").Scan(&n); err != nil || n != 1234 {
		t.Fatalf("after bad input: %v %d", err, n)
	}
}

func TestCloseEndsConnections(t *testing.T) {
	h := start(t)
	db := h.analyst("")
	conn, err := db.Conn(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.PingContext(ctx(t)); err != nil {
		t.Fatal(err)
	}
	h.srv.Close()
	if err := conn.PingContext(ctx(t)); err == nil {
		t.Fatal("connection still alive after Close")
	}
	if _, err := net.DialTimeout("tcp", h.addr, time.Second); err == nil {
		t.Fatal("still listening after Close")
	}
}

// TestRawProtocolCommands sends COM_FIELD_LIST (which vitess turns into
// "SELECT * FROM `adult` LIMIT 0;" through ComQuery), COM_INIT_DB and
// COM_PING with vitess's client: GMS answers them, the backend is not asked.
func TestRawProtocolCommands(t *testing.T) {
	h := start(t)
	host, port, _ := net.SplitHostPort(h.addr)
	var p int
	fmt.Sscan(port, &p)
	c, err := vtmysql.Connect(ctx(t), &vtmysql.ConnParams{Host: host, Port: p, Uname: "analyst", Pass: "analyst", DbName: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// COM_FIELD_LIST: 0x04, table name, NUL, wildcard.
	payload := append([]byte{0x04}, "adult\x00"...)
	pkt := append([]byte{byte(len(payload)), byte(len(payload) >> 8), byte(len(payload) >> 16), 0}, payload...)
	if _, err := c.Conn.Write(pkt); err != nil {
		t.Fatal(err)
	}
	var cols int
	for {
		var hdr [4]byte
		if _, err := io.ReadFull(c.Conn, hdr[:]); err != nil {
			t.Fatal(err)
		}
		data := make([]byte, int(hdr[0])|int(hdr[1])<<8|int(hdr[2])<<16)
		if _, err := io.ReadFull(c.Conn, data); err != nil {
			t.Fatal(err)
		}
		if data[0] == 0xff {
			t.Fatalf("COM_FIELD_LIST error: %q", data[9:])
		}
		if data[0] == 0xfe && len(data) < 9 {
			break
		}
		cols++
	}
	if cols != 3 {
		t.Fatalf("COM_FIELD_LIST: %d columns", cols)
	}
	if err := c.Ping(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ExecuteFetch("USE information_schema", 10, false); err != nil {
		t.Fatal(err)
	}
	r, err := c.ExecuteFetch("SELECT DATABASE()", 10, false)
	if err != nil || r.Rows[0][0].ToString() != "information_schema" {
		t.Fatalf("USE: %v %v", err, r)
	}
	r, err = c.ExecuteFetch("SELECT COUNT(*) AS n FROM demo.adult", 10, true)
	if err != nil || r.Fields[0].Name != "n" || r.Rows[0][0].ToString() != "1234" {
		t.Fatalf("qualified intercepted query: %v %v", err, r)
	}
	if n := len(h.fb.Calls()); n != 1 {
		t.Fatalf("backend called %d times", n)
	}
}

// TestGuard: what GMS v0.20.0 would allow without privilege checks is
// refused before it gets there.
func TestGuard(t *testing.T) {
	h := start(t)
	db := h.analyst("multiStatements=true")
	db.SetMaxOpenConns(1)
	refused := map[string]uint16{
		"SET GLOBAL sql_mode = ''":                            1227,
		"SET @@global.max_connections = 1":                    1227,
		"SET sql_mode = '', PERSIST max_connections = 5":      1227,
		"SET GLOBAL TRANSACTION ISOLATION LEVEL SERIALIZABLE": 1227,
		"SELECT LOAD_FILE('/etc/hostname')":                   1227,
		"/*!50000 SELECT load_file('/etc/hostname') */":       1227,
		"SELECT 1 INTO OUTFILE '/tmp/dpproxy-test-outfile'":   1227,
		"SELECT 1 INTO DUMPFILE '/tmp/dpproxy-test-outfile'":  1227,
		"LOAD DATA INFILE '/etc/hostname' INTO TABLE adult":   1227,
		"PREPARE s FROM 'SELECT COUNT(*) FROM adult'":         1235,
		"EXECUTE s": 1235,
	}
	for q, code := range refused {
		_, err := db.ExecContext(ctx(t), q)
		if err == nil {
			t.Errorf("%s: allowed", q)
			continue
		}
		if me := mysqlErr(t, err); me.Number != code {
			t.Errorf("%s: %d %s, want %d", q, me.Number, me.Message, code)
		}
	}
	if _, err := os.Stat("/tmp/dpproxy-test-outfile"); err == nil {
		t.Error("INTO OUTFILE wrote a file")
	}
	// Also through the binary protocol and inside a multi-statement request.
	_, err := db.QueryContext(ctx(t), "SELECT LOAD_FILE(?)", "/etc/hostname")
	if me := mysqlErr(t, err); me.Number != 1227 {
		t.Errorf("prepared LOAD_FILE: %v", err)
	}
	rows, err := db.QueryContext(ctx(t), "SELECT 1; SELECT LOAD_FILE('/etc/hostname')")
	if err == nil {
		for rows.NextResultSet() {
		}
		err = rows.Err()
		rows.Close()
	}
	if me := mysqlErr(t, err); me.Number != 1227 {
		t.Errorf("multi-statement LOAD_FILE: %v", err)
	}
	// Even if a statement slipped through, secure_file_priv points nowhere.
	want := [][]string{{noFileAccess, noFileAccess}}
	if got := queryStrings(t, db, "SELECT @@secure_file_priv, @@global.secure_file_priv"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("secure_file_priv: %v", got)
	}
	// Words in strings and reading globals are fine.
	if got := queryStrings(t, db, "SELECT 'load_file into outfile', @@global.max_connections > 0"); fmt.Sprint(got) != "[[load_file into outfile 1]]" {
		t.Errorf("harmless statement: %v", got)
	}
	if _, err := db.ExecContext(ctx(t), "SET SESSION sql_mode = 'ANSI_QUOTES'; SET @y = 2"); err != nil {
		t.Errorf("session SET: %v", err)
	}
}

func selfSignedTLS(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "dpproxy-test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

func TestTLS(t *testing.T) {
	if _, err := New(Config{Catalog: testCatalog(), Backend: newFakeBackend(), Address: "127.0.0.1:0", RequireTLS: true}); err == nil {
		t.Fatal("RequireTLS without TLS accepted")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Catalog: testCatalog(), Backend: newFakeBackend(), Listener: l, TLS: selfSignedTLS(t), RequireTLS: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	defer srv.Close()
	open := func(params string) *sql.DB {
		db, err := sql.Open("mysql", fmt.Sprintf("analyst:analyst@tcp(%s)/demo?%s", srv.Addr(), params))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	var n int64
	if err := open("tls=skip-verify").QueryRowContext(ctx(t), "SELECT COUNT(*) FROM adult").Scan(&n); err != nil || n != 1234 {
		t.Fatalf("over TLS: %v %d", err, n)
	}
	if err := open("tls=false").PingContext(ctx(t)); err == nil {
		t.Fatal("clear-text client served although TLS is required")
	}
}

// TestRequireTLSHostileClient: a clear-text client that ignores the error
// vitess sends when TLS is required, authenticates and sends a query, gets
// no answer and a closed connection.
func TestRequireTLSHostileClient(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fb := newFakeBackend()
	srv, err := New(Config{Catalog: testCatalog(), Backend: fb, Listener: l, TLS: selfSignedTLS(t), RequireTLS: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	defer srv.Close()

	c, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	read := func() ([]byte, error) {
		var hdr [4]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return nil, err
		}
		data := make([]byte, int(hdr[0])|int(hdr[1])<<8|int(hdr[2])<<16)
		_, err := io.ReadFull(c, data)
		return data, err
	}
	write := func(seq byte, payload []byte) {
		if _, err := c.Write(append([]byte{byte(len(payload)), byte(len(payload) >> 8), byte(len(payload) >> 16), seq}, payload...)); err != nil {
			t.Fatal(err)
		}
	}
	greeting, err := read()
	if err != nil {
		t.Fatal(err)
	}
	// protocol version, server version NUL, connection id, salt part 1, filler,
	// capabilities, charset, status, capabilities, salt length, reserved, salt part 2.
	p := 1 + strings.IndexByte(string(greeting[1:]), 0) + 1 + 4
	salt := append([]byte(nil), greeting[p:p+8]...)
	p += 8 + 1 + 2 + 1 + 2 + 2 + 1 + 10
	salt = append(salt, greeting[p:p+12]...)

	pw1 := sha1.Sum([]byte("analyst"))
	pw2 := sha1.Sum(pw1[:])
	h := sha1.New()
	h.Write(salt)
	h.Write(pw2[:])
	scramble := h.Sum(nil)
	for i := range scramble {
		scramble[i] ^= pw1[i]
	}
	caps := uint32(0x1 | 0x200 | 0x8000 | 0x80000) // LONG_PASSWORD, PROTOCOL_41, SECURE_CONNECTION, PLUGIN_AUTH
	resp := []byte{byte(caps), byte(caps >> 8), byte(caps >> 16), byte(caps >> 24), 0, 0, 0, 1, 45}
	resp = append(resp, make([]byte, 23)...)
	resp = append(resp, "analyst\x00"...)
	resp = append(resp, byte(len(scramble)))
	resp = append(resp, scramble...)
	resp = append(resp, "mysql_native_password\x00"...)
	write(1, resp)
	// The "must use TLS" error, then (vitess carries on) the auth result.
	for i := 0; i < 2; i++ {
		if _, err := read(); err != nil {
			break
		}
	}
	write(0, append([]byte{0x03}, "SELECT COUNT(*) FROM adult"...))
	for {
		data, err := read()
		if err != nil {
			break // closed: good
		}
		if data[0] != 0xff {
			t.Fatalf("clear-text connection got an answer: % x", data)
		}
	}
	if n := len(fb.Calls()); n != 0 {
		t.Fatalf("backend called %d times", n)
	}
}

func TestDefaultEpsilonForSessions(t *testing.T) {
	cat := &catalog.Catalog{
		Tables: []*catalog.Table{{Name: "a", Budget: catalog.Budget{DefaultPerQuery: 0.1}}, {Name: "b", Budget: catalog.Budget{DefaultPerQuery: 0.1}}},
		Users: []*catalog.User{
			{Name: "ann", Role: catalog.RoleAnalyst},
			{Name: "cap", Role: catalog.RoleAnalyst, DefaultEpsilon: 0.25},
			{Name: "aud", Role: catalog.RoleAuditor},
		},
	}
	for _, c := range []struct {
		user string
		eps  float64
		ok   bool
	}{{"ann", 0.1, true}, {"cap", 0.25, true}, {"aud", 0, false}, {"nobody", 0, false}} {
		if eps, ok := defaultEpsilon(cat, c.user); eps != c.eps || ok != c.ok {
			t.Errorf("%s: %v %v, want %v %v", c.user, eps, ok, c.eps, c.ok)
		}
	}
	cat.Tables[1].Budget.DefaultPerQuery = 0.2 // tables disagree: no single default
	if _, ok := defaultEpsilon(cat, "ann"); ok {
		t.Error("a default was shown although it depends on the table")
	}
}
