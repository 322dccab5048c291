package console

import (
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/internal/statedb"
	"github.com/dpproxy/dpproxy/internal/testdb"
)

var pg = testdb.NewLazy(testdb.StartPostgres)

// clock is a settable clock for Config.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// sharedConsoles starts n consoles over one ledger whose sessions are kept
// in db, each with a pool of its own (a proxy each), on one clock.
func sharedConsoles(t *testing.T, n int, open func(t *testing.T) *statedb.DB, clk *clock) []*fixture {
	t.Helper()
	base := newFixture(t, false)
	out := make([]*fixture, n)
	for i := range out {
		srv, err := New(Config{Catalog: func() *catalog.Catalog { return base.cat }, Ledger: base.ledger,
			Logger: testLogger(), SessionTTL: time.Hour, Now: clk.now, SessionDB: open(t)})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(srv)
		t.Cleanup(ts.Close)
		out[i] = &fixture{t: t, cat: base.cat, ledger: base.ledger, path: base.path, srv: srv, ts: ts}
	}
	return out
}

// sessionBackends runs test with sessions in a PostgreSQL database of its
// own and in a SQLite file: the SQL is the same.
func sessionBackends(t *testing.T, test func(t *testing.T, open func(t *testing.T) *statedb.DB)) {
	t.Run("postgres", func(t *testing.T) {
		dsn, err := pg.Get(t).FreshPostgresDB(context.Background(), "console")
		if err != nil {
			t.Fatal(err)
		}
		test(t, func(t *testing.T) *statedb.DB {
			db, err := statedb.OpenPostgres(context.Background(), dsn, 4)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		})
	})
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.sqlite")
		test(t, func(t *testing.T) *statedb.DB {
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return &statedb.DB{DB: db, Dialect: statedb.SQLite, Where: path}
		})
	})
}

// login logs user in on f with the form and returns the session cookie.
func login(t *testing.T, f *fixture, user string) *http.Cookie {
	t.Helper()
	c := f.client(true)
	tok := loginForm(t, f, c)
	r := postForm(f, c, "/login", url.Values{"user": {user}, "password": {passwords[user]}, "csrf": {tok}, "next": {"/"}})
	if r.status != http.StatusSeeOther {
		t.Fatalf("login: %d %s", r.status, r.body)
	}
	for _, ck := range (&http.Response{Header: r.header}).Cookies() {
		if ck.Name == sessionCookie {
			return ck
		}
	}
	t.Fatal("no session cookie")
	return nil
}

// withCookie GETs path on f with only the session cookie.
func withCookie(t *testing.T, f *fixture, path string, ck *http.Cookie) response {
	t.Helper()
	return f.do(f.client(false), http.MethodGet, path, "", "", nil, "Cookie", ck.Name+"="+ck.Value)
}

// Two consoles sharing a state database: a login on one holds on the
// other, a logout on one ends it on both, expiry holds on both, and the
// table never holds a token.
func TestSharedSessions(t *testing.T) { sessionBackends(t, testSharedSessions) }

func testSharedSessions(t *testing.T, open func(t *testing.T) *statedb.DB) {
	clk := &clock{t: time.Date(2026, 11, 21, 16, 0, 0, 0, time.UTC)}
	fs := sharedConsoles(t, 2, open, clk)
	a, b := fs[0], fs[1]
	ck := login(t, a, "alice")
	page := withCookie(t, b, "/", ck)
	if page.status != http.StatusOK || !strings.Contains(page.body, ">alice<") {
		t.Fatalf("a's session on b: %d", page.status)
	}
	if r := withCookie(t, b, "/api/budgets", ck); r.status != http.StatusOK {
		t.Fatalf("a's session on b's API: %d", r.status)
	}
	// The database holds the token's digest only.
	db := open(t)
	var digest string
	if err := db.QueryRow("SELECT token_sha256 FROM console_sessions WHERE user_name = ?", "alice").Scan(&digest); err != nil {
		t.Fatal(err)
	}
	if digest == ck.Value || digest != tokenDigest(ck.Value) {
		t.Fatalf("stored %q for token %q", digest, ck.Value)
	}
	// Logging out on b (with the session's CSRF token, shown by b) ends it on a.
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page.body)
	if csrf == nil {
		t.Fatal("no logout form")
	}
	r := b.do(b.client(false), http.MethodPost, "/logout", "", "", strings.NewReader(url.Values{"csrf": {csrf[1]}}.Encode()),
		"Content-Type", "application/x-www-form-urlencoded", "Cookie", ck.Name+"="+ck.Value)
	if r.status != http.StatusSeeOther {
		t.Fatalf("logout on b: %d %s", r.status, r.body)
	}
	if r := withCookie(t, a, "/api/budgets", ck); r.status != http.StatusUnauthorized {
		t.Fatalf("session on a after logout on b: %d", r.status)
	}
	// Expiry: an hour-long session is dead on both after 61 minutes, and
	// the next login sweeps its row.
	ck = login(t, b, "bob")
	clk.add(59 * time.Minute)
	if r := withCookie(t, a, "/api/budgets", ck); r.status != http.StatusOK {
		t.Fatalf("session after 59 minutes: %d", r.status)
	}
	clk.add(2 * time.Minute)
	for _, f := range fs {
		if r := withCookie(t, f, "/api/budgets", ck); r.status != http.StatusUnauthorized {
			t.Fatalf("expired session: %d", r.status)
		}
	}
	stale := login(t, a, "audrey")
	clk.add(2 * time.Hour)
	login(t, a, "alice")
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM console_sessions WHERE token_sha256 = ?", tokenDigest(stale.Value)).Scan(&n); err != nil || n != 0 {
		t.Fatalf("expired row kept: %d %v", n, err)
	}
	// A restarted console (a new server, a new pool) knows the sessions.
	ck = login(t, a, "bob")
	again := sharedConsoles(t, 1, open, clk)[0]
	if r := withCookie(t, again, "/api/budgets", ck); r.status != http.StatusOK {
		t.Fatalf("session after a restart: %d", r.status)
	}
}

// Without a database sessions stay in memory, per console, as before.
func TestMemorySessionsPerConsole(t *testing.T) {
	a, b := newFixture(t, false), newFixture(t, false)
	ck := login(t, a, "alice")
	if r := withCookie(t, a, "/api/budgets", ck); r.status != http.StatusOK {
		t.Fatalf("own session: %d", r.status)
	}
	if r := withCookie(t, b, "/api/budgets", ck); r.status != http.StatusUnauthorized {
		t.Fatalf("another console's memory session: %d", r.status)
	}
}
