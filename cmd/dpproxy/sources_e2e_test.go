package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/internal/testdb"

	_ "github.com/jackc/pgx/v5/stdlib"
)

// One PostgreSQL and one MariaDB per test binary, started when a test
// first asks (see TestMain, which stops them).
var (
	pgServer    = testdb.NewLazy(testdb.StartPostgres)
	mariaServer = testdb.NewLazy(testdb.StartMariaDB)
)

// readerPassword is the password of the read-only role the README's
// recipes create; the tests check it never reaches a log or an error.
const readerPassword = "s3cret-reader-pw"

// postgresRecipe is README "Connecting your database", PostgreSQL: a role
// that can log in and read the table, nothing else, read-only by default.
var postgresRecipe = []string{
	"CREATE ROLE dp_reader LOGIN PASSWORD '" + readerPassword + "'",
	"GRANT CONNECT ON DATABASE shop TO dp_reader",
	"GRANT USAGE ON SCHEMA public TO dp_reader",
	"GRANT SELECT ON public.adult TO dp_reader",
	"ALTER ROLE dp_reader SET default_transaction_read_only = on",
}

// mariadbRecipe is README "Connecting your database", MySQL/MariaDB.
var mariadbRecipe = []string{
	"CREATE USER 'dp_reader'@'%' IDENTIFIED BY '" + readerPassword + "'",
	"GRANT SELECT ON shop.adult TO 'dp_reader'@'%'",
}

// serverCatalog is the demo catalog with the table adult in a server
// source (the demo's events and countries left out).
func serverCatalog(source string) string {
	c := string(catalog.DemoYAML())
	if i, k := strings.Index(c, "\n  events:\n"), strings.Index(c, "\nusers:\n"); i >= 0 && k > i {
		c = c[:i+1] + c[k+1:]
	}
	c = strings.Replace(c, "  main: {driver: sqlite, path: demo.sqlite}", "  shop: "+source, 1)
	c = strings.Replace(c, "    source: main\n", "    source: shop\n", 1)
	return strings.Replace(c, "budget: {total: 100, per_user: 20, default_per_query: 0.1, max_per_query: 2}",
		"budget: {total: 1000, per_user: 1000, default_per_query: 1, max_per_query: 5}", 1)
}

var (
	shopOnce sync.Map // server kind → *shopResult
)

type shopResult struct {
	once sync.Once
	err  error
}

// loadShop creates database shop with the demo table adult on srv (once
// per server) and runs the README recipe for the read-only role.
func loadShop(t *testing.T, srv *testdb.Server) {
	t.Helper()
	v, _ := shopOnce.LoadOrStore(srv.Kind, &shopResult{})
	r := v.(*shopResult)
	r.once.Do(func() {
		ctx := context.Background()
		from, err := sql.Open("sqlite", "file:"+demoData(t)+"?mode=ro")
		if err != nil {
			r.err = err
			return
		}
		defer from.Close()
		var to *sql.DB
		switch srv.Kind {
		case "postgres":
			if r.err = srv.Exec(ctx, "CREATE DATABASE shop"); r.err != nil {
				return
			}
			to, r.err = sql.Open("pgx", strings.Replace(srv.AdminDSN, "/postgres?", "/shop?", 1))
		default:
			if r.err = srv.Exec(ctx, "CREATE DATABASE shop CHARACTER SET utf8mb4"); r.err != nil {
				return
			}
			to, r.err = sql.Open("mysql", strings.Replace(srv.AdminDSN, ")/?", ")/shop?", 1)+"&allowAllFiles=true")
		}
		if r.err != nil {
			return
		}
		defer to.Close()
		table := "adult"
		if srv.Kind == "postgres" {
			table = "public.adult"
		}
		if _, r.err = testdb.CopyAdult(ctx, from, srv.Driver, to, table); r.err != nil {
			return
		}
		recipe := mariadbRecipe
		if srv.Kind == "postgres" {
			recipe = postgresRecipe
		}
		for _, st := range recipe {
			if _, r.err = to.ExecContext(ctx, st); r.err != nil {
				r.err = fmt.Errorf("%s: %w", st, r.err)
				return
			}
		}
	})
	if r.err != nil {
		t.Fatal(r.err)
	}
}

