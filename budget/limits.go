package budget

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MechanismLimit is the Mechanism of every KindLimits entry that
// RecordLimits writes.
const MechanismLimit = "limit"

// LimitChange is one catalog limit that changed: the limit now in force and
// the one it replaces (equal to it when the entry records a scope's first
// value; see Initial). In a KindLimits entry a rule's User "" in a
// ScopeUserSpace (ScopeUserTable) limit means every user in the space (on
// the table), each separately (the catalog's per_user budget); in a
// ScopeUser limit, every user across all tables.
type LimitChange struct {
	Limit    Limit
	Previous Limit
}

// Initial reports whether the change records a scope's first value.
func (c LimitChange) Initial() bool { return sameLimit(c.Limit, c.Previous) }

// limitKey identifies a limit's scope in the ledger's history of limits.
type limitKey struct{ scope, user, table, space string }

func keyOf(l Limit) limitKey { return limitKey{l.Scope, l.User, l.Table, l.Space} }

func sameLimit(a, b Limit) bool {
	return math.Float64bits(a.Epsilon) == math.Float64bits(b.Epsilon) &&
		math.Float64bits(a.Delta) == math.Float64bits(b.Delta) &&
		math.Float64bits(a.MaxDelta) == math.Float64bits(b.MaxDelta)
}

