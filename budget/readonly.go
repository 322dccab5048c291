package budget

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/dpproxy/dpproxy/internal/sqlitefile"
)

// errReadOnly is returned by every write on a Ledger from OpenReadOnly.
var errReadOnly = errors.New("ledger is open read-only")

// OpenReadOnly opens an existing ledger for reading only: SQLite opens the
// file with mode=ro, and every method that would write (Charge, Record,
// RecordLimits, AppendSignedHead) fails before touching it. Reads see the
// entries committed by writers in other processes as they commit (WAL). It
// is what a viewer of the ledger (the web console, an auditor's tool) opens,
// so that it cannot change what it shows. The file must exist and be a
// ledger: OpenReadOnly never creates one.
func OpenReadOnly(ctx context.Context, path string) (*Ledger, error) {
	if path == "" {
		return nil, errors.New("budget: open ledger: empty path")
	}
	uri, abs, err := sqlitefile.URI(path, "mode=ro", fmt.Sprintf("_pragma=busy_timeout(%d)", busyTimeout.Milliseconds()))
	if err != nil {
		return nil, fmt.Errorf("budget: open ledger %s: %w", path, err)
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("budget: open ledger %s: %w", abs, err)
	}
	db, err := sql.Open("sqlite", uri)
	if err != nil {
		return nil, fmt.Errorf("budget: open ledger %s: %w", abs, err)
	}
	db.SetMaxOpenConns(4)
	l := &Ledger{
		path:     abs,
		db:       db,
		log:      slog.Default().With("component", "budget", "ledger", abs, "mode", "read-only"),
		wmu:      make(chan struct{}, 1),
		readOnly: true,
		closed:   make(chan struct{}),
	}
	ready, err := l.ready(ctx)
	if err == nil && !ready {
		err = errors.New("not a ledger (no WAL mode or no schema)")
	}
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("budget: open ledger %s: %w", abs, err)
	}
	return l, nil
}

// ReadOnly reports whether the ledger was opened with OpenReadOnly.
func (l *Ledger) ReadOnly() bool { return l.readOnly }
