package budget

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

func spaceLimits(user, space string, perUser, total float64) []Limit {
	return []Limit{
		{Scope: ScopeUserSpace, User: user, Space: space, Epsilon: perUser},
		{Scope: ScopeSpace, Space: space, Epsilon: total},
	}
}

// Two tables of one space share its budgets: per user and in total.
func TestSpaceSharedBudget(t *testing.T) { forBackends(t, testSpaceSharedBudget) }

func testSpaceSharedBudget(t *testing.T, open opener) {
	ctx := context.Background()
	l := open(t)
	on := func(user string, eps float64, table string) Charge {
		c := lapCharge(user, eps, table)
		c.Spaces = []string{"customer"}
		return c
	}
	steps := []struct {
		c  Charge
		ok bool
	}{
		{on("alice", 0.6, "events"), true},
		{on("alice", 0.6, "users"), false}, // 1.2 > 1 for alice in customer
		{on("alice", 0.4, "users"), true},
		{on("bob", 0.9, "users"), true},
		{on("bob", 0.2, "events"), false}, // 1.9+0.2 > 2 in customer
		{on("bob", 0.1, "events"), true},
	}
	for i, s := range steps {
		_, err := l.Charge(ctx, s.c, spaceLimits(s.c.User, "customer", 1, 2))
		var ex *ExceededError
		switch {
		case s.ok && err != nil:
			t.Fatalf("step %d: %v", i, err)
		case !s.ok && !errors.As(err, &ex):
			t.Fatalf("step %d: err = %v, want *ExceededError", i, err)
		}
	}
	mustVerify(t, l)
	for _, w := range []struct {
		user string
		eps  float64
	}{{"alice", 1}, {"bob", 1}, {"", 2}} {
		c, err := l.SpentSpace(ctx, w.user, "customer")
		if err != nil || !near(c.Epsilon, w.eps, 1e-12) {
			t.Errorf("SpentSpace(%q) = %+v, %v; want ε=%g", w.user, c, err, w.eps)
		}
	}
	es, err := l.Entries(ctx, Filter{})
	if err != nil || len(es) != 4 {
		t.Fatalf("%d entries, %v", len(es), err)
	}
	for _, e := range es {
		if len(e.Spaces) != 1 || e.Spaces[0] != "customer" {
			t.Errorf("entry %d records spaces %v", e.Seq, e.Spaces)
		}
	}
	if err := CheckSpending(es, spaceLimits("", "customer", 1, 2)); err != nil {
		t.Fatal(err)
	}
	if err := CheckSpending(es, spaceLimits("", "customer", 0.9, 2)); err == nil {
		t.Fatal("CheckSpending missed alice's 1.0 over a per-user 0.9")
	}
	// A charge given no space spends in the space its table is mapped to:
	// here, its own name.
	if _, err := l.Charge(ctx, lapCharge("carol", 0.1, "adult"), []Limit{{Scope: ScopeSpace, Space: "adult", Epsilon: 1}}); err != nil {
		t.Fatal(err)
	}
	if c, _ := l.SpentSpace(ctx, "", "adult"); c.Epsilon != 0.1 {
		t.Fatalf("adult's space spent %+v", c)
	}
}

