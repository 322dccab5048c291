package console

import (
	"context"

	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/engine"
	"github.com/dpproxy/dpproxy/mysqlfront"
)

const testCatalog = `
database: shop
sources:
  main: {driver: sqlite, path: shop.sqlite}
tables:
  orders:
    budget: {total: 10, per_user: 4, default_per_query: 0.5, max_per_query: 2}
    columns:
      region: {type: categorical, values: [north, south, east, west]}
      amount: {type: integer, min: 0, max: 99, width: 10}
  visits:
    noise: gaussian
    budget: {total: 8, per_user: 3, default_per_query: 0.5, delta: 1.0e-6}
    columns:
      day: {type: integer, min: 1, max: 31}
users:
  alice: {password: alice-pw, role: analyst}
  bob: {password: bob-pw, role: analyst}
  audrey: {password: audrey-pw, role: auditor}
`

// fixture is a console over a real ledger file with a few entries.
type fixture struct {
	t      *testing.T
	cat    *catalog.Catalog
	ledger *budget.Ledger
	path   string
	srv    *Server
	ts     *httptest.Server
}

func newFixture(t *testing.T, useTLS bool) *fixture {
	t.Helper()
	ctx := context.Background()
	cat, err := catalog.Parse("test.yaml", []byte(testCatalog))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ledger.sqlite")
	l, err := budget.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if _, err := l.RecordLimits(ctx, engine.Limits(cat), nil); err != nil {
		t.Fatal(err)
	}
	digest := strings.Repeat("ab", 32)
	charge := func(user, table string, c budget.Cost) {
		t.Helper()
		mech := "laplace"
		if c.Rho > 0 {
			mech = "gaussian"
		}
		if _, err := l.Charge(ctx, budget.Charge{User: user, ConnID: 3, Tables: []string{table}, Mechanism: mech,
			Strategy: "workload", Cost: c, QueryDigest: digest}, nil); err != nil {
			t.Fatal(err)
		}
	}
	charge("alice", "orders", budget.Cost{Epsilon: 0.5})
	charge("bob", "orders", budget.Cost{Epsilon: 1})
	charge("alice", "orders", budget.Cost{Epsilon: 0.25})
	charge("alice", "visits", budget.Cost{Rho: 0.01})
	charge("bob", "visits", budget.Cost{Rho: 0.02})
	if _, err := l.Record(ctx, budget.KindReuse, budget.Charge{User: "alice", Tables: []string{"orders"},
		Mechanism: "laplace", Strategy: "stored answer", QueryDigest: digest}); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Catalog: func() *catalog.Catalog { return cat }, Ledger: l,
		Explainer: engine.New(engine.Config{Catalog: cat, Ledger: l, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}),
		Logger:    testLogger()}
	var ts *httptest.Server
	if useTLS {
		tc, err := mysqlfront.SelfSignedTLS(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		cfg.TLS = tc
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if useTLS {
		ts = httptest.NewUnstartedServer(srv)
		ts.TLS = cfg.TLS
		ts.StartTLS()
	} else {
		ts = httptest.NewServer(srv)
	}
	t.Cleanup(ts.Close)
	return &fixture{t: t, cat: cat, ledger: l, path: path, srv: srv, ts: ts}
}

// client is an HTTP client that does not follow redirects, optionally with
// a cookie jar.
func (f *fixture) client(jar bool) *http.Client {
	c := f.ts.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if jar {
		c.Jar, _ = cookiejar.New(nil)
	}
	return c
}

type response struct {
	status int
	header http.Header
	body   string
}

func (f *fixture) do(c *http.Client, method, path, user, pw string, body io.Reader, header ...string) response {
	f.t.Helper()
	req, err := http.NewRequest(method, f.ts.URL+path, body)
	if err != nil {
		f.t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, pw)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, string(b)}
}

var passwords = map[string]string{"alice": "alice-pw", "bob": "bob-pw", "audrey": "audrey-pw"}

// get is a Basic-authenticated GET.
func (f *fixture) get(user, path string) response {
	f.t.Helper()
	return f.do(f.client(false), http.MethodGet, path, user, passwords[user], nil)
}

func decode[T any](t *testing.T, r response) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(r.body), &v); err != nil {
		t.Fatalf("decode %q: %v", r.body, err)
	}
	return v
}

