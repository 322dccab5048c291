// Package state opens the place where a proxy keeps what it must remember
// across requests, restarts and other proxies: the privacy ledger, the
// released answers, the stored measurements with the key sets partition
// selection released, the key of the unit hash, and the console's
// sessions. The catalog's state section chooses it:
//
//   - SQLite files in the data directory (the default, and the embedded
//     demo's): ledger.sqlite, answers.sqlite, measurements.sqlite and
//     unit-hash.key. Processes on one host may share the directory.
//   - One PostgreSQL database (state: {driver: postgres, dsn_env: …}):
//     every proxy pointed at it, on any host, shares one budget, one
//     ledger and one set of stored answers.
//
// The stores keep one copy of their logic for both (each writes its SQL
// once; package internal/statedb rebinds it for PostgreSQL), so this
// package only chooses and opens them. How a batch is charged exactly
// once across proxies is the stores' arrangement: the answers store holds
// a PostgreSQL advisory lock on the batch's key from before the charge
// until its answer is stored, and the ledger's charge is one transaction
// that takes the chain head FOR UPDATE, checks and updates the spends,
// and appends the entry (see packages answers and budget).
package state

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dpproxy/dpproxy/answers"
	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/internal/statedb"
	"github.com/dpproxy/dpproxy/measure"
)

// DefaultMaxConnections is a proxy's connections to a PostgreSQL state
// database when the catalog sets no state.max_connections. The answers
// store's claims each hold one (and its advisory lock) while a batch is
// measured, at most half of them (package answers), so the ledger,
// measurements and sessions always have the other half.
const DefaultMaxConnections = 24

// File names in the data directory (SQLite state).
const (
	LedgerFile       = "ledger.sqlite"
	AnswersFile      = "answers.sqlite"
	MeasurementsFile = "measurements.sqlite"
)

// Store is a proxy's opened state.
type Store struct {
	Ledger       *budget.Ledger
	Answers      *answers.Store
	Measurements *measure.Store
	// UnitKey is the key of the unit hash that bounds contributions,
	// kept in the shared database so that every proxy bounds the same
	// rows (sources.Options.UnitKey); "" with SQLite state, where the
	// sources read <data-dir>/unit-hash.key.
	UnitKey string
	// DB is the shared database (nil with SQLite state), for what else
	// keeps state there (the console's sessions).
	DB *statedb.DB
	// Where names the state for messages: the data directory, or the
	// PostgreSQL host and database (never a password).
	Where string
}

// Open opens the state the catalog's state section names; dataDir holds
// SQLite state.
func Open(ctx context.Context, st catalog.State, dataDir string, maxMeasurementBytes int64) (*Store, error) {
	if !st.Shared() {
		return openFiles(ctx, dataDir, maxMeasurementBytes)
	}
	dsn, err := DSN(st)
	if err != nil {
		return nil, err
	}
	conns := st.MaxConnections
	if conns == 0 {
		conns = DefaultMaxConnections
	}
	s := &Store{}
	if s.DB, err = statedb.OpenPostgres(ctx, dsn, conns); err != nil {
		return nil, err
	}
	s.Where = s.DB.Where
	fail := func(what string, err error) (*Store, error) {
		s.Close()
		return nil, fmt.Errorf("state %s: %s: %w", s.Where, what, err)
	}
	if s.Ledger, err = budget.OpenDB(ctx, s.DB); err != nil {
		return fail("ledger", err)
	}
	if s.Answers, err = answers.OpenDB(ctx, s.DB); err != nil {
		return fail("answers", err)
	}
	if s.Measurements, err = measure.OpenDB(ctx, s.DB, maxMeasurementBytes); err != nil {
		return fail("measurements", err)
	}
	if s.UnitKey, err = unitKey(ctx, s.DB, ""); err != nil {
		return fail("unit key", err)
	}
	return s, nil
}

