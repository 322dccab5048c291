// Package mysqlfront wires go-mysql-server (GMS) as dpproxy's MySQL protocol
// front.
//
// Protected tables exist in GMS as schema only: a database named
// catalog.Database with one table per protected table, no rows, and a
// refusal (3900) for any statement that would scan one (schema.go). Every
// statement that touches a protected table is intercepted and handed to the
// Backend (the engine); everything else — SHOW, SET, SELECT @@x,
// information_schema, USE, ROLLBACK, COM_PING, COM_INIT_DB, COM_FIELD_LIST… —
// is answered by GMS. Since GMS holds no rows, nothing it answers can reveal
// protected data. A few session statements GMS gets wrong for dpproxy's
// users are answered by the front itself: KILL, SHOW PROCESSLIST, SHOW
// GRANTS (session.go).
//
// Under the MySQL protocol handler sits a packet layer (netconn.go): it runs
// TLS (Config.TLS; required with Config.RequireTLS, refused clients get
// MySQL's 3159), answers COM_STATISTICS, and repairs vitess's answer to a
// COM_STMT_PREPARE that does not parse. It reads every packet before vitess
// does and refuses, with MySQL's errors, what vitess would misread
// (commands.go), and it bounds what a client may hold: the handshake, idle
// sessions (wait_timeout), packet sizes; accept errors never stop the
// server (limits.go). Which connections may hold a place is admission's
// (admission.go): connecting sockets are capped apart from sessions, in all
// and per address, the oldest closed at once over a cap; sessions are
// capped by max_connections (1040) with one more place kept for auditors,
// and per user by max_user_connections (1226). Sessions are private: every
// listing of sessions shows a user their own (processlist.go).
// Authentication (auth.go) checks the catalog's password hashes with
// mysql_native_password or caching_sha2_password (fast from a cache, full
// over TLS or RSA); unknown users and wrong passwords both get MySQL's 1045. Each catalog user may
// SELECT from the catalog database and information_schema and set session
// and user variables, nothing else; the GMS engine is read-only besides.
//
// Errors go-mysql-server reports are given MySQL's codes, SQLSTATEs and
// message shapes (1064 syntax errors, 1146, 1054, 1049/1044, 1142, ...;
// errors.go): BI tools parse them.
//
// Statement flow:
//   - The backend reads statements in MySQL's default lexical conventions:
//     under a session sql_mode with ANSI_QUOTES or NO_BACKSLASH_ESCAPES the
//     front rewrites quotes first (lex.go), so "adult" stays the table.
//   - COM_QUERY without CLIENT_MULTI_STATEMENTS: the whole text is one
//     statement; if Backend.Intercepts it, Backend.Answer gets it alone.
//   - COM_QUERY with CLIENT_MULTI_STATEMENTS (mysql CLI, go-sql-driver with
//     multiStatements=true): the text is split into statements; the maximal
//     run of consecutive intercepted statements at the front is answered by
//     ONE Backend.Answer call, a non-intercepted first statement goes alone to
//     GMS. Execution stops at the first error, as in MySQL.
//   - COM_STMT_PREPARE / COM_STMT_EXECUTE of an intercepted statement: prepare
//     announces no result columns (the column definitions come with the
//     execute response); execute substitutes the bound parameters as SQL
//     literals for the `?` placeholders and calls Backend.Answer.
//   - Statements for GMS first pass guard, which refuses what GMS v0.20.0
//     would allow without MySQL's privilege checks (SET GLOBAL, LOAD_FILE,
//     INTO OUTFILE, LOAD DATA) and SQL-level PREPARE/EXECUTE, which would run
//     over the empty schema-only tables out of the Backend's sight.
//
// Errors: a *parser.Error from the Backend reaches the client with its code
// and SQLSTATE; any other error, a panic included, becomes 3902 "internal
// error; nothing was released" and is logged, never sent.
//
// Process-wide state: GMS keeps system variables and its logger (logrus)
// globally, and vitess its logger. New sets the global secure_file_priv to a
// path that cannot exist and routes the library logs into the most recent
// Config.Logger; @@version_comment and @@version are set per session.
package mysqlfront