func TestAuthenticationRequired(t *testing.T) {
	f := newFixture(t, false)
	c := f.client(false)
	for _, p := range []string{"/api/budgets", "/api/ledger", "/api/verify", "/api/spending?table=orders", "/api/catalog"} {
		r := f.do(c, http.MethodGet, p, "", "", nil)
		if r.status != http.StatusUnauthorized || !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Basic ") ||
			!strings.Contains(r.body, "authentication required") {
			t.Errorf("GET %s without credentials: %d %q %q", p, r.status, r.header.Get("WWW-Authenticate"), r.body)
		}
	}
	if r := f.do(c, http.MethodPost, "/api/explain", "", "", strings.NewReader(`{"query":"SELECT COUNT(*) FROM orders"}`),
		"Content-Type", "application/json"); r.status != http.StatusUnauthorized {
		t.Errorf("POST /api/explain without credentials: %d", r.status)
	}
	for _, p := range []string{"/", "/ledger?table=orders", "/verify", "/catalog", "/explain"} {
		r := f.do(c, http.MethodGet, p, "", "", nil)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/login?next="+url.QueryEscape(p) {
			t.Errorf("GET %s without a session: %d → %q", p, r.status, r.header.Get("Location"))
		}
	}
	if r := f.do(c, http.MethodGet, "/plot/orders/epsilon.svg", "", "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("plot without a session: %d", r.status)
	}
	// Static assets need no login.
	if r := f.do(c, http.MethodGet, "/static/console.css", "", "", nil); r.status != http.StatusOK || !strings.Contains(r.header.Get("Content-Type"), "text/css") {
		t.Errorf("static css: %d %q", r.status, r.header.Get("Content-Type"))
	}
}

func TestBasicAuthNoUserEnumeration(t *testing.T) {
	f := newFixture(t, false)
	c := f.client(false)
	wrongPw := f.do(c, http.MethodGet, "/api/budgets", "alice", "nope", nil)
	noUser := f.do(c, http.MethodGet, "/api/budgets", "mallory", "nope", nil)
	// Case matters: MySQL user names are case-sensitive.
	wrongCase := f.do(c, http.MethodGet, "/api/budgets", "Alice", "alice-pw", nil)
	for _, r := range []response{wrongPw, noUser, wrongCase} {
		if r.status != http.StatusUnauthorized || r.body != wrongPw.body {
			t.Errorf("refusal %d %q differs from %q", r.status, r.body, wrongPw.body)
		}
	}
	if r := f.get("alice", "/api/budgets"); r.status != http.StatusOK {
		t.Fatalf("right password: %d %s", r.status, r.body)
	}
	cat := f.cat
	if !checkPassword(cat, "alice", "alice-pw") || checkPassword(cat, "alice", "") || checkPassword(cat, "mallory", "") ||
		checkPassword(cat, "mallory", "x") {
		t.Error("checkPassword")
	}
}

// loginForm fetches the login form and returns its CSRF token.
func loginForm(t *testing.T, f *fixture, c *http.Client) string {
	t.Helper()
	r := f.do(c, http.MethodGet, "/login", "", "", nil)
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(r.body)
	if r.status != http.StatusOK || m == nil {
		t.Fatalf("login form: %d %s", r.status, r.body)
	}
	return m[1]
}

func postForm(f *fixture, c *http.Client, path string, v url.Values, header ...string) response {
	f.t.Helper()
	return f.do(c, http.MethodPost, path, "", "", strings.NewReader(v.Encode()),
		append([]string{"Content-Type", "application/x-www-form-urlencoded"}, header...)...)
}

