package budget

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Read APIs for viewers of a long ledger (the web console): a page of
// entries at a time, spending summed per time bucket, and the spent
// aggregate. Each runs in SQLite over the indexes, in one snapshot, so its
// cost grows with the page or the number of buckets, not with the ledger.

// Query selects a page of entries for [Ledger.Page]. Zero fields select
// everything.
type Query struct {
	User  string    // only entries of this user
	Table string    // only entries touching this table
	Kind  string    // only entries of this kind
	Since time.Time // only entries at or after this time
	Until time.Time // only entries before this time
	// Before, if > 0, selects entries with Seq < Before: the page after one
	// whose last entry was Before (pages run from the newest entry back).
	Before int64
	// Limit is the page size: DefaultPageSize if 0, at most MaxPageSize.
	Limit int
	// Count asks for Page.Total (one more pass over the matching entries).
	Count bool
}

// Page sizes of [Ledger.Page].
const (
	DefaultPageSize = 50
	MaxPageSize     = 1000
)

// Page is one page of entries, newest first.
type Page struct {
	Entries []Entry `json:"entries"`
	// Next is the Query.Before of the next (older) page, 0 if this is the
	// last page.
	Next int64 `json:"next,omitempty"`
	// Total is the number of entries the query matches on all pages (only
	// when Query.Count is set; -1 otherwise).
	Total int64 `json:"total"`
}

func (q Query) where() (string, []any) {
	var where []string
	var args []any
	if q.User != "" {
		where = append(where, "user_name = ?")
		args = append(args, q.User)
	}
	if q.Table != "" {
		where = append(where, "EXISTS (SELECT 1 FROM json_each(entries.tables_json) WHERE value = ?)")
		args = append(args, q.Table)
	}
	if q.Kind != "" {
		where = append(where, "kind = ?")
		args = append(args, q.Kind)
	}
	if !q.Since.IsZero() {
		where = append(where, "time >= ?")
		args = append(args, q.Since.UTC().Format(timeLayout))
	}
	if !q.Until.IsZero() {
		where = append(where, "time < ?")
		args = append(args, q.Until.UTC().Format(timeLayout))
	}
	if len(where) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(where, " AND "), args
}

// Page returns one page of the entries q selects, newest first, and where
// the next page starts. Pages are keyed by sequence number, so a page costs
// the same wherever it is in the ledger, and entries appended while a
// viewer pages do not shift the pages it has not seen yet.
func (l *Ledger) Page(ctx context.Context, q Query) (Page, error) {
	n := q.Limit
	switch {
	case n <= 0:
		n = DefaultPageSize
	case n > MaxPageSize:
		n = MaxPageSize
	}
	where, args := q.where()
	page := Page{Total: -1}
	err := l.read(ctx, func(tx *sql.Tx) error {
		if q.Count {
			if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM entries"+where, args...).Scan(&page.Total); err != nil {
				return fmt.Errorf("count entries: %w", err)
			}
		}
		pw, pargs := where, append([]any(nil), args...)
		if q.Before > 0 {
			if pw == "" {
				pw = " WHERE seq < ?"
			} else {
				pw += " AND seq < ?"
			}
			pargs = append(pargs, q.Before)
		}
		pargs = append(pargs, n+1)
		return scanEntries(ctx, tx, "SELECT "+entryColumns+" FROM entries"+pw+" ORDER BY seq DESC LIMIT ?", pargs,
			func(e Entry, _ string) error {
				page.Entries = append(page.Entries, e)
				return nil
			})
	})
	if err != nil {
		return Page{}, fmt.Errorf("budget: page: %w", err)
	}
	if len(page.Entries) > n {
		page.Entries = page.Entries[:n]
		page.Next = page.Entries[n-1].Seq
	}
	return page, nil
}

// SeriesQuery selects the charges that [Ledger.Spending] sums.
type SeriesQuery struct {
	Table string // required: charges touching this table
	User  string // only this user's charges ("" for every user)
	// Buckets is the most time buckets wanted (default 120): the bucket
	// width is the smallest of a fixed ladder (1ms, 10ms, 100ms, 1s, 5s,
	// 15s, 1m, 5m, 15m, 1h, 6h, 1d, 7d, 30d, 365d) that covers the charges'
	// time span in that many buckets.
	Buckets int
}

// SpendPoint is what one user spent on a table in one time bucket.
type SpendPoint struct {
	Start   time.Time `json:"start"` // the bucket's start (UTC)
	User    string    `json:"user"`
	Cost    Cost      `json:"cost"`
	Charges int64     `json:"charges"`
}

// Series is spending over time: the charges of one table summed per user
// and time bucket, buckets in time order, users by name within a bucket.
// Buckets without a charge are left out.
type Series struct {
	Table  string        `json:"table"`
	Width  time.Duration `json:"width_ns"`
	From   time.Time     `json:"from"` // first bucket's start; zero if no charge
	To     time.Time     `json:"to"`   // last charge's time
	Points []SpendPoint  `json:"points"`
}