// RecordLimits records budget changes on the hash chain, so that the
// history of the limits is in the ledger with the charges made under them.
// In one serialised write transaction it appends a KindLimits entry for
// each limit in limits that differs (in ε or δ) from its scope's previous
// limit: the one the ledger last recorded for that scope, or else the one
// in base (the limits the caller enforced until now). A limit with no
// previous value in either is the scope's first: it is recorded too, with
// Previous equal to it, so that the ledger alone holds every limit that
// was ever in force and an auditor needs no catalog to check spending.
// Since the
// previous value is read from the ledger inside the transaction, processes
// sharing a ledger that apply the same change record it once.
//
// Each entry has Kind KindLimits, zero cost, User = the limit's User, Tables
// = [the limit's Table] (for the table scopes), Spaces = [the limit's
// Space] (for the space scopes), Mechanism MechanismLimit and
// Strategy "scope=<scope> epsilon=<ε> delta=<δ> previous_epsilon=<ε>
// previous_delta=<δ>", followed by " max_delta=<δ> previous_max_delta=<δ>"
// when either δ budget is set (numbers in Go's shortest 'g' form); see
// ParseLimitEntry. It returns the changes it recorded, in the order of
// limits.
func (l *Ledger) RecordLimits(ctx context.Context, limits, base []Limit) ([]LimitChange, error) {
	for _, lim := range append(append([]Limit(nil), limits...), base...) {
		if err := validRule(lim); err != nil {
			return nil, fmt.Errorf("budget: record limits: %w", err)
		}
	}
	var out []LimitChange
	err := l.write(ctx, func(tx *sql.Tx) error {
		out = out[:0]
		prev, err := recordedLimits(ctx, tx)
		if err != nil {
			return err
		}
		for _, b := range base {
			if _, ok := prev[keyOf(b)]; !ok {
				prev[keyOf(b)] = b
			}
		}
		for _, lim := range limits {
			p, ok := prev[keyOf(lim)]
			if !ok {
				p = lim // the scope's first value
			} else if sameLimit(p, lim) {
				continue
			}
			c := Charge{User: lim.User, Mechanism: MechanismLimit, Strategy: limitStrategy(lim, p)}
			if lim.Table != "" {
				c.Tables = []string{lim.Table}
			}
			if lim.Space != "" {
				c.Spaces = []string{lim.Space}
			}
			if c, err = normaliseCharge(c, false); err != nil {
				return err
			}
			if _, err := l.appendEntry(ctx, tx, KindLimits, c); err != nil {
				return err
			}
			prev[keyOf(lim)] = lim
			out = append(out, LimitChange{Limit: lim, Previous: p})
		}
		return nil
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("budget: record limits: %w", err)
	}
	return out, nil
}

// RecordedLimits returns, for every scope that has one, the limit that the
// ledger last recorded (see RecordLimits), in no particular order.
func (l *Ledger) RecordedLimits(ctx context.Context) ([]Limit, error) {
	var m map[limitKey]Limit
	err := l.read(ctx, func(tx *sql.Tx) error {
		var err error
		m, err = recordedLimits(ctx, tx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("budget: recorded limits: %w", err)
	}
	out := make([]Limit, 0, len(m))
	for _, lim := range m {
		out = append(out, lim)
	}
	return out, nil
}

func recordedLimits(ctx context.Context, tx *sql.Tx) (map[limitKey]Limit, error) {
	m := map[limitKey]Limit{}
	err := scanEntries(ctx, tx, "SELECT "+entryColumns+" FROM entries WHERE kind = ? ORDER BY seq", []any{KindLimits},
		func(e Entry, _ string) error {
			if ch, ok := ParseLimitEntry(e); ok {
				m[keyOf(ch.Limit)] = ch.Limit
			}
			return nil
		})
	return m, err
}

// ParseLimitEntry decodes a KindLimits entry written by RecordLimits. ok is
// false for any other entry (KindLimits entries recorded with Record in a
// free form included).
func ParseLimitEntry(e Entry) (LimitChange, bool) {
	if e.Kind != KindLimits || e.Mechanism != MechanismLimit {
		return LimitChange{}, false
	}
	kv := map[string]string{}
	for _, f := range strings.Fields(e.Strategy) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return LimitChange{}, false
		}
		kv[k] = v
	}
	num := func(k string) (float64, bool) {
		f, err := strconv.ParseFloat(kv[k], 64)
		return f, err == nil
	}
	var ch LimitChange
	var ok1, ok2, ok3, ok4 bool
	ch.Limit.Epsilon, ok1 = num("epsilon")
	ch.Limit.Delta, ok2 = num("delta")
	ch.Previous.Epsilon, ok3 = num("previous_epsilon")
	ch.Previous.Delta, ok4 = num("previous_delta")
	if !(ok1 && ok2 && ok3 && ok4) {
		return LimitChange{}, false
	}
	switch len(kv) {
	case 5:
	case 7:
		var ok5, ok6 bool
		ch.Limit.MaxDelta, ok5 = num("max_delta")
		ch.Previous.MaxDelta, ok6 = num("previous_max_delta")
		if !ok5 || !ok6 {
			return LimitChange{}, false
		}
	default:
		return LimitChange{}, false
	}
	ch.Limit.Scope, ch.Limit.User = kv["scope"], e.User
	switch {
	case len(e.Tables) == 1:
		ch.Limit.Table = e.Tables[0]
	case len(e.Tables) > 1:
		return LimitChange{}, false
	}
	switch {
	case len(e.Spaces) == 1:
		ch.Limit.Space = e.Spaces[0]
	case len(e.Spaces) > 1:
		return LimitChange{}, false
	}
	if validRule(ch.Limit) != nil {
		return LimitChange{}, false
	}
	ch.Previous.Scope, ch.Previous.User, ch.Previous.Table, ch.Previous.Space = ch.Limit.Scope, ch.Limit.User, ch.Limit.Table, ch.Limit.Space
	return ch, true
}

func limitStrategy(lim, prev Limit) string {
	g := func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
	s := fmt.Sprintf("scope=%s epsilon=%s delta=%s previous_epsilon=%s previous_delta=%s",
		lim.Scope, g(lim.Epsilon), g(lim.Delta), g(prev.Epsilon), g(prev.Delta))
	// Limits without a δ budget are written as before δ was accounted.
	if lim.MaxDelta != 0 || prev.MaxDelta != 0 {
		s += fmt.Sprintf(" max_delta=%s previous_max_delta=%s", g(lim.MaxDelta), g(prev.MaxDelta))
	}
	return s
}

// validRule checks a limit as a catalog rule (User may be "": every user).
func validRule(lim Limit) error {
	if math.IsNaN(lim.Epsilon) || math.IsInf(lim.Epsilon, 0) || lim.Epsilon < 0 {
		return fmt.Errorf("limit %s: ε=%g must be finite and non-negative", lim.Scope, lim.Epsilon)
	}
	if math.IsNaN(lim.Delta) || lim.Delta < 0 || lim.Delta >= 1 {
		return fmt.Errorf("limit %s: δ=%g must be in [0,1)", lim.Scope, lim.Delta)
	}
	if math.IsNaN(lim.MaxDelta) || lim.MaxDelta < 0 || lim.MaxDelta >= 1 {
		return fmt.Errorf("limit %s: δ budget %g must be in [0,1)", lim.Scope, lim.MaxDelta)
	}
	if strings.ContainsAny(lim.Scope, " =") {
		return fmt.Errorf("limit scope %q", lim.Scope)
	}
	switch lim.Scope {
	case ScopeUserSpace:
		if lim.Space == "" || lim.Table != "" {
			return errors.New("a user_space limit needs a space and no table")
		}
	case ScopeSpace:
		if lim.Space == "" || lim.Table != "" || lim.User != "" {
			return errors.New("a space limit needs a space, no table and no user")
		}
	case ScopeUserTable:
		if lim.Table == "" || lim.Space != "" {
			return errors.New("a user_table limit needs a table and no space")
		}
	case ScopeTable:
		if lim.Table == "" || lim.User != "" || lim.Space != "" {
			return errors.New("a table limit needs a table, no user and no space")
		}
	case ScopeUser:
		if lim.Table != "" || lim.Space != "" {
			return errors.New("a user limit has no table and no space")
		}
	default:
		return fmt.Errorf("limit scope %q is not %q, %q, %q, %q or %q", lim.Scope, ScopeUserSpace, ScopeSpace, ScopeUserTable, ScopeTable, ScopeUser)
	}
	return nil
}