func TestLoginSessionCSRF(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", useTLS), func(t *testing.T) {
			f := newFixture(t, useTLS)
			c := f.client(true)
			tok := loginForm(t, f, c)

			// No CSRF token, a wrong one, or a cross-site Origin: refused.
			for _, tc := range []struct {
				v      url.Values
				header []string
			}{
				{url.Values{"user": {"alice"}, "password": {"alice-pw"}}, nil},
				{url.Values{"user": {"alice"}, "password": {"alice-pw"}, "csrf": {tok + "x"}}, nil},
				{url.Values{"user": {"alice"}, "password": {"alice-pw"}, "csrf": {tok}}, []string{"Origin", "https://evil.example"}},
			} {
				r := postForm(f, c, "/login", tc.v, tc.header...)
				if r.status != http.StatusForbidden || r.header.Get("Set-Cookie") == "" || strings.Contains(r.header.Get("Set-Cookie"), sessionCookie) {
					t.Errorf("login %v %v: %d %q", tc.v, tc.header, r.status, r.header.Get("Set-Cookie"))
				}
				tok = loginForm(t, f, c)
			}

			// A wrong password and an unknown user get the same answer.
			var bodies []string
			for _, u := range []string{"alice", "mallory"} {
				r := postForm(f, c, "/login", url.Values{"user": {"x"}, "password": {"wrong"}, "csrf": {tok}})
				_ = u
				if r.status != http.StatusUnauthorized || !strings.Contains(r.body, "Unknown user or wrong password.") {
					t.Errorf("bad login: %d %s", r.status, r.body)
				}
				bodies = append(bodies, regexp.MustCompile(`value="[^"]*"`).ReplaceAllString(r.body, ""))
				tok = loginForm(t, f, c)
			}
			if bodies[0] != bodies[1] {
				t.Error("an unknown user and a wrong password are answered differently")
			}

			// The right password starts a session; next= keeps the visitor on this console.
			r := postForm(f, c, "/login", url.Values{"user": {"alice"}, "password": {"alice-pw"}, "csrf": {tok}, "next": {"//evil.example/"}})
			if r.status != http.StatusSeeOther || r.header.Get("Location") != "/" {
				t.Fatalf("login: %d → %q", r.status, r.header.Get("Location"))
			}
			var sess *http.Cookie
			for _, ck := range (&http.Response{Header: r.header}).Cookies() {
				if ck.Name == sessionCookie {
					sess = ck
				}
			}
			if sess == nil || !sess.HttpOnly || sess.SameSite != http.SameSiteStrictMode || sess.Secure != useTLS || sess.Path != "/" || len(sess.Value) < 43 {
				t.Fatalf("session cookie %+v", sess)
			}
			page := f.do(c, http.MethodGet, "/", "", "", nil)
			if page.status != http.StatusOK || !strings.Contains(page.body, ">alice<") {
				t.Fatalf("budgets page with the session: %d", page.status)
			}
			csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page.body)
			if csrf == nil {
				t.Fatal("no logout form")
			}
			// The session works for the API too.
			if r := f.do(c, http.MethodGet, "/api/budgets", "", "", nil); r.status != http.StatusOK {
				t.Fatalf("API with the session cookie: %d", r.status)
			}
			// Logging out needs the session's CSRF token.
			if r := postForm(f, c, "/logout", url.Values{}); r.status != http.StatusForbidden {
				t.Fatalf("logout without CSRF: %d", r.status)
			}
			if r := postForm(f, c, "/logout", url.Values{"csrf": {csrf[1]}}); r.status != http.StatusSeeOther {
				t.Fatalf("logout: %d", r.status)
			}
			// The old token is dead even if a client kept it.
			c2 := f.client(false)
			req, _ := http.NewRequest(http.MethodGet, f.ts.URL+"/api/budgets", nil)
			req.AddCookie(sess)
			resp, err := c2.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("session after logout: %d", resp.StatusCode)
			}
			if h := page.header.Get("Content-Security-Policy"); !strings.Contains(h, "default-src 'none'") ||
				page.header.Get("X-Frame-Options") != "DENY" || page.header.Get("Cache-Control") != "no-store" {
				t.Errorf("security headers: %v", page.header)
			}
			// No HSTS: a console with a self-signed certificate on a host
			// name would become unreachable for a year.
			if page.header.Get("Strict-Transport-Security") != "" {
				t.Error("HSTS sent")
			}
		})
	}
}

