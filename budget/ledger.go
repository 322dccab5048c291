package budget

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Entry kinds.
const (
	KindCharge = "charge" // a measurement that spent budget
	KindReuse  = "reuse"  // a stored answer re-released; costs nothing
	KindLimits = "limits" // a catalog budget change; costs nothing
	// KindDerived is a batch answered from stored measurements alone
	// (generalised least squares over noisy answers already paid for):
	// post-processing, so it costs nothing; its Strategy names the
	// measurements used.
	KindDerived = "derived"
)

// Limit scopes. The catalog's budgets belong to privacy unit spaces
// (ScopeUserSpace, ScopeSpace): tables of one space protect the same
// people, so their charges add up in one spend. The table scopes are the
// budgets of ledgers written before spaces; CheckSpending applies them
// to the entries of that time only.
const (
	ScopeUserSpace = "user_space" // one user in one space (User and Space set)
	ScopeSpace     = "space"      // one space, all users together (Space set)
	ScopeUserTable = "user_table" // one user on one table (User and Table set)
	ScopeTable     = "table"      // one table, all users together (Table set)
	ScopeUser      = "user"       // one user across all tables (User set)
)

// relTol is the relative slack allowed when comparing a spend with a limit:
// a charge is refused only if ε(after) > Limit.Epsilon·(1+relTol). Floating
// point sums drift by a few ulps (ten charges of 0.1 add up to
// 0.9999999999999999 and 0.7+0.2+0.1 to 1.0000000000000002), and an analyst
// who was told "ten queries at ε=0.1" must get ten. The slack lets at most a
// billionth of a limit be overspent.
const relTol = 1e-9

// genesisHash is the PrevHash of the first entry.
const genesisHash = "0000000000000000000000000000000000000000000000000000000000000000"

// timeLayout is RFC 3339 in UTC with exactly nine fractional digits. It is
// fixed width, so stored times sort as text, and it is what the hash covers.
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// Limit is a budget in ε at Delta (δ is used only to convert a ρ-zCDP part;
// it may be 0 where only pure ε is ever spent), and in δ spent: MaxDelta
// bounds the sum of the charges' Cost.Delta (partition selection). A limit
// of 0 refuses every charge with a positive cost; a MaxDelta of 0 refuses
// every charge that spends δ. The δ budget is checked only for charges
// that spend δ, so a scope whose δ is used up keeps answering the rest.
type Limit struct {
	Scope    string // ScopeUserSpace (User+Space), ScopeSpace (Space), ScopeUserTable (User+Table), ScopeTable (Table), ScopeUser (User)
	User     string
	Table    string
	Space    string
	Epsilon  float64
	Delta    float64
	MaxDelta float64
}

// Charge describes one release: who, on which tables, how, and at what cost.
type Charge struct {
	User        string   `json:"user"`
	ConnID      uint32   `json:"conn_id"`
	Tables      []string `json:"tables"` // stored sorted, without duplicates
	Mechanism   string   `json:"mechanism"`
	Strategy    string   `json:"strategy"`
	Cost        Cost     `json:"cost"`
	QueryDigest string   `json:"query_digest"` // hex SHA-256 of the normalised query texts (computed by the caller)
	// Unit is the privacy unit and bounds of a charge on a table that
	// declares one (nil for row privacy); see UnitBound.
	Unit *UnitBound `json:"unit,omitempty"`
	// Spaces are the privacy unit spaces the charge spends in (stored
	// sorted, without duplicates): one per table, the table's space. A
	// charge given none spends in the spaces the ledger maps its tables to
	// (MapSpaces; a table's own name by default), and is recorded with
	// them. Entries written before spaces have none (see MapSpaces).
	Spaces []string `json:"spaces,omitempty"`
}

// Entry is one ledger entry. Hash is the SHA-256 of the entry's canonical
// encoding (see hashEntry), which includes PrevHash, the previous entry's
// Hash (64 zeros for the first entry).
type Entry struct {
	Seq  int64     `json:"seq"` // 1, 2, 3, ... without gaps
	Time time.Time `json:"time"`
	Kind string    `json:"kind"` // KindCharge, KindReuse, KindDerived or KindLimits
	Charge
	PrevHash string `json:"prev_hash"`
	Hash     string `json:"hash"`
}

