package measure

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/dpproxy/dpproxy/internal/cache"
	"github.com/dpproxy/dpproxy/internal/sqlitefile"
)

// Store keeps measurements in a SQLite file, at most MaxBytes of encoded
// measurements: Put forgets the oldest past the bound. It is safe for
// concurrent use, and several processes may share one file.
type Store struct {
	db       *sql.DB
	maxBytes int64

	// cache keeps decoded measurements per key, so a batch reads only the
	// measurements stored since the last; at most maxBytes of encodings
	// (or maxCacheBytes), least recently used keys first. Measurements
	// another process forgot may stay here: they remain valid measurements
	// of that version. mu orders the reads and writes of one key's entry.
	mu    sync.Mutex
	cache *cache.LRU[string, *cached]
}

// maxCacheBytes bounds the decoded measurements kept in memory.
const maxCacheBytes = 64 << 20

type cached struct {
	ms    []*Measurement
	last  int64 // the largest ID read
	bytes int64 // the encodings' size
}

// DefaultMaxBytes bounds a store whose catalog sets no cache.measurements.
const DefaultMaxBytes = 256 << 20

const schema = `
CREATE TABLE IF NOT EXISTS measurements (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	table_name TEXT NOT NULL,
	def        TEXT NOT NULL,
	version    TEXT NOT NULL,
	ledger_seq INTEGER NOT NULL,
	bytes      INTEGER NOT NULL,
	body       BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS measurements_key ON measurements (table_name, def, version);`

// Open opens (creating if needed) the store at path; path "" keeps the
// measurements in memory for the life of the Store. maxBytes ≤ 0 means
// DefaultMaxBytes.
func Open(ctx context.Context, path string, maxBytes int64) (*Store, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	uri := "file::memory:"
	if path != "" {
		var err error
		if uri, _, err = sqlitefile.URI(path, "_pragma=journal_mode(WAL)", "_pragma=busy_timeout(10000)", "_pragma=synchronous(NORMAL)", "_txlock=immediate"); err != nil {
			return nil, fmt.Errorf("measure: open %s: %w", path, err)
		}
	}
	db, err := sql.Open("sqlite", uri)
	if err != nil {
		return nil, fmt.Errorf("measure: open %s: %w", path, err)
	}
	if path == "" {
		db.SetMaxOpenConns(1) // one in-memory database, not one per connection
	}
	if _, err := db.ExecContext(ctx, schema+keySchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("measure: open %s: %w", path, err)
	}
	return &Store{db: db, maxBytes: maxBytes, cache: cache.New[string, *cached](min(maxBytes, maxCacheBytes))}, nil
}

// Close closes the file.
func (s *Store) Close() error { return s.db.Close() }