// TestCrossOriginRefused: a browser's cross-site POST is refused by its
// Sec-Fetch-Site header even when it sends no Origin (the hand-written
// check this replaced let such a request through), whatever CSRF token and
// cookies it carries; the same requests from this origin, and from a
// script that sends neither header, still work.
func TestCrossOriginRefused(t *testing.T) {
	f := newFixture(t, false)
	c := f.client(true)
	login := func(header ...string) response {
		t.Helper()
		tok := loginForm(t, f, c)
		return postForm(f, c, "/login", url.Values{"user": {"alice"}, "password": {"alice-pw"}, "csrf": {tok}}, header...)
	}
	hasSession := func(r response) bool {
		return strings.Contains(strings.Join(r.header.Values("Set-Cookie"), "\n"), sessionCookie+"=") &&
			!strings.Contains(strings.Join(r.header.Values("Set-Cookie"), "\n"), sessionCookie+"=;")
	}
	for _, site := range []string{"cross-site", "same-site"} {
		if r := login("Sec-Fetch-Site", site); r.status != http.StatusForbidden || hasSession(r) ||
			!strings.Contains(r.body, "did not come from this console") {
			t.Errorf("login with Sec-Fetch-Site: %s and no Origin: %d %q", site, r.status, r.header.Values("Set-Cookie"))
		}
	}
	// Sec-Fetch-Site decides over an Origin that names this console.
	if r := login("Sec-Fetch-Site", "cross-site", "Origin", f.ts.URL); r.status != http.StatusForbidden || hasSession(r) {
		t.Errorf("login cross-site with this Origin: %d", r.status)
	}
	if r := login("Sec-Fetch-Site", "same-origin"); r.status != http.StatusSeeOther || !hasSession(r) {
		t.Fatalf("same-origin login: %d %q", r.status, r.header.Values("Set-Cookie"))
	}

	page := f.do(c, http.MethodGet, "/explain", "", "", nil)
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page.body)[1]
	explain := url.Values{"query": {"SELECT COUNT(*) FROM visits"}, "csrf": {csrf}}
	if r := postForm(f, c, "/explain", explain, "Sec-Fetch-Site", "cross-site"); r.status != http.StatusForbidden {
		t.Errorf("cross-site explain form: %d", r.status)
	}
	if r := postForm(f, c, "/logout", url.Values{"csrf": {csrf}}, "Sec-Fetch-Site", "cross-site"); r.status != http.StatusForbidden {
		t.Errorf("cross-site logout: %d", r.status)
	}
	if r := postForm(f, c, "/explain", explain, "Sec-Fetch-Site", "same-origin"); r.status != http.StatusOK ||
		!strings.Contains(r.body, "nothing (EXPLAIN)") {
		t.Errorf("same-origin explain form: %d", r.status)
	}
	// A GET is never refused for its origin (it changes nothing).
	if r := f.do(c, http.MethodGet, "/", "", "", nil, "Sec-Fetch-Site", "cross-site"); r.status != http.StatusOK {
		t.Errorf("cross-site GET: %d", r.status)
	}

	body := `{"query": "SELECT COUNT(*) FROM orders"}`
	api := func(header ...string) response {
		t.Helper()
		return f.do(f.client(false), http.MethodPost, "/api/explain", "alice", "alice-pw", strings.NewReader(body),
			append([]string{"Content-Type", "application/json"}, header...)...)
	}
	if r := api("Sec-Fetch-Site", "cross-site"); r.status != http.StatusForbidden || !strings.Contains(r.body, "cross-origin request refused") {
		t.Errorf("cross-site API POST: %d %s", r.status, r.body)
	}
	if r := api("Origin", "https://evil.example"); r.status != http.StatusForbidden {
		t.Errorf("API POST from another Origin: %d %s", r.status, r.body)
	}
	for _, h := range [][]string{nil, {"Sec-Fetch-Site", "same-origin"}, {"Origin", f.ts.URL}} {
		if r := api(h...); r.status != http.StatusOK {
			t.Errorf("API POST with %v: %d %s", h, r.status, r.body)
		}
	}
}

func TestSessionExpires(t *testing.T) {
	now := time.Date(2026, 11, 21, 16, 0, 0, 0, time.UTC)
	ss := newSessions(time.Hour, func() time.Time { return now })
	tok := ss.start("alice")
	if _, ok := ss.get(tok); !ok {
		t.Fatal("fresh session missing")
	}
	now = now.Add(61 * time.Minute)
	if _, ok := ss.get(tok); ok {
		t.Fatal("expired session accepted")
	}
	if safeNext("//evil") != "/" || safeNext("/\\evil") != "/" || safeNext("https://evil") != "/" || safeNext("/ledger?x=1") != "/ledger?x=1" {
		t.Error("safeNext")
	}
}

type budgetsJSON struct {
	User   string `json:"user"`
	View   string `json:"view"`
	Scopes []struct {
		Scope, User, Table string
		Spent              float64 `json:"spent_epsilon"`
	} `json:"scopes"`
	Budgets []struct {
		Table     string
		Spent     float64 `json:"spent_epsilon"`
		Remaining float64 `json:"remaining_epsilon"`
	} `json:"budgets"`
}

type pageJSON struct {
	Entries []budget.Entry `json:"entries"`
	Next    int64          `json:"next"`
	Total   int64          `json:"total"`
}