import (
	"context"
	"crypto/rsa"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sqle "github.com/dolthub/go-mysql-server"
	"github.com/dolthub/go-mysql-server/memory"
	"github.com/dolthub/go-mysql-server/server"
	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/mysql_db"
	"github.com/dolthub/go-mysql-server/sql/types"
	"github.com/dolthub/vitess/go/mysql"
	"github.com/dolthub/vitess/go/sqltypes"
	querypb "github.com/dolthub/vitess/go/vt/proto/query"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/engine"
	"github.com/dpproxy/dpproxy/internal/gmsengine"
)

// VersionComment is the value of @@version_comment in every dpproxy session.
const VersionComment = "dpproxy — differentially private MySQL proxy"

// Backend answers the statements that touch protected tables. It is
// implemented by engine.Engine.
type Backend interface {
	// Intercepts reports whether one statement (text as sent, may carry
	// leading comments) must go to the backend: it references a protected
	// table. The backend owns this decision.
	Intercepts(stmt string) bool
	// Answer answers a batch of consecutive intercepted statements of one
	// request, in order: one *engine.Result per statement, or an error for
	// the whole batch. A *parser.Error carries the MySQL code and SQLSTATE;
	// any other error becomes code 3902 "internal error; nothing was
	// released" for the client and is logged, never echoed.
	Answer(ctx context.Context, s *engine.Session, stmts []string) ([]*engine.Result, error)
}

// Config configures a Server.
type Config struct {
	// Catalog is the schema clients see and the users; its Server section
	// bounds connections and sessions (zero fields: MySQL's defaults; see
	// limits.go).
	Catalog *catalog.Catalog
	Backend Backend
	// Address to listen on, e.g. "127.0.0.1:3306". Ignored when Listener is set.
	Address string
	// Listener, when set, is used instead of listening on Address (tests use
	// one on a free port). Close closes it.
	Listener net.Listener
	// Version is the server version announced in the handshake and returned
	// by @@version, e.g. "8.0.33-dpproxy". Empty keeps GMS's default.
	Version string
	// Logger receives dpproxy's logs and, routed, those of go-mysql-server
	// and vitess. nil means slog.Default().
	Logger *slog.Logger
	// TLS, when set, lets clients switch to TLS (mysql --ssl, DSN tls=...):
	// the handshake announces it and MySQL clients that prefer TLS (the
	// default of MySQL 8 clients, Connector/J with useSSL) switch. See
	// LoadTLS and SelfSignedTLS.
	TLS *tls.Config
	// RequireTLS refuses clients that do not switch to TLS (MySQL's error
	// 3159, before authentication); it needs TLS.
	RequireTLS bool
	// AuthPlugin is the authentication plugin the handshake announces:
	// mysql_native_password (the default) or caching_sha2_password. Clients
	// may answer with either; see auth.go.
	AuthPlugin string
	// RSAKey decrypts caching_sha2_password passwords that clients send
	// without TLS; nil generates a 2048-bit key on first use.
	RSAKey *rsa.PrivateKey
	// Audit, when set, adds the read-only audit tables (schema dpproxy; see audit.go).
	Audit *Audit
}

// Server is a running MySQL front.
type Server struct {
	cfg        Config
	log        *slog.Logger
	version    string
	requireTLS bool
	tlsConfig  *tls.Config
	started    time.Time
	questions  atomic.Int64 // commands received, for COM_STATISTICS
	limits     catalog.Server
	adm        *admission    // the connections' places (admission.go)
	handler    *connHandler  // set by trackConnections
	closing    chan struct{} // closed by Close
	creds      *credentials
	listener   net.Listener
	engine     *sqle.Engine
	gms        *server.Server
	icpt       *interceptor

	mu        sync.Mutex
	conns     map[uint32]*connInfo
	closed    bool
	listenErr error // why the listener died, if it did
	closeOnce sync.Once
}

