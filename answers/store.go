// Package answers persists released noisy answers in their own SQLite
// file, so that a repeated batch is re-released for free across proxy
// restarts and across processes sharing a data directory.
//
// Everything stored here has already left the proxy, paid for in the
// ledger: re-releasing it is post-processing and costs nothing. The store
// holds only released values, never data; it is keyed by an opaque string
// (the engine's canonical batch key) and stores opaque bytes (the engine's
// encoding of its result sets).
package answers

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"
)

// Store is a persistent map from batch keys to released answers. It is
// safe for concurrent use, and several processes may share one file.
type Store struct {
	db *sql.DB
}

// Open opens (creating if needed) the store at path.
func Open(ctx context.Context, path string) (*Store, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return nil, fmt.Errorf("answers: open %s: %w", path, err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS answers (
		key      TEXT PRIMARY KEY,
		results  BLOB NOT NULL,
		released TEXT NOT NULL
	)`); err != nil {
		db.Close()
		return nil, fmt.Errorf("answers: open %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// Close closes the store.
func (s *Store) Close() error { return s.db.Close() }

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

// Put stores results under key unless an answer is already stored there:
// the first release is the one every later repeat shows, whichever process
// made it.
func (s *Store) Put(ctx context.Context, key string, results []byte) error {
	_, err := s.db.ExecContext(ctx, "INSERT INTO answers (key, results, released) VALUES (?, ?, ?) ON CONFLICT (key) DO NOTHING",
		key, results, time.Now().UTC().Format(time.RFC3339Nano))
	if err != nil {
		return fmt.Errorf("answers: put: %w", err)
	}
	return nil
}