func TestAccessRules(t *testing.T) {
	f := newFixture(t, false)

	// Budgets: the auditor sees every scope, an analyst only their own.
	b := decode[budgetsJSON](t, f.get("audrey", "/api/budgets"))
	var users []string
	for _, s := range b.Scopes {
		users = append(users, s.User)
	}
	if b.View != "all" || !slices.Contains(users, "bob") || !slices.Contains(users, "alice") || len(b.Budgets) != 0 {
		t.Fatalf("auditor budgets: %+v", b)
	}
	r := f.get("alice", "/api/budgets")
	b = decode[budgetsJSON](t, r)
	if b.View != "own" || len(b.Scopes) != 0 || len(b.Budgets) != 2 || b.Budgets[0].Table != "orders" || b.Budgets[0].Spent != 0.75 ||
		b.Budgets[0].Remaining != 3.25 || strings.Contains(r.body, "bob") {
		t.Fatalf("analyst budgets: %s", r.body)
	}

	// Ledger: an analyst gets their own entries; asking for another user's is refused.
	p := decode[pageJSON](t, f.get("alice", "/api/ledger"))
	if p.Total != 4 || len(p.Entries) != 4 {
		t.Fatalf("alice's ledger: %+v", p)
	}
	for _, e := range p.Entries {
		if e.User != "alice" {
			t.Errorf("alice sees an entry of %q", e.User)
		}
	}
	if r := f.get("alice", "/api/ledger?user=bob"); r.status != http.StatusForbidden {
		t.Errorf("alice asks for bob's entries: %d %s", r.status, r.body)
	}
	if r := f.get("alice", "/api/ledger?user=alice&kind=reuse"); r.status != http.StatusOK || decode[pageJSON](t, r).Total != 1 {
		t.Errorf("alice's own reuses: %d %s", r.status, r.body)
	}
	all := decode[pageJSON](t, f.get("audrey", "/api/ledger"))
	if all.Total != 10 { // 4 limits + 5 charges + 1 reuse
		t.Fatalf("auditor's ledger: total %d", all.Total)
	}
	bob := decode[pageJSON](t, f.get("audrey", "/api/ledger?user=bob"))
	if bob.Total != 2 {
		t.Fatalf("auditor filters bob: %+v", bob)
	}

	// Spending series: own only for an analyst.
	if r := f.get("alice", "/api/spending?table=orders&user=bob"); r.status != http.StatusForbidden {
		t.Errorf("alice asks for bob's spending: %d", r.status)
	}
	s := decode[budget.Series](t, f.get("alice", "/api/spending?table=orders"))
	for _, pt := range s.Points {
		if pt.User != "alice" {
			t.Errorf("alice's series has %q", pt.User)
		}
	}
	s = decode[budget.Series](t, f.get("audrey", "/api/spending?table=orders"))
	if len(s.Points) == 0 {
		t.Error("auditor's series is empty")
	}
	if r := f.get("audrey", "/api/spending?table=nosuch"); r.status != http.StatusNotFound {
		t.Errorf("spending of an unknown table: %d", r.status)
	}

	// Verify: auditors only.
	if r := f.get("alice", "/api/verify"); r.status != http.StatusForbidden {
		t.Errorf("alice verifies: %d", r.status)
	}
	if r := f.get("alice", "/verify"); r.status != http.StatusForbidden {
		t.Errorf("alice's verify page: %d", r.status)
	}
	rep := decode[budget.Report](t, f.get("audrey", "/api/verify"))
	if !rep.OK || !rep.ChainIntact || rep.Entries != 10 {
		t.Errorf("auditor's verify: %+v", rep)
	}

	// Pages apply the same rule: nothing of bob on alice's pages.
	for _, path := range []string{"/", "/ledger", "/ledger?table=orders", "/plot/orders/epsilon.svg", "/plot/visits/rho.svg", "/plot/visits/epsilon.svg", "/catalog"} {
		r := f.get("alice", path)
		if r.status != http.StatusOK || strings.Contains(r.body, "bob") {
			t.Errorf("alice GET %s: %d, mentions bob: %v", path, r.status, strings.Contains(r.body, "bob"))
		}
	}
	for _, path := range []string{"/", "/ledger", "/plot/orders/epsilon.svg", "/plot/visits/rho.svg"} {
		r := f.get("audrey", path)
		if r.status != http.StatusOK || !strings.Contains(r.body, "bob") {
			t.Errorf("audrey GET %s: %d, mentions bob: %v", path, r.status, strings.Contains(r.body, "bob"))
		}
	}
	// The auditor sees no EXPLAIN link (auditors run no DP query); analysts do.
	if strings.Contains(f.get("audrey", "/").body, `href="/explain"`) || !strings.Contains(f.get("alice", "/").body, `href="/explain"`) {
		t.Error("EXPLAIN link")
	}
	if strings.Contains(f.get("alice", "/").body, `href="/verify"`) {
		t.Error("analysts get a verify link")
	}
}

