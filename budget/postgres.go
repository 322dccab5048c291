package budget

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"

	"github.com/dpproxy/dpproxy/internal/statedb"
)

// The ledger in PostgreSQL (see "PostgreSQL" in doc.go): the same tables,
// under the same names, as in a SQLite ledger file, and the same Go code
// over them. What differs between the two engines is kept here: the
// column types, where the schema version is kept, how a writer
// serialises, which errors are worth a retry and the few functions whose
// names differ.

// pgSchema is schema in PostgreSQL's types. Every text column sorts and
// compares by bytes (COLLATE "C"), as SQLite's BINARY does, so that times
// (fixed-width text, see timeLayout), names and pages order the same
// whatever the database's locale. DOUBLE PRECISION keeps a float64's bits
// (pgx moves it in binary), BIGINT an int64: an entry reads back exactly
// as written, so its hash verifies. The schema version is kept in
// ledger_schema, where a SQLite file keeps it in PRAGMA user_version.
var pgSchema = []string{
	`CREATE TABLE IF NOT EXISTS entries (
	seq          BIGINT PRIMARY KEY,
	time         TEXT COLLATE "C" NOT NULL,
	kind         TEXT COLLATE "C" NOT NULL,
	user_name    TEXT COLLATE "C" NOT NULL,
	conn_id      BIGINT NOT NULL,
	tables_json  TEXT COLLATE "C" NOT NULL,
	mechanism    TEXT COLLATE "C" NOT NULL,
	strategy     TEXT COLLATE "C" NOT NULL,
	epsilon      DOUBLE PRECISION NOT NULL,
	rho          DOUBLE PRECISION NOT NULL,
	query_digest TEXT COLLATE "C" NOT NULL,
	prev_hash    TEXT COLLATE "C" NOT NULL,
	hash         TEXT COLLATE "C" NOT NULL,
	unit_json    TEXT COLLATE "C" NOT NULL DEFAULT '',
	delta        DOUBLE PRECISION NOT NULL DEFAULT 0,
	spaces_json  TEXT COLLATE "C" NOT NULL DEFAULT ''
)`,
	`CREATE INDEX IF NOT EXISTS entries_user ON entries (user_name, seq)`,
	`CREATE INDEX IF NOT EXISTS entries_time ON entries (time)`,
	`CREATE INDEX IF NOT EXISTS entries_kind ON entries (kind, seq)`,
	`CREATE TABLE IF NOT EXISTS spent (
	user_name  TEXT COLLATE "C" NOT NULL,
	table_name TEXT COLLATE "C" NOT NULL,
	epsilon    DOUBLE PRECISION NOT NULL,
	rho        DOUBLE PRECISION NOT NULL,
	delta      DOUBLE PRECISION NOT NULL DEFAULT 0,
	PRIMARY KEY (user_name, table_name)
)`,
	`CREATE TABLE IF NOT EXISTS spent_spaces (
	user_name  TEXT COLLATE "C" NOT NULL,
	space_name TEXT COLLATE "C" NOT NULL,
	epsilon    DOUBLE PRECISION NOT NULL,
	rho        DOUBLE PRECISION NOT NULL,
	delta      DOUBLE PRECISION NOT NULL,
	PRIMARY KEY (user_name, space_name)
)`,
	`CREATE TABLE IF NOT EXISTS head (
	id   INTEGER PRIMARY KEY CHECK (id = 1),
	seq  BIGINT NOT NULL,
	hash TEXT COLLATE "C" NOT NULL
)`,
	`CREATE TABLE IF NOT EXISTS ledger_schema (
	id      INTEGER PRIMARY KEY CHECK (id = 1),
	version INTEGER NOT NULL
)`,
}

// schemaLockKey is the transaction-level advisory lock under which
// concurrent openers create the schema once ("dpledger" in ASCII).
const schemaLockKey int64 = 0x64706c6564676572

// OpenDB opens the ledger kept in a shared state database, creating its
// tables if needed; several proxies, on any number of hosts, may open the
// same database at once and share its budgets. Only PostgreSQL is
// supported: a SQLite ledger keeps its own file, WAL mode and writer lock,
// so it is opened with [Open]. The Ledger uses db's pool and does not
// close it.
func OpenDB(ctx context.Context, db *statedb.DB) (*Ledger, error) {
	l, err := newDBLedger(db, false)
	if err != nil {
		return nil, err
	}
	l.startReuses()
	if err := l.initPostgres(ctx); err != nil {
		l.Close()
		return nil, fmt.Errorf("budget: open ledger %s: %w", l.path, err)
	}
	l.warnNotDurable(ctx)
	l.log.DebugContext(ctx, "ledger opened")
	return l, nil
}

