package measure

import (
	"context"
	"database/sql"
	"fmt"
	"os"

	"github.com/dpproxy/dpproxy/internal/sqlitefile"
)

// migrateBatch is how many rows Migrate copies per transaction.
const migrateBatch = 200

// Migrate copies the measurements, key sets and replay records of the
// SQLite store at srcPath into dst (for `dpproxy state migrate`) and
// returns how many rows it added. Measurements keep their table,
// definition, version, ledger entry, size and encoding byte for byte, and
// their order (dst gives them new ids, after its own); dst's byte bound
// then forgets the oldest, as Put does. Key sets keep their ledger entry
// and time, replay records their ledger entry. A measurement dst holds
// already (same key, ledger entry and encoding) is not copied again, nor
// is a key set dst holds for the same version or a replay record for the
// same entry, so Migrate may be run again: the same release counted twice
// would overstate what is known. The source is opened read-only.
func Migrate(ctx context.Context, srcPath string, dst *Store) (int64, error) {
	if _, err := os.Stat(srcPath); err != nil {
		return 0, fmt.Errorf("measure: migrate: %w", err)
	}
	uri, _, err := sqlitefile.URI(srcPath, "mode=ro", "_pragma=busy_timeout(10000)")
	if err != nil {
		return 0, fmt.Errorf("measure: migrate %s: %w", srcPath, err)
	}
	src, err := sql.Open("sqlite", uri)
	if err != nil {
		return 0, fmt.Errorf("measure: migrate %s: %w", srcPath, err)
	}
	defer src.Close()
	n, err := copyRows(ctx, src, dst, "SELECT table_name, def, version, ledger_seq, bytes, body FROM measurements ORDER BY id", 6,
		"INSERT INTO measurements (table_name, def, version, ledger_seq, bytes, body) VALUES (?, ?, ?, ?, ?, ?)",
		"SELECT COUNT(*) FROM measurements WHERE table_name = ? AND def = ? AND version = ? AND ledger_seq = ? AND body = ?",
		func(v []any) []any { return []any{v[0], v[1], v[2], v[3], v[5]} })
	if err != nil {
		return n, fmt.Errorf("measure: migrate %s: measurements: %w", srcPath, err)
	}
	k, err := copyRows(ctx, src, dst, "SELECT table_name, def, column_name, version, ledger_seq, time, keys FROM key_sets ORDER BY id", 7,
		`INSERT INTO key_sets (table_name, def, column_name, version, ledger_seq, time, keys) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (table_name, def, column_name, version) DO NOTHING`, "", nil)
	if err != nil {
		return n + k, fmt.Errorf("measure: migrate %s: key sets: %w", srcPath, err)
	}
	// Replay records (replay.go) move with the ledger entries they name,
	// which keep their sequence numbers; a file written before replays
	// has none.
	var tables int
	if err := src.QueryRowContext(ctx, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'replays'").Scan(&tables); err != nil {
		return n + k, fmt.Errorf("measure: migrate %s: replays: %w", srcPath, err)
	}
	if tables == 0 {
		return n + k, nil
	}
	r, err := copyRows(ctx, src, dst, "SELECT ledger_seq, table_name, user_name, texts, options, reused FROM replays ORDER BY ledger_seq", 6,
		`INSERT INTO replays (ledger_seq, table_name, user_name, texts, options, reused) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (ledger_seq) DO NOTHING`, "", nil)
	if err != nil {
		return n + k + r, fmt.Errorf("measure: migrate %s: replays: %w", srcPath, err)
	}
	// and their bases, in a file written since they were kept.
	if err := src.QueryRowContext(ctx, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'replay_basis'").Scan(&tables); err != nil {
		return n + k + r, fmt.Errorf("measure: migrate %s: replay bases: %w", srcPath, err)
	}
	if tables == 0 {
		return n + k + r, nil
	}
	b, err := copyRows(ctx, src, dst, "SELECT ledger_seq, stored FROM replay_basis ORDER BY ledger_seq", 2,
		`INSERT INTO replay_basis (ledger_seq, stored) VALUES (?, ?)
		ON CONFLICT (ledger_seq) DO NOTHING`, "", nil)
	if err != nil {
		return n + k + r + b, fmt.Errorf("measure: migrate %s: replay bases: %w", srcPath, err)
	}
	return n + k + r + b, nil
}

// copyRows copies the rows of query on src (of cols columns) into dst with
// insert, in transactions of migrateBatch rows under the writers' lock,
// each ending with the byte bound enforced; it returns how many rows
// insert added. A row is skipped when seen, if set, counts rows of dst
// with the arguments key makes from the row.
func copyRows(ctx context.Context, src *sql.DB, dst *Store, query string, cols int, insert, seen string, key func([]any) []any) (int64, error) {
	rows, err := src.QueryContext(ctx, query)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var added int64
	var batch [][]any
	flush := func() error {
		n, err := dst.insertAll(ctx, insert, seen, key, batch)
		added += n
		batch = batch[:0]
		return err
	}
	for rows.Next() {
		v := make([]any, cols)
		ptrs := make([]any, cols)
		for i := range v {
			ptrs[i] = &v[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return added, err
		}
		if batch = append(batch, v); len(batch) == migrateBatch {
			if err := flush(); err != nil {
				return added, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return added, err
	}
	return added, flush()
}

// insertAll runs insert with each of rows not seen (see copyRows) in one
// transaction under the writers' lock, enforces the byte bound, and
// returns how many rows it added.
func (s *Store) insertAll(ctx context.Context, insert, seen string, key func([]any) []any, rows [][]any) (int64, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit, a no-op
	if err := s.lockWriters(ctx, tx); err != nil {
		return 0, err
	}
	var added int64
	for _, r := range rows {
		if seen != "" {
			var n int
			if err := tx.QueryRowContext(ctx, seen, key(r)...).Scan(&n); err != nil {
				return 0, err
			}
			if n > 0 {
				continue
			}
		}
		res, err := tx.ExecContext(ctx, insert, r...)
		if err != nil {
			return 0, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, err
		}
		added += n
	}
	if err := s.forgetOldest(ctx, tx, func(int64) {}); err != nil {
		return 0, err
	}
	return added, tx.Commit()
}