func TestLedgerBrowser(t *testing.T) {
	f := newFixture(t, false)
	// Paging: two at a time, newest first, "next" continues.
	var seqs []int64
	path := "/api/ledger?limit=3"
	for range 10 {
		p := decode[pageJSON](t, f.get("audrey", path))
		for _, e := range p.Entries {
			seqs = append(seqs, e.Seq)
		}
		if p.Next == 0 {
			break
		}
		path = fmt.Sprintf("/api/ledger?limit=3&before=%d", p.Next)
	}
	if !slices.Equal(seqs, []int64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}) {
		t.Fatalf("paged seqs %v", seqs)
	}
	for q, want := range map[string]int64{
		"table=visits":              2, // 2 charges (its limits name its space)
		"kind=charge":               5,
		"kind=limits":               4,
		"kind=derived":              0,
		"table=orders&kind=reuse":   1,
		"since=2000-01-01T00:00:00": 10,
		"until=2000-01-01":          0,
	} {
		p := decode[pageJSON](t, f.get("audrey", "/api/ledger?"+q))
		if p.Total != want || int64(len(p.Entries)) != want {
			t.Errorf("%s: total %d, %d entries; want %d", q, p.Total, len(p.Entries), want)
		}
	}
	for _, q := range []string{"kind=nope", "since=yesterday", "before=-1", "limit=0", "limit=100000"} {
		if r := f.get("audrey", "/api/ledger?"+q); r.status != http.StatusBadRequest || !strings.Contains(r.body, `"error"`) {
			t.Errorf("%s: %d %s", q, r.status, r.body)
		}
	}
	// The page marks zero-cost entries, and pages with links.
	page := f.get("audrey", "/ledger?limit=4")
	if page.status != http.StatusOK || !strings.Contains(page.body, `class="is-free"`) || !strings.Contains(page.body, `kind free">free<`) ||
		!strings.Contains(page.body, "before=7") || !strings.Contains(page.body, "10 matching entries") {
		t.Errorf("ledger page: %d\n%s", page.status, page.body)
	}
	if r := f.get("audrey", "/ledger?kind=nope"); r.status != http.StatusBadRequest || !strings.Contains(r.body, "kind must be one of") {
		t.Errorf("bad filter on the page: %d", r.status)
	}
	if r := f.get("audrey", "/ledger?before=8&mark=5"); !strings.Contains(r.body, `id="e5" class=" mark"`) || !strings.Contains(r.body, "« newest") {
		t.Errorf("marked entry: %s", r.body)
	}
}