// Put stores ms (setting their IDs) and forgets the oldest measurements
// while the store holds more than its bound. A measurement larger than the
// bound alone is not stored (its ID stays 0).
func (s *Store) Put(ctx context.Context, ms []*Measurement) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("measure: put: %w", err)
	}
	defer tx.Rollback()             //nolint:errcheck // after Commit, a no-op
	sizes := make([]int64, len(ms)) // each stored encoding's bytes
	for i, m := range ms {
		if err := m.Check(); err != nil {
			return err
		}
		if m.Time.IsZero() {
			m.Time = time.Now().UTC()
		}
		m.ID = 0
		body, err := json.Marshal(m)
		if err != nil {
			return fmt.Errorf("measure: put: %w", err)
		}
		if int64(len(body)) > s.maxBytes {
			continue
		}
		sizes[i] = int64(len(body))
		res, err := tx.ExecContext(ctx, "INSERT INTO measurements (table_name, def, version, ledger_seq, bytes, body) VALUES (?, ?, ?, ?, ?, ?)",
			m.Table, m.Def, m.Version, m.LedgerSeq, len(body), body)
		if err != nil {
			return fmt.Errorf("measure: put: %w", err)
		}
		if m.ID, err = res.LastInsertId(); err != nil {
			return fmt.Errorf("measure: put: %w", err)
		}
	}
	// Forget the oldest past the bound.
	var total int64
	if err := tx.QueryRowContext(ctx, "SELECT COALESCE(SUM(bytes), 0) FROM measurements").Scan(&total); err != nil {
		return fmt.Errorf("measure: put: %w", err)
	}
	for total > s.maxBytes {
		var id, n int64
		if err := tx.QueryRowContext(ctx, "SELECT id, bytes FROM measurements ORDER BY id LIMIT 1").Scan(&id, &n); err != nil {
			return fmt.Errorf("measure: put: %w", err)
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM measurements WHERE id = ?", id); err != nil {
			return fmt.Errorf("measure: put: %w", err)
		}
		total -= n
		for _, m := range ms {
			if m.ID == id {
				m.ID = 0
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("measure: put: %w", err)
	}
	s.remember(ctx, ms, sizes)
	return nil
}

// remember adds what Put stored to the cache of Load, so that a long
// column's measurement (thousands of cells per factor row) is not decoded
// back from JSON by the next request. It adds a measurement only when the
// cache holds every earlier one of its table definition and version (no
// other writer put one in between); otherwise Load reads it as before.
// The cache keeps a copy: the caller may go on using its measurement.
func (s *Store) remember(ctx context.Context, ms []*Measurement, sizes []int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, m := range ms {
		if m.ID == 0 {
			continue
		}
		key := m.Table + "\x00" + m.Def + "\x00" + m.Version
		c, _ := s.cache.Get(key)
		if c == nil || m.ID <= c.last {
			continue
		}
		var between int
		err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM measurements WHERE table_name = ? AND def = ? AND version = ? AND id > ? AND id < ?",
			m.Table, m.Def, m.Version, c.last, m.ID).Scan(&between)
		n := c.bytes + sizes[i]
		if err != nil || between != 0 || n > s.cache.Limit() {
			continue
		}
		s.cache.Put(key, &cached{ms: append(append([]*Measurement(nil), c.ms...), m.clone()), last: m.ID, bytes: n}, n)
	}
}

// clone is a deep copy of m.
func (m *Measurement) clone() *Measurement {
	out := *m
	out.Columns = append([]Column(nil), m.Columns...)
	out.Factors = make([][]float64, len(m.Factors))
	for j, f := range m.Factors {
		if f != nil {
			out.Factors[j] = append([]float64(nil), f...)
		}
	}
	out.Rows = append([]int(nil), m.Rows...)
	out.Answers = append([]float64(nil), m.Answers...)
	return &out
}

// Load returns the measurements of one table definition and data
// version, oldest first. The measurements are shared: callers must not
// modify them.
func (s *Store) Load(ctx context.Context, table, def, version string) ([]*Measurement, error) {
	key := table + "\x00" + def + "\x00" + version
	s.mu.Lock()
	defer s.mu.Unlock()
	c, _ := s.cache.Get(key)
	if c == nil {
		c = &cached{}
	}
	rows, err := s.db.QueryContext(ctx, "SELECT id, bytes, body FROM measurements WHERE table_name = ? AND def = ? AND version = ? AND id > ? ORDER BY id", table, def, version, c.last)
	if err != nil {
		return nil, fmt.Errorf("measure: load: %w", err)
	}
	defer rows.Close()
	var added int64
	fresh := append([]*Measurement(nil), c.ms...)
	last := c.last
	for rows.Next() {
		var id, n int64
		var body []byte
		if err := rows.Scan(&id, &n, &body); err != nil {
			return nil, fmt.Errorf("measure: load: %w", err)
		}
		m := &Measurement{}
		if err := json.Unmarshal(body, m); err != nil {
			return nil, fmt.Errorf("measure: load %d: %w", id, err)
		}
		m.ID = id
		if err := m.Check(); err != nil {
			return nil, fmt.Errorf("measure: load %d: %w", id, err)
		}
		fresh = append(fresh, m)
		last, added = id, added+n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("measure: load: %w", err)
	}
	s.cache.Put(key, &cached{ms: fresh, last: last, bytes: c.bytes + added}, c.bytes+added)
	return fresh, nil
}

// Bytes is the size of the stored measurements' encodings.
func (s *Store) Bytes(ctx context.Context) (int64, error) {
	var total int64
	err := s.db.QueryRowContext(ctx, "SELECT COALESCE(SUM(bytes), 0) FROM measurements").Scan(&total)
	return total, err
}
