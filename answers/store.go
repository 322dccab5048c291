package answers

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/dpproxy/dpproxy/internal/sqlitefile"
)

// Store is a persistent map from batch keys to released answers, with
// claims on keys being answered. It is safe for concurrent use, and
// several processes may share one SQLite file (Open) or one PostgreSQL
// database (OpenDB).
type Store struct {
	// db reads, and writes claims (SQLite: synchronous=NORMAL, a claim
	// lost in a power failure costs at most a second measurement, whose
	// answer Put reconciles). wdb writes answers (SQLite:
	// synchronous=FULL, durable before release). On PostgreSQL both are
	// the one pool the caller opened.
	db, wdb *sql.DB
	// SQLite only: this Store's name in the pending table, and its
	// liveness for other processes.
	owner string
	lock  *ownerLock
	// pg holds the claims' connections on PostgreSQL; nil on SQLite.
	pg  *pgClaims
	log *slog.Logger

	mu     sync.Mutex
	claims map[string]*claim // keys this Store has claimed and not yet Put or Released
	closed bool
}

// leaseTTL is how long a claim holds without renewal; the owner renews it
// every leaseTTL/3 while it works.
const leaseTTL = 30 * time.Second

// answersTable is the stored answers' table, %s the byte string type.
const answersTable = `
CREATE TABLE IF NOT EXISTS answers (
	key      TEXT PRIMARY KEY,
	results  %s NOT NULL,
	released TEXT NOT NULL
);`

// schema is the SQLite file's: the answers, and the claims (pending),
// which on PostgreSQL are advisory locks instead (pg.go).
var schema = fmt.Sprintf(answersTable, "BLOB") + `
CREATE TABLE IF NOT EXISTS pending (
	key     TEXT PRIMARY KEY,
	owner   TEXT NOT NULL,
	expires INTEGER NOT NULL -- Unix milliseconds
);`

// Open opens (creating if needed) the store at path.
func Open(ctx context.Context, path string) (*Store, error) {
	uri, abs, err := sqlitefile.URI(path, "_pragma=journal_mode(WAL)", "_pragma=busy_timeout(10000)", "_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("answers: open %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", uri+"&_pragma=synchronous(NORMAL)")
	if err != nil {
		return nil, fmt.Errorf("answers: open %s: %w", path, err)
	}
	wdb, err := sql.Open("sqlite", uri+"&_pragma=synchronous(FULL)")
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("answers: open %s: %w", path, err)
	}
	if _, err := db.ExecContext(ctx, schema); err != nil {
		db.Close()
		wdb.Close()
		return nil, fmt.Errorf("answers: open %s: %w", path, err)
	}
	var b [16]byte
	rand.Read(b[:])
	s := &Store{db: db, wdb: wdb, owner: hex.EncodeToString(b[:]), claims: map[string]*claim{},
		log: slog.Default().With("component", "answers", "path", abs)}
	if s.lock, err = openOwnerLock(abs+"-owners", s.owner); err != nil {
		db.Close()
		wdb.Close()
		return nil, fmt.Errorf("answers: open %s: %w", path, err)
	}
	return s, nil
}

// Close ends this Store's claims (others may take their keys at once) and
// closes the file. A Store opened with OpenDB leaves the database open:
// its opener closes it.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	claims := s.claims
	s.claims = map[string]*claim{}
	s.mu.Unlock()
	for _, c := range claims {
		c.end()
	}
	if s.pg != nil {
		return nil
	}
	_, err := s.db.Exec("DELETE FROM pending WHERE owner = ?", s.owner)
	return errors.Join(err, s.db.Close(), s.wdb.Close(), s.lock.close())
}

// Get returns the answer stored under key; ok is false when there is none.
func (s *Store) Get(ctx context.Context, key string) (results []byte, ok bool, err error) {
	err = s.db.QueryRowContext(ctx, "SELECT results FROM answers WHERE key = ?", key).Scan(&results)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("answers: get: %w", err)
	}
	return results, true, nil
}

// Put stores results under key unless an answer is already stored there,
// ends this Store's claim on key if it has one, and returns the answer
// stored under key — the first one stored, whichever process stored it,
// which is the one to release. It is durable (SQLite: synchronous=FULL) when
// Put returns.
//
// The claim ends after the answer is committed (or Put has failed), so
// that on PostgreSQL whoever takes the key's lock next finds the answer.
func (s *Store) Put(ctx context.Context, key string, results []byte) (stored []byte, err error) {
	if c := s.takeClaim(key); c != nil {
		defer c.end()
	}
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("answers: put: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit, a no-op
	if _, err := tx.ExecContext(ctx, "INSERT INTO answers (key, results, released) VALUES (?, ?, ?) ON CONFLICT (key) DO NOTHING",
		key, results, time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		return nil, fmt.Errorf("answers: put: %w", err)
	}
	if s.pg == nil {
		if _, err := tx.ExecContext(ctx, "DELETE FROM pending WHERE key = ? AND owner = ?", key, s.owner); err != nil {
			return nil, fmt.Errorf("answers: put: %w", err)
		}
	}
	if err := tx.QueryRowContext(ctx, "SELECT results FROM answers WHERE key = ?", key).Scan(&stored); err != nil {
		return nil, fmt.Errorf("answers: put: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("answers: put: %w", err)
	}
	return stored, nil
}