func TestVerifyShowsFirstBadEntry(t *testing.T) {
	f := newFixture(t, false)
	if r := f.get("audrey", "/verify"); r.status != http.StatusOK || !strings.Contains(r.body, "Ledger OK") {
		t.Fatalf("verify page: %d %s", r.status, r.body)
	}
	db, err := sql.Open("sqlite", f.path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("UPDATE entries SET epsilon = 0.001 WHERE seq = 6"); err != nil {
		t.Fatal(err)
	}
	rep := decode[budget.Report](t, f.get("audrey", "/api/verify"))
	if rep.OK || rep.ChainIntact || rep.BadSeq != 6 {
		t.Fatalf("tampered ledger: %+v", rep)
	}
	r := f.get("audrey", "/verify")
	if !strings.Contains(r.body, "Verification FAILED") || !strings.Contains(r.body, "at entry 6") ||
		!strings.Contains(r.body, `/ledger?before=16&amp;mark=6#e6`) {
		t.Fatalf("verify page after tampering: %s", r.body)
	}
}

func TestExplainChargesNothing(t *testing.T) {
	f := newFixture(t, false)
	ctx := context.Background()
	seq0, hash0, err := f.ledger.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	post := func(user, body string) response {
		return f.do(f.client(false), http.MethodPost, "/api/explain", user, passwords[user], strings.NewReader(body), "Content-Type", "application/json")
	}
	type result struct {
		Statement string
		Rows      [][2]string
		Code      int
		Error     string
	}
	r := post("alice", `{"query": "SELECT region, COUNT(*) FROM orders GROUP BY region;", "epsilon": 0.3}`)
	res := decode[result](t, r)
	props := map[string]string{}
	for _, row := range res.Rows {
		props[row[0]] = row[1]
	}
	if r.status != http.StatusOK || res.Statement != "EXPLAIN SELECT region, COUNT(*) FROM orders GROUP BY region" ||
		props["charged"] != "nothing (EXPLAIN)" || props["epsilon"] != "0.3" || props["table"] != "orders" {
		t.Fatalf("explain: %d %s", r.status, r.body)
	}
	for _, tc := range []struct {
		user, body string
		code       int
	}{
		{"alice", `{"query": "SELECT COUNT(*) FROM orders; SELECT COUNT(*) FROM orders"}`, 1235},
		{"alice", `{"query": "EXPLAIN SELECT COUNT(*) FROM orders; SELECT COUNT(*) FROM orders"}`, 1235},
		{"alice", `{"query": "SHOW TABLES"}`, 1235},
		{"alice", `{"query": "SELECT * FROM orders"}`, 3900},
		{"audrey", `{"query": "SELECT COUNT(*) FROM orders"}`, 3900}, // auditors run no DP query
	} {
		r := post(tc.user, tc.body)
		if res := decode[result](t, r); r.status != http.StatusUnprocessableEntity || res.Code != tc.code || res.Error == "" {
			t.Errorf("%s %s: %d %s", tc.user, tc.body, r.status, r.body)
		}
	}
	for _, tc := range []struct {
		body, ct string
		status   int
	}{
		{`{"query": ""}`, "application/json", http.StatusBadRequest},
		{`{"query": "SELECT 1", "eps": 1}`, "application/json", http.StatusBadRequest},
		{`query=SELECT+COUNT(*)+FROM+orders`, "application/x-www-form-urlencoded", http.StatusUnsupportedMediaType},
	} {
		r := f.do(f.client(false), http.MethodPost, "/api/explain", "alice", "alice-pw", strings.NewReader(tc.body), "Content-Type", tc.ct)
		if r.status != tc.status {
			t.Errorf("%s (%s): %d %s", tc.body, tc.ct, r.status, r.body)
		}
	}

	// The page's form, with a session and its CSRF token.
	c := f.client(true)
	tok := loginForm(t, f, c)
	if r := postForm(f, c, "/login", url.Values{"user": {"alice"}, "password": {"alice-pw"}, "csrf": {tok}}); r.status != http.StatusSeeOther {
		t.Fatal("login failed")
	}
	page := f.do(c, http.MethodGet, "/explain", "", "", nil)
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page.body)[1]
	if r := postForm(f, c, "/explain", url.Values{"query": {"SELECT COUNT(*) FROM visits"}}); r.status != http.StatusForbidden {
		t.Errorf("explain form without CSRF: %d", r.status)
	}
	r = postForm(f, c, "/explain", url.Values{"query": {"SELECT COUNT(*) FROM visits"}, "csrf": {csrf}})
	if r.status != http.StatusOK || !strings.Contains(r.body, "nothing (EXPLAIN)") || !strings.Contains(r.body, "gaussian") {
		t.Errorf("explain form: %d %s", r.status, r.body)
	}
	r = postForm(f, c, "/explain", url.Values{"query": {"SELECT COUNT(*) FROM visits"}, "epsilon": {"-1"}, "csrf": {csrf}})
	if r.status != http.StatusBadRequest || !strings.Contains(r.body, "ε must be a positive number") {
		t.Errorf("explain form with a bad ε: %d", r.status)
	}

	seq1, hash1, err := f.ledger.Head(ctx)
	if err != nil || seq1 != seq0 || hash1 != hash0 {
		t.Fatalf("the ledger moved from %d to %d during EXPLAINs", seq0, seq1)
	}
}

func TestPlots(t *testing.T) {
	f := newFixture(t, false)
	for _, tc := range []struct {
		user, path string
		want       []string
	}{
		{"audrey", "/plot/orders/epsilon.svg", []string{"<svg", "alice", "bob", "orders: ε=1.75 spent"}},
		{"audrey", "/plot/visits/rho.svg", []string{"<svg", "alice", "bob", "ρ=0.03 spent"}},
		{"audrey", "/plot/visits/epsilon.svg", []string{"<svg", "all users", "at δ=1e-06"}},
		{"alice", "/plot/orders/epsilon.svg", []string{"<svg", "alice", "ε=0.75 spent, 3.25 remaining of 4"}},
	} {
		r := f.get(tc.user, tc.path)
		if r.status != http.StatusOK || r.header.Get("Content-Type") != "image/svg+xml" {
			t.Errorf("%s %s: %d %q", tc.user, tc.path, r.status, r.header.Get("Content-Type"))
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(r.body, w) {
				t.Errorf("%s %s: no %q", tc.user, tc.path, w)
			}
		}
	}
	for _, p := range []string{"/plot/orders/rho.svg", "/plot/nosuch/epsilon.svg", "/plot/orders/other.svg"} {
		if r := f.get("audrey", p); r.status != http.StatusNotFound {
			t.Errorf("%s: %d", p, r.status)
		}
	}
}

