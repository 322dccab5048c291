package console

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/engine"
	"github.com/dpproxy/dpproxy/internal/statedb"
)

// Ledger is what the console reads from the privacy ledger. It has no
// method that writes: *budget.Ledger satisfies it, opened read-write by a
// proxy that serves the console beside it or with budget.OpenReadOnly by
// `dpproxy console`.
type Ledger interface {
	Page(ctx context.Context, q budget.Query) (budget.Page, error)
	Spending(ctx context.Context, q budget.SeriesQuery) (budget.Series, error)
	SpentRows(ctx context.Context) ([]budget.SpentRow, error)
	Spent(ctx context.Context, user, table string) (budget.Cost, error)
	SpentSpace(ctx context.Context, user, space string) (budget.Cost, error)
	Report(ctx context.Context, current []budget.Limit, pub ed25519.PublicKey, headsPath string) (budget.Report, error)
	Head(ctx context.Context) (seq int64, hash string, err error)
}

// Explainer plans statements for a user as the MySQL front has them
// planned: engine.Live and engine.Engine satisfy it. The console hands it
// only a single EXPLAIN statement (see explain.go), which plans and charges
// nothing.
type Explainer interface {
	Answer(ctx context.Context, s *engine.Session, stmts []string) ([]*engine.Result, error)
}

// Config configures a Server.
type Config struct {
	// Catalog returns the catalog in force: its users and password hashes
	// log in, its roles decide what they see, its tables and limits are
	// shown. It is called per request, so a reloaded catalog shows at once.
	Catalog func() *catalog.Catalog
	Ledger  Ledger
	// Explainer, when set, enables the EXPLAIN box and /api/explain.
	Explainer Explainer
	// PublicKey checks the signed heads in HeadsPath on the verify page;
	// nil: no signed heads are checked.
	PublicKey ed25519.PublicKey
	HeadsPath string
	// TLS, when set, serves HTTPS only, and session cookies are Secure.
	TLS *tls.Config
	// SessionTTL is how long a browser session lasts (default 8h).
	SessionTTL time.Duration
	// SessionDB, when set, keeps browser sessions in this state database
	// (table console_sessions, created on first use), shared by every
	// console pointed at it: a login survives restarts and holds on each
	// console behind a load balancer. nil keeps them in memory.
	SessionDB *statedb.DB
	Logger    *slog.Logger
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// Server is the web console: an http.Handler, and Serve to run it.
type Server struct {
	cfg      Config
	log      *slog.Logger
	now      func() time.Time
	sessions sessionStore
	failures *failures
	series   *seriesCache
	handler  http.Handler // the routes behind the cross-origin check
	pages    *pages
}

// New returns a console over cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Catalog == nil || cfg.Ledger == nil {
		return nil, errors.New("console: a catalog and a ledger are required")
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 8 * time.Hour
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	pg, err := loadPages()
	if err != nil {
		return nil, err
	}
	var sessions sessionStore = newSessions(cfg.SessionTTL, now)
	if cfg.SessionDB != nil {
		sessions = newSQLSessions(cfg.SessionDB, cfg.SessionTTL, now)
	}
	s := &Server{
		cfg:      cfg,
		log:      log.With("component", "console"),
		now:      now,
		sessions: sessions,
		series:   newSeriesCache(),
		failures: newFailures(now),
		pages:    pg,
	}
	s.routes()
	return s, nil
}

// ServeHTTP serves the console with its security headers.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; img-src 'self'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// same-origin, not no-referrer: with no-referrer, browsers send "Origin: null"
	// on form posts, and a browser without Sec-Fetch-Site could not be told
	// from another site by its Origin (crossOrigin).
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	start := s.now()
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		if rec := recover(); rec != nil {
			s.log.Error("panic serving a request", "path", r.URL.Path, "panic", fmt.Sprint(rec))
			if !sw.wrote {
				http.Error(sw, "internal error", http.StatusInternalServerError)
			}
		}
		s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", sw.status, "duration", s.now().Sub(start))
	}()
	s.handler.ServeHTTP(sw, r)
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Serve serves the console on ln (over TLS when Config.TLS is set) until
// ctx ends, then shuts down, waiting up to five seconds for requests in
// progress.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	if s.cfg.TLS != nil {
		ln = tls.NewListener(ln, s.cfg.TLS.Clone())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if e := <-errc; !errors.Is(e, http.ErrServerClosed) && err == nil {
		err = e
	}
	return err
}

// URL is the console's address as a browser opens it.
func (s *Server) URL(addr net.Addr) string {
	scheme := "http"
	if s.cfg.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + addr.String() + "/"
}

func (s *Server) routes() {
	m := http.NewServeMux()
	m.Handle("GET /static/", staticHandler())
	m.HandleFunc("GET /login", s.loginPage)
	m.HandleFunc("POST /login", s.login)
	m.HandleFunc("POST /logout", s.page(s.logout))

	m.HandleFunc("GET /{$}", s.page(s.budgetsPage))
	m.HandleFunc("GET /ledger", s.page(s.ledgerPage))
	m.HandleFunc("GET /verify", s.page(s.verifyPage))
	m.HandleFunc("GET /catalog", s.page(s.catalogPage))
	m.HandleFunc("GET /explain", s.page(s.explainPage))
	m.HandleFunc("POST /explain", s.page(s.explainPage))
	m.HandleFunc("GET /plot/{table}/{metric}", s.page(s.plot))

	m.HandleFunc("GET /api/budgets", s.api(s.apiBudgets))
	m.HandleFunc("GET /api/ledger", s.api(s.apiLedger))
	m.HandleFunc("GET /api/verify", s.api(s.apiVerify))
	m.HandleFunc("GET /api/spending", s.api(s.apiSpending))
	m.HandleFunc("GET /api/catalog", s.api(s.apiCatalog))
	m.HandleFunc("POST /api/explain", s.api(s.apiExplain))
	s.handler = s.crossOrigin(m)
}