// readerDSN is the DSN of the README's catalog line for srv.
func readerDSN(srv *testdb.Server) string {
	if srv.Kind == "postgres" {
		return fmt.Sprintf("postgres://dp_reader:%s@127.0.0.1:%d/shop?sslmode=disable", readerPassword, srv.Port)
	}
	return fmt.Sprintf("dp_reader:%s@tcp(127.0.0.1:%d)/shop", readerPassword, srv.Port)
}

// startLoggedProxy is startProxy with the proxy's log kept.
func startLoggedProxy(t *testing.T, yaml string) (string, *bytes.Buffer) {
	t.Helper()
	dir := t.TempDir()
	cf := commonFlags{dataDir: dir, config: filepath.Join(dir, "catalog.yaml")}
	if err := os.WriteFile(cf.config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
	p, err := start(context.Background(), cf, "127.0.0.1:0", log)
	if err != nil {
		t.Fatal(err)
	}
	go p.front.Start()
	t.Cleanup(p.Close)
	return p.front.Addr().String(), &logs
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// The demo workload through a proxy in front of a real PostgreSQL and a
// real MariaDB, set up as the README says (a read-only role, the catalog
// lines; the PostgreSQL DSN from dsn_env): COUNT, a range, GROUP BY of two
// columns, SUM and AVG, top-k, each within 13 standard errors of the
// truth: a Laplace error exceeds z standard errors with probability
// exp(−z·√2), so a false failure has probability about 10⁻⁸ per answer.
// (At 6 standard errors, as this test first had, it was 2·10⁻⁴ per answer,
// about 0.3% per run of its 16 answers, and a run failed so.) The
// reader's password appears in no log and no error.
func TestServerSourcesEndToEnd(t *testing.T) {
	for _, tc := range []struct {
		name string
		srv  *testdb.Lazy
	}{{"postgres", pgServer}, {"mariadb", mariaServer}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := tc.srv.Get(t)
			loadShop(t, srv)
			source := `{driver: mysql, dsn: "` + readerDSN(srv) + `"}`
			if srv.Kind == "postgres" {
				t.Setenv("DPPROXY_SHOP_DSN", readerDSN(srv))
				source = `{driver: postgres, dsn_env: DPPROXY_SHOP_DSN}`
			}
			addr, logs := startLoggedProxy(t, serverCatalog(source))
			db := connect(t, addr, "analyst", "analyst", "")
			db.SetMaxOpenConns(1)
			if _, err := db.Exec("SET @dp_epsilon = 1"); err != nil {
				t.Fatal(err)
			}
			within := func(what string, got, se, want float64) {
				t.Helper()
				if math.Abs(got-want) > 13*se+0.5 {
					t.Errorf("%s: %v ± %v, truth %v", what, got, se, want)
				}
			}
			var n, se float64
			if err := db.QueryRow("SELECT COUNT(*), DP_STDERR(COUNT(*)) FROM adult").Scan(&n, &se); err != nil {
				t.Fatal(err)
			}
			within("COUNT(*)", n, se, float64(truth(t, "SELECT COUNT(*) FROM adult")))
			if err := db.QueryRow("SELECT COUNT(*), DP_STDERR(COUNT(*)) FROM adult WHERE age BETWEEN 30 AND 40 AND education IN ('Bachelors', 'Masters')").Scan(&n, &se); err != nil {
				t.Fatal(err)
			}
			within("range", n, se, float64(truth(t, "SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 40 AND education IN ('Bachelors', 'Masters')")))
			rows, err := db.Query("SELECT sex, income, COUNT(*), DP_STDERR(COUNT(*)) FROM adult GROUP BY sex, income")
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
				within(sex+"/"+income, n, se, float64(truth(t, "SELECT COUNT(*) FROM adult WHERE sex = ? AND income = ?", sex, income)))
			}
			rows.Close()
			if groups != 4 {
				t.Fatalf("%d groups", groups)
			}
			var sum, sumSE, avg, avgSE float64
			if err := db.QueryRow("SELECT SUM(hours_per_week), DP_STDERR(SUM(hours_per_week)), AVG(hours_per_week), DP_STDERR(AVG(hours_per_week)) FROM adult WHERE sex = 'Female'").Scan(&sum, &sumSE, &avg, &avgSE); err != nil {
				t.Fatal(err)
			}
			trueSum := float64(truth(t, "SELECT SUM(hours_per_week) FROM adult WHERE sex = 'Female' AND hours_per_week IS NOT NULL"))
			trueN := float64(truth(t, "SELECT COUNT(hours_per_week) FROM adult WHERE sex = 'Female'"))
			within("SUM", sum, sumSE, trueSum)
			within("AVG", avg, avgSE, trueSum/trueN)
			rows, err = db.Query("SELECT occupation FROM adult GROUP BY occupation ORDER BY COUNT(*) DESC LIMIT 3")
			if err != nil {
				t.Fatal(err)
			}
			var top []string
			for rows.Next() {
				var o string
				if err := rows.Scan(&o); err != nil {
					t.Fatal(err)
				}
				top = append(top, o)
			}
			rows.Close()
			// The selected groups are among the five largest: the gaps
			// below them are hundreds of rows at ε = 0.5/3 per round.
			big := map[string]bool{}
			tr, err := sql.Open("sqlite", "file:"+demoData(t)+"?mode=ro")
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			r5, err := tr.Query("SELECT occupation FROM adult GROUP BY occupation ORDER BY COUNT(*) DESC LIMIT 5")
			if err != nil {
				t.Fatal(err)
			}
			for r5.Next() {
				var o string
				r5.Scan(&o)
				big[o] = true
			}
			r5.Close()
			if len(top) != 3 || !big[top[0]] || !big[top[1]] || !big[top[2]] {
				t.Errorf("top-3 %v not among the five largest %v", top, big)
			}
			if strings.Contains(logs.String(), readerPassword) {
				t.Error("the reader's password is in the proxy's log")
			}
		})
	}
}

