package budget

import (
	"errors"
	"testing"
)

func TestCheckSpending(t *testing.T) {
	charge := func(seq int64, user string, eps float64) Entry {
		return Entry{Seq: seq, Kind: KindCharge, Charge: Charge{User: user, Tables: []string{"adult"}, Cost: Cost{Epsilon: eps}}}
	}
	raise := func(seq int64, from, to float64) Entry {
		lim := Limit{Scope: ScopeUserTable, Table: "adult", Epsilon: to}
		prev := Limit{Scope: ScopeUserTable, Table: "adult", Epsilon: from}
		return Entry{Seq: seq, Kind: KindLimits, Charge: Charge{Tables: []string{"adult"}, Mechanism: MechanismLimit, Strategy: limitStrategy(lim, prev)}}
	}
	rules := []Limit{
		{Scope: ScopeTable, Table: "adult", Epsilon: 10},
		{Scope: ScopeUserTable, Table: "adult", Epsilon: 1},
	}
	cases := []struct {
		name    string
		entries []Entry
		bad     int64
	}{
		{"within", []Entry{charge(1, "a", 0.5), charge(2, "a", 0.5), charge(3, "b", 1)}, 0},
		{"user overspends", []Entry{charge(1, "a", 0.6), charge(2, "b", 0.6), charge(3, "a", 0.6)}, 3},
		// The catalog now says 1, but the ledger shows the limit was 0.5 until entry 3.
		{"before a raise", []Entry{charge(1, "a", 0.4), charge(2, "a", 0.4), raise(3, 0.5, 1)}, 2},
		{"after a raise", []Entry{charge(1, "a", 0.4), raise(2, 0.5, 1), charge(3, "a", 0.4)}, 0},
		{"table total", []Entry{charge(1, "a", 1), charge(2, "b", 1), charge(3, "c", 1), charge(4, "d", 1), charge(5, "e", 1), charge(6, "f", 1), charge(7, "g", 1), charge(8, "h", 1), charge(9, "i", 1), charge(10, "j", 1), charge(11, "k", 0.5)}, 11},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckSpending(c.entries, rules)
			var oe *OverspendError
			switch {
			case c.bad == 0 && err != nil:
				t.Fatalf("unexpected %v", err)
			case c.bad != 0 && (!errors.As(err, &oe) || oe.Seq != c.bad):
				t.Fatalf("got %v, want overspend at entry %d", err, c.bad)
			}
		})
	}
}
