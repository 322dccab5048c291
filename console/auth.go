package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/dpproxy/dpproxy/budgetview"
	"github.com/dpproxy/dpproxy/catalog"
)

// Logging in.
//
// Users and passwords are the catalog's: a password is right when its
// mysql_native_password hash ("*" + upper(hex(SHA1(SHA1(pw))))) equals the
// user's hash, compared in constant time. An unknown user is compared with a
// hash no password has, so that a wrong user and a wrong password take the
// same time and get the same answer (no user enumeration). Ten failures
// in a minute from one address refuse that address for the rest of the
// minute (failures).
//
// Scripts send HTTP Basic credentials with every request (the API answers
// 401 with a Basic challenge without them). Browsers log in with a form: on
// success the server keeps a session under a random 256-bit token, sent as
// an HttpOnly, SameSite=Strict cookie (Secure over HTTPS). Forms that act
// (login, logout, EXPLAIN) carry a CSRF token: the login form's is
// double-submitted (a cookie and a field that must match), the others' is
// the session's own. Sessions live in memory, where a restart logs
// everyone out, or in the shared state database (Config.SessionDB,
// sessions.go), where they survive restarts and every console behind a
// load balancer knows them.
//
// Cross-origin requests: every request that is not GET, HEAD or OPTIONS
// passes net/http's CrossOriginProtection first (crossOrigin), which
// refuses a browser's cross-site request by its Sec-Fetch-Site header
// (sent by every browser since 2023, with or without Origin), or else by
// an Origin whose host is not the request's Host. A request with neither
// header is not a browser's (curl, scripts with HTTP Basic) and passes; the
// CSRF tokens above still guard the forms.

const (
	sessionCookie = "dpconsole_session"
	csrfCookie    = "dpconsole_csrf"
)

// noPassword is compared against when the user is unknown: no password
// hashes to it (it is not upper-case hex).
const noPassword = "*????????????????????????????????????????"

// viewer is the logged-in user a request is answered for.
type viewer struct {
	Name    string
	Auditor bool   // sees everything (budgetview.CanSeeAll)
	CSRF    string // the session's CSRF token ("" for Basic authentication)
}

// checkPassword reports whether password is user's, in time independent
// of whether the user exists.
func checkPassword(cat *catalog.Catalog, user, password string) bool {
	want := noPassword
	u := cat.User(user)
	if u != nil && u.PasswordHash != "" {
		want = strings.ToUpper(u.PasswordHash)
	}
	got := catalog.NativePasswordHash(password)
	ok := subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
	return ok && u != nil
}

func (s *Server) viewerFor(cat *catalog.Catalog, name, csrf string) *viewer {
	return &viewer{Name: name, Auditor: budgetview.CanSeeAll(cat, name), CSRF: csrf}
}

// authenticate returns the request's viewer from Basic credentials or the
// session cookie, or nil.
func (s *Server) authenticate(r *http.Request) *viewer {
	cat := s.cfg.Catalog()
	if user, pw, ok := r.BasicAuth(); ok {
		if s.failures.blocked(r) {
			return nil
		}
		if !checkPassword(cat, user, pw) {
			s.failures.add(r)
			s.log.Info("console login failed", "user", user, "remote", r.RemoteAddr, "via", "basic")
			return nil
		}
		return s.viewerFor(cat, user, "")
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil
	}
	sess, ok, err := s.sessions.Get(r.Context(), c.Value)
	if err != nil {
		s.log.Warn("console session not read", "err", err)
		return nil
	}
	if !ok || cat.User(sess.user) == nil {
		return nil
	}
	return s.viewerFor(cat, sess.user, sess.csrf)
}

// page wraps a browser page: without a viewer it redirects to the login
// form, and a POST must carry the session's CSRF token (its origin was
// checked before: crossOrigin).
func (s *Server) page(h func(http.ResponseWriter, *http.Request, *viewer)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v := s.authenticate(r)
		if v == nil {
			if r.Method == http.MethodGet && !strings.HasPrefix(r.URL.Path, "/plot/") {
				http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			http.Error(w, "log in first", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost {
			if v.CSRF == "" || !tokenEqual(r.PostFormValue("csrf"), v.CSRF) {
				http.Error(w, "the form has expired or did not come from this console; reload the page and try again", http.StatusForbidden)
				return
			}
		}
		h(w, r, v)
	}
}

// api wraps a JSON endpoint: without a viewer it answers 401 with a Basic
// challenge. A POST must be JSON (which a cross-site form cannot send
// without the console's consent; its origin was checked before:
// crossOrigin).
func (s *Server) api(h func(http.ResponseWriter, *http.Request, *viewer)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v := s.authenticate(r)
		if v == nil {
			w.Header().Set("WWW-Authenticate", `Basic realm="dpproxy console", charset="UTF-8"`)
			writeJSONError(w, http.StatusUnauthorized, "authentication required: HTTP Basic with a catalog user, or the console's session cookie")
			return
		}
		if r.Method == http.MethodPost {
			ct := r.Header.Get("Content-Type")
			if !strings.HasPrefix(ct, "application/json") {
				writeJSONError(w, http.StatusUnsupportedMediaType, "POST a JSON body (Content-Type: application/json)")
				return
			}
		}
		h(w, r, v)
	}
}

// crossOrigin wraps the console's routes in net/http's
// CrossOriginProtection. No origin is trusted beyond the request's own Host:
// the console has no cross-origin callers.
func (s *Server) crossOrigin(h http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(s.crossOriginRefused))
	return cop.Handler(h)
}