// New builds the schema-only database and the users from the catalog and
// starts listening (so Addr is known), but does not accept connections
// until Start.
func New(cfg Config) (*Server, error) {
	if cfg.Catalog == nil {
		return nil, errors.New("mysqlfront: no catalog")
	}
	if cfg.Backend == nil {
		return nil, errors.New("mysqlfront: no backend")
	}
	if cfg.Catalog.Database == "" {
		return nil, errors.New("mysqlfront: catalog has no database name")
	}
	if cfg.RequireTLS && cfg.TLS == nil {
		return nil, errors.New("mysqlfront: RequireTLS without a TLS configuration")
	}
	authPlugin := mysql.AuthMethodDescription(cfg.AuthPlugin)
	switch authPlugin {
	case "":
		authPlugin = mysql.MysqlNativePassword
	case mysql.MysqlNativePassword, mysql.CachingSha2Password:
	default:
		return nil, fmt.Errorf("mysqlfront: unsupported auth plugin %q (mysql_native_password or caching_sha2_password)", cfg.AuthPlugin)
	}
	creds, err := newCredentials(cfg.Catalog.Users, cfg.RSAKey)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "mysqlfront")
	routeLibraryLogs(log)

	// GMS initialises process-wide variables when an engine and a server are
	// built; two Servers built at once (tests) would race on them.
	gmsInit.Lock()
	defer gmsInit.Unlock()

	// GMS checks no FILE privilege: LOAD_FILE, INTO OUTFILE and LOAD DATA are
	// limited only by secure_file_priv ("" = anywhere). guard refuses them;
	// as a second lock, secure_file_priv names a directory that cannot exist.
	// It is a process-wide GMS global, read-only for clients.
	if err := sql.SystemVariables.AssignValues(map[string]any{"secure_file_priv": noFileAccess}); err != nil {
		return nil, fmt.Errorf("mysqlfront: secure_file_priv: %w", err)
	}
	limits := limitsOf(cfg.Catalog)
	if err := setGlobalLimits(limits); err != nil {
		return nil, err
	}
	checkDescriptors(log, limits)
	pro, err := schemaOnlyDatabase(cfg.Catalog)
	if err != nil {
		return nil, err
	}
	if err := addAuditDatabase(pro, cfg.Catalog, cfg.Audit); err != nil {
		return nil, err
	}
	eng := gmsengine.NewDefault(pro)
	// Nothing may ever be written to the schema-only database; the users'
	// grants already say so, read-only mode is a second lock.
	eng.ReadOnly.Store(true)
	if err := addUsers(eng.Analyzer.Catalog.MySQLDb, cfg.Catalog); err != nil {
		return nil, err
	}

	l := cfg.Listener
	if l == nil {
		if l, err = net.Listen("tcp", cfg.Address); err != nil {
			return nil, err
		}
	}
	s := &Server{
		cfg:        cfg,
		log:        log,
		version:    cfg.Version,
		requireTLS: cfg.RequireTLS,
		tlsConfig:  cfg.TLS.Clone(),
		started:    time.Now(),
		limits:     limits,
		closing:    make(chan struct{}),
		listener:   l,
		engine:     eng,
		conns:      map[uint32]*connInfo{},
	}
	s.creds = creds
	s.adm = newAdmission(limits, s.userLimit)
	s.icpt = &interceptor{backend: cfg.Backend, log: log, srv: s}
	var chain server.InterceptorChain
	chain.WithInterceptor(s.icpt)
	auth := &authServer{def: authPlugin}
	var native, sha2 mysql.AuthMethod = admittingMethod{nativeMethod{creds}, s}, admittingMethod{sha2Method{creds}, s}
	if authPlugin == mysql.CachingSha2Password {
		auth.methods = []mysql.AuthMethod{sha2, native}
	} else {
		auth.methods = []mysql.AuthMethod{native, sha2}
	}
	gcfg := server.Config{
		Protocol: "tcp",
		Address:  l.Addr().String(),
		Listener: &frontListener{Listener: l, s: s},
		Version:  cfg.Version,
		// vitess only announces TLS in the greeting; the packet layer
		// (netconn.go) runs it and enforces RequireTLS.
		TLSConfig: s.tlsConfig,
		Options:   []server.Option{chain.Option(), s.trackConnections},
		ProtocolListenerFactory: func(c server.Config, lc mysql.ListenerConfig, sel server.ServerEventListener) (server.ProtocolListener, error) {
			lc.AuthServer = auth
			return server.MySQLProtocolListenerFactory(c, lc, sel)
		},
	}
	base := memory.NewSessionBuilder(pro)
	s.gms, err = server.NewServer(gcfg, eng, s.newContext, s.sessionBuilder(base), nil)
	if err != nil {
		l.Close()
		return nil, err
	}
	s.icpt.sm = s.gms.SessionManager()
	return s, nil
}