// Filter selects entries for [Ledger.Entries]. Zero fields select everything.
type Filter struct {
	User  string    // only entries of this user
	Table string    // only entries touching this table
	Since time.Time // only entries at or after this time
	Limit int       // if > 0, only the newest Limit matching entries
}

// SpentRow is what one scope has spent. With Space set (and Table ""), it
// is a space's spend: User "" is the space's total over all users, else
// one user's in the space. Otherwise User "" is a table's total over all
// users; Table "" is a user's total over all tables; both set is one user
// on one table.
type SpentRow struct {
	User  string `json:"user"`
	Table string `json:"table"`
	Cost  Cost   `json:"cost"`
	Space string `json:"space,omitempty"`
}

// Charge appends one "charge" entry for c if every limit still holds after
// it, all in one serialised write transaction: each limit's scope has its
// spent total (kept in an aggregate table, so this is O(1) in the number of
// entries) plus c.Cost converted with EpsilonFor at the limit's Delta, and
// compared with the limit (with a relative slack of 1e-9, see relTol).
//
// Each limit is also checked at the value the ledger last recorded for its
// scope (see RecordLimits), when that differs: processes sharing a ledger
// may not all have reloaded a changed catalog yet, and the stricter of the
// two keeps every charge within what the ledger says was in force, which
// is what audit verify checks.
//
// If a limit would be exceeded nothing is appended and the error is an
// *ExceededError. Every limit must concern the charge (its user and/or one
// of its tables); a limit that does not is a caller error. With no limits
// the charge is recorded unconditionally. When Charge returns nil the entry
// is committed and on disk (synchronous=FULL in SQLite, synchronous_commit
// in PostgreSQL; see lockHead).
func (l *Ledger) Charge(ctx context.Context, c Charge, limits []Limit) (Entry, error) {
	if len(c.Spaces) == 0 {
		m, err := l.SpaceMap(ctx)
		if err != nil {
			return Entry{}, fmt.Errorf("budget: charge: %w", err)
		}
		c.Spaces = spacesOf(c.Tables, m)
	}
	c, err := normaliseCharge(c, true)
	if err != nil {
		return Entry{}, fmt.Errorf("budget: charge: %w", err)
	}
	for _, lim := range limits {
		if err := checkLimit(lim, c); err != nil {
			return Entry{}, fmt.Errorf("budget: charge: %w", err)
		}
	}
	scopes := scopesOf(c)
	// Without the lock, while waiting for it: a refusal in any snapshot
	// stands, since spends only grow. Read errors are left to the locked path.
	refuse := func(ctx context.Context) error {
		cur, err := spentOf(ctx, l.db, scopes, false)
		if err != nil {
			return nil
		}
		return checkLimits(c, limits, cur)
	}
	var out Entry
	piggy := l.takeReuses()
	err = l.write(ctx, func(tx *sql.Tx) error {
		cur, err := spentOf(ctx, tx, scopes, l.pg())
		if err != nil {
			return err
		}
		recorded, err := recordedFor(ctx, tx, limits)
		if err != nil {
			return err
		}
		if err := checkLimits(c, append(slices.Clone(limits), recorded...), cur); err != nil {
			return err
		}
		// Pending reuse entries ride along, ahead of the charge: no extra
		// fsync, and the chain keeps the order in which things happened.
		for _, r := range piggy {
			if _, err := l.appendEntry(ctx, tx, KindReuse, r); err != nil {
				return err
			}
		}
		e, err := l.appendEntry(ctx, tx, KindCharge, c)
		if err != nil {
			return err
		}
		if err := writeSpent(ctx, tx, scopes, func(k scope) Cost { return cur[k].Add(c.Cost) }); err != nil {
			return err
		}
		out = e
		return nil
	}, refuse)
	l.settleReuses(piggy, err == nil)
	if err != nil {
		var ex *ExceededError
		if errors.As(err, &ex) {
			l.log.DebugContext(ctx, "charge refused", "user", c.User, "tables", c.Tables, "err", ex.Error())
			return Entry{}, ex
		}
		return Entry{}, fmt.Errorf("budget: charge: %w", err)
	}
	l.log.DebugContext(ctx, "charged", "seq", out.Seq, "user", c.User, "tables", c.Tables,
		"epsilon", c.Cost.Epsilon, "rho", c.Cost.Rho, "delta", c.Cost.Delta)
	return out, nil
}