var bucketLadder = []time.Duration{
	time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond, time.Second, 5 * time.Second, 15 * time.Second, time.Minute, 5 * time.Minute, 15 * time.Minute,
	time.Hour, 6 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour, 30 * 24 * time.Hour, 365 * 24 * time.Hour,
}

// Spending sums the charges selected by q per user and time bucket, in
// SQLite, in one snapshot; zero-cost entries (reuse, limits) are not
// charges and are left out. Sums are in SQLite's order of addition, so a
// total may differ from the spent aggregate in the last bits.
func (l *Ledger) Spending(ctx context.Context, q SeriesQuery) (Series, error) {
	if q.Table == "" {
		return Series{}, errors.New("budget: spending: a table is required")
	}
	nb := q.Buckets
	if nb <= 0 {
		nb = 120
	}
	where := " WHERE kind = ? AND EXISTS (SELECT 1 FROM json_each(entries.tables_json) WHERE value = ?)"
	args := []any{KindCharge, q.Table}
	if q.User != "" {
		where += " AND user_name = ?"
		args = append(args, q.User)
	}
	s := Series{Table: q.Table}
	err := l.read(ctx, func(tx *sql.Tx) error {
		var lo, hi sql.NullString
		if err := tx.QueryRowContext(ctx, "SELECT MIN(time), MAX(time) FROM entries"+where, args...).Scan(&lo, &hi); err != nil {
			return fmt.Errorf("time span: %w", err)
		}
		if !lo.Valid || !hi.Valid {
			return nil
		}
		from, err1 := time.Parse(time.RFC3339Nano, lo.String)
		to, err2 := time.Parse(time.RFC3339Nano, hi.String)
		if err := errors.Join(err1, err2); err != nil {
			return &TamperError{Reason: "undecodable entry time: " + err.Error()}
		}
		s.Width = bucketLadder[len(bucketLadder)-1]
		for _, w := range bucketLadder {
			if to.Sub(from.Truncate(w)) < time.Duration(nb)*w {
				s.Width = w
				break
			}
		}
		s.From, s.To = from.UTC().Truncate(s.Width), to.UTC()
		width := s.Width.Milliseconds()
		origin := s.From.UnixMilli()
		// Milliseconds since the epoch, from the fixed-width stored time
		// (see timeLayout): whole seconds, then the first three digits of
		// the fraction.
		rows, err := tx.QueryContext(ctx, `SELECT
			(unixepoch(substr(time, 1, 19)) * 1000 + CAST(substr(time, 21, 3) AS INTEGER) - ?) / ? AS b, user_name,
			SUM(epsilon), SUM(rho), COUNT(*) FROM entries`+where+` GROUP BY b, user_name ORDER BY b, user_name`,
			append([]any{origin, width}, args...)...)
		if err != nil {
			return fmt.Errorf("sum per bucket: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var b int64
			var p SpendPoint
			if err := rows.Scan(&b, &p.User, &p.Cost.Epsilon, &p.Cost.Rho, &p.Charges); err != nil {
				return fmt.Errorf("sum per bucket: %w", err)
			}
			p.Start = time.UnixMilli(origin + b*width).UTC()
			s.Points = append(s.Points, p)
		}
		return rows.Err()
	})
	if err != nil {
		return Series{}, fmt.Errorf("budget: spending: %w", err)
	}
	return s, nil
}

// SpentRows returns every scope's spend from the spent aggregate (what each
// charge is checked against), sorted by Table, then User; see SpentRow for
// the scopes. Unlike [Ledger.Budgets] it reads one row per scope, not
// every entry; [Ledger.Verify] checks that the two agree.
func (l *Ledger) SpentRows(ctx context.Context) ([]SpentRow, error) {
	var out []SpentRow
	err := l.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, "SELECT user_name, table_name, epsilon, rho FROM spent ORDER BY table_name, user_name")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r SpentRow
			if err := rows.Scan(&r.User, &r.Table, &r.Cost.Epsilon, &r.Cost.Rho); err != nil {
				return err
			}
			out = append(out, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("budget: spent rows: %w", err)
	}
	return out, nil
}

// Head returns the number of entries and the last entry's hash, as the
// head row records them (64 zeros for an empty ledger), without verifying.
func (l *Ledger) Head(ctx context.Context) (seq int64, hash string, err error) {
	err = l.db.QueryRowContext(ctx, "SELECT seq, hash FROM head WHERE id = 1").Scan(&seq, &hash)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", &TamperError{Reason: "the head row is missing"}
	}
	if err != nil {
		return 0, "", fmt.Errorf("budget: head: %w", err)
	}
	return seq, hash, nil
}