// OpenDBReadOnly opens an existing ledger in a shared state database for
// reading only, as OpenReadOnly does a file: every write fails before
// touching the database, and reads run in READ ONLY transactions. It never
// creates the tables.
func OpenDBReadOnly(ctx context.Context, db *statedb.DB) (*Ledger, error) {
	l, err := newDBLedger(db, true)
	if err != nil {
		return nil, err
	}
	err = l.read(ctx, func(tx *sql.Tx) error {
		v, ok, err := pgSchemaVersion(ctx, tx)
		switch {
		case err != nil:
			return err
		case !ok:
			return errors.New("not a ledger (no ledger tables in the database)")
		case v > schemaVersion:
			return fmt.Errorf("ledger schema version %d is newer than this program's %d", v, schemaVersion)
		case v < schemaVersion:
			return fmt.Errorf("ledger schema version %d is unknown", v)
		}
		return nil
	})
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("budget: open ledger %s: %w", l.path, err)
	}
	return l, nil
}

func newDBLedger(db *statedb.DB, readOnly bool) (*Ledger, error) {
	if db == nil || db.DB == nil {
		return nil, errors.New("budget: open ledger: no database")
	}
	if db.Dialect != statedb.Postgres {
		return nil, fmt.Errorf("budget: open ledger %s: a %s ledger is a file of its own, opened with Open", db.Where, db.Dialect)
	}
	log := slog.Default().With("component", "budget", "ledger", db.Where)
	if readOnly {
		log = log.With("mode", "read-only")
	}
	l := &Ledger{
		path:     db.Where,
		dialect:  db.Dialect,
		db:       db.DB,
		log:      log,
		wmu:      make(chan struct{}, 1),
		readOnly: readOnly,
		closed:   make(chan struct{}),
	}
	if !readOnly {
		l.wdb = db.DB
	}
	return l, nil
}

// initPostgres creates the schema and the head row, under an advisory
// lock so that concurrent openers do it once.
func (l *Ledger) initPostgres(ctx context.Context) error {
	return retryBusy(ctx, func() error {
		return l.tryWrite(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(?)", schemaLockKey); err != nil {
				return fmt.Errorf("lock schema: %w", err)
			}
			v, ok, err := pgSchemaVersion(ctx, tx)
			switch {
			case err != nil:
				return err
			case ok && v == schemaVersion:
				return nil
			case ok && v > schemaVersion:
				return fmt.Errorf("ledger schema version %d is newer than this program's %d", v, schemaVersion)
			case ok:
				return fmt.Errorf("ledger schema version %d is unknown", v)
			}
			for _, q := range pgSchema {
				if _, err := tx.ExecContext(ctx, q); err != nil {
					return fmt.Errorf("create schema: %w", err)
				}
			}
			// As in SQLite, the head row is created with the ledger, never
			// recreated.
			if _, err := tx.ExecContext(ctx, `INSERT INTO head (id, seq, hash)
				SELECT 1, 0, ? WHERE NOT EXISTS (SELECT 1 FROM head) AND NOT EXISTS (SELECT 1 FROM entries)`,
				genesisHash); err != nil {
				return fmt.Errorf("create head: %w", err)
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO ledger_schema (id, version) VALUES (1, ?)", schemaVersion); err != nil {
				return fmt.Errorf("set schema version: %w", err)
			}
			return nil
		})
	}, l.retryable, nil)
}

// pgSchemaVersion reads the ledger's schema version; ok is false when
// there is no ledger in the database.
func pgSchemaVersion(ctx context.Context, tx *sql.Tx) (v int, ok bool, err error) {
	if err := tx.QueryRowContext(ctx, "SELECT to_regclass('ledger_schema') IS NOT NULL").Scan(&ok); err != nil {
		return 0, false, fmt.Errorf("read schema version: %w", err)
	}
	if !ok {
		return 0, false, nil
	}
	err = tx.QueryRowContext(ctx, "SELECT version FROM ledger_schema WHERE id = 1").Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read schema version: %w", err)
	}
	return v, true, nil
}

