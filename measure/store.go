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
	"github.com/dpproxy/dpproxy/internal/statedb"
)

// Store keeps measurements in a SQLite file (Open) or a PostgreSQL state
// database (OpenDB), at most MaxBytes of encoded measurements: Put forgets
// the oldest past the bound. It is safe for concurrent use, and several
// processes may share one file or database.
type Store struct {
	db       *sql.DB
	maxBytes int64
	// pg is set on PostgreSQL, whose database the Store does not own
	// (Close leaves it open) and whose writers serialize (lockWriters).
	pg bool

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
	bytes int64 // the measurements' cacheBytes
}

// cacheBytes is what the cache charges for m, encoded in stored bytes:
// the larger of its encoding and its decoded size. A factor over cells
// that is mostly zero is stored as its non-zero entries, so a day among
// five years of hours is hundreds of bytes stored and 350 KB decoded:
// charged for its encoding alone, 64 MB of such records would hold
// gigabytes in memory.
func cacheBytes(m *Measurement, stored int64) int64 {
	n := int64(len(m.Answers)) * 8
	for j := range m.Factors {
		n += int64(len(m.Factors[j])) * 8
		if m.InClassForm(j) {
			n += int64(len(m.Classes[j])) * 4
		}
	}
	return max(stored, n)
}

// DefaultMaxBytes bounds a store whose catalog sets no cache.measurements.
const DefaultMaxBytes = 256 << 20

// schema is the measurements' table and the key sets' (keys.go), in the
// column types of a dialect: %[1]s an ever-increasing id, %[2]s a 64-bit
// integer, %[3]s a byte string. Ids are never reused, in both dialects
// (AUTOINCREMENT, an identity column), so Load reads new measurements as
// those with an id past the last it read.
const schema = `
CREATE TABLE IF NOT EXISTS measurements (
	id         %[1]s,
	table_name TEXT NOT NULL,
	def        TEXT NOT NULL,
	version    TEXT NOT NULL,
	ledger_seq %[2]s NOT NULL,
	bytes      %[2]s NOT NULL,
	body       %[3]s NOT NULL
);
CREATE INDEX IF NOT EXISTS measurements_key ON measurements (table_name, def, version);`

// schemaFor is schema, keySchema and replaySchema in the dialect's column types.
func schemaFor(d statedb.Dialect) string {
	if d == statedb.Postgres {
		return fmt.Sprintf(schema+keySchema+replaySchema, "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", "BIGINT", "BYTEA")
	}
	return fmt.Sprintf(schema+keySchema+replaySchema, "INTEGER PRIMARY KEY AUTOINCREMENT", "INTEGER", "BLOB")
}

// writersLock names the advisory lock that serializes the writers of a
// PostgreSQL store, as BEGIN IMMEDIATE does a SQLite file's: then ids
// are committed in increasing order, so a Load that has read up to id n
// never misses a measurement with a smaller id committed later, and two
// Puts never both forget the same oldest measurements to make room.
var writersLock = statedb.LockKey("dpproxy measurements", "writers")

// lockWriters takes the writers' lock in tx on PostgreSQL (until tx ends);
// on SQLite, tx holds the file's write lock already.
func (s *Store) lockWriters(ctx context.Context, tx *sql.Tx) error {
	if !s.pg {
		return nil
	}
	_, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(?)", writersLock)
	return err
}

// OpenDB opens the store in the PostgreSQL state database db (creating
// its tables if needed), which every proxy pointed at it shares. maxBytes
// ≤ 0 means DefaultMaxBytes. Close leaves db open: its opener closes it.
func OpenDB(ctx context.Context, db *statedb.DB, maxBytes int64) (*Store, error) {
	if db.Dialect != statedb.Postgres {
		return nil, fmt.Errorf("measure: open %s: OpenDB takes a PostgreSQL database; SQLite files open with Open", db.Where)
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if err := statedb.CreateSchema(ctx, db, "measurements", schemaFor(statedb.Postgres)); err != nil {
		return nil, fmt.Errorf("measure: %w", err)
	}
	return &Store{db: db.DB, maxBytes: maxBytes, pg: true, cache: cache.New[string, *cached](min(maxBytes, maxCacheBytes))}, nil
}

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
	if _, err := db.ExecContext(ctx, schemaFor(statedb.SQLite)); err != nil {
		db.Close()
		return nil, fmt.Errorf("measure: open %s: %w", path, err)
	}
	return &Store{db: db, maxBytes: maxBytes, cache: cache.New[string, *cached](min(maxBytes, maxCacheBytes))}, nil
}