// crossOriginRefused answers a refused cross-origin request: JSON on the
// API, a fresh login form on /login, a plain 403 elsewhere.
func (s *Server) crossOriginRefused(w http.ResponseWriter, r *http.Request) {
	s.log.Info("console cross-origin request refused", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr,
		"origin", r.Header.Get("Origin"), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"))
	switch {
	case strings.HasPrefix(r.URL.Path, "/api/"):
		writeJSONError(w, http.StatusForbidden, "cross-origin request refused: call the API from this console's origin or without a browser")
	case r.URL.Path == "/login":
		tok := randomToken()
		http.SetCookie(w, s.cookie(csrfCookie, tok, 3600))
		s.render(w, r, http.StatusForbidden, "login", nil, loginData{CSRF: tok, Next: "/",
			Error: "The form did not come from this console; please log in here."})
	default:
		http.Error(w, "the form did not come from this console; reload the page and try again", http.StatusForbidden)
	}
}

func tokenEqual(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

func randomToken() string {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (s *Server) cookie(name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge, HttpOnly: true,
		Secure: s.cfg.TLS != nil, SameSite: http.SameSiteStrictMode}
}

type loginData struct {
	CSRF, Next, User, Error string
}

// loginPage shows the form, with a fresh double-submit CSRF token.
func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	tok := randomToken()
	http.SetCookie(w, s.cookie(csrfCookie, tok, 3600))
	s.render(w, r, http.StatusOK, "login", nil, loginData{CSRF: tok, Next: safeNext(r.URL.Query().Get("next"))})
}

// login checks the form and starts a session.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	user, pw, next := r.PostFormValue("user"), r.PostFormValue("password"), safeNext(r.PostFormValue("next"))
	c, err := r.Cookie(csrfCookie)
	if err != nil || !tokenEqual(r.PostFormValue("csrf"), c.Value) {
		s.log.Info("console login form refused", "remote", r.RemoteAddr, "has_csrf_cookie", err == nil)
		tok := randomToken()
		http.SetCookie(w, s.cookie(csrfCookie, tok, 3600))
		s.render(w, r, http.StatusForbidden, "login", nil, loginData{CSRF: tok, Next: next, User: user,
			Error: "The form expired; please log in again."})
		return
	}
	if s.failures.blocked(r) {
		tok := randomToken()
		http.SetCookie(w, s.cookie(csrfCookie, tok, 3600))
		w.Header().Set("Retry-After", "60")
		s.render(w, r, http.StatusTooManyRequests, "login", nil, loginData{CSRF: tok, Next: next, User: user,
			Error: "Too many failed logins from your address; wait a minute."})
		return
	}
	if !checkPassword(s.cfg.Catalog(), user, pw) {
		s.failures.add(r)
		s.log.Info("console login failed", "user", user, "remote", r.RemoteAddr, "via", "form")
		tok := randomToken()
		http.SetCookie(w, s.cookie(csrfCookie, tok, 3600))
		s.render(w, r, http.StatusUnauthorized, "login", nil, loginData{CSRF: tok, Next: next, User: user,
			Error: "Unknown user or wrong password."})
		return
	}
	// A new token at every login: a token planted before cannot be used.
	tok, err := s.sessions.Start(r.Context(), user)
	if err != nil {
		s.log.Error("console session not started", "user", user, "err", err)
		tok := randomToken()
		http.SetCookie(w, s.cookie(csrfCookie, tok, 3600))
		s.render(w, r, http.StatusServiceUnavailable, "login", nil, loginData{CSRF: tok, Next: next, User: user,
			Error: "Sessions are unavailable just now; try again shortly."})
		return
	}
	http.SetCookie(w, s.cookie(sessionCookie, tok, int(s.cfg.SessionTTL/time.Second)))
	http.SetCookie(w, s.cookie(csrfCookie, "", -1))
	s.log.Info("console login", "user", user, "remote", r.RemoteAddr)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, v *viewer) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		if err := s.sessions.End(r.Context(), c.Value); err != nil {
			s.log.Warn("console session not ended", "user", v.Name, "err", err)
		}
	}
	http.SetCookie(w, s.cookie(sessionCookie, "", -1))
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// safeNext keeps a redirect target on this console: a path, never another
// host ("//evil" or "/\evil").
func safeNext(next string) string {
	if next == "" || next[0] != '/' || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") || strings.ContainsAny(next, "\r\n") {
		return "/"
	}
	return next
}

// failures counts failed logins per client address, to slow down password
// guessing: after maxFailures in failureWindow, logins from that address
// are refused (429) until the window has passed. It never locks out a
// user, only an address. Memory is bounded by maxTracked addresses.
type failures struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[string][]time.Time
}

const (
	maxFailures   = 10
	failureWindow = time.Minute
	maxTracked    = 10000
)

func newFailures(now func() time.Time) *failures {
	return &failures{now: now, m: map[string][]time.Time{}}
}

func clientHost(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}

// recent drops the failures of host older than the window; f.mu is held.
func (f *failures) recent(host string) []time.Time {
	ts := f.m[host]
	cut := f.now().Add(-failureWindow)
	i := 0
	for i < len(ts) && ts[i].Before(cut) {
		i++
	}
	ts = ts[i:]
	if len(ts) == 0 {
		delete(f.m, host)
		return nil
	}
	f.m[host] = ts
	return ts
}

func (f *failures) blocked(r *http.Request) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.recent(clientHost(r))) >= maxFailures
}

func (f *failures) add(r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	host := clientHost(r)
	if len(f.m) >= maxTracked && f.m[host] == nil {
		clear(f.m)
	}
	f.m[host] = append(f.recent(host), f.now())
}
