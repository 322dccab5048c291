package budget

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/dpproxy/dpproxy/internal/statedb"
)

// migrateBatch is how many entries one INSERT of Migrate carries (16
// parameters each, well under PostgreSQL's 65535).
const migrateBatch = 500

// Migrate copies the ledger src (a SQLite ledger file, opened with Open or
// OpenReadOnly) into the ledger in dst, which must hold no entries yet
// (its tables are created if needed), and returns the number of entries
// copied. Every entry is copied verbatim: its sequence number, its time as
// stored text, every field, its prev_hash and its hash, so that the chain
// verifies in dst as it did in src and signed heads of src hold in dst
// (Ledger.CheckHead). The spent aggregates are copied as they are, after
// src has been verified (which checks them, bit for bit, against the
// entries), and the head last.
//
// Everything is read in one snapshot of src and written in one transaction
// of dst, which holds the head lock: a failure leaves dst as it was, and
// no proxy can charge in dst while the copy runs. dst is verified after
// the commit. Proxies still writing to src meanwhile are not seen: stop
// them first.
func Migrate(ctx context.Context, src *Ledger, dst *statedb.DB) (int64, error) {
	if err := src.FlushReuses(ctx); err != nil {
		return 0, fmt.Errorf("budget: migrate: %w", err)
	}
	d, err := OpenDB(ctx, dst)
	if err != nil {
		return 0, fmt.Errorf("budget: migrate: %w", err)
	}
	defer d.Close()
	var seq int64
	var hash string
	err = src.read(ctx, func(stx *sql.Tx) error {
		var err error
		if seq, hash, err = verifyTx(ctx, stx); err != nil {
			return fmt.Errorf("the source ledger %s does not verify: %w", src.Path(), err)
		}
		return d.write(ctx, func(dtx *sql.Tx) error { return copyLedger(ctx, stx, dtx, seq, hash) }, nil)
	})
	if err != nil {
		return 0, fmt.Errorf("budget: migrate %s to %s: %w", src.Path(), d.Path(), err)
	}
	if err := d.Verify(ctx); err != nil {
		return 0, fmt.Errorf("budget: migrate: the copy in %s does not verify: %w", d.Path(), err)
	}
	gotSeq, gotHash, err := d.Head(ctx)
	if err != nil {
		return 0, fmt.Errorf("budget: migrate: %w", err)
	}
	if gotSeq != seq || gotHash != hash {
		return 0, fmt.Errorf("budget: migrate: the copy's head (%d, %s) is not the source's (%d, %s)", gotSeq, gotHash, seq, hash)
	}
	d.log.InfoContext(ctx, "ledger migrated", "from", src.Path(), "entries", seq, "head", hash)
	return seq, nil
}

// copyLedger copies entries, spent aggregates and head from stx to dtx,
// whose ledger must be empty.
func copyLedger(ctx context.Context, stx, dtx *sql.Tx, seq int64, hash string) error {
	var n, rows int64
	var headHash string
	if err := dtx.QueryRowContext(ctx, "SELECT seq, hash FROM head WHERE id = 1").Scan(&n, &headHash); err != nil {
		return fmt.Errorf("read the destination's head: %w", err)
	}
	if err := dtx.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM entries) + (SELECT COUNT(*) FROM spent) + (SELECT COUNT(*) FROM spent_spaces)").Scan(&rows); err != nil {
		return fmt.Errorf("read the destination: %w", err)
	}
	if n != 0 || rows != 0 || headHash != genesisHash {
		// A ledger with entries is never overwritten, nor merged into:
		// two chains cannot be joined without rewriting one.
		return fmt.Errorf("%w (its head records %d entries): migrate only into a new ledger", ErrNotEmpty, n)
	}
	if err := copyEntries(ctx, stx, dtx); err != nil {
		return err
	}
	if err := copySpent(ctx, stx, dtx, "spent", "table_name"); err != nil {
		return err
	}
	if err := copySpent(ctx, stx, dtx, "spent_spaces", "space_name"); err != nil {
		return err
	}
	if _, err := dtx.ExecContext(ctx, "UPDATE head SET seq = ?, hash = ? WHERE id = 1", seq, hash); err != nil {
		return fmt.Errorf("write the head: %w", err)
	}
	return nil
}

