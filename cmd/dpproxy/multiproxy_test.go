package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/internal/testdb"
	"github.com/dpproxy/dpproxy/state"
)

// stateDatabase creates an empty PostgreSQL database for one test's shared
// state and returns its DSN.
func stateDatabase(t *testing.T, srv *testdb.Server, name string) string {
	t.Helper()
	if err := srv.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d/%s?sslmode=disable", testdb.PostgresPassword, srv.Port, name)
}

// sharedStateCatalog is the dashboard's catalog with its state in the
// PostgreSQL database DPPROXY_STATE_DSN names, and two more tables over
// the same rows, with reuse off so that every distinct statement is
// measured and charged: small, whose budget the budget race exhausts, and
// fresh, which the crash test loads.
func sharedStateCatalog(t *testing.T, dir string) string {
	small := `  small:
    source_table: visits
    budget: {total: 1, per_user: 1, default_per_query: 0.1}
    reuse_measurements: false
    columns:
      age: {type: integer, min: 17, max: 90}
  fresh:
    source_table: visits
    budget: {total: 1000000, per_user: 1000000, default_per_query: 0.1}
    reuse_measurements: false
    columns:
      age: {type: integer, min: 17, max: 90}
`
	yaml := strings.Replace(dashCatalog(t, dir), "users:\n", small+"users:\n", 1)
	return yaml + "state: {driver: postgres, dsn_env: DPPROXY_STATE_DSN}\n"
}

// proxyFleet is n dpproxy processes, each with its own data directory (as
// on its own host), sharing the state database.
type proxyFleet struct {
	procs []*child
	cfg   string
	dirs  []string
}

