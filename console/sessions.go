package console

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dpproxy/dpproxy/internal/statedb"
)

// sessionStore keeps the browser sessions: in this process's memory
// (sessions, the default) or in the state database that every proxy of a
// deployment shares (sqlSessions, Config.SessionDB), where a login
// survives a restart and is valid on every console behind a load balancer,
// and a logout on one ends it on all. Each store owns the sessions' lifetime
// and reads the Server's clock.
type sessionStore interface {
	// Start begins a session for user and returns its new random token.
	Start(ctx context.Context, user string) (token string, err error)
	// Get returns the live session under token; ok is false when there is
	// none or it has expired.
	Get(ctx context.Context, token string) (s session, ok bool, err error)
	// End ends the session under token, if there is one.
	End(ctx context.Context, token string) error
}

type session struct {
	user    string
	csrf    string
	expires time.Time
}

// sessions keeps sessions in memory, by token.
type sessions struct {
	ttl time.Duration
	now func() time.Time
	mu  sync.Mutex
	m   map[string]session
}

func newSessions(ttl time.Duration, now func() time.Time) *sessions {
	return &sessions{ttl: ttl, now: now, m: map[string]session{}}
}

func (ss *sessions) Start(_ context.Context, user string) (string, error) { return ss.start(user), nil }
func (ss *sessions) Get(_ context.Context, tok string) (session, bool, error) {
	s, ok := ss.get(tok)
	return s, ok, nil
}
func (ss *sessions) End(_ context.Context, tok string) error { ss.end(tok); return nil }

func (ss *sessions) start(user string) string {
	tok := randomToken()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	now := ss.now()
	for k, v := range ss.m { // drop expired sessions now and then
		if now.After(v.expires) {
			delete(ss.m, k)
		}
	}
	ss.m[tok] = session{user: user, csrf: randomToken(), expires: now.Add(ss.ttl)}
	return tok
}

func (ss *sessions) get(tok string) (session, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	v, ok := ss.m[tok]
	if !ok {
		return session{}, false
	}
	if ss.now().After(v.expires) {
		delete(ss.m, tok)
		return session{}, false
	}
	return v, true
}

func (ss *sessions) end(tok string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.m, tok)
}

// sqlSessions keeps sessions in the console_sessions table of a state
// database (SQLite or PostgreSQL: the SQL is the same). A row holds the
// SHA-256 of its token, never the token itself, so that whoever reads the
// table (a backup, a replica, a database user) cannot log in with it; the
// session's CSRF token is stored as it is, being of no use without the
// session's. Expired rows are deleted at each login, as the memory store
// does.
type sqlSessions struct {
	db  *statedb.DB
	ttl time.Duration
	now func() time.Time

	// The table is created on first use, with that request's context; a
	// failure is retried by the next request.
	mu    sync.Mutex
	ready bool
}

const sessionSchema = `
CREATE TABLE IF NOT EXISTS console_sessions (
	token_sha256 TEXT PRIMARY KEY,
	user_name    TEXT NOT NULL,
	csrf         TEXT NOT NULL,
	expires      BIGINT NOT NULL -- Unix milliseconds
);
CREATE INDEX IF NOT EXISTS console_sessions_expires ON console_sessions (expires);`

func newSQLSessions(db *statedb.DB, ttl time.Duration, now func() time.Time) *sqlSessions {
	return &sqlSessions{db: db, ttl: ttl, now: now}
}

func (ss *sqlSessions) ensure(ctx context.Context) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.ready {
		return nil
	}
	if err := statedb.CreateSchema(ctx, ss.db, "console sessions", sessionSchema); err != nil {
		return fmt.Errorf("console sessions: %w", err)
	}
	ss.ready = true
	return nil
}

func tokenDigest(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

func (ss *sqlSessions) Start(ctx context.Context, user string) (string, error) {
	if err := ss.ensure(ctx); err != nil {
		return "", err
	}
	tok, now := randomToken(), ss.now()
	if _, err := ss.db.ExecContext(ctx, "DELETE FROM console_sessions WHERE expires < ?", now.UnixMilli()); err != nil {
		return "", fmt.Errorf("console sessions: sweep in %s: %w", ss.db.Where, err)
	}
	if _, err := ss.db.ExecContext(ctx, "INSERT INTO console_sessions (token_sha256, user_name, csrf, expires) VALUES (?, ?, ?, ?)",
		tokenDigest(tok), user, randomToken(), now.Add(ss.ttl).UnixMilli()); err != nil {
		return "", fmt.Errorf("console sessions: start in %s: %w", ss.db.Where, err)
	}
	return tok, nil
}

func (ss *sqlSessions) Get(ctx context.Context, tok string) (session, bool, error) {
	if err := ss.ensure(ctx); err != nil {
		return session{}, false, err
	}
	var s session
	var expires int64
	err := ss.db.QueryRowContext(ctx, "SELECT user_name, csrf, expires FROM console_sessions WHERE token_sha256 = ?", tokenDigest(tok)).
		Scan(&s.user, &s.csrf, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return session{}, false, nil
	}
	if err != nil {
		return session{}, false, fmt.Errorf("console sessions: read in %s: %w", ss.db.Where, err)
	}
	s.expires = time.UnixMilli(expires)
	if ss.now().After(s.expires) {
		return session{}, false, ss.End(ctx, tok)
	}
	return s, true, nil
}

func (ss *sqlSessions) End(ctx context.Context, tok string) error {
	if err := ss.ensure(ctx); err != nil {
		return err
	}
	if _, err := ss.db.ExecContext(ctx, "DELETE FROM console_sessions WHERE token_sha256 = ?", tokenDigest(tok)); err != nil {
		return fmt.Errorf("console sessions: end in %s: %w", ss.db.Where, err)
	}
	return nil
}