// ErrNotEmpty is returned (wrapped) by Migrate when the destination
// ledger already holds entries or spends: a ledger is migrated once, into
// a new one.
var ErrNotEmpty = errors.New("the destination ledger is not empty")

// batchInsert writes rows with multi-row INSERTs of up to migrateBatch
// rows.
type batchInsert struct {
	tx   *sql.Tx
	head string // INSERT INTO t (cols) VALUES
	row  string // (?, ?, …)
	cols int
	args []any
}

func newBatchInsert(tx *sql.Tx, table, cols string) *batchInsert {
	n := strings.Count(cols, ",") + 1
	return &batchInsert{tx: tx, head: "INSERT INTO " + table + " (" + cols + ") VALUES ",
		row: "(" + strings.Repeat("?, ", n-1) + "?)", cols: n}
}

func (b *batchInsert) add(ctx context.Context, vals ...any) error {
	b.args = append(b.args, vals...)
	if len(b.args) >= b.cols*migrateBatch {
		return b.flush(ctx)
	}
	return nil
}

func (b *batchInsert) flush(ctx context.Context) error {
	n := len(b.args) / b.cols
	if n == 0 {
		return nil
	}
	q := b.head + strings.Repeat(b.row+", ", n-1) + b.row
	if _, err := b.tx.ExecContext(ctx, q, b.args...); err != nil {
		return err
	}
	b.args = b.args[:0]
	return nil
}

// copyEntries copies every entry, column by column as stored.
func copyEntries(ctx context.Context, stx, dtx *sql.Tx) error {
	rows, err := stx.QueryContext(ctx, "SELECT "+entryColumns+" FROM entries ORDER BY seq")
	if err != nil {
		return fmt.Errorf("read entries: %w", err)
	}
	defer rows.Close()
	b := newBatchInsert(dtx, "entries", entryColumns)
	for rows.Next() {
		var (
			seq, conn                                                          int64
			ts, kind, user, tables, mech, strat, digest, prev, hash, unit, sps string
			eps, rho, delta                                                    float64
		)
		if err := rows.Scan(&seq, &ts, &kind, &user, &conn, &tables, &mech, &strat, &eps, &rho, &digest, &prev, &hash, &unit, &delta, &sps); err != nil {
			return fmt.Errorf("read entry: %w", err)
		}
		if err := b.add(ctx, seq, ts, kind, user, conn, tables, mech, strat, eps, rho, digest, prev, hash, unit, delta, sps); err != nil {
			return fmt.Errorf("write entries: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read entries: %w", err)
	}
	if err := b.flush(ctx); err != nil {
		return fmt.Errorf("write entries: %w", err)
	}
	return nil
}

// copySpent copies the rows of one spent aggregate (table spent or
// spent_spaces, whose second key column is name).
func copySpent(ctx context.Context, stx, dtx *sql.Tx, table, name string) error {
	cols := "user_name, " + name + ", epsilon, rho, delta"
	rows, err := stx.QueryContext(ctx, "SELECT "+cols+" FROM "+table)
	if err != nil {
		return fmt.Errorf("read %s: %w", table, err)
	}
	defer rows.Close()
	b := newBatchInsert(dtx, table, cols)
	for rows.Next() {
		var user, key string
		var c Cost
		if err := rows.Scan(&user, &key, &c.Epsilon, &c.Rho, &c.Delta); err != nil {
			return fmt.Errorf("read %s: %w", table, err)
		}
		if err := b.add(ctx, user, key, c.Epsilon, c.Rho, c.Delta); err != nil {
			return fmt.Errorf("write %s: %w", table, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read %s: %w", table, err)
	}
	if err := b.flush(ctx); err != nil {
		return fmt.Errorf("write %s: %w", table, err)
	}
	return nil
}