// writeSpent sets each scope's row of the spent aggregates to value(scope).
func writeSpent(ctx context.Context, tx *sql.Tx, scopes []scope, value func(scope) Cost) error {
	for _, spaces := range [...]bool{false, true} {
		q := "INSERT INTO spent (user_name, table_name, epsilon, rho, delta) VALUES "
		conflict := " ON CONFLICT (user_name, table_name)"
		if spaces {
			q = "INSERT INTO spent_spaces (user_name, space_name, epsilon, rho, delta) VALUES "
			conflict = " ON CONFLICT (user_name, space_name)"
		}
		var args []any
		for _, k := range scopes {
			if (k.space != "") != spaces {
				continue
			}
			if len(args) > 0 {
				q += ", "
			}
			q += "(?, ?, ?, ?, ?)"
			n := value(k)
			name := k.table
			if spaces {
				name = k.space
			}
			args = append(args, k.user, name, n.Epsilon, n.Rho, n.Delta)
		}
		if len(args) == 0 {
			continue
		}
		q += conflict + " DO UPDATE SET epsilon = excluded.epsilon, rho = excluded.rho, delta = excluded.delta"
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("update spent: %w", err)
		}
	}
	return nil
}

// Record appends a zero-cost entry of the given kind, KindReuse (a stored
// answer re-released), KindDerived (answers derived from stored
// measurements) or KindLimits (a catalog budget change), on the same
// hash chain as the charges. c.Cost must be zero; User and Tables may be
// empty.
func (l *Ledger) Record(ctx context.Context, kind string, c Charge) (Entry, error) {
	if kind != KindReuse && kind != KindLimits && kind != KindDerived {
		return Entry{}, fmt.Errorf("budget: record: kind %q is not %q, %q or %q", kind, KindReuse, KindDerived, KindLimits)
	}
	c, err := normaliseCharge(c, false)
	if err != nil {
		return Entry{}, fmt.Errorf("budget: record: %w", err)
	}
	if !c.Cost.IsZero() {
		return Entry{}, fmt.Errorf("budget: record: a %s entry costs nothing, got ε=%g ρ=%g δ=%g (use Charge)", kind, c.Cost.Epsilon, c.Cost.Rho, c.Cost.Delta)
	}
	var out Entry
	err = l.write(ctx, func(tx *sql.Tx) error {
		e, err := l.appendEntry(ctx, tx, kind, c)
		out = e
		return err
	}, nil)
	if err != nil {
		return Entry{}, fmt.Errorf("budget: record: %w", err)
	}
	return out, nil
}

// appendEntry writes the next entry of the chain and moves the head, inside
// the caller's write transaction.
func (l *Ledger) appendEntry(ctx context.Context, tx *sql.Tx, kind string, c Charge) (Entry, error) {
	var seq int64
	var prev string
	var last sql.NullString
	err := tx.QueryRowContext(ctx, `SELECT h.seq, h.hash, (SELECT time FROM entries WHERE seq = h.seq)
		FROM head h WHERE h.id = 1`).Scan(&seq, &prev, &last)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Entry{}, errors.New("ledger head row is missing (run verification)")
	case err != nil:
		return Entry{}, fmt.Errorf("read head: %w", err)
	}
	// Times never go backwards along the chain, even if the clocks of
	// processes sharing the file disagree.
	now := time.Now().UTC().Round(0)
	if last.Valid {
		if t, err := time.Parse(time.RFC3339Nano, last.String); err == nil && t.After(now) {
			now = t.UTC()
		}
	}
	e := Entry{Seq: seq + 1, Time: now, Kind: kind, Charge: c, PrevHash: prev}
	ts := e.Time.Format(timeLayout)
	e.Hash = hashEntry(&e, ts)
	tables, err := json.Marshal(tablesOrEmpty(c.Tables))
	if err != nil {
		return Entry{}, fmt.Errorf("encode tables: %w", err)
	}
	unit, err := encodeUnit(c.Unit)
	if err != nil {
		return Entry{}, fmt.Errorf("encode unit: %w", err)
	}
	spaces := ""
	if len(c.Spaces) > 0 {
		b, err := json.Marshal(c.Spaces)
		if err != nil {
			return Entry{}, fmt.Errorf("encode spaces: %w", err)
		}
		spaces = string(b)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO entries
		(seq, time, kind, user_name, conn_id, tables_json, mechanism, strategy, epsilon, rho, query_digest, prev_hash, hash, unit_json, delta, spaces_json)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.Seq, ts, e.Kind, c.User, int64(c.ConnID), string(tables), c.Mechanism, c.Strategy,
		c.Cost.Epsilon, c.Cost.Rho, c.QueryDigest, e.PrevHash, e.Hash, unit, c.Cost.Delta, spaces); err != nil {
		return Entry{}, fmt.Errorf("insert entry %d: %w", e.Seq, err)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE head SET seq = ?, hash = ? WHERE id = 1", e.Seq, e.Hash); err != nil {
		return Entry{}, fmt.Errorf("update head: %w", err)
	}
	return e, nil
}

