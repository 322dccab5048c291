package measure

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
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
	if _, err := s.db.ExecContext(ctx, "INSERT INTO replays (ledger_seq, table_name, user_name, texts, options, reused) VALUES (?, ?, ?, ?, ?, ?)",
		r.LedgerSeq, r.Table, r.User, string(texts), string(opts), reused); err != nil {
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
	return r, nil
}
