package measure

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Key sets are the keys DP partition selection released for an open
// column (package selection), stored per table, table definition digest,
// column and data version beside the measurements, so that a later batch,
// in this process or another, or after a restart, groups by them with no
// new selection. Like measurements they were paid for when released
// (KeySet.LedgerSeq) and are public from then on; nothing here releases
// them.
//
// They are not counted in the store's byte bound: forgetting a key set
// would cost a new selection, ε and δ. Only the newest keySetVersions data
// versions of each column are kept; an older version's keys would serve a
// table that no longer holds that data.

// keySetVersions is how many data versions' key sets are kept per column.
const keySetVersions = 4

// keySchema is in the dialect's column types, as schema (store.go).
const keySchema = `
CREATE TABLE IF NOT EXISTS key_sets (
	id         %[1]s,
	table_name TEXT NOT NULL,
	def        TEXT NOT NULL,
	column_name TEXT NOT NULL,
	version    TEXT NOT NULL,
	ledger_seq %[2]s NOT NULL,
	time       TEXT NOT NULL,
	keys       %[3]s NOT NULL,
	UNIQUE (table_name, def, column_name, version)
);`

// KeySet is one column's released keys for one data version.
type KeySet struct {
	Table, Def, Column, Version string
	// LedgerSeq is the ledger entry that paid for the selection.
	LedgerSeq int64
	Keys      []string
}

// Keys returns the key set stored for (table, def, column, version); ok is
// false when none is.
func (s *Store) Keys(ctx context.Context, table, def, column, version string) (keys []string, ok bool, err error) {
	var body []byte
	err = s.db.QueryRowContext(ctx, "SELECT keys FROM key_sets WHERE table_name = ? AND def = ? AND column_name = ? AND version = ?",
		table, def, column, version).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("measure: keys: %w", err)
	}
	if err := json.Unmarshal(body, &keys); err != nil {
		return nil, false, fmt.Errorf("measure: keys of %s.%s: %w", table, column, err)
	}
	if keys == nil {
		keys = []string{}
	}
	return keys, true, nil
}

// PutKeys stores k unless a key set for its table, definition, column and
// version is stored already (another batch or process selected the same
// keys concurrently), and returns the stored set: the caller releases
// that one, so that every batch of a data version sees the same keys.
// Both selections were charged; either set is a DP release.
func (s *Store) PutKeys(ctx context.Context, k KeySet) ([]string, error) {
	body, err := json.Marshal(k.Keys)
	if err != nil {
		return nil, fmt.Errorf("measure: put keys: %w", err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("measure: put keys: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit, a no-op
	if err := s.lockWriters(ctx, tx); err != nil {
		return nil, fmt.Errorf("measure: put keys: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO key_sets (table_name, def, column_name, version, ledger_seq, time, keys) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (table_name, def, column_name, version) DO NOTHING`,
		k.Table, k.Def, k.Column, k.Version, k.LedgerSeq, time.Now().UTC().Format(time.RFC3339Nano), body); err != nil {
		return nil, fmt.Errorf("measure: put keys: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM key_sets WHERE table_name = ? AND def = ? AND column_name = ? AND id NOT IN (
		SELECT id FROM key_sets WHERE table_name = ? AND def = ? AND column_name = ? ORDER BY id DESC LIMIT ?)`,
		k.Table, k.Def, k.Column, k.Table, k.Def, k.Column, keySetVersions); err != nil {
		return nil, fmt.Errorf("measure: put keys: %w", err)
	}
	var stored []byte
	if err := tx.QueryRowContext(ctx, "SELECT keys FROM key_sets WHERE table_name = ? AND def = ? AND column_name = ? AND version = ?",
		k.Table, k.Def, k.Column, k.Version).Scan(&stored); err != nil {
		return nil, fmt.Errorf("measure: put keys: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("measure: put keys: %w", err)
	}
	var keys []string
	if err := json.Unmarshal(stored, &keys); err != nil {
		return nil, fmt.Errorf("measure: put keys: %w", err)
	}
	if keys == nil {
		keys = []string{}
	}
	return keys, nil
}