// Spent returns what has been spent in one scope, from the aggregate table:
// user "" gives a table's total over all users, table "" a user's total
// over all tables, both set one user on one table.
func (l *Ledger) Spent(ctx context.Context, user, table string) (Cost, error) {
	if user == "" && table == "" {
		return Cost{}, errors.New("budget: spent: user or table must be given")
	}
	var c Cost
	err := l.db.QueryRowContext(ctx, "SELECT epsilon, rho, delta FROM spent WHERE user_name = ? AND table_name = ?",
		user, table).Scan(&c.Epsilon, &c.Rho, &c.Delta)
	if errors.Is(err, sql.ErrNoRows) {
		return Cost{}, nil
	}
	if err != nil {
		return Cost{}, fmt.Errorf("budget: spent: %w", err)
	}
	return c, nil
}

// SpentSpace returns what has been spent in one space, from the aggregate:
// user "" gives the space's total over all users.
func (l *Ledger) SpentSpace(ctx context.Context, user, space string) (Cost, error) {
	if space == "" {
		return Cost{}, errors.New("budget: spent: space must be given")
	}
	var c Cost
	err := l.db.QueryRowContext(ctx, "SELECT epsilon, rho, delta FROM spent_spaces WHERE user_name = ? AND space_name = ?",
		user, space).Scan(&c.Epsilon, &c.Rho, &c.Delta)
	if errors.Is(err, sql.ErrNoRows) {
		return Cost{}, nil
	}
	if err != nil {
		return Cost{}, fmt.Errorf("budget: spent: %w", err)
	}
	return c, nil
}

const entryColumns = `seq, time, kind, user_name, conn_id, tables_json, mechanism, strategy, epsilon, rho, query_digest, prev_hash, hash, unit_json, delta, spaces_json`