// Start accepts connections until Close; it blocks. It returns nil after
// Close, and otherwise only if the listener can no longer accept (see
// limits.go), with the reason.
func (s *Server) Start() error {
	_ = s.gms.Start()
	if s.isClosing() {
		return nil
	}
	s.mu.Lock()
	err := s.listenErr
	s.mu.Unlock()
	if err == nil {
		err = errors.New("the accept loop ended")
	}
	return fmt.Errorf("mysqlfront: listener stopped: %w", err)
}

// Close stops accepting connections and closes the open ones.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.gms.Close() // closes the listener
		s.mu.Lock()
		s.closed = true
		conns := make([]*mysql.Conn, 0, len(s.conns))
		for _, ci := range s.conns {
			conns = append(conns, ci.conn)
		}
		s.mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
		if err := s.engine.Close(); err != nil {
			s.log.Debug("closing go-mysql-server engine", "err", err)
		}
	})
	return nil
}

// statistics is the answer to COM_STATISTICS, in MySQL's format. dpproxy
// has no slow-query log and opens no tables, so those counters are 0.
func (s *Server) statistics() string {
	up := time.Since(s.started)
	s.mu.Lock()
	threads := len(s.conns)
	s.mu.Unlock()
	q := s.questions.Load()
	secs := int64(up / time.Second)
	qps := 0.0
	if secs > 0 {
		qps = float64(q) / float64(secs)
	}
	return fmt.Sprintf("Uptime: %d  Threads: %d  Questions: %d  Slow queries: 0  Opens: 0  Flush tables: 0  Open tables: 0  Queries per second avg: %.3f",
		secs, threads, q, qps)
}

// Config is the configuration the server was built with (its Listener
// belongs to this server).
func (s *Server) Config() Config { return s.cfg }

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.listener.Addr() }

// sessionBuilder makes GMS sessions carrying dpproxy's @@version_comment and
// @@version. They are set per session (InitSessionVariable may initialise
// read-only variables) so that GMS's process-wide globals stay untouched;
// @@global.version_comment therefore still shows GMS's default.
func (s *Server) sessionBuilder(base server.SessionBuilder) server.SessionBuilder {
	return func(ctx context.Context, conn *mysql.Conn, addr string) (sql.Session, error) {
		sess, err := base(ctx, conn, addr)
		if err != nil {
			return nil, err
		}
		sctx := sql.NewContext(ctx, sql.WithSession(sess))
		if err := sess.InitSessionVariable(sctx, "version_comment", VersionComment); err != nil {
			s.log.Warn("setting @@version_comment", "err", err)
		}
		if s.version != "" {
			if err := sess.InitSessionVariable(sctx, "version", s.version); err != nil {
				s.log.Warn("setting @@version", "err", err)
			}
		}
		// SELECT @dp_epsilon shows the ε the next batch will spend.
		cat := s.liveCatalog()
		s.initSessionTimeouts(sctx, sess, conn)
		// As in MySQL, the session value is the account's own limit.
		if limit, _ := s.userLimit(conn.User); limit > 0 {
			if err := sess.InitSessionVariable(sctx, "max_user_connections", int64(limit)); err != nil {
				s.log.Warn("setting @@max_user_connections", "err", err)
			}
		}
		if eps, ok := defaultEpsilon(cat, conn.User); ok {
			if err := sess.SetUserVariable(sctx, "dp_epsilon", eps, types.Float64); err != nil {
				s.log.Warn("setting @dp_epsilon", "err", err)
			}
		}
		return sess, nil
	}
}

