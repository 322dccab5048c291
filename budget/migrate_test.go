package budget

import (
	"context"
	"crypto/ed25519"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// A SQLite ledger with every kind of entry (old charges from before
// spaces, their mapping into a space, limits, charges under a privacy unit,
// ρ and δ charges, reuse and derived entries) is copied into PostgreSQL
// verbatim: entries, spends, head and report are the source's, a signed
// head of the source holds in the copy, charging goes on from there, and a
// second migration into the same database is refused.
func TestMigrate(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.sqlite")
	writeV3(t, path, []Charge{
		lapCharge("alice", 0.3, "events"),
		lapCharge("alice", 0.2, "users"),
		lapCharge("bob", 0.4, "events"),
	})
	src, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := src.MapSpaces(ctx, map[string]string{"events": "customer", "users": "customer"}); err != nil {
		t.Fatal(err)
	}
	limits := []Limit{
		{Scope: ScopeUserSpace, Space: "customer", Epsilon: 5, Delta: 1e-6, MaxDelta: 1e-5},
		{Scope: ScopeSpace, Space: "customer", Epsilon: 20, Delta: 1e-6, MaxDelta: 1e-4},
	}
	if _, err := src.RecordLimits(ctx, limits, nil); err != nil {
		t.Fatal(err)
	}
	forUser := func(u string) []Limit {
		return []Limit{{Scope: ScopeUserSpace, User: u, Space: "customer", Epsilon: 5, Delta: 1e-6, MaxDelta: 1e-5}, limits[1]}
	}
	unit := withSpace(lapCharge("alice", 0.5, "events"), "customer")
	unit.Unit = &UnitBound{Column: "user_id", MaxRows: 10, MaxGroups: 2, MaxRowsPerGroup: 3, RowEpsilon: 0.5 / 6}
	gauss := withSpace(Charge{User: "bob", ConnID: 3, Tables: []string{"users"}, Mechanism: "gaussian", Strategy: "identity",
		Cost: Cost{Rho: 0.015625}, QueryDigest: digestOf("q")}, "customer")
	sel := withSpace(selCharge("alice", 0.1, 3e-7, "events", "users"), "customer")
	for _, c := range []Charge{unit, gauss, sel, withSpace(lapCharge("bob", 1.0/3, "events"), "customer")} {
		if _, err := src.Charge(ctx, c, forUser(c.User)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := src.Charge(ctx, lapCharge("carol", 0.7, "adult"), nil); err != nil {
		t.Fatal(err)
	}
	if err := src.RecordReuse(ctx, reuseOf("alice", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Record(ctx, KindDerived, Charge{User: "bob", Tables: []string{"events"}, Mechanism: "gls", Strategy: "measurements=1,2"}); err != nil {
		t.Fatal(err)
	}
	_, priv, _ := ed25519.GenerateKey(nil)
	head, _, err := src.SignHead(ctx, priv)
	if err != nil {
		t.Fatal(err)
	}

	db := newPGDB(t, 4)
	n, err := Migrate(ctx, src, db)
	if err != nil {
		t.Fatal(err)
	}
	dst := openPG(t, db)
	srcEntries, err := src.Entries(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(len(srcEntries)) || n < 12 {
		t.Fatalf("Migrate copied %d entries, the source has %d", n, len(srcEntries))
	}
	same := func(what string, get func(*Ledger) (any, error)) {
		t.Helper()
		a, err := get(src)
		if err != nil {
			t.Fatalf("%s of the source: %v", what, err)
		}
		b, err := get(dst)
		if err != nil {
			t.Fatalf("%s of the copy: %v", what, err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s differ:\nsource %+v\ncopy   %+v", what, a, b)
		}
	}
	same("entries", func(l *Ledger) (any, error) { return l.Entries(ctx, Filter{}) })
	same("budgets", func(l *Ledger) (any, error) { return l.Budgets(ctx) })
	same("spent rows", func(l *Ledger) (any, error) { return l.SpentRows(ctx) })
	same("space map", func(l *Ledger) (any, error) { return l.SpaceMap(ctx) })
	same("report", func(l *Ledger) (any, error) { return l.Report(ctx, forUser("alice"), nil, "") })
	same("page", func(l *Ledger) (any, error) { return l.Page(ctx, Query{Table: "events", Count: true}) })
	same("spending", func(l *Ledger) (any, error) { return l.Spending(ctx, SeriesQuery{Table: "adult"}) })
	same("recorded limits", func(l *Ledger) (any, error) {
		ls, err := l.RecordedLimits(ctx)
		return len(ls), err
	})
	if err := dst.CheckHead(ctx, head); err != nil {
		t.Fatalf("the source's signed head in the copy: %v", err)
	}
	// The old charges count in their space in the copy too.
	c := withSpace(lapCharge("alice", 4, "events"), "customer")
	if _, err := dst.Charge(ctx, c, forUser("alice")); err == nil {
		t.Fatal("the copy forgot alice's earlier spends in space customer")
	}
	c.Cost.Epsilon = 0.25
	if _, err := dst.Charge(ctx, c, forUser("alice")); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, dst)

	if _, err := Migrate(ctx, src, db); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("second Migrate: %v, want ErrNotEmpty", err)
	}
	if err := dst.Verify(ctx); err != nil {
		t.Fatalf("the refused migration changed the copy: %v", err)
	}
}

// A source that does not verify is not copied, and the destination stays
// empty.
func TestMigrateRefusesATamperedSource(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.sqlite")
	buildLedger(t, path)
	rawExec(t, path, "UPDATE entries SET epsilon = 0.001 WHERE seq = 2")
	src, err := OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	db := newPGDB(t, 2)
	if _, err := Migrate(ctx, src, db); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Fatalf("Migrate: %v", err)
	}
	dst := openPG(t, db)
	if n := count(t, dst); n != 0 {
		t.Fatalf("%d entries in the destination", n)
	}
}

// A ledger of an older schema, opened read-only (not upgraded), migrates
// as it would read after an upgrade: each old table its own space.
func TestMigrateOlderSchemaReadOnly(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.sqlite")
	old := writeV3(t, path, []Charge{lapCharge("alice", 0.3, "events"), lapCharge("bob", 0.25, "users")})
	src, err := OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	db := newPGDB(t, 2)
	if n, err := Migrate(ctx, src, db); err != nil || n != int64(len(old)) {
		t.Fatalf("Migrate: %d, %v", n, err)
	}
	dst := openPG(t, db)
	if c, err := dst.SpentSpace(ctx, "alice", "events"); err != nil || c.Epsilon != 0.3 {
		t.Fatalf("alice in space events: %+v, %v", c, err)
	}
	es, err := dst.Entries(ctx, Filter{})
	if err != nil || len(es) != 2 || es[1].Hash != old[1].Hash {
		t.Fatalf("entries %+v, %v", es, err)
	}
}