// Entries returns the entries selected by f in ascending Seq order.
func (l *Ledger) Entries(ctx context.Context, f Filter) ([]Entry, error) {
	if err := l.FlushReuses(ctx); err != nil {
		return nil, err
	}
	var where []string
	var args []any
	if f.User != "" {
		where = append(where, "user_name = ?")
		args = append(args, f.User)
	}
	if f.Table != "" {
		where = append(where, "EXISTS (SELECT 1 FROM "+jsonEach(l.pg(), "entries.tables_json", "j")+" WHERE j.value = ?)")
		args = append(args, f.Table)
	}
	if !f.Since.IsZero() {
		where = append(where, "time >= ?")
		args = append(args, f.Since.UTC().Format(timeLayout))
	}
	q := "SELECT " + entryColumns + " FROM entries"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	if f.Limit > 0 {
		q += " ORDER BY seq DESC LIMIT ?"
		args = append(args, f.Limit)
	} else {
		q += " ORDER BY seq"
	}
	var out []Entry
	err := l.read(ctx, func(tx *sql.Tx) error {
		return scanEntries(ctx, tx, q, args, func(e Entry, _ string) error {
			out = append(out, e)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("budget: entries: %w", err)
	}
	if f.Limit > 0 {
		slices.Reverse(out)
	}
	return out, nil
}

// Budgets recomputes, from the entries alone, what every scope has spent:
// each (user, space) and each space over all users (Space set, User ""),
// each (user, table), each table over all users (User ""), and each user
// over all tables (Table ""). Rows are sorted by Space, Table, then User.
func (l *Ledger) Budgets(ctx context.Context) ([]SpentRow, error) {
	if err := l.FlushReuses(ctx); err != nil {
		return nil, err
	}
	var sum map[scope]Cost
	err := l.read(ctx, func(tx *sql.Tx) error {
		var err error
		sum, err = replaySpent(ctx, tx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("budget: budgets: %w", err)
	}
	out := make([]SpentRow, 0, len(sum))
	for k, c := range sum {
		out = append(out, SpentRow{User: k.user, Table: k.table, Space: k.space, Cost: c})
	}
	slices.SortFunc(out, func(a, b SpentRow) int {
		if c := strings.Compare(a.Space, b.Space); c != 0 {
			return c
		}
		if c := strings.Compare(a.Table, b.Table); c != 0 {
			return c
		}
		return strings.Compare(a.User, b.User)
	})
	return out, nil
}

// accumulate adds a charge entry's cost to every scope it touches; m maps
// the tables of entries that name no space (see MapSpaces). Entries are
// replayed in Seq order, the order in which Charge added them to the
// aggregates, so the float64 sums agree bit for bit.
func accumulate(sum map[scope]Cost, e Entry, m map[string]string) {
	if e.Kind != KindCharge {
		return
	}
	c := e.Charge
	if len(c.Spaces) == 0 {
		c.Spaces = spacesOf(c.Tables, m)
	}
	for _, k := range scopesOf(c) {
		sum[k] = sum[k].Add(e.Cost)
	}
}

// scopesOf lists the aggregate keys a charge adds to: (user, t) and ("", t)
// for each of its tables, (user, space s) and ("", space s) for each of its
// spaces, and (user, "").
func scopesOf(c Charge) []scope {
	out := make([]scope, 0, 2*len(c.Tables)+2*len(c.Spaces)+1)
	for _, t := range c.Tables {
		out = append(out, scope{c.User, t, ""}, scope{"", t, ""})
	}
	for _, s := range c.Spaces {
		out = append(out, scope{c.User, "", s}, scope{"", "", s})
	}
	return append(out, scope{c.User, "", ""})
}

func limitScope(lim Limit) scope {
	switch lim.Scope {
	case ScopeUserSpace:
		return scope{lim.User, "", lim.Space}
	case ScopeSpace:
		return scope{"", "", lim.Space}
	case ScopeUserTable:
		return scope{lim.User, lim.Table, ""}
	case ScopeTable:
		return scope{"", lim.Table, ""}
	default:
		return scope{lim.User, "", ""}
	}
}

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// spentOf reads the aggregates of the given scopes (absent ones are zero).
// With lock (PostgreSQL, inside a write transaction) it also locks their
// rows FOR UPDATE, table scopes then space scopes, each in the order of
// their keys, so that writers lock rows in one fixed order.
func spentOf(ctx context.Context, q querier, scopes []scope, lock bool) (map[scope]Cost, error) {
	var tw, sw []string
	var targs, sargs []any
	for _, k := range scopes {
		if k.space != "" {
			sw = append(sw, "(user_name = ? AND space_name = ?)")
			sargs = append(sargs, k.user, k.space)
		} else {
			tw = append(tw, "(user_name = ? AND table_name = ?)")
			targs = append(targs, k.user, k.table)
		}
	}
	var qs []string
	var args []any
	if len(tw) > 0 {
		qs = append(qs, "SELECT user_name, table_name, '', epsilon, rho, delta FROM spent WHERE "+strings.Join(tw, " OR "))
		args = append(args, targs...)
	}
	if len(sw) > 0 {
		qs = append(qs, "SELECT user_name, '', space_name, epsilon, rho, delta FROM spent_spaces WHERE "+strings.Join(sw, " OR "))
		args = append(args, sargs...)
	}
	out := make(map[scope]Cost, len(scopes))
	if len(qs) == 0 {
		return out, nil
	}
	if !lock {
		return out, readSpent(ctx, q, strings.Join(qs, " UNION ALL "), args, out)
	}
	// FOR UPDATE does not go with UNION: one query per table.
	if len(tw) > 0 {
		if err := readSpent(ctx, q, qs[0]+" ORDER BY user_name, table_name FOR UPDATE", targs, out); err != nil {
			return nil, err
		}
	}
	if len(sw) > 0 {
		if err := readSpent(ctx, q, qs[len(qs)-1]+" ORDER BY user_name, space_name FOR UPDATE", sargs, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readSpent adds the rows of q (user, table, space, ε, ρ, δ) to out.
func readSpent(ctx context.Context, q querier, query string, args []any, out map[scope]Cost) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("read spent: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k scope
		var c Cost
		if err := rows.Scan(&k.user, &k.table, &k.space, &c.Epsilon, &c.Rho, &c.Delta); err != nil {
			return fmt.Errorf("read spent: %w", err)
		}
		out[k] = c
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read spent: %w", err)
	}
	return nil
}

// checkLimits returns an *ExceededError for the first limit that c would
// exceed on top of the spends in cur, or nil.
func checkLimits(c Charge, limits []Limit, cur map[scope]Cost) error {
	for _, lim := range limits {
		s := cur[limitScope(lim)]
		// δ is checked only when the charge spends some, so that a scope
		// whose δ budget is used up (or lowered below its spend) still
		// answers everything that spends none.
		if c.Cost.Delta > 0 && s.Delta+c.Cost.Delta > lim.MaxDelta*(1+relTol) {
			remaining := lim.MaxDelta - s.Delta
			if remaining <= lim.MaxDelta*relTol {
				remaining = 0
			}
			return &ExceededError{
				Limit:     lim,
				Delta:     true,
				Spent:     s.Delta,
				Requested: c.Cost.Delta,
				Remaining: remaining,
			}
		}
		after := EpsilonFor(s.Add(c.Cost), lim.Delta)
		if math.IsInf(after, 1) {
			return fmt.Errorf("limit %s (user %q, table %q, space %q) has δ=%g: a ρ-zCDP spend needs δ in (0,1)",
				lim.Scope, lim.User, lim.Table, lim.Space, lim.Delta)
		}
		if after > lim.Epsilon*(1+relTol) {
			spent := EpsilonFor(s, lim.Delta)
			remaining := lim.Epsilon - spent
			if remaining <= lim.Epsilon*relTol {
				remaining = 0 // within the slack: nothing left worth reporting
			}
			return &ExceededError{
				Limit:     lim,
				Spent:     spent,
				Requested: EpsilonFor(c.Cost, lim.Delta),
				Remaining: remaining,
			}
		}
	}
	return nil
}

// recordedFor returns, for each limit, the value the ledger last recorded
// for its scope (by the exact scope, or by the catalog rule with User ""
// that covers it) when that differs from the limit: the extra limits a
// charge must also meet.
func recordedFor(ctx context.Context, tx *sql.Tx, limits []Limit) ([]Limit, error) {
	if len(limits) == 0 {
		return nil, nil
	}
	rec, err := recordedLimits(ctx, tx)
	if err != nil {
		return nil, err
	}
	var out []Limit
	for _, lim := range limits {
		r, ok := rec[keyOf(lim)]
		if !ok && lim.User != "" {
			r, ok = rec[limitKey{lim.Scope, "", lim.Table, lim.Space}]
		}
		if ok && !sameLimit(r, lim) {
			r.Scope, r.User, r.Table, r.Space = lim.Scope, lim.User, lim.Table, lim.Space
			out = append(out, r)
		}
	}
	return out, nil
}

// checkLimit rejects malformed limits and limits that do not concern c.
func checkLimit(lim Limit, c Charge) error {
	if math.IsNaN(lim.Epsilon) || lim.Epsilon < 0 {
		return fmt.Errorf("limit %s: ε=%g must be a non-negative number", lim.Scope, lim.Epsilon)
	}
	if math.IsNaN(lim.Delta) || lim.Delta < 0 || lim.Delta >= 1 {
		return fmt.Errorf("limit %s: δ=%g must be in [0,1)", lim.Scope, lim.Delta)
	}
	if math.IsNaN(lim.MaxDelta) || lim.MaxDelta < 0 || lim.MaxDelta >= 1 {
		return fmt.Errorf("limit %s: δ budget %g must be in [0,1)", lim.Scope, lim.MaxDelta)
	}
	userOK := lim.User != "" && lim.User == c.User
	tableOK := lim.Table != "" && lim.Space == "" && slices.Contains(c.Tables, lim.Table)
	spaceOK := lim.Space != "" && lim.Table == "" && slices.Contains(c.Spaces, lim.Space)
	var ok bool
	switch lim.Scope {
	case ScopeUserSpace:
		ok = userOK && spaceOK
	case ScopeSpace:
		ok = spaceOK && lim.User == ""
	case ScopeUserTable:
		ok = userOK && tableOK
	case ScopeTable:
		ok = tableOK && lim.User == ""
	case ScopeUser:
		ok = userOK && lim.Table == "" && lim.Space == ""
	default:
		return fmt.Errorf("limit scope %q is not %q, %q, %q, %q or %q", lim.Scope, ScopeUserSpace, ScopeSpace, ScopeUserTable, ScopeTable, ScopeUser)
	}
	if !ok {
		return fmt.Errorf("limit %s (user %q, table %q, space %q) does not concern a charge of user %q on tables %v in spaces %v",
			lim.Scope, lim.User, lim.Table, lim.Space, c.User, c.Tables, c.Spaces)
	}
	return nil
}

// normaliseCharge validates c and puts it in its stored form: tables sorted
// without duplicates (nil if none), the digest in lower case, -0 costs as 0.
// A charge (as opposed to a zero-cost record) needs a user and a table.
func normaliseCharge(c Charge, charging bool) (Charge, error) {
	for _, f := range [...]struct{ name, s string }{{"user", c.User}, {"mechanism", c.Mechanism}, {"strategy", c.Strategy}} {
		if !utf8.ValidString(f.s) {
			return Charge{}, fmt.Errorf("%s is not valid UTF-8", f.name)
		}
	}
	if charging && c.User == "" {
		return Charge{}, errors.New("a charge needs a user")
	}
	tables := make([]string, 0, len(c.Tables))
	for _, t := range c.Tables {
		if t == "" || !utf8.ValidString(t) {
			return Charge{}, fmt.Errorf("table name %q is empty or not valid UTF-8", t)
		}
		tables = append(tables, t)
	}
	slices.Sort(tables)
	tables = slices.Compact(tables)
	if len(tables) == 0 {
		if charging {
			return Charge{}, errors.New("a charge needs at least one table")
		}
		tables = nil
	}
	c.Tables = tables
	spaces := make([]string, 0, len(c.Spaces))
	for _, s := range c.Spaces {
		if s == "" || !utf8.ValidString(s) {
			return Charge{}, fmt.Errorf("space name %q is empty or not valid UTF-8", s)
		}
		spaces = append(spaces, s)
	}
	slices.Sort(spaces)
	if spaces = slices.Compact(spaces); len(spaces) == 0 {
		spaces = nil
	}
	c.Spaces = spaces
	if c.QueryDigest != "" {
		c.QueryDigest = strings.ToLower(c.QueryDigest)
		if b, err := hex.DecodeString(c.QueryDigest); err != nil || len(b) != 32 {
			return Charge{}, fmt.Errorf("query digest %q is not a hex SHA-256", c.QueryDigest)
		}
	}
	for _, f := range [...]struct {
		name string
		p    *float64
	}{{"ε", &c.Cost.Epsilon}, {"ρ", &c.Cost.Rho}, {"δ", &c.Cost.Delta}} {
		if math.IsNaN(*f.p) || math.IsInf(*f.p, 0) || *f.p < 0 {
			return Charge{}, fmt.Errorf("cost %s=%g must be finite and non-negative", f.name, *f.p)
		}
		if *f.p == 0 {
			*f.p = 0 // -0 has other bits
		}
	}
	if c.Cost.Delta >= 1 {
		return Charge{}, fmt.Errorf("cost δ=%g must be below 1", c.Cost.Delta)
	}
	if reason := checkUnit(c); reason != "" {
		return Charge{}, errors.New(reason)
	}
	return c, nil
}

func tablesOrEmpty(t []string) []string {
	if t == nil {
		return []string{}
	}
	return t
}