// Close closes the file; a Store opened with OpenDB leaves the database
// open.
func (s *Store) Close() error {
	if s.pg {
		return nil
	}
	return s.db.Close()
}

// Put stores ms (setting their IDs) and forgets the oldest measurements
// while the store holds more than its bound. A measurement larger than the
// bound alone is not stored (its ID stays 0).
func (s *Store) Put(ctx context.Context, ms []*Measurement) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("measure: put: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit, a no-op
	if err := s.lockWriters(ctx, tx); err != nil {
		return fmt.Errorf("measure: put: %w", err)
	}
	sizes := make([]int64, len(ms)) // each stored encoding's bytes
	for i, m := range ms {
		if err := m.Valid(); err != nil {
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
		// RETURNING, not LastInsertId, which pgx does not have.
		if err := tx.QueryRowContext(ctx, "INSERT INTO measurements (table_name, def, version, ledger_seq, bytes, body) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
			m.Table, m.Def, m.Version, m.LedgerSeq, len(body), body).Scan(&m.ID); err != nil {
			return fmt.Errorf("measure: put: %w", err)
		}
	}
	if err := s.forgetOldest(ctx, tx, func(id int64) {
		for _, m := range ms {
			if m.ID == id {
				m.ID = 0
			}
		}
	}); err != nil {
		return fmt.Errorf("measure: put: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("measure: put: %w", err)
	}
	s.remember(ctx, ms, sizes)
	return nil
}

// forgetOldest deletes the oldest measurements while the store holds more
// than its bound, telling forgot each id it deletes.
func (s *Store) forgetOldest(ctx context.Context, tx *sql.Tx, forgot func(id int64)) error {
	var total int64
	if err := tx.QueryRowContext(ctx, "SELECT COALESCE(SUM(bytes), 0) FROM measurements").Scan(&total); err != nil {
		return err
	}
	for total > s.maxBytes {
		var id, n int64
		if err := tx.QueryRowContext(ctx, "SELECT id, bytes FROM measurements ORDER BY id LIMIT 1").Scan(&id, &n); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM measurements WHERE id = ?", id); err != nil {
			return err
		}
		total -= n
		forgot(id)
	}
	return nil
}

// remember adds what Put stored to the cache of Load, so that a long
// column's measurement (thousands of cells per factor row) is not decoded
// back from JSON by the next request. It adds a measurement only when the
// cache holds every earlier one of its table definition and version (no
// other writer put one in between); otherwise Load reads it as before.
// The cache keeps a copy of the measurement (sharing its factors, which
// no one writes in place): the caller may go on using its measurement.
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
		n := c.bytes + cacheBytes(m, sizes[i])
		if err != nil || between != 0 || n > s.cache.Limit() {
			continue
		}
		s.cache.Put(key, &cached{ms: append(append([]*Measurement(nil), c.ms...), m.clone()), last: m.ID, bytes: n}, n)
	}
}

// clone is a copy of m that shares its factors and class maps: those are
// never written in place once made (a long column's factor can be
// hundreds of megabytes over cells), the rest may be.
func (m *Measurement) clone() *Measurement {
	out := *m
	out.Columns = append([]Column(nil), m.Columns...)
	out.Factors = append([][]float64(nil), m.Factors...)
	out.Classes = append([]ClassMap(nil), m.Classes...)
	out.Rows = append([]int(nil), m.Rows...)
	out.Answers = append([]float64(nil), m.Answers...)
	return &out
}

// decodeStored is the measurement stored under id as body, checked.
func decodeStored(id int64, body []byte) (*Measurement, error) {
	m := &Measurement{}
	if err := json.Unmarshal(body, m); err != nil {
		return nil, err
	}
	m.ID = id
	if err := m.Valid(); err != nil {
		return nil, err
	}
	return m, nil
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
		m, err := decodeStored(id, body)
		if err != nil {
			return nil, fmt.Errorf("measure: load %d: %w", id, err)
		}
		fresh = append(fresh, m)
		last, added = id, added+cacheBytes(m, n)
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
