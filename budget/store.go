package budget

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/dpproxy/dpproxy/internal/sqlitefile"
	"github.com/dpproxy/dpproxy/internal/statedb"
)

// busyTimeout is how long an operation waits for another connection or
// process holding a lock on the ledger before it fails.
const busyTimeout = 10 * time.Second

// schemaVersion is stored in PRAGMA user_version.
const schemaVersion = 4

// Ledger is the privacy ledger: an append-only, hash-chained table in its own
// SQLite file, or in a PostgreSQL database shared by several proxies (see
// OpenDB). It is safe for concurrent use, and several Ledgers (in one
// process or several, on one host or several for PostgreSQL) may share a
// ledger: every write is one transaction that the database serialises
// (BEGIN IMMEDIATE in SQLite, the head row's lock in PostgreSQL).
type Ledger struct {
	path string // absolute; for PostgreSQL, the database's statedb.DB.Where
	// dialect is the SQL engine: the few statements that differ ask it
	// (postgres.go).
	dialect statedb.Dialect
	// db reads: deferred (snapshot) transactions, waiting up to busyTimeout
	// in SQLite's busy handler. In PostgreSQL it is the caller's pool, and
	// reads are REPEATABLE READ, READ ONLY transactions (one snapshot).
	db *sql.DB
	// wdb writes, on one connection: BEGIN IMMEDIATE, and no busy handler;
	// write retries by itself (see write). In PostgreSQL it is db: writes
	// are READ COMMITTED transactions that lock the head row first.
	wdb *sql.DB
	log *slog.Logger
	// wmu serialises this Ledger's writes: its own goroutines queue here
	// (honouring their contexts), then take flock against other Ledgers and
	// processes (in SQLite; in PostgreSQL the head row's lock). Close takes
	// it for good.
	wmu   chan struct{}
	flock *writerLock // nil in PostgreSQL
	// readOnly: opened by OpenReadOnly or OpenDBReadOnly; wdb and flock
	// are nil, and every write fails with errReadOnly before it touches
	// the file or database.
	readOnly bool

	closeOnce sync.Once
	closed    chan struct{}
	closeErr  error

	reuses *reuseQueue // group commit of KindReuse entries (reuse.go)
}

// scope keys the spent aggregates: see SpentRow for the convention. At
// most one of table and space is set; a scope with a space is kept in
// spent_spaces, every other in spent.
type scope struct{ user, table, space string }

const schema = `
CREATE TABLE IF NOT EXISTS entries (
	seq          INTEGER PRIMARY KEY,
	time         TEXT    NOT NULL,
	kind         TEXT    NOT NULL,
	user_name    TEXT    NOT NULL,
	conn_id      INTEGER NOT NULL,
	tables_json  TEXT    NOT NULL,
	mechanism    TEXT    NOT NULL,
	strategy     TEXT    NOT NULL,
	epsilon      REAL    NOT NULL,
	rho          REAL    NOT NULL,
	query_digest TEXT    NOT NULL,
	prev_hash    TEXT    NOT NULL,
	hash         TEXT    NOT NULL,
	unit_json    TEXT    NOT NULL DEFAULT '',
	delta        REAL    NOT NULL DEFAULT 0,
	spaces_json  TEXT    NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX IF NOT EXISTS entries_user ON entries (user_name, seq);
CREATE INDEX IF NOT EXISTS entries_time ON entries (time);
CREATE INDEX IF NOT EXISTS entries_kind ON entries (kind, seq);
CREATE TABLE IF NOT EXISTS spent (
	user_name  TEXT NOT NULL,
	table_name TEXT NOT NULL,
	epsilon    REAL NOT NULL,
	rho        REAL NOT NULL,
	delta      REAL NOT NULL DEFAULT 0,
	PRIMARY KEY (user_name, table_name)
) WITHOUT ROWID, STRICT;
CREATE TABLE IF NOT EXISTS spent_spaces (
	user_name  TEXT NOT NULL,
	space_name TEXT NOT NULL,
	epsilon    REAL NOT NULL,
	rho        REAL NOT NULL,
	delta      REAL NOT NULL,
	PRIMARY KEY (user_name, space_name)
) WITHOUT ROWID, STRICT;
CREATE TABLE IF NOT EXISTS head (
	id   INTEGER PRIMARY KEY CHECK (id = 1),
	seq  INTEGER NOT NULL,
	hash TEXT    NOT NULL
) STRICT;
`

