package state

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dpproxy/dpproxy/answers"
	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/internal/statedb"
	"github.com/dpproxy/dpproxy/measure"
	"github.com/dpproxy/dpproxy/sources"
)

// Migrated counts what Migrate copied.
type Migrated struct {
	Entries      int64 // ledger entries, hashes unchanged
	Answers      int64
	Measurements int64 // measurements and key sets
	UnitKey      bool  // the unit-hash key was copied (or was already there)
	Where        string
}

// Migrate copies the SQLite state in dataDir into the PostgreSQL database
// st names: the ledger entry by entry with their hashes (into an empty
// ledger only; the copy is verified like audit verify), the stored
// answers, the measurements and key sets, and the unit-hash key, so that
// the proxies that start on the copy bound the same rows and re-release
// the same answers. Nothing is copied when the database already holds a
// different unit-hash key or a ledger with entries. Console sessions are
// not copied: SQLite state keeps them in memory.
func Migrate(ctx context.Context, dataDir string, st catalog.State) (Migrated, error) {
	var out Migrated
	if !st.Shared() {
		return out, errors.New("state migrate: the catalog's state section must name driver postgres")
	}
	ledgerPath := filepath.Join(dataDir, LedgerFile)
	if _, err := os.Stat(ledgerPath); err != nil {
		return out, fmt.Errorf("state migrate: no ledger at %s: %w", ledgerPath, err)
	}
	dsn, err := DSN(st)
	if err != nil {
		return out, err
	}
	db, err := statedb.OpenPostgres(ctx, dsn, 4)
	if err != nil {
		return out, err
	}
	defer db.Close()
	out.Where = db.Where
	key, err := sources.ReadUnitKey(dataDir)
	if err != nil {
		return out, err
	}
	if key != "" {
		got, err := unitKey(ctx, db, key)
		if err != nil {
			return out, fmt.Errorf("state migrate: %w", err)
		}
		if got != key {
			return out, fmt.Errorf("state migrate: %s already keeps another unit-hash key than %s: proxies on the two would bound different rows; migrate into an empty database",
				db.Where, filepath.Join(dataDir, sources.UnitKeyFile))
		}
		out.UnitKey = true
	}
	src, err := budget.OpenReadOnly(ctx, ledgerPath)
	if err != nil {
		return out, fmt.Errorf("state migrate: %w", err)
	}
	defer src.Close()
	if out.Entries, err = budget.Migrate(ctx, src, db); err != nil {
		return out, fmt.Errorf("state migrate: ledger: %w", err)
	}
	if path := filepath.Join(dataDir, MeasurementsFile); exists(path) {
		ms, err := measure.OpenDB(ctx, db, 0)
		if err != nil {
			return out, fmt.Errorf("state migrate: measurements: %w", err)
		}
		out.Measurements, err = measure.Migrate(ctx, path, ms)
		if cerr := ms.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return out, fmt.Errorf("state migrate: measurements: %w", err)
		}
	}
	if path := filepath.Join(dataDir, AnswersFile); exists(path) {
		as, err := answers.OpenDB(ctx, db)
		if err != nil {
			return out, fmt.Errorf("state migrate: answers: %w", err)
		}
		out.Answers, err = answers.Migrate(ctx, path, as)
		if cerr := as.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return out, fmt.Errorf("state migrate: answers: %w", err)
		}
	}
	return out, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