func openFiles(ctx context.Context, dataDir string, maxMeasurementBytes int64) (*Store, error) {
	s := &Store{Where: dataDir}
	var err error
	if s.Ledger, err = budget.Open(ctx, filepath.Join(dataDir, LedgerFile)); err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	if s.Answers, err = answers.Open(ctx, filepath.Join(dataDir, AnswersFile)); err != nil {
		s.Close()
		return nil, err
	}
	if s.Measurements, err = measure.Open(ctx, filepath.Join(dataDir, MeasurementsFile), maxMeasurementBytes); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close closes every store (the ledger last: pending reuse entries are
// written first).
func (s *Store) Close() error {
	var errs []error
	if s.Answers != nil {
		errs = append(errs, s.Answers.Close())
	}
	if s.Measurements != nil {
		errs = append(errs, s.Measurements.Close())
	}
	if s.Ledger != nil {
		errs = append(errs, s.Ledger.Close())
	}
	if s.DB != nil {
		errs = append(errs, s.DB.Close())
	}
	return errors.Join(errs...)
}

// Ledger is a ledger opened alone, for the audit commands and the
// stand-alone console.
type Ledger struct {
	*budget.Ledger
	// Where names it for messages: the ledger file, or the PostgreSQL host
	// and database.
	Where string
	// DB is the shared database (nil for a SQLite ledger), for the
	// console's sessions.
	DB *statedb.DB
}

// Close closes the ledger and its database.
func (l *Ledger) Close() error {
	err := l.Ledger.Close()
	if l.DB != nil {
		err = errors.Join(err, l.DB.Close())
	}
	return err
}

// OpenLedger opens the ledger of the catalog's state alone: read-only
// unless writable (audit sign appends a signed head's record). A SQLite
// ledger must exist already.
func OpenLedger(ctx context.Context, st catalog.State, dataDir string, writable bool) (*Ledger, error) {
	if !st.Shared() {
		path := filepath.Join(dataDir, LedgerFile)
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("no ledger at %s: %w", path, err)
		}
		open := budget.OpenReadOnly
		if writable {
			open = budget.Open
		}
		l, err := open(ctx, path)
		if err != nil {
			return nil, err
		}
		return &Ledger{Ledger: l, Where: path}, nil
	}
	dsn, err := DSN(st)
	if err != nil {
		return nil, err
	}
	db, err := statedb.OpenPostgres(ctx, dsn, 4)
	if err != nil {
		return nil, err
	}
	open := budget.OpenDBReadOnly
	if writable {
		open = budget.OpenDB
	}
	l, err := open(ctx, db)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("ledger in %s: %w", db.Where, err)
	}
	return &Ledger{Ledger: l, Where: db.Where, DB: db}, nil
}

// DSN is the state database's connection string: the catalog's dsn, or
// the environment variable its dsn_env names.
func DSN(st catalog.State) (string, error) {
	d, err := catalog.LookupDSN(st.DSN, st.DSNEnv)
	if err != nil {
		return "", fmt.Errorf("state: %w", err)
	}
	return d, nil
}

const unitKeySchema = `CREATE TABLE IF NOT EXISTS unit_key (
	id  INTEGER PRIMARY KEY CHECK (id = 1),
	key TEXT NOT NULL
)`

// unitKey returns the unit-hash key kept in db, storing want (or, when
// want is "", a fresh random key) if none is kept yet: the first proxy
// to start chooses it, and every later one reads the same key, so that
// all of them bound contributions to the same rows.
func unitKey(ctx context.Context, db *statedb.DB, want string) (string, error) {
	if err := statedb.CreateSchema(ctx, db, "unit_key", unitKeySchema); err != nil {
		return "", fmt.Errorf("create unit_key: %w", err)
	}
	if want == "" {
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		want = hex.EncodeToString(b[:])
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO unit_key (id, key) VALUES (1, ?) ON CONFLICT (id) DO NOTHING", want); err != nil {
		return "", fmt.Errorf("store unit key: %w", err)
	}
	var key string
	if err := db.QueryRowContext(ctx, "SELECT key FROM unit_key WHERE id = 1").Scan(&key); err != nil {
		return "", fmt.Errorf("read unit key: %w", err)
	}
	return key, nil
}