// writeV3 writes a ledger of schema version 3 (before spaces) holding the
// given charges, with hashes as that version computed them.
func writeV3(t *testing.T, path string, charges []Charge) []Entry {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{"PRAGMA journal_mode = WAL", withoutSpaces(t, schema)} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	prev := genesisHash
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sum := map[scope]Cost{}
	var out []Entry
	for i, c := range charges {
		c, err := normaliseCharge(c, true)
		if err != nil {
			t.Fatal(err)
		}
		e := Entry{Seq: int64(i + 1), Time: at.Add(time.Duration(i) * time.Second), Kind: KindCharge, Charge: c, PrevHash: prev}
		ts := e.Time.Format(timeLayout)
		e.Hash = hashEntry(&e, ts)
		if _, err := db.Exec(`INSERT INTO entries (seq, time, kind, user_name, conn_id, tables_json, mechanism, strategy, epsilon, rho, query_digest, prev_hash, hash, unit_json, delta)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', 0)`, e.Seq, ts, e.Kind, c.User, c.ConnID, fmt.Sprintf("[%q]", c.Tables[0]),
			c.Mechanism, c.Strategy, c.Cost.Epsilon, c.Cost.Rho, c.QueryDigest, e.PrevHash, e.Hash); err != nil {
			t.Fatal(err)
		}
		for _, k := range []scope{{c.User, c.Tables[0], ""}, {"", c.Tables[0], ""}, {c.User, "", ""}} {
			sum[k] = sum[k].Add(c.Cost)
		}
		prev = e.Hash
		out = append(out, e)
	}
	for k, c := range sum {
		if _, err := db.Exec("INSERT INTO spent VALUES (?, ?, ?, ?, ?)", k.user, k.table, c.Epsilon, c.Rho, c.Delta); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec("INSERT INTO head VALUES (1, ?, ?)", len(out), prev); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("PRAGMA user_version = 3"); err != nil {
		t.Fatal(err)
	}
	return out
}

// A ledger written before spaces is upgraded when opened: its entries keep
// their hashes, each table counts in a space of its own name until
// MapSpaces maps it into the catalog's space, once; then the space's
// budget covers the old spends, and everything verifies.
func TestLedgerUpgradeMapsSpaces(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.sqlite")
	old := writeV3(t, path, []Charge{
		lapCharge("alice", 0.3, "events"),
		lapCharge("alice", 0.2, "users"),
		lapCharge("bob", 0.4, "events"),
		lapCharge("alice", 0.5, "adult"),
	})
	l, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mustVerify(t, l)
	es, err := l.Entries(ctx, Filter{})
	if err != nil || len(es) != len(old) {
		t.Fatalf("%d entries, %v", len(es), err)
	}
	for i, e := range es {
		if e.Hash != old[i].Hash || e.Spaces != nil {
			t.Fatalf("entry %d: hash %s spaces %v after the upgrade, was %s", e.Seq, e.Hash, e.Spaces, old[i].Hash)
		}
	}
	if c, _ := l.SpentSpace(ctx, "alice", "events"); !near(c.Epsilon, 0.3, 1e-12) {
		t.Fatalf("before mapping, alice in space events: %+v", c)
	}

	catalog := map[string]string{"events": "customer", "users": "customer", "adult": "adult"}
	got, err := l.MapSpaces(ctx, catalog)
	if err != nil {
		t.Fatal(err)
	}
	want := []SpaceMapping{{"events", "customer"}, {"users", "customer"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("MapSpaces = %v, want %v", got, want)
	}
	mustVerify(t, l)
	for _, w := range []struct {
		user, space string
		eps         float64
	}{{"alice", "customer", 0.5}, {"bob", "customer", 0.4}, {"", "customer", 0.9}, {"alice", "adult", 0.5}, {"alice", "events", 0}} {
		c, err := l.SpentSpace(ctx, w.user, w.space)
		if err != nil || !near(c.Epsilon, w.eps, 1e-12) {
			t.Errorf("SpentSpace(%q, %q) = %+v, %v; want ε=%g", w.user, w.space, c, err, w.eps)
		}
	}
	// Once only: a second start, or a catalog that moves events elsewhere,
	// maps nothing more.
	for _, m := range []map[string]string{catalog, {"events": "elsewhere"}} {
		if got, err := l.MapSpaces(ctx, m); err != nil || len(got) != 0 {
			t.Fatalf("MapSpaces again = %v, %v", got, err)
		}
	}
	// The space's budget covers the old spends: alice has 0.5 left of 1.
	lims := spaceLimits("alice", "customer", 1, 10)
	if _, err := l.Charge(ctx, withSpace(lapCharge("alice", 0.6, "users"), "customer"), lims); err == nil {
		t.Fatal("alice overspent the customer space counting her old charges")
	}
	if _, err := l.Charge(ctx, withSpace(lapCharge("alice", 0.5, "users"), "customer"), lims); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, l)
	es, err = l.Entries(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	// Old entries are checked against the table budgets of their time
	// (none given here), new ones against the space's.
	if err := CheckSpending(es, spaceLimits("", "customer", 1, 10)); err != nil {
		t.Fatal(err)
	}
	if err := CheckSpending(es, spaceLimits("", "customer", 0.9, 10)); err == nil {
		t.Fatal("CheckSpending missed alice's 1.0 in customer, 0.5 of it from old entries")
	}
	rows, err := l.Budgets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	agg, err := l.SpentRows(ctx)
	if err != nil || fmt.Sprint(rows) != fmt.Sprint(agg) {
		t.Fatalf("Budgets %v\nSpentRows %v (%v)", rows, agg, err)
	}
}

func withSpace(c Charge, s string) Charge {
	c.Spaces = []string{s}
	return c
}