// Open opens the ledger at path, creating the file and its schema if needed,
// and switching the file to WAL mode (a property of the file, kept by every
// later connection). Several processes may open the same file at once.
func Open(ctx context.Context, path string) (*Ledger, error) {
	if path == "" {
		return nil, errors.New("budget: open ledger: empty path")
	}
	uri, abs, err := sqlitefile.URI(path, "_pragma=synchronous(FULL)")
	if err != nil {
		return nil, fmt.Errorf("budget: open ledger %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", uri+fmt.Sprintf("&_pragma=busy_timeout(%d)", busyTimeout.Milliseconds()))
	if err != nil {
		return nil, fmt.Errorf("budget: open ledger %s: %w", abs, err)
	}
	wdb, err := sql.Open("sqlite", uri+"&_pragma=busy_timeout(0)&_txlock=immediate")
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("budget: open ledger %s: %w", abs, err)
	}
	db.SetMaxOpenConns(4)
	wdb.SetMaxOpenConns(1)
	flock, err := openWriterLock(abs)
	if err != nil {
		db.Close()
		wdb.Close()
		return nil, fmt.Errorf("budget: open ledger %s: %w", abs, err)
	}
	l := &Ledger{
		path:    abs,
		dialect: statedb.SQLite,
		db:      db,
		wdb:     wdb,
		log:     slog.Default().With("component", "budget", "ledger", abs),
		wmu:     make(chan struct{}, 1),
		flock:   flock,
		closed:  make(chan struct{}),
	}
	l.startReuses()
	if err := l.init(ctx); err != nil {
		l.Close()
		return nil, fmt.Errorf("budget: open ledger %s: %w", abs, err)
	}
	l.log.DebugContext(ctx, "ledger opened")
	return l, nil
}

// init checks the connection settings and, on a new file, switches it to WAL
// and creates the schema, under the writer lock so that concurrent openers
// do it once.
func (l *Ledger) init(ctx context.Context) error {
	for _, db := range []*sql.DB{l.db, l.wdb} {
		var sync int
		// The writer pool has no busy handler: retry while another opener
		// switches the file to WAL.
		if err := retryBusy(ctx, func() error {
			return db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync)
		}, isBusy, nil); err != nil {
			return fmt.Errorf("read synchronous: %w", err)
		}
		if sync < 2 {
			return fmt.Errorf("synchronous is %d, want 2 (FULL)", sync)
		}
	}
	ready, err := l.ready(ctx)
	if err != nil || ready {
		return err
	}
	return l.locked(ctx, func() error {
		// WAL is a property of the file, kept by every later connection.
		err := retryBusy(ctx, func() error {
			var mode string
			if err := l.wdb.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
				return err
			}
			if !strings.EqualFold(mode, "wal") {
				return fmt.Errorf("cannot switch to WAL: journal_mode is %q", mode)
			}
			return nil
		}, isBusy, nil)
		if err != nil {
			return fmt.Errorf("set WAL mode: %w", err)
		}
		return retryBusy(ctx, func() error {
			return l.tryWrite(ctx, func(tx *sql.Tx) error { return createSchema(ctx, tx) })
		}, isBusy, nil)
	})
}

// ready reports whether the file is in WAL mode with the current schema.
func (l *Ledger) ready(ctx context.Context) (bool, error) {
	var mode string
	if err := l.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return false, fmt.Errorf("read journal_mode: %w", err)
	}
	var v int
	if err := l.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return false, fmt.Errorf("read schema version: %w", err)
	}
	if v > schemaVersion {
		return false, fmt.Errorf("ledger schema version %d is newer than this program's %d", v, schemaVersion)
	}
	// The schema is written with its version, in one transaction.
	return strings.EqualFold(mode, "wal") && v == schemaVersion, nil
}

