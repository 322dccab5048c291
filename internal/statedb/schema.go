package statedb

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// LockKey is the PostgreSQL advisory lock key of key within namespace: the
// first 64 bits of SHA-256(namespace, NUL, key). Advisory locks share one
// 64-bit key space per database, so each user of them names its own
// namespace; two keys that collide only make one wait for the other.
func LockKey(namespace, key string) int64 {
	h := sha256.New()
	h.Write([]byte(namespace))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return int64(binary.BigEndian.Uint64(h.Sum(nil)[:8]))
}

// CreateSchema runs a store's CREATE … IF NOT EXISTS statements (ddl, no
// placeholders). On PostgreSQL it runs them in one transaction under an
// advisory lock named after the store, because two proxies starting at
// once may otherwise both try to create a table, and "IF NOT EXISTS" does
// not stop the loser failing on the catalog's unique index.
func CreateSchema(ctx context.Context, db *DB, store, ddl string) error {
	if db.Dialect != Postgres {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			return fmt.Errorf("create the %s tables: %w", store, err)
		}
		return nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create the %s tables in %s: %w", store, db.Where, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit, a no-op
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(?)", LockKey("dpproxy schema", store)); err != nil {
		return fmt.Errorf("create the %s tables in %s: %w", store, db.Where, err)
	}
	if _, err := tx.ExecContext(ctx, ddl); err != nil {
		return fmt.Errorf("create the %s tables in %s: %w", store, db.Where, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create the %s tables in %s: %w", store, db.Where, err)
	}
	return nil
}
