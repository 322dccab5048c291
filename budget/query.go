package budget

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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

func (q Query) where(pg bool) (string, []any) {
	var where []string
	var args []any
	if q.User != "" {
		where = append(where, "user_name = ?")
		args = append(args, q.User)
	}
	if q.Table != "" {
		w, a := tableFilter(pg, q.Table)
		where = append(where, w)
		args = append(args, a...)
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

// tableFilter selects the entries touching table. The substring test on
// the stored JSON (a table's name is written as json.Marshal writes it)
// spares the database the JSON parse of most non-matching rows; the
// array's elements then decide exactly.
func tableFilter(pg bool, table string) (string, []any) {
	quoted, _ := json.Marshal(table) // a string always encodes
	return containsText(pg, "tables_json") + " AND EXISTS (SELECT 1 FROM " + jsonEach(pg, "entries.tables_json", "j") + " WHERE j.value = ?)",
		[]any{string(quoted), table}
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
	where, args := q.where(l.pg())
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
	// 15s, 1m, 5m, 15m, 1h, 6h, 1d, 7d, 28d, 364d) that covers the charges'
	// time span in that many buckets. Each width divides the next, so a
	// series coarsened to a wider one sums exactly the same charges per
	// bucket as one summed at that width directly.
	Buckets int
	// Width, if > 0, fixes the bucket width instead (buckets start at
	// multiples of Width since the zero time, as time.Truncate rounds).
	Width time.Duration
	// AfterSeq, if > 0, sums only the entries after it: those appended
	// since a Series whose LastSeq it was. Merged with that Series and
	// coarsened (see Coarsen), the result is the Series of every entry,
	// at the cost of reading only the new ones.
	AfterSeq int64
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
	// LastSeq is the ledger's last entry when the sums were taken.
	LastSeq int64 `json:"last_seq"`
}

var bucketLadder = []time.Duration{
	time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond, time.Second, 5 * time.Second, 15 * time.Second, time.Minute, 5 * time.Minute, 15 * time.Minute,
	time.Hour, 6 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour, 28 * 24 * time.Hour, 364 * 24 * time.Hour,
}

// Spending sums the charges selected by q per user and time bucket, in
// the database, in one snapshot; zero-cost entries (reuse, limits) are not
// charges and are left out. Sums are in the database's order of addition, so a
// total may differ from the spent aggregate in the last bits.
func (l *Ledger) Spending(ctx context.Context, q SeriesQuery) (Series, error) {
	if q.Table == "" {
		return Series{}, errors.New("budget: spending: a table is required")
	}
	nb := q.Buckets
	if nb <= 0 {
		nb = 120
	}
	tw, targs := tableFilter(l.pg(), q.Table)
	where := " WHERE kind = ? AND " + tw
	args := append([]any{KindCharge}, targs...)
	if q.User != "" {
		where += " AND user_name = ?"
		args = append(args, q.User)
	}
	if q.AfterSeq > 0 {
		where += " AND seq > ?"
		args = append(args, q.AfterSeq)
	}
	s := Series{Table: q.Table}
	err := l.read(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, "SELECT seq FROM head WHERE id = 1").Scan(&s.LastSeq); err != nil {
			return fmt.Errorf("read head: %w", err)
		}
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
		s.Width = q.Width
		if s.Width <= 0 {
			s.Width = bucketWidth(from, to, nb, 0)
		}
		s.From, s.To = from.UTC().Truncate(s.Width), to.UTC()
		width := s.Width.Milliseconds()
		origin := s.From.UnixMilli()
		// Milliseconds since the epoch, from the fixed-width stored time
		// (see timeLayout): whole seconds, then the first three digits of
		// the fraction.
		rows, err := tx.QueryContext(ctx, `SELECT
			(`+epochMillis(l.pg(), "time")+` - ?) / ? AS b, user_name,
			SUM(epsilon), SUM(rho), SUM(delta), COUNT(*) FROM entries`+where+` GROUP BY b, user_name ORDER BY b, user_name`,
			append([]any{origin, width}, args...)...)
		if err != nil {
			return fmt.Errorf("sum per bucket: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var b int64
			var p SpendPoint
			if err := rows.Scan(&b, &p.User, &p.Cost.Epsilon, &p.Cost.Rho, &p.Cost.Delta, &p.Charges); err != nil {
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

// bucketWidth is the smallest width of the ladder, at least min, that
// covers from..to in n buckets.
func bucketWidth(from, to time.Time, n int, min time.Duration) time.Duration {
	for _, w := range bucketLadder {
		if w >= min && to.Sub(from.Truncate(w)) < time.Duration(n)*w {
			return w
		}
	}
	return bucketLadder[len(bucketLadder)-1]
}

// Coarsen re-buckets a series, for instance one of fine buckets merged
// from several Spending calls (points may repeat a bucket and user), into at
// most n buckets (default 120) of a width of the ladder (see SeriesQuery),
// summing per bucket and user. It is what Spending with Buckets n returns
// for the same charges, whose times were truncated to s.Width.
func Coarsen(s Series, n int) Series {
	if n <= 0 {
		n = 120
	}
	out := Series{Table: s.Table, LastSeq: s.LastSeq}
	if len(s.Points) == 0 {
		out.Width = s.Width
		return out
	}
	from, to := s.Points[0].Start, s.Points[0].Start
	for _, p := range s.Points {
		if p.Start.Before(from) {
			from = p.Start
		}
		if p.Start.After(to) {
			to = p.Start
		}
	}
	if s.To.After(to) {
		to = s.To
	}
	out.Width = bucketWidth(from, to, n, s.Width)
	out.From, out.To = from.Truncate(out.Width), to
	type key struct {
		start time.Time
		user  string
	}
	at := map[key]int{}
	for _, p := range s.Points {
		k := key{p.Start.Truncate(out.Width), p.User}
		i, ok := at[k]
		if !ok {
			i = len(out.Points)
			at[k] = i
			out.Points = append(out.Points, SpendPoint{Start: k.start, User: k.user})
		}
		q := &out.Points[i]
		q.Cost = q.Cost.Add(p.Cost)
		q.Charges += p.Charges
	}
	slices.SortFunc(out.Points, func(a, b SpendPoint) int {
		if c := a.Start.Compare(b.Start); c != 0 {
			return c
		}
		return strings.Compare(a.User, b.User)
	})
	return out
}

// SpentRows returns every scope's spend from the spent aggregate (what each
// charge is checked against), sorted by Space, Table, then User; see
// SpentRow for the scopes. Unlike [Ledger.Budgets] it reads one row per scope, not
// every entry; [Ledger.Verify] checks that the two agree.
func (l *Ledger) SpentRows(ctx context.Context) ([]SpentRow, error) {
	var out []SpentRow
	err := l.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT user_name, table_name, '' AS space, epsilon, rho, delta FROM spent
			UNION ALL SELECT user_name, '', space_name, epsilon, rho, delta FROM spent_spaces ORDER BY 3, 2, 1`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r SpentRow
			if err := rows.Scan(&r.User, &r.Table, &r.Space, &r.Cost.Epsilon, &r.Cost.Rho, &r.Cost.Delta); err != nil {
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