// A wrong password or an unreachable server stops start-up with an error
// that names the source, never the DSN's password.
func TestServerSourceErrorsRedactPassword(t *testing.T) {
	for _, tc := range []struct {
		name string
		srv  *testdb.Lazy
	}{{"postgres", pgServer}, {"mariadb", mariaServer}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := tc.srv.Get(t)
			loadShop(t, srv)
			dsn := strings.Replace(readerDSN(srv), readerPassword, "wrong-"+readerPassword, 1)
			driver := map[string]string{"postgres": "postgres", "mariadb": "mysql"}[srv.Kind]
			dir := t.TempDir()
			cf := commonFlags{dataDir: dir, config: filepath.Join(dir, "catalog.yaml")}
			if err := os.WriteFile(cf.config, []byte(serverCatalog(`{driver: `+driver+`, dsn: "`+dsn+`"}`)), 0o600); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			_, err := start(context.Background(), cf, "127.0.0.1:0", slog.New(slog.NewTextHandler(&logs, nil)))
			if err == nil {
				t.Fatal("started with a wrong password")
			}
			t.Logf("start-up error: %v", err)
			if !strings.Contains(err.Error(), "source shop") {
				t.Errorf("error does not name the source: %v", err)
			}
			if strings.Contains(err.Error()+logs.String(), readerPassword) {
				t.Errorf("the password leaked: %v\n%s", err, logs.String())
			}
		})
	}
}