// liveCatalog is the catalog in force: after reloads, Audit.Catalog's.
func (s *Server) liveCatalog() *catalog.Catalog {
	if s.cfg.Audit != nil && s.cfg.Audit.Catalog != nil {
		if cat := s.cfg.Audit.Catalog(); cat != nil {
			return cat
		}
	}
	return s.cfg.Catalog
}

// defaultEpsilon is the ε a user's batches spend when the session sets
// none: the user's default_epsilon, else the tables' default_per_query if
// they all agree. ok is false when it depends on the table.
func defaultEpsilon(cat *catalog.Catalog, user string) (float64, bool) {
	if u := cat.User(user); u == nil || u.Role != catalog.RoleAnalyst {
		return 0, false
	} else if u.DefaultEpsilon > 0 {
		return u.DefaultEpsilon, true
	}
	eps := 0.0
	for _, t := range cat.Tables {
		if eps != 0 && t.Budget.DefaultPerQuery != eps {
			return 0, false
		}
		eps = t.Budget.DefaultPerQuery
	}
	return eps, eps > 0
}

// trackConnections is a server.Option wrapping the handler: it knows the
// open connections, so that Close can close them, and enforces RequireTLS.
func (s *Server) trackConnections(e *sqle.Engine, sm *server.SessionManager, h mysql.Handler) (*sqle.Engine, *server.SessionManager, mysql.Handler) {
	s.handler = &connHandler{Handler: h, s: s}
	return e, sm, s.handler
}

type connHandler struct {
	mysql.Handler
	s *Server
}

// NewConnection registers a connection when vitess accepts it; GMS hears
// of it only once it is authenticated (authenticated, below). GMS's
// ConnectionClosed builds a whole session, under the session manager's
// lock, for a connection it has none for: done for every socket of a flood
// that never authenticates, it took a third of the server's CPU and held
// real logins back.
func (h *connHandler) NewConnection(c *mysql.Conn) {
	fc := frontConnOf(c)
	if fc != nil {
		fc.vconn.Store(c)
	}
	h.s.mu.Lock()
	closed := h.s.closed
	if !closed {
		h.s.conns[c.ConnectionID] = &connInfo{conn: c, since: time.Now()}
	}
	h.s.mu.Unlock()
	if fc == nil {
		h.Handler.NewConnection(c)
	}
	if closed {
		c.Close()
	}
}

// authenticated tells GMS of a connection that has just become a session
// (on the connection's goroutine, before vitess answers OK).
func (h *connHandler) authenticated(c *mysql.Conn) {
	if fc := frontConnOf(c); fc != nil && !fc.gmsKnown.Swap(true) {
		h.Handler.NewConnection(c)
	}
}

func (h *connHandler) ConnectionClosed(c *mysql.Conn) {
	h.s.mu.Lock()
	delete(h.s.conns, c.ConnectionID)
	h.s.mu.Unlock()
	if fc := frontConnOf(c); fc == nil || fc.gmsKnown.Load() {
		h.Handler.ConnectionClosed(c)
	}
}