func TestReadOnlyLedgerConsole(t *testing.T) {
	f := newFixture(t, false)
	ro, err := budget.OpenReadOnly(context.Background(), f.path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	srv, err := New(Config{Catalog: func() *catalog.Catalog { return f.cat }, Ledger: ro,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/api/verify", nil)
	req.SetBasicAuth("audrey", "audrey-pw")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep budget.Report
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil || !rep.OK {
		t.Fatalf("verify over a read-only ledger: %+v %v", rep, err)
	}
	// Without an explainer, EXPLAIN says where it is available.
	req, _ = http.NewRequest(http.MethodPost, ts.URL+"/api/explain", strings.NewReader(`{"query":"SELECT COUNT(*) FROM orders"}`))
	req.Header.Set("Content-Type", "application/json")
	req.SetBasicAuth("alice", "alice-pw")
	resp2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusNotFound {
		t.Errorf("explain without an explainer: %d", resp2.StatusCode)
	}
}

// testLogger discards logs unless -v.
func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.Default()
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// The spending series follows the ledger as it grows: the cache reads only
// the new entries, and a rebuilt (shorter) ledger is summed anew.
func TestSpendingFollowsTheLedger(t *testing.T) {
	f := newFixture(t, false)
	total := func() float64 {
		t.Helper()
		s := decode[budget.Series](t, f.get("audrey", "/api/spending?table=orders"))
		sum := 0.0
		for _, p := range s.Points {
			sum += p.Cost.Epsilon
		}
		return sum
	}
	if got := total(); got != 1.75 {
		t.Fatalf("orders spent %g, want 1.75", got)
	}
	if _, err := f.ledger.Charge(context.Background(), budget.Charge{User: "bob", Tables: []string{"orders"}, Mechanism: "laplace",
		Strategy: "workload", Cost: budget.Cost{Epsilon: 2}}, nil); err != nil {
		t.Fatal(err)
	}
	if got := total(); got != 3.75 {
		t.Fatalf("after a charge: orders spent %g, want 3.75", got)
	}
	// Another, shorter ledger behind the same console: summed anew.
	other, err := budget.Open(context.Background(), filepath.Join(t.TempDir(), "other.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Charge(context.Background(), budget.Charge{User: "alice", Tables: []string{"orders"}, Mechanism: "laplace",
		Strategy: "workload", Cost: budget.Cost{Epsilon: 0.5}}, nil); err != nil {
		t.Fatal(err)
	}
	s, err := f.srv.series.get(context.Background(), other, "orders", "")
	if err != nil || len(s.Points) != 1 || s.Points[0].Cost.Epsilon != 0.5 {
		t.Fatalf("series of a shorter ledger: %+v, %v", s, err)
	}
}

// Password guessing from one address is slowed down: after maxFailures
// failures in a minute, even the right password is refused there (429 on
// the form, 401 on the API) until the minute has passed.
func TestLoginThrottle(t *testing.T) {
	f := newFixture(t, false)
	now := time.Now()
	f.srv.failures.now = func() time.Time { return now }
	c := f.client(false)
	for range maxFailures {
		if r := f.do(c, http.MethodGet, "/api/budgets", "alice", "guess", nil); r.status != http.StatusUnauthorized {
			t.Fatalf("wrong password: %d", r.status)
		}
	}
	if r := f.get("alice", "/api/budgets"); r.status != http.StatusUnauthorized {
		t.Fatalf("right password while throttled: %d", r.status)
	}
	jar := f.client(true)
	tok := loginForm(t, f, jar)
	r := postForm(f, jar, "/login", url.Values{"user": {"alice"}, "password": {"alice-pw"}, "csrf": {tok}})
	if r.status != http.StatusTooManyRequests || !strings.Contains(r.body, "Too many failed logins") || r.header.Get("Retry-After") == "" {
		t.Fatalf("login form while throttled: %d", r.status)
	}
	now = now.Add(failureWindow + time.Second)
	if r := f.get("alice", "/api/budgets"); r.status != http.StatusOK {
		t.Fatalf("after the window: %d", r.status)
	}
}