func startFleet(t *testing.T, n int, dsn string) *proxyFleet {
	t.Helper()
	dir := t.TempDir()
	f := &proxyFleet{cfg: writeCatalog(t, dir, sharedStateCatalog(t, dir))}
	if _, err := catalog.Load(f.cfg); err != nil {
		t.Fatal(err)
	}
	bin := dpproxyBinary(t)
	for i := range n {
		d := filepath.Join(dir, fmt.Sprintf("host%d", i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", d, "--config", f.cfg, "--http", "127.0.0.1:0")
		cmd.Env = append(os.Environ(), "DPPROXY_STATE_DSN="+dsn)
		f.procs = append(f.procs, startChildCmd(t, cmd))
		f.dirs = append(f.dirs, d)
	}
	return f
}

// sharedLedger opens the shared ledger read-only, as audit does.
func sharedLedger(t *testing.T, cfg string) []budget.Entry {
	t.Helper()
	cat, err := catalog.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := state.OpenLedger(context.Background(), cat.State, t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	es, err := l.Entries(context.Background(), budget.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// Issue 23 item 4: three proxy processes on one PostgreSQL state.
//
//	CI=true go test -run TestThreeProxiesShareState -v ./cmd/dpproxy
func TestThreeProxiesShareState(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	srv := pgServer.Get(t)
	dsn := stateDatabase(t, srv, "dpstate_fleet")
	t.Setenv("DPPROXY_STATE_DSN", dsn) // for the in-process audit and ledger reads
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	f := startFleet(t, 3, dsn)

	t.Run("dashboard", func(t *testing.T) {
		// 64 connections spread across the three proxies, the whole
		// dashboard on each at once: one charge per distinct batch, and
		// one answer per query everywhere.
		var conns []*sql.Conn
		for i, p := range f.procs {
			conns = append(conns, openConns(t, ctx, p.addr, []int{22, 21, 21}[i])...)
		}
		got := runDashboard(t, ctx, conns)
		for _, c := range conns {
			c.Close()
		}
		n := checkDashboard(t, got, sharedLedger(t, f.cfg))
		t.Logf("three proxies, %d connections × %d queries: %d charges", len(conns), len(dashboardMix), n)
	})

	t.Run("budget race", func(t *testing.T) {
		// Every proxy races distinct statements on the small table
		// (ε 0.1 each against a budget of 1) until refused: at most ten
		// charges, and the spend never passes the budget.
		var answered, refused atomic.Int64
		var wg sync.WaitGroup
		for i, p := range f.procs {
			conns := openConns(t, ctx, p.addr, 4)
			for c, conn := range conns {
				wg.Go(func() {
					for k := range 8 {
						lo, hi := ageRange(i*32 + c*8 + k)
						q := fmt.Sprintf("SELECT COUNT(*) FROM small WHERE age >= %d AND age < %d", lo, hi)
						_, err := render(ctx, conn, q)
						var me *mysql.MySQLError
						switch {
						case err == nil:
							answered.Add(1)
						case errors.As(err, &me) && me.Number == 3901:
							refused.Add(1)
						default:
							t.Errorf("%s: %v", q, err)
						}
					}
				})
			}
		}
		wg.Wait()
		var spent float64
		charges := 0
		for _, e := range sharedLedger(t, f.cfg) {
			if e.Kind == budget.KindCharge && len(e.Tables) == 1 && e.Tables[0] == "small" {
				spent += e.Cost.Epsilon
				charges++
			}
		}
		if spent > 1+1e-9 || charges > 10 {
			t.Fatalf("overspent: %d charges, ε %.12g against a budget of 1", charges, spent)
		}
		if int64(charges) != answered.Load() || refused.Load() == 0 {
			t.Fatalf("%d answered, %d refused, %d charges", answered.Load(), refused.Load(), charges)
		}
		t.Logf("budget race over three proxies: %d answered, %d refused, ε spent %.4g of 1", answered.Load(), refused.Load(), spent)
	})

	t.Run("SIGKILL under load", func(t *testing.T) {
		// Load on every proxy (distinct statements on the dashboard's
		// table, so each answered one is a fresh measurement), one proxy
		// killed in the middle: the ledger verifies and every answer a
		// client received has its charge.
		before := 0
		for _, e := range sharedLedger(t, f.cfg) {
			if e.Kind == budget.KindCharge {
				before++
			}
		}
		var answered atomic.Int64
		var seq atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for _, p := range f.procs {
			for _, conn := range openConns(t, ctx, p.addr, 4) {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						k := seq.Add(1)
						lo, hi := ageRange(int(k))
						q := fmt.Sprintf("SELECT COUNT(*) FROM fresh WHERE age >= %d AND age < %d", lo, hi)
						if _, err := render(ctx, conn, q); err == nil {
							answered.Add(1)
						} else if p != f.procs[1] {
							t.Errorf("%s: %v", q, err)
						} else {
							return // the killed proxy's connections
						}
					}
				})
			}
		}
		time.Sleep(time.Second)
		f.procs[1].kill()
		time.Sleep(time.Second)
		close(stop)
		wg.Wait()
		after := 0
		for _, e := range sharedLedger(t, f.cfg) {
			if e.Kind == budget.KindCharge {
				after++
			}
		}
		// Distinct statements on a table without reuse: each released
		// answer is a charge of its own, committed before the answer left.
		// A killed proxy may have charged a batch it never released
		// (conservative), never the other way round.
		if int64(after-before) < answered.Load() {
			t.Fatalf("%d answers released, %d charges recorded", answered.Load(), after-before)
		}
		if code, out, errOut := dpproxyCmd("audit", "verify", "--data-dir", f.dirs[0], "--config", f.cfg); code != 0 {
			t.Fatalf("audit verify: exit %d\n%s%s", code, out, errOut)
		}
		t.Logf("SIGKILL under load: %d answers, %d charges; audit verify passes", answered.Load(), after-before)
	})

	t.Run("audit and console", func(t *testing.T) {
		// The audit commands read the shared ledger from any host; a
		// console login on one proxy holds on the others.
		code, out, errOut := dpproxyCmd("audit", "list", "--config", f.cfg, "--data-dir", t.TempDir(), "--kind", "charge")
		if code != 0 || strings.Count(out, "charge") < 5 {
			t.Fatalf("audit list: exit %d\n%s%s", code, out, errOut)
		}
		if code, out, errOut := dpproxyCmd("audit", "budgets", "--config", f.cfg, "--data-dir", t.TempDir()); code != 0 || !strings.Contains(out, "fresh") {
			t.Fatalf("audit budgets: exit %d\n%s%s", code, out, errOut)
		}
		// The three proxies' charges re-plan, from any host, to the
		// strategies they recorded.
		if code, out, errOut := dpproxyCmd("audit", "verify", "--config", f.cfg, "--data-dir", t.TempDir(), "--replan", "20"); code != 0 || !strings.Contains(out, " match") {
			t.Fatalf("audit verify --replan: exit %d\n%s%s", code, out, errOut)
		} else {
			t.Logf("audit verify --replan 20: %s", out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])
		}
		cookie := consoleLogin(t, f.procs[0].waitLine(consoleLine), "analyst", "analyst")
		for _, p := range []*child{f.procs[0], f.procs[2]} {
			if code := consoleGet(t, p.waitLine(consoleLine)+"api/budgets", cookie); code != http.StatusOK {
				t.Fatalf("the session of proxy 0 on %s: HTTP %d", p.addr, code)
			}
		}
		if code := consoleGet(t, f.procs[2].waitLine(consoleLine)+"api/budgets", &http.Cookie{Name: cookie.Name, Value: "forged"}); code != http.StatusUnauthorized {
			t.Fatalf("a forged session: HTTP %d", code)
		}
	})

	for i, p := range f.procs {
		if i != 1 {
			p.stop()
		}
	}
}

var consoleLine = regexp.MustCompile(`^web console: (\S+)`)

// consoleLogin logs in through the console's form and returns the session
// cookie.
func consoleLogin(t *testing.T, base, user, password string) *http.Cookie {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(base + "login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	u, _ := url.Parse(base)
	csrf := ""
	for _, ck := range jar.Cookies(u) {
		if strings.Contains(ck.Name, "csrf") {
			csrf = ck.Value
		}
	}
	resp, err = c.PostForm(base+"login", url.Values{"user": {user}, "password": {password}, "csrf": {csrf}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, ck := range resp.Cookies() {
		if ck.Name == "dpconsole_session" && ck.Value != "" {
			return ck
		}
	}
	t.Fatalf("console login: HTTP %d, no session cookie", resp.StatusCode)
	return nil
}

// consoleGet fetches a console URL with a session cookie and returns the
// status code.
func consoleGet(t *testing.T, target string, cookie *http.Cookie) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(cookie)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// `dpproxy state migrate` moves a proxy's SQLite data directory into
// PostgreSQL: a proxy started on the copy re-releases the stored answer
// of a batch asked before the move for free, and extends the same chain.
func TestStateMigrateCommand(t *testing.T) {
	srv := pgServer.Get(t)
	dsn := stateDatabase(t, srv, "dpstate_migrate_cmd")
	t.Setenv("DPPROXY_STATE_DSN", dsn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	yaml := dashCatalog(t, dir)
	q := dashboardMix[1]
	ask := func(cf commonFlags) (string, []budget.Entry) {
		t.Helper()
		p, err := start(ctx, cf, "127.0.0.1:0", newLogger(io.Discard))
		if err != nil {
			t.Fatal(err)
		}
		go p.front.Start()
		defer p.Close()
		conn := openConns(t, ctx, p.front.Addr().String(), 1)[0]
		defer conn.Close()
		got, err := render(ctx, conn, q)
		if err != nil {
			t.Fatal(err)
		}
		return got, entries(t, p)
	}
	before, es := ask(commonFlags{dataDir: dir, config: writeCatalog(t, dir, yaml)})
	charged := len(charges(es))
	shared := writeCatalog(t, t.TempDir(), yaml+"state: {driver: postgres, dsn_env: DPPROXY_STATE_DSN}\n")
	code, out, errOut := dpproxyCmd("state", "migrate", "--config", shared, "--data-dir", dir)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("%d ledger entries", len(es))) {
		t.Fatalf("state migrate: exit %d\n%s%s", code, out, errOut)
	}
	after, es2 := ask(commonFlags{dataDir: t.TempDir(), config: shared})
	if after != before {
		t.Fatalf("after the move %q, before %q", after, before)
	}
	if n := len(charges(es2)); n < charged || es2[len(es)-1].Hash != es[len(es)-1].Hash {
		t.Fatalf("the moved ledger does not extend the old chain: %d entries, %d charges", len(es2), n)
	}
	for _, e := range es2[len(es):] {
		if e.Kind == budget.KindCharge {
			t.Fatalf("the repeat was charged again after the move: %+v", e)
		}
	}
	if code, out, errOut := dpproxyCmd("audit", "verify", "--config", shared, "--data-dir", t.TempDir()); code != 0 {
		t.Fatalf("audit verify: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := dpproxyCmd("state", "migrate", "--data-dir", dir); code != 2 || !strings.Contains(errOut, "--config is required") {
		t.Fatalf("without --config: exit %d %s", code, errOut)
	}
}

// ageRange is the k-th of the distinct ranges [lo, hi) of the age domain
// 17..90, so that the k-th statement of a test is a batch of its own.
func ageRange(k int) (lo, hi int) {
	for lo = 17; lo <= 90; lo++ {
		n := 90 - lo // ranges starting at lo: [lo, lo+1) … [lo, 90)
		if k < n {
			return lo, lo + 1 + k
		}
		k -= n
	}
	panic("ageRange: past the domain's ranges")
}
