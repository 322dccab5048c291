package budget

import (
	"fmt"
	"strings"
)

// OverspendError names the first charge after which a scope's spend
// exceeded the limit in force.
type OverspendError struct {
	Seq   int64
	Limit Limit
	Delta bool    // the δ budget (Limit.MaxDelta), not ε, was exceeded
	Spent float64 // ε at the limit's δ (or δ spent) after the charge
}

func (e *OverspendError) Error() string {
	who := e.Limit.Scope
	switch e.Limit.Scope {
	case ScopeUserSpace:
		who = fmt.Sprintf("user %s in space %s", e.Limit.User, e.Limit.Space)
	case ScopeSpace:
		who = fmt.Sprintf("space %s (all users)", e.Limit.Space)
	case ScopeUserTable:
		who = fmt.Sprintf("user %s on table %s", e.Limit.User, e.Limit.Table)
	case ScopeTable:
		who = fmt.Sprintf("table %s (all users)", e.Limit.Table)
	case ScopeUser:
		who = fmt.Sprintf("user %s (all tables)", e.Limit.User)
	}
	if e.Delta {
		return fmt.Sprintf("entry %d overspends %s: spent δ=%.6g, limit δ=%g", e.Seq, who, e.Spent, e.Limit.MaxDelta)
	}
	return fmt.Sprintf("entry %d overspends %s: spent ε=%.6g, limit ε=%g", e.Seq, who, e.Spent, e.Limit.Epsilon)
}

// CheckSpending replays entries in order and returns an *OverspendError
// for the first charge that took any scope past the limit then in force.
// The limits in force come from the entries: a scope's limit before its
// first KindLimits entry is that entry's previous value (its own value
// when the entry records the scope's first value, as RecordLimits does
// when a proxy first starts on a ledger), and each entry changes it from
// its position on. current, the limits the catalog sets now (as rules:
// User "" in a user_table or user scope means every user), is used only
// for a scope no entry mentions (a ledger written before first values
// were recorded). Reuse entries cost nothing.
//
// A charge that names its spaces is checked against the space scopes (and
// the user scope). A charge written before spaces (none named) is checked
// against the table scopes, the budgets of its time, and counts in the
// space its table is mapped to (see MapSpaces), so that the charges after
// it are checked against everything the space has spent.
func CheckSpending(entries []Entry, current []Limit) error {
	type key = limitKey
	inForce := map[key]Limit{}
	for _, l := range current {
		inForce[keyOf(l)] = l
	}
	seen := map[key]bool{}
	spaceOf := map[string]string{}
	for _, e := range entries {
		if c, ok := ParseLimitEntry(e); ok {
			k := keyOf(c.Limit)
			if !seen[k] {
				seen[k] = true
				inForce[k] = c.Previous
			}
		}
		if sm, ok := ParseSpaceEntry(e); ok {
			if _, mapped := spaceOf[sm.Table]; !mapped {
				spaceOf[sm.Table] = sm.Space
			}
		}
	}
	spent := map[key]Cost{}
	check := func(e Entry, k key, rule key, c Cost) error {
		spent[k] = spent[k].Add(c)
		if rule.scope == "" {
			return nil // counted, not checked
		}
		lim, ok := inForce[k]
		if !ok {
			if lim, ok = inForce[rule]; !ok {
				return nil
			}
			lim.User = k.user
		}
		s := EpsilonFor(spent[k], lim.Delta)
		if s > lim.Epsilon*(1+1e-9) {
			return &OverspendError{Seq: e.Seq, Limit: lim, Spent: s}
		}
		// As Charge: δ is checked for charges that spend some.
		if c.Delta > 0 && spent[k].Delta > lim.MaxDelta*(1+1e-9) {
			return &OverspendError{Seq: e.Seq, Limit: lim, Delta: true, Spent: spent[k].Delta}
		}
		return nil
	}
	for _, e := range entries {
		if c, ok := ParseLimitEntry(e); ok {
			inForce[keyOf(c.Limit)] = c.Limit
			continue
		}
		if e.Kind != KindCharge {
			continue
		}
		legacy := len(e.Spaces) == 0
		if legacy {
			for _, t := range e.Tables {
				t = strings.ToLower(t)
				if err := check(e, key{ScopeTable, "", t, ""}, key{ScopeTable, "", t, ""}, e.Cost); err != nil {
					return err
				}
				if err := check(e, key{ScopeUserTable, e.User, t, ""}, key{ScopeUserTable, "", t, ""}, e.Cost); err != nil {
					return err
				}
			}
		}
		spaces := e.Spaces
		if legacy {
			spaces = spacesOf(e.Tables, spaceOf)
		}
		for _, sp := range spaces {
			rule := func(r key) key {
				if legacy {
					return key{}
				}
				return r
			}
			if err := check(e, key{ScopeSpace, "", "", sp}, rule(key{ScopeSpace, "", "", sp}), e.Cost); err != nil {
				return err
			}
			if err := check(e, key{ScopeUserSpace, e.User, "", sp}, rule(key{ScopeUserSpace, "", "", sp}), e.Cost); err != nil {
				return err
			}
		}
		if err := check(e, key{ScopeUser, e.User, "", ""}, key{ScopeUser, "", "", ""}, e.Cost); err != nil {
			return err
		}
	}
	return nil
}