// lockHead starts every write transaction in PostgreSQL: it takes the head
// row FOR UPDATE, the lock that serialises the ledger's writers on every
// host, waiting for it at most busyTimeout (as a SQLite writer waits for
// the database). Whatever the transaction reads afterwards (each statement
// of a READ COMMITTED transaction reads the latest commits) is current
// until it commits, as in a BEGIN IMMEDIATE transaction of SQLite. A
// missing head row is left for appendEntry (and Verify) to report.
//
// It also makes the commit durable, as synchronous=FULL does a SQLite
// ledger's: a charge must be on disk before its answer leaves, so where
// the session's synchronous_commit is off (the server's default or the
// role's), the transaction turns it on; stronger settings (remote_apply,
// …) are kept.
func lockHead(ctx context.Context, tx *sql.Tx) error {
	// One round trip: without arguments pgx sends the statements in one
	// simple-protocol query.
	q := fmt.Sprintf(`SELECT set_config('synchronous_commit', 'on', true) WHERE current_setting('synchronous_commit') = 'off';
		SET LOCAL lock_timeout = %d;
		SELECT seq FROM head WHERE id = 1 FOR UPDATE`, busyTimeout.Milliseconds())
	if _, err := tx.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("lock the ledger head: %w", err)
	}
	return nil
}

// warnNotDurable logs when the server does not flush its commits to disk
// (fsync off): a charge then survives a crash of the proxy, not of the
// database server. The ledger cannot change that setting; it says so.
func (l *Ledger) warnNotDurable(ctx context.Context) {
	var fsync string
	if err := l.db.QueryRowContext(ctx, "SELECT current_setting('fsync')").Scan(&fsync); err != nil {
		l.log.WarnContext(ctx, "cannot read the server's fsync setting", "err", err)
		return
	}
	if fsync != "on" {
		l.log.WarnContext(ctx, "the PostgreSQL server runs with fsync off: charges are lost if the server crashes")
	}
}

// pg reports whether the ledger is in PostgreSQL.
func (l *Ledger) pg() bool { return l.dialect == statedb.Postgres }

// retryable reports whether a write transaction that failed with err may
// simply run again: SQLITE_BUSY, or PostgreSQL's serialization failure or
// deadlock.
func (l *Ledger) retryable(err error) bool {
	if l.pg() {
		return statedb.IsRetryable(err)
	}
	return isBusy(err)
}

// writeTxOptions: SQLite's writer pool begins IMMEDIATE transactions by
// itself (_txlock); PostgreSQL's are READ COMMITTED whatever the server's
// default, so that the statements after lockHead see the latest commits.
func (l *Ledger) writeTxOptions() *sql.TxOptions {
	if l.pg() {
		return &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	return nil
}

// readTxOptions: one snapshot for every statement of a read, which SQLite
// gives any transaction and PostgreSQL a REPEATABLE READ one.
func (l *Ledger) readTxOptions() *sql.TxOptions {
	if l.pg() {
		return &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}
	}
	return &sql.TxOptions{ReadOnly: true}
}

// jsonEach is a FROM item of the elements of a JSON array of strings held
// in the text column col, as rows with one text column alias.value.
func jsonEach(pg bool, col, alias string) string {
	if pg {
		return "jsonb_array_elements_text(" + col + "::jsonb) AS " + alias + "(value)"
	}
	return "json_each(" + col + ") AS " + alias
}

// containsText is a condition: the text column col contains the
// parameter's text.
func containsText(pg bool, col string) string {
	if pg {
		return "strpos(" + col + ", ?) > 0"
	}
	return "instr(" + col + ", ?) > 0"
}

// epochMillis is an expression: milliseconds since the epoch of the
// stored time (fixed width, see timeLayout) in column col: whole seconds,
// then the first three digits of the fraction.
func epochMillis(pg bool, col string) string {
	if pg {
		return "(CAST(EXTRACT(EPOCH FROM CAST(substr(" + col + ", 1, 19) AS TIMESTAMP)) AS BIGINT) * 1000 + CAST(substr(" + col + ", 21, 3) AS BIGINT))"
	}
	return "(unixepoch(substr(" + col + ", 1, 19)) * 1000 + CAST(substr(" + col + ", 21, 3) AS INTEGER))"
}
