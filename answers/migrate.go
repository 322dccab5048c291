package answers

import (
	"context"
	"database/sql"
	"fmt"
	"os"

	"github.com/dpproxy/dpproxy/internal/sqlitefile"
)

// migrateBatch is how many answers Migrate copies per transaction.
const migrateBatch = 500

// Migrate copies every answer stored in the SQLite answers file at srcPath
// into dst (for `dpproxy state migrate`), byte for byte with its release
// time, and returns how many it added. An answer dst already holds under a
// key is kept (first stored wins, as for Put), so Migrate may be run again.
// Pending claims are not copied: they belong to the processes that held
// them. The source is opened read-only.
func Migrate(ctx context.Context, srcPath string, dst *Store) (int64, error) {
	if _, err := os.Stat(srcPath); err != nil {
		return 0, fmt.Errorf("answers: migrate: %w", err)
	}
	uri, _, err := sqlitefile.URI(srcPath, "mode=ro", "_pragma=busy_timeout(10000)")
	if err != nil {
		return 0, fmt.Errorf("answers: migrate %s: %w", srcPath, err)
	}
	src, err := sql.Open("sqlite", uri)
	if err != nil {
		return 0, fmt.Errorf("answers: migrate %s: %w", srcPath, err)
	}
	defer src.Close()
	rows, err := src.QueryContext(ctx, "SELECT key, results, released FROM answers ORDER BY key")
	if err != nil {
		return 0, fmt.Errorf("answers: migrate %s: %w", srcPath, err)
	}
	defer rows.Close()
	var added int64
	batch := make([]storedAnswer, 0, migrateBatch)
	flush := func() error {
		n, err := dst.putAll(ctx, batch)
		added += n
		batch = batch[:0]
		return err
	}
	for rows.Next() {
		var a storedAnswer
		if err := rows.Scan(&a.key, &a.results, &a.released); err != nil {
			return added, fmt.Errorf("answers: migrate %s: %w", srcPath, err)
		}
		if batch = append(batch, a); len(batch) == migrateBatch {
			if err := flush(); err != nil {
				return added, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return added, fmt.Errorf("answers: migrate %s: %w", srcPath, err)
	}
	if err := flush(); err != nil {
		return added, err
	}
	return added, nil
}

// storedAnswer is a row of the answers table.
type storedAnswer struct {
	key, released string
	results       []byte
}

// putAll stores answers in one transaction, keeping any already stored
// under their keys, and returns how many it added.
func (s *Store) putAll(ctx context.Context, answers []storedAnswer) (int64, error) {
	if len(answers) == 0 {
		return 0, nil
	}
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("answers: migrate: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit, a no-op
	var added int64
	for _, a := range answers {
		res, err := tx.ExecContext(ctx, "INSERT INTO answers (key, results, released) VALUES (?, ?, ?) ON CONFLICT (key) DO NOTHING", a.key, a.results, a.released)
		if err != nil {
			return 0, fmt.Errorf("answers: migrate: %w", err)
		}
		k, err := res.RowsAffected()
		if err != nil {
			return 0, fmt.Errorf("answers: migrate: %w", err)
		}
		added += k
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("answers: migrate: %w", err)
	}
	return added, nil
}
