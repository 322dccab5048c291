package budgetview

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
)

func TestViews(t *testing.T) {
	ctx := context.Background()
	cat := catalog.Demo()
	l, err := budget.Open(ctx, filepath.Join(t.TempDir(), "ledger.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, c := range []struct {
		user  string
		table string
		eps   float64
	}{{"analyst", "adult", 0.5}, {"bob", "adult", 0.25}, {"analyst", "adult", 0.25}, {"carol", "gone", 1}} {
		if _, err := l.Charge(ctx, budget.Charge{User: c.user, Tables: []string{c.table}, Mechanism: "laplace",
			Strategy: "identity", Cost: budget.Cost{Epsilon: c.eps}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if !CanSeeAll(cat, "auditor") || CanSeeAll(cat, "analyst") || CanSeeAll(cat, "nobody") || CanSeeAll(cat, "") {
		t.Fatal("CanSeeAll: only auditors")
	}

	spent, err := l.SpentRows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all := All(cat, spent)
	type row struct {
		scope, user, space, table string
		limit, spent              float64 // limit NaN: none
	}
	want := []row{
		{budget.ScopeSpace, "", "adult", "adult", 100, 1},
		{budget.ScopeUserSpace, "analyst", "adult", "adult", 20, 0.75},
		{budget.ScopeUserSpace, "bob", "adult", "adult", 20, 0.25},
		{budget.ScopeSpace, "", "customer", "events,users", 150, 0}, // the demo's other space, unspent
		{budget.ScopeUserSpace, "analyst", "customer", "events,users", 30, 0},
		{budget.ScopeUserSpace, "bob", "customer", "events,users", 30, 0},
		{budget.ScopeSpace, "", "gone", "", math.NaN(), 1}, // spent in, no longer in the catalog
		{budget.ScopeUserSpace, "carol", "gone", "", math.NaN(), 1},
	}
	if len(all) != len(want) {
		t.Fatalf("All = %+v", all)
	}
	for i, w := range want {
		g := all[i]
		if g.Scope != w.scope || g.User != w.user || g.Space != w.space || g.Table != w.table || g.Spent != w.spent ||
			(g.Limit == nil) != math.IsNaN(w.limit) || (g.Limit != nil && (*g.Limit != w.limit || *g.Remaining != w.limit-w.spent)) {
			t.Errorf("row %d = %+v, want %+v", i, g, w)
		}
	}

	mine, err := Mine(ctx, cat, l, "bob")
	if err != nil || len(mine) != 3 {
		t.Fatalf("Mine(bob) = %+v, %v", mine, err)
	}
	if m := mine[2]; m.Table != "users" || m.Space != "customer" || m.Limit != 30 {
		t.Errorf("Mine(bob) = %+v", m)
	}
	if m := mine[0]; m.Table != "adult" || m.Space != "adult" || m.Limit != 20 || m.Spent != 0.25 || m.Remaining != 19.75 || m.Default != 0.1 || m.Max != 2 {
		t.Errorf("Mine(bob) = %+v", m)
	}
	for _, u := range []string{"auditor", "nobody"} {
		if m, err := Mine(ctx, cat, l, u); err != nil || m != nil {
			t.Errorf("Mine(%s) = %+v, %v; want nothing", u, m, err)
		}
	}
	if Finite(math.Inf(1)) != math.MaxFloat64 || Finite(2) != 2 {
		t.Error("Finite")
	}
}
