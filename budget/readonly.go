package budget

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"modernc.org/sqlite"

	"github.com/dpproxy/dpproxy/internal/sqlitefile"
	"github.com/dpproxy/dpproxy/internal/statedb"
)

// errReadOnly is returned by every write on a Ledger from OpenReadOnly or
// OpenDBReadOnly.
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
	// Each connection shows an older schema as the current one
	// (olderSchemaViews), so that a ledger no proxy of this version has
	// opened yet (and upgraded) reads as it will after the upgrade.
	drv := &sqlite.Driver{}
	drv.RegisterConnectionHook(func(conn sqlite.ExecQuerierContext, _ string) error {
		return olderSchemaViews(context.Background(), conn)
	})
	db := sql.OpenDB(roConnector{drv: drv, dsn: uri})
	db.SetMaxOpenConns(4)
	// A proxy may upgrade the file while it is open here: connections are
	// renewed, and each reads the schema anew.
	db.SetConnMaxLifetime(time.Second)
	l := &Ledger{
		path:     abs,
		dialect:  statedb.SQLite,
		db:       db,
		log:      slog.Default().With("component", "budget", "ledger", abs, "mode", "read-only"),
		wmu:      make(chan struct{}, 1),
		readOnly: true,
		closed:   make(chan struct{}),
	}
	ready, err := l.readyToRead(ctx)
	if err == nil && !ready {
		err = errors.New("not a ledger (no WAL mode or no schema)")
	}
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("budget: open ledger %s: %w", abs, err)
	}
	return l, nil
}

// ReadOnly reports whether the ledger was opened with OpenReadOnly or
// OpenDBReadOnly.
func (l *Ledger) ReadOnly() bool { return l.readOnly }

// roConnector opens connections of a read-only ledger through its own
// driver, whose connection hook is olderSchemaViews.
type roConnector struct {
	drv *sqlite.Driver
	dsn string
}

func (c roConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c roConnector) Driver() driver.Driver                        { return c.drv }

// readyToRead reports whether the file is in WAL mode with a ledger schema
// of this version or an older one (which olderSchemaViews presents as
// this version's).
func (l *Ledger) readyToRead(ctx context.Context) (bool, error) {
	var mode string
	if err := l.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return false, fmt.Errorf("read journal_mode: %w", err)
	}
	var v int
	if err := l.db.QueryRowContext(ctx, "PRAGMA main.user_version").Scan(&v); err != nil {
		return false, fmt.Errorf("read schema version: %w", err)
	}
	if v > schemaVersion {
		return false, fmt.Errorf("ledger schema version %d is newer than this program's %d", v, schemaVersion)
	}
	return strings.EqualFold(mode, "wal") && v >= 1, nil
}

// olderSchemaViews makes a read-only connection to a ledger of an older
// schema read as the current one, without writing to it: TEMP views named
// entries and spent (SQLite resolves an unqualified name in temp first)
// over the stored tables, with the columns later versions added at the
// values an upgrade gives them (createSchema): no privacy unit (empty text) before
// version 2, no δ (0) before version 3, no privacy unit space (empty
// text) before version 4. Entries keep their hashes: the chain hashes a
// unit, a δ or a space only when there is one. Before version 4 a view
// named spent_spaces stands for the table of version 4: an upgrade
// rebuilds it from the entries (rebuildSpaces), and since an older ledger
// maps no table to another space (MapSpaces came with version 4), each
// table is its own space and its spends are the table's (user, table) and
// ("", table) spends.
func olderSchemaViews(ctx context.Context, conn sqlite.ExecQuerierContext) error {
	has := func(table, column string) (bool, error) {
		rows, err := conn.QueryContext(ctx, "SELECT COUNT(*) FROM main.pragma_table_info('"+table+"') WHERE name = '"+column+"'", nil)
		if err != nil {
			return false, err
		}
		defer rows.Close()
		dest := make([]driver.Value, 1)
		if err := rows.Next(dest); err != nil {
			return false, err
		}
		n, _ := dest[0].(int64)
		return n > 0, nil
	}
	hasEntries, err := has("entries", "seq")
	if err != nil || !hasEntries {
		return err // not a ledger: OpenReadOnly says so
	}
	unit, err := has("entries", "unit_json")
	if err != nil {
		return err
	}
	entryDelta, err := has("entries", "delta")
	if err != nil {
		return err
	}
	spentDelta, err := has("spent", "delta")
	if err != nil {
		return err
	}
	entrySpaces, err := has("entries", "spaces_json")
	if err != nil {
		return err
	}
	spacesTable, err := has("spent_spaces", "space_name")
	if err != nil {
		return err
	}
	if unit && entryDelta && spentDelta && entrySpaces && spacesTable {
		return nil
	}
	unitCol, deltaCol, spentCol, spacesCol := "unit_json", "delta", "delta", "spaces_json"
	if !unit {
		unitCol = "'' AS unit_json"
	}
	if !entryDelta {
		deltaCol = "0.0 AS delta"
	}
	if !spentDelta {
		spentCol = "0.0 AS delta"
	}
	if !entrySpaces {
		spacesCol = "'' AS spaces_json"
	}
	qs := []string{
		"CREATE TEMP VIEW IF NOT EXISTS entries AS SELECT seq, time, kind, user_name, conn_id, tables_json, mechanism, strategy, epsilon, rho, query_digest, prev_hash, hash, " +
			unitCol + ", " + deltaCol + ", " + spacesCol + " FROM main.entries",
		"CREATE TEMP VIEW IF NOT EXISTS spent AS SELECT user_name, table_name, epsilon, rho, " + spentCol + " FROM main.spent",
	}
	if !spacesTable {
		qs = append(qs, "CREATE TEMP VIEW IF NOT EXISTS spent_spaces AS SELECT user_name, table_name AS space_name, epsilon, rho, "+
			spentCol+" FROM main.spent WHERE table_name <> ''")
	}
	for _, q := range qs {
		if _, err := conn.ExecContext(ctx, q, nil); err != nil {
			return fmt.Errorf("read an older ledger schema: %w", err)
		}
	}
	return nil
}