// insecure enforces RequireTLS. vitess's RequireSecureTransport only sends
// the client an error packet and then carries on with the connection, so a
// client that ignores it would be served: here every command of a clear-text
// connection is refused and the connection closed.
func (h *connHandler) insecure(c *mysql.Conn) error {
	if !h.s.requireTLS || connTLS(c) {
		return nil
	}
	c.Close()
	return mysql.NewSQLError(mysql.ERAccessDeniedError, mysql.SSAccessDeniedError, "dpproxy requires TLS; connect with SSL/TLS")
}

func (h *connHandler) ComInitDB(c *mysql.Conn, schemaName string) error {
	if err := h.insecure(c); err != nil {
		return err
	}
	return h.Handler.ComInitDB(c, schemaName)
}

func (h *connHandler) ComQuery(ctx context.Context, c *mysql.Conn, query string, callback mysql.ResultSpoolFn) error {
	if err := h.insecure(c); err != nil {
		return err
	}
	return h.Handler.ComQuery(ctx, c, query, callback)
}

func (h *connHandler) ComMultiQuery(ctx context.Context, c *mysql.Conn, query string, callback mysql.ResultSpoolFn) (string, error) {
	if err := h.insecure(c); err != nil {
		return "", err
	}
	return h.Handler.ComMultiQuery(ctx, c, query, callback)
}

func (h *connHandler) ComPrepare(ctx context.Context, c *mysql.Conn, query string, prepare *mysql.PrepareData) ([]*querypb.Field, error) {
	if err := h.insecure(c); err != nil {
		return nil, err
	}
	return h.Handler.ComPrepare(ctx, c, query, prepare)
}

func (h *connHandler) ComStmtExecute(ctx context.Context, c *mysql.Conn, prepare *mysql.PrepareData, callback func(*sqltypes.Result) error) error {
	if err := h.insecure(c); err != nil {
		return err
	}
	return h.Handler.ComStmtExecute(ctx, c, prepare, callback)
}

func (h *connHandler) ComResetConnection(c *mysql.Conn) error {
	if err := h.insecure(c); err != nil {
		return err
	}
	return h.Handler.ComResetConnection(c)
}

// addUsers enables GMS's user table and adds the catalog's users with their
// mysql_native_password hashes. Each may SELECT from the catalog database
// and information_schema; setting session and user variables needs no grant.
// There is no root account: only catalog users can log in.
func addUsers(mdb *mysql_db.MySQLDb, cat *catalog.Catalog) error {
	mdb.SetEnabled(true)
	ed := mdb.Editor()
	defer ed.Close()
	for _, u := range cat.Users {
		if u.Name == "" {
			return errors.New("mysqlfront: a catalog user has no name")
		}
		if u.PasswordHash != "" && !validNativeHash(u.PasswordHash) {
			return fmt.Errorf("mysqlfront: user %s: password hash is not a mysql_native_password hash (\"*\" + 40 hex digits)", u.Name)
		}
		privs := mysql_db.NewPrivilegeSet()
		privs.AddDatabase(cat.Database, sql.PrivilegeType_Select)
		privs.AddDatabase("information_schema", sql.PrivilegeType_Select)
		auditGrants(privs, u)
		ed.PutUser(&mysql_db.User{
			User:                u.Name,
			Host:                "%",
			PrivilegeSet:        privs,
			Plugin:              string(mysql.MysqlNativePassword),
			AuthString:          strings.ToUpper(u.PasswordHash),
			PasswordLastChanged: time0,
			IsEphemeral:         true, // never persisted
		})
	}
	return nil
}

// gmsInit serialises the construction of GMS engines and servers.
var gmsInit sync.Mutex

// noFileAccess is the secure_file_priv directory: below /dev/null, so it can
// never be created.
var noFileAccess = filepath.Join(os.DevNull, "dpproxy-no-file-access")

// time0 is the password change time recorded for catalog users.
var time0 = time.Unix(1, 0).UTC()
