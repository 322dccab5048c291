package measure

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Replays are what an auditor needs to re-plan a charged batch and compare
// its strategy with the digest the ledger's hash chain covers (`dpproxy
// audit verify --replan`): the statements' texts, the session options
// the plan was made at and whether stored measurements shaped it. They
// are metadata the analyst sent, never data, and are kept beside the
// measurements so that PostgreSQL state shares them like the rest. The
// texts are authenticated by the ledger entry's query digest, and the
// plan by its strategy digest, so a replay record need not be trusted.
//
// They are not counted in the store's byte bound: one is a few hundred
// bytes per charge, like the ledger entry it describes.

// replaySchema is in the dialect's column types, as schema (store.go).
const replaySchema = `
CREATE TABLE IF NOT EXISTS replays (
	ledger_seq %[2]s PRIMARY KEY,
	table_name TEXT NOT NULL,
	user_name  TEXT NOT NULL,
	texts      TEXT NOT NULL,
	options    TEXT NOT NULL,
	reused     %[2]s NOT NULL
);
CREATE TABLE IF NOT EXISTS replay_basis (
	ledger_seq %[2]s PRIMARY KEY,
	stored     TEXT NOT NULL
);`

// Replay is what re-plans one charged batch.
type Replay struct {
	// LedgerSeq is the charge's ledger entry.
	LedgerSeq int64
	// Table is the table the batch read, as the analyst named it.
	Table string
	// User is the analyst: the catalog's defaults for them shape the plan.
	User string
	// Texts are the batch's statements as sent, in order.
	Texts []string
	// Options are the session variables the plan was made at (name
	// without '@' → value as text); absent ones were unset.
	Options map[string]string
	// Reused is set when the plan was decided with stored measurements
	// (measured less, to combine with them): re-deriving it needs the
	// store as it was then.
	Reused bool
	// Stored, when Reused, are the IDs of the measurements stored for
	// the table's data version when the plan was decided, ascending:
	// the store as it was then (kept in replay_basis; nil for a record
	// written before it was kept).
	Stored []int64
}

// PutReplay stores r; a second record for the same entry replaces none
// and is an error.
func (s *Store) PutReplay(ctx context.Context, r Replay) error {
	texts, err := json.Marshal(r.Texts)
	if err != nil {
		return fmt.Errorf("measure: put replay %d: %w", r.LedgerSeq, err)
	}
	if r.Options == nil {
		r.Options = map[string]string{}
	}
	opts, err := json.Marshal(r.Options)
	if err != nil {
		return fmt.Errorf("measure: put replay %d: %w", r.LedgerSeq, err)
	}
	reused := 0
	if r.Reused {
		reused = 1
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("measure: put replay %d: %w", r.LedgerSeq, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit, a no-op
	if _, err := tx.ExecContext(ctx, "INSERT INTO replays (ledger_seq, table_name, user_name, texts, options, reused) VALUES (?, ?, ?, ?, ?, ?)",
		r.LedgerSeq, r.Table, r.User, string(texts), string(opts), reused); err != nil {
		return fmt.Errorf("measure: put replay %d: %w", r.LedgerSeq, err)
	}
	if r.Reused && r.Stored != nil {
		stored, err := json.Marshal(r.Stored)
		if err != nil {
			return fmt.Errorf("measure: put replay %d: %w", r.LedgerSeq, err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO replay_basis (ledger_seq, stored) VALUES (?, ?)", r.LedgerSeq, string(stored)); err != nil {
			return fmt.Errorf("measure: put replay %d: %w", r.LedgerSeq, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("measure: put replay %d: %w", r.LedgerSeq, err)
	}
	return nil
}

// ErrNoReplay is Replay's error for an entry with no record.
var ErrNoReplay = errors.New("measure: no replay record")

// Replay returns the record of ledger entry seq (ErrNoReplay when none).
func (s *Store) Replay(ctx context.Context, seq int64) (Replay, error) {
	r := Replay{LedgerSeq: seq}
	var texts, opts string
	var reused int64
	err := s.db.QueryRowContext(ctx, "SELECT table_name, user_name, texts, options, reused FROM replays WHERE ledger_seq = ?", seq).
		Scan(&r.Table, &r.User, &texts, &opts, &reused)
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("%w for entry %d", ErrNoReplay, seq)
	}
	if err != nil {
		return r, fmt.Errorf("measure: replay %d: %w", seq, err)
	}
	if err := json.Unmarshal([]byte(texts), &r.Texts); err != nil {
		return r, fmt.Errorf("measure: replay %d: texts: %w", seq, err)
	}
	if err := json.Unmarshal([]byte(opts), &r.Options); err != nil {
		return r, fmt.Errorf("measure: replay %d: options: %w", seq, err)
	}
	r.Reused = reused != 0
	var stored string
	err = s.db.QueryRowContext(ctx, "SELECT stored FROM replay_basis WHERE ledger_seq = ?", seq).Scan(&stored)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return r, fmt.Errorf("measure: replay %d: stored: %w", seq, err)
	default:
		if err := json.Unmarshal([]byte(stored), &r.Stored); err != nil {
			return r, fmt.Errorf("measure: replay %d: stored: %w", seq, err)
		}
	}
	return r, nil
}

// ByID returns the measurements of ids that are still stored, by
// ascending ID, and the IDs that are not (forgotten to keep the store
// within its bound).
func (s *Store) ByID(ctx context.Context, ids []int64) (found []*Measurement, missing []int64, err error) {
	want := slices.Sorted(slices.Values(ids))
	want = slices.Compact(want)
	for len(want) > 0 {
		chunk := want[:min(len(want), 500)]
		want = want[len(chunk):]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		q := "SELECT id, body FROM measurements WHERE id IN (?" + strings.Repeat(", ?", len(chunk)-1) + ") ORDER BY id"
		rows, err := s.db.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, nil, fmt.Errorf("measure: by id: %w", err)
		}
		got := map[int64]bool{}
		for rows.Next() {
			var id int64
			var body []byte
			if err := rows.Scan(&id, &body); err != nil {
				rows.Close()
				return nil, nil, fmt.Errorf("measure: by id: %w", err)
			}
			m, err := decodeStored(id, body)
			if err != nil {
				rows.Close()
				return nil, nil, fmt.Errorf("measure: by id %d: %w", id, err)
			}
			found = append(found, m)
			got[id] = true
		}
		if err := rows.Close(); err != nil {
			return nil, nil, fmt.Errorf("measure: by id: %w", err)
		}
		if err := rows.Err(); err != nil {
			return nil, nil, fmt.Errorf("measure: by id: %w", err)
		}
		for _, id := range chunk {
			if !got[id] {
				missing = append(missing, id)
			}
		}
	}
	return found, missing, nil
}