func createSchema(ctx context.Context, tx *sql.Tx) error {
	var v int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if v == schemaVersion {
		return nil
	}
	if _, err := tx.ExecContext(ctx, schema); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	// Version 2 adds the privacy unit of a charge (UnitBound) to ledgers
	// of version 1; their entries keep their hashes.
	var hasUnit int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM pragma_table_info('entries') WHERE name = 'unit_json'").Scan(&hasUnit); err != nil {
		return fmt.Errorf("read schema: %w", err)
	}
	if hasUnit == 0 {
		if _, err := tx.ExecContext(ctx, "ALTER TABLE entries ADD COLUMN unit_json TEXT NOT NULL DEFAULT ''"); err != nil {
			return fmt.Errorf("upgrade schema: %w", err)
		}
	}
	// Version 3 adds the δ a charge spends (Cost.Delta) to entries and to
	// the spent aggregate; older entries spent none and keep their hashes.
	// Version 4 adds the privacy unit spaces a charge spends in
	// (Charge.Spaces) and the spend of each space (spent_spaces). Older
	// entries name no space and keep their hashes: each of their tables
	// counts in the space the ledger maps it to (space.go), its own name
	// until MapSpaces records another, so spent_spaces starts as the
	// per-table spends.
	for _, tc := range [...][3]string{{"entries", "delta", "REAL NOT NULL DEFAULT 0"}, {"spent", "delta", "REAL NOT NULL DEFAULT 0"},
		{"entries", "spaces_json", "TEXT NOT NULL DEFAULT ''"}} {
		var has int
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM pragma_table_info('"+tc[0]+"') WHERE name = ?", tc[1]).Scan(&has); err != nil {
			return fmt.Errorf("read schema: %w", err)
		}
		if has == 0 {
			if _, err := tx.ExecContext(ctx, "ALTER TABLE "+tc[0]+" ADD COLUMN "+tc[1]+" "+tc[2]); err != nil {
				return fmt.Errorf("upgrade schema: %w", err)
			}
		}
	}
	if v > 0 && v < 4 {
		if err := rebuildSpaces(ctx, tx); err != nil {
			return fmt.Errorf("upgrade schema: %w", err)
		}
	}
	// The head row is created with the ledger, never recreated: a missing
	// head on a ledger with entries is for Verify to report.
	if _, err := tx.ExecContext(ctx, `INSERT INTO head (id, seq, hash)
		SELECT 1, 0, ? WHERE NOT EXISTS (SELECT 1 FROM head) AND NOT EXISTS (SELECT 1 FROM entries)`,
		genesisHash); err != nil {
		return fmt.Errorf("create head: %w", err)
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion)); err != nil {
		return fmt.Errorf("set schema version: %w", err)
	}
	return nil
}

// Path is the ledger file's absolute path; for a ledger in PostgreSQL, the
// database's host, port and name (statedb.DB.Where).
func (l *Ledger) Path() string { return l.path }

// Close writes the pending reuse entries (see RecordReuse), waits for
// writes in progress and closes the ledger's connections. Every entry
// appended before has then been committed. A ledger in PostgreSQL leaves
// the caller's statedb.DB open: the other state stores share it. Later
// calls return the first call's result.
func (l *Ledger) Close() error {
	l.closeOnce.Do(func() {
		l.stopReuses()      // pending reuse entries are written first
		l.wmu <- struct{}{} // held for good: no write starts after this
		close(l.closed)
		var errs []error
		if !l.pg() {
			errs = append(errs, l.db.Close())
			if !l.readOnly {
				errs = append(errs, l.wdb.Close(), l.flock.close())
			}
		}
		if err := errors.Join(errs...); err != nil {
			l.closeErr = fmt.Errorf("budget: close ledger: %w", err)
		}
	})
	return l.closeErr
}

// errClosed is returned by writes on a closed Ledger.
var errClosed = errors.New("ledger is closed")

// locked runs fn holding this Ledger's write slot and, in SQLite, the
// cross-process writer lock (see writerLock). In PostgreSQL the write
// transaction serialises itself on the head row (see lockHead).
func (l *Ledger) locked(ctx context.Context, fn func() error) error {
	if l.readOnly {
		return errReadOnly
	}
	select {
	case l.wmu <- struct{}{}:
	case <-l.closed:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	if l.flock == nil {
		defer func() { <-l.wmu }()
		return fn()
	}
	ok, err := l.flock.tryLock()
	if err == nil && !ok {
		err = l.waitFlock(ctx)
		if errors.Is(err, errAbandoned) {
			return ctx.Err() // the waiter gives the slot back
		}
	}
	if err != nil {
		<-l.wmu
		return err
	}
	defer func() {
		if err := l.flock.unlock(); err != nil {
			l.log.Warn("writer lock", "err", err)
		}
		<-l.wmu
	}()
	return fn()
}

var errAbandoned = errors.New("abandoned")

// waitFlock waits for the writer lock in the kernel. If ctx ends first, the
// waiting goroutine is left to take the lock, drop it and free the write
// slot, and errAbandoned is returned.
func (l *Ledger) waitFlock(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- l.flock.lock() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		go func() {
			if err := <-done; err == nil {
				if err := l.flock.unlock(); err != nil {
					l.log.Warn("writer lock", "err", err)
				}
			}
			<-l.wmu
		}()
		return errAbandoned
	}
}

