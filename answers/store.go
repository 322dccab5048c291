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
// several processes may share one file.
type Store struct {
	// db reads, and writes claims (synchronous=NORMAL: a claim lost in a
	// power failure costs at most a second measurement, whose answer Put
	// reconciles). wdb writes answers (synchronous=FULL: durable before
	// release).
	db, wdb *sql.DB
	owner   string
	lock    *ownerLock // liveness of this Store for other processes
	log     *slog.Logger

	mu     sync.Mutex
	claims map[string]*claim // keys this Store has claimed and not yet Put or Released
	closed bool
}

// leaseTTL is how long a claim holds without renewal; the owner renews it
// every leaseTTL/3 while it works.
const leaseTTL = 30 * time.Second

const schema = `
CREATE TABLE IF NOT EXISTS answers (
	key      TEXT PRIMARY KEY,
	results  BLOB NOT NULL,
	released TEXT NOT NULL
);
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
// closes the file.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	claims := s.claims
	s.claims = map[string]*claim{}
	s.mu.Unlock()
	for _, c := range claims {
		c.end()
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
// which is the one to release. It is durable (synchronous=FULL) when Put
// returns.
func (s *Store) Put(ctx context.Context, key string, results []byte) (stored []byte, err error) {
	s.endClaim(key)
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("answers: put: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit, a no-op
	if _, err := tx.ExecContext(ctx, "INSERT INTO answers (key, results, released) VALUES (?, ?, ?) ON CONFLICT (key) DO NOTHING",
		key, results, time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		return nil, fmt.Errorf("answers: put: %w", err)
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM pending WHERE key = ? AND owner = ?", key, s.owner); err != nil {
		return nil, fmt.Errorf("answers: put: %w", err)
	}
	if err := tx.QueryRowContext(ctx, "SELECT results FROM answers WHERE key = ?", key).Scan(&stored); err != nil {
		return nil, fmt.Errorf("answers: put: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("answers: put: %w", err)
	}
	return stored, nil
}