// write runs fn in one BEGIN IMMEDIATE transaction, which holds the
// database's write lock from its start, so everything fn reads stays current
// until it commits: no read-then-write race across goroutines, connections
// or processes.
//
// Writers queue first on the writer lock (see writerLock). Should the
// database still be locked (by a writer that does not take it), write does
// not use SQLite's busy handler, whose sleeps grow to 100 ms; it rolls back
// and retries with short, jittered, growing sleeps for up to busyTimeout.
// Between tries it calls refuse (if not nil), which may end the wait with an
// error found without the lock: a refusal that a snapshot already justifies
// stands, because spends only grow.
//
// In PostgreSQL the transaction is READ COMMITTED and fn runs after
// lockHead has taken the head row FOR UPDATE, the one lock every writer of
// the ledger takes first; a transaction that loses a race anyway
// (statedb.IsRetryable) is run again in the same way.
func (l *Ledger) write(ctx context.Context, fn func(*sql.Tx) error, refuse func(context.Context) error) error {
	if l.pg() {
		inner := fn
		fn = func(tx *sql.Tx) error {
			if err := lockHead(ctx, tx); err != nil {
				return err
			}
			return inner(tx)
		}
	}
	return l.locked(ctx, func() error {
		return retryBusy(ctx, func() error { return l.tryWrite(ctx, fn) }, l.retryable, refuse)
	})
}

func (l *Ledger) tryWrite(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := l.wdb.BeginTx(ctx, l.writeTxOptions())
	if err != nil {
		return fmt.Errorf("begin write transaction: %w", err)
	}
	if err := fn(tx); err != nil {
		if rerr := tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
			l.log.WarnContext(ctx, "rollback failed", "err", rerr)
		}
		return err
	}
	// If COMMIT fails the driver rolls back: nothing was written.
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// retryBusy calls try until it returns something that busy does not
// report (SQLITE_BUSY, or a lost race in PostgreSQL), busyTimeout passes,
// or ctx ends; between tries it calls between (if not nil), whose error
// ends the wait.
func retryBusy(ctx context.Context, try func() error, busy func(error) bool, between func(context.Context) error) error {
	deadline := time.Now().Add(busyTimeout)
	sleep := 200 * time.Microsecond
	for {
		err := try()
		if !busy(err) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ledger locked by another connection for %v: %w", busyTimeout, err)
		}
		if between != nil {
			if err := between(ctx); err != nil {
				return err
			}
		}
		t := time.NewTimer(jitter(sleep))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		sleep = min(sleep*3/2, 20*time.Millisecond)
	}
}

// jitter returns a duration uniform in [d/2, d), so that waiters spread out.
func jitter(d time.Duration) time.Duration {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	half := uint64(d / 2)
	if half == 0 {
		return d
	}
	return time.Duration(half + binary.LittleEndian.Uint64(b[:])%half)
}

// IsDamaged reports whether err is SQLite's report of a damaged database
// file (SQLITE_CORRUPT or SQLITE_NOTADB), e.g. a ledger file cut short.
func IsDamaged(err error) bool {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	c := e.Code() & 0xff
	return c == sqlite3.SQLITE_CORRUPT || c == sqlite3.SQLITE_NOTADB
}

// isBusy reports whether err is SQLITE_BUSY (any extended code): another
// connection holds a lock that the operation needs.
func isBusy(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_BUSY
}

// read runs fn in one read transaction: a consistent snapshot (WAL in
// SQLite, REPEATABLE READ in PostgreSQL), which does not block writers.
func (l *Ledger) read(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := l.db.BeginTx(ctx, l.readTxOptions())
	if err != nil {
		return fmt.Errorf("begin read transaction: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only; nothing to undo
	return fn(tx)
}
