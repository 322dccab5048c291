package budget

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// withoutDelta is the schema of version 2, before δ was accounted.
func withoutDelta(t *testing.T, s string) string {
	t.Helper()
	v2 := strings.Replace(withoutSpaces(t, s), ",\n\tdelta        REAL    NOT NULL DEFAULT 0", "", 1)
	v2 = strings.Replace(v2, "\tdelta      REAL NOT NULL DEFAULT 0,\n", "", 1)
	if strings.Contains(v2, "delta") {
		t.Fatal("the version 2 schema is not derived")
	}
	return v2
}

// withoutSpaces is the schema of version 3: no spaces_json, no
// spent_spaces.
func withoutSpaces(t *testing.T, s string) string {
	t.Helper()
	v3 := strings.Replace(s, ",\n\tspaces_json  TEXT    NOT NULL DEFAULT ''", "", 1)
	i := strings.Index(v3, "CREATE TABLE IF NOT EXISTS spent_spaces")
	j := strings.Index(v3, "CREATE TABLE IF NOT EXISTS head")
	if i < 0 || j < i {
		t.Fatal("the version 3 schema is not derived")
	}
	v3 = v3[:i] + v3[j:]
	if strings.Contains(v3, "space") {
		t.Fatal("the version 3 schema is not derived")
	}
	return v3
}

func selCharge(user string, eps, delta float64, tables ...string) Charge {
	c := lapCharge(user, eps, tables...)
	c.Mechanism = "partition_selection"
	c.Cost.Delta = delta
	return c
}

// A charge that spends δ is checked against every limit's δ budget
// (MaxDelta), recorded with its δ in the entry and the aggregate, and
// verified; once the δ budget is used up, charges that spend no δ still
// pass.
func TestChargeDeltaBudget(t *testing.T) { forBackends(t, testChargeDeltaBudget) }

func testChargeDeltaBudget(t *testing.T, open opener) {
	ctx := context.Background()
	l := open(t)
	lims := []Limit{
		{Scope: ScopeUserTable, User: "bob", Table: "events", Epsilon: 10, MaxDelta: 1e-6},
		{Scope: ScopeTable, Table: "events", Epsilon: 100, MaxDelta: 3e-6},
	}
	for i := 0; i < 10; i++ {
		if _, err := l.Charge(ctx, selCharge("bob", 0.1, 1e-7, "events"), lims); err != nil {
			t.Fatalf("charge %d (δ=1e-7 of 1e-6): %v", i+1, err)
		}
	}
	_, err := l.Charge(ctx, selCharge("bob", 0.1, 1e-7, "events"), lims)
	var ex *ExceededError
	if !errors.As(err, &ex) || !ex.Delta || ex.Limit.Scope != ScopeUserTable || ex.Remaining != 0 {
		t.Fatalf("11th δ charge: %v, want a δ ExceededError on the user_table limit with nothing remaining", err)
	}
	if !strings.Contains(err.Error(), "requested δ=1e-07, remaining δ=0") {
		t.Errorf("message %q does not say δ", err)
	}
	// The δ budget is spent; ε-only charges still fit.
	if _, err := l.Charge(ctx, lapCharge("bob", 0.1, "events"), lims); err != nil {
		t.Fatalf("an ε-only charge after δ ran out: %v", err)
	}
	got, err := l.Spent(ctx, "bob", "events")
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got.Delta-1e-6) > 1e-18 || math.Abs(got.Epsilon-1.1) > 1e-12 {
		t.Errorf("spent %+v, want ε=1.1 δ=1e-6", got)
	}
	mustVerify(t, l)
	rows, err := l.Budgets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Table == "events" && r.User == "" && math.Abs(r.Cost.Delta-1e-6) > 1e-18 {
			t.Errorf("Budgets: table total δ=%g, want 1e-6", r.Cost.Delta)
		}
	}
	// A limit without a δ budget refuses any δ spend.
	_, err = l.Charge(ctx, selCharge("ann", 0.1, 1e-9, "events"), []Limit{{Scope: ScopeUser, User: "ann", Epsilon: 1}})
	if !errors.As(err, &ex) || !ex.Delta {
		t.Fatalf("δ charge against a limit with MaxDelta 0: %v", err)
	}
}

// δ is covered by the entry's hash and checked against the aggregate: an
// edit of either is reported by Verify.
func TestDeltaTamper(t *testing.T) {
	ctx := context.Background()
	for _, q := range []string{
		"UPDATE entries SET delta = 2e-7 WHERE seq = 1",
		"UPDATE spent SET delta = 0 WHERE user_name = 'bob' AND table_name = 'events'",
	} {
		l, path := openTest(t)
		if _, err := l.Charge(ctx, selCharge("bob", 0.5, 1e-7, "events"), nil); err != nil {
			t.Fatal(err)
		}
		mustVerify(t, l)
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
		db.Close()
		var te *TamperError
		if err := l.Verify(ctx); !errors.As(err, &te) {
			t.Errorf("after %s: Verify = %v, want a TamperError", q, err)
		}
	}
}

// Bad δ costs and δ budgets are refused before anything is written.
func TestDeltaRejectsBadInput(t *testing.T) { forBackends(t, testDeltaRejectsBadInput) }

func testDeltaRejectsBadInput(t *testing.T, open opener) {
	ctx := context.Background()
	l := open(t)
	for _, d := range []float64{-1e-9, math.NaN(), math.Inf(1), 1} {
		if _, err := l.Charge(ctx, selCharge("bob", 0.1, d, "events"), nil); err == nil {
			t.Errorf("δ=%g accepted", d)
		}
	}
	lim := Limit{Scope: ScopeUser, User: "bob", Epsilon: 1, MaxDelta: 1}
	if _, err := l.Charge(ctx, selCharge("bob", 0.1, 1e-9, "events"), []Limit{lim}); err == nil {
		t.Error("MaxDelta=1 accepted")
	}
	if _, err := l.Record(ctx, KindReuse, selCharge("bob", 0, 1e-9, "events")); err == nil {
		t.Error("a reuse entry with δ accepted")
	}
	if n := count(t, l); n != 0 {
		t.Errorf("%d entries written", n)
	}
}

// δ budgets go on the chain with the limits; limits without one are
// written exactly as before δ was accounted.
func TestRecordLimitsDelta(t *testing.T) { forBackends(t, testRecordLimitsDelta) }

func testRecordLimitsDelta(t *testing.T, open opener) {
	ctx := context.Background()
	l := open(t)
	plain := Limit{Scope: ScopeTable, Table: "adult", Epsilon: 5}
	withD := Limit{Scope: ScopeTable, Table: "events", Epsilon: 5, MaxDelta: 1e-5}
	if _, err := l.RecordLimits(ctx, []Limit{plain, withD}, nil); err != nil {
		t.Fatal(err)
	}
	withD2 := withD
	withD2.MaxDelta = 2e-5
	ch, err := l.RecordLimits(ctx, []Limit{plain, withD2}, nil)
	if err != nil || len(ch) != 1 || ch[0].Previous.MaxDelta != 1e-5 || ch[0].Limit.MaxDelta != 2e-5 {
		t.Fatalf("changing only the δ budget: %+v, %v", ch, err)
	}
	es, err := l.Entries(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(es[0].Strategy, "max_delta") {
		t.Errorf("a limit without δ budget written as %q", es[0].Strategy)
	}
	if got := es[2].Strategy; !strings.HasSuffix(got, "max_delta=2e-05 previous_max_delta=1e-05") {
		t.Errorf("strategy %q", got)
	}
	rec, err := l.RecordedLimits(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range rec {
		if r.Table == "events" {
			found = r.MaxDelta == 2e-5
		}
	}
	if !found {
		t.Errorf("recorded limits %+v lack events' δ budget 2e-5", rec)
	}
	// The auditor's replay checks δ too.
	c1 := selCharge("bob", 0.1, 1.5e-5, "events")
	es = append(es, Entry{Seq: 4, Kind: KindCharge, Charge: c1}, Entry{Seq: 5, Kind: KindCharge, Charge: c1})
	var oe *OverspendError
	if err := CheckSpending(es, nil); !errors.As(err, &oe) || !oe.Delta || oe.Seq != 5 {
		t.Errorf("CheckSpending = %v, want δ overspent at entry 5", err)
	}
}

// A ledger of schema version 2 (before δ) is upgraded when opened: its
// entries keep their hashes and verify, and new charges record δ.
func TestLedgerUpgradeAddsDelta(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.sqlite")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	old := Entry{Seq: 1, Kind: KindCharge, Charge: lapCharge("bob", 0.1, "adult"), PrevHash: genesisHash}
	ts := "2026-01-02T03:04:05.000000000Z"
	old.Hash = hashEntry(&old, ts)
	for _, q := range []string{"PRAGMA journal_mode = WAL", withoutDelta(t, schema),
		"INSERT INTO entries VALUES (1, '" + ts + "', 'charge', 'bob', 7, '[\"adult\"]', 'laplace', 'identity', 0.1, 0, '" + old.QueryDigest + "', '" + genesisHash + "', '" + old.Hash + "', '')",
		"INSERT INTO spent VALUES ('bob', 'adult', 0.1, 0), ('bob', '', 0.1, 0), ('', 'adult', 0.1, 0)",
		"INSERT INTO head VALUES (1, 1, '" + old.Hash + "')", "PRAGMA user_version = 2"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	l, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mustVerify(t, l)
	if _, err := l.Charge(ctx, selCharge("bob", 0.4, 1e-7, "adult"), nil); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, l)
	if got, _ := l.Spent(ctx, "bob", "adult"); got.Delta != 1e-7 {
		t.Errorf("spent δ=%g after upgrade, want 1e-7", got.Delta)
	}
}

// DeltaFor: the δ spent, plus the conversion δ only when there is a ρ part.
func TestDeltaFor(t *testing.T) {
	if got := DeltaFor(Cost{Epsilon: 1, Delta: 1e-7}, 1e-5); got != 1e-7 {
		t.Errorf("pure ε + δ: %g", got)
	}
	if got := DeltaFor(Cost{Rho: 0.1, Delta: 1e-7}, 1e-5); math.Abs(got-1.01e-5) > 1e-20 {
		t.Errorf("ρ + δ: %g", got)
	}
	c := Cost{Epsilon: 1, Rho: 2, Delta: 3}.Add(Cost{Epsilon: 1, Rho: 2, Delta: 3})
	if c != (Cost{2, 4, 6}) || (Cost{Delta: 1e-9}).IsZero() {
		t.Errorf("Add/IsZero: %+v", c)
	}
}

// A ledger of an older schema (version 3, before privacy unit spaces;
// version 2, before δ; version 1, before privacy units) opens read-only, without an upgrade and without writing:
// its entries verify, list and add up with δ 0, and the file keeps its
// schema version until a writer opens it. A writer's upgrade is then
// seen by the read-only ledger once its connections renew.
func TestReadOnlyOlderSchema(t *testing.T) {
	ctx := context.Background()
	for _, version := range []int{1, 2, 3} {
		t.Run(fmt.Sprint("version ", version), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ledger.sqlite")
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			old := Entry{Seq: 1, Kind: KindCharge, Charge: lapCharge("bob", 0.1, "adult"), PrevHash: genesisHash}
			ts := "2026-01-02T03:04:05.000000000Z"
			old.Hash = hashEntry(&old, ts)
			create, row := withoutDelta(t, schema), "'"+old.Hash+"', '')"
			spent := "INSERT INTO spent VALUES ('bob', 'adult', 0.1, 0), ('bob', '', 0.1, 0), ('', 'adult', 0.1, 0)"
			if version == 3 {
				create, row = withoutSpaces(t, schema), "'"+old.Hash+"', '', 0)"
				spent = "INSERT INTO spent VALUES ('bob', 'adult', 0.1, 0, 0), ('bob', '', 0.1, 0, 0), ('', 'adult', 0.1, 0, 0)"
			}
			if version == 1 {
				create = strings.Replace(create, ",\n\tunit_json    TEXT    NOT NULL DEFAULT ''", "", 1)
				row = "'" + old.Hash + "')"
			}
			for _, q := range []string{"PRAGMA journal_mode = WAL", create,
				"INSERT INTO entries VALUES (1, '" + ts + "', 'charge', 'bob', 7, '[\"adult\"]', 'laplace', 'identity', 0.1, 0, '" + old.QueryDigest + "', '" + genesisHash + "', " + row,
				spent,
				"INSERT INTO head VALUES (1, 1, '" + old.Hash + "')", fmt.Sprintf("PRAGMA user_version = %d", version)} {
				if _, err := db.Exec(q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			db.Close()
			ro, err := OpenReadOnly(ctx, path)
			if err != nil {
				t.Fatalf("read-only open of a version %d ledger: %v", version, err)
			}
			defer ro.Close()
			mustVerify(t, ro)
			es, err := ro.Entries(ctx, Filter{})
			if err != nil || len(es) != 1 || es[0].Hash != old.Hash || es[0].Cost.Delta != 0 || es[0].Unit != nil {
				t.Fatalf("entries %+v, %v", es, err)
			}
			// The three rows of spent, and the table's space (its own name,
			// as an upgrade makes it) for bob and in total.
			rows, err := ro.SpentRows(ctx)
			if err != nil || len(rows) != 5 {
				t.Fatalf("spent rows %+v, %v", rows, err)
			}
			if c, err := ro.SpentSpace(ctx, "bob", "adult"); err != nil || c.Epsilon != 0.1 {
				t.Fatalf("bob's spend in space adult %+v, %v", c, err)
			}
			if b, err := ro.Budgets(ctx); err != nil || len(b) == 0 {
				t.Fatalf("budgets %+v, %v", b, err)
			}
			if _, err := ro.Charge(ctx, selCharge("bob", 0.1, 1e-7, "adult"), nil); err == nil {
				t.Fatal("a read-only ledger charged")
			}
			check, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
			if err != nil {
				t.Fatal(err)
			}
			var v int
			if err := check.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != version {
				t.Fatalf("the read-only open changed the schema version to %d (%v)", v, err)
			}
			check.Close()

			// A writer upgrades the file and charges δ; the reader sees it.
			w, err := Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Charge(ctx, selCharge("bob", 0.1, 1e-7, "adult"), nil); err != nil {
				t.Fatal(err)
			}
			w.Close()
			time.Sleep(1100 * time.Millisecond) // the reader's connections renew
			mustVerify(t, ro)
			if got, err := ro.Spent(ctx, "bob", "adult"); err != nil || got.Delta != 1e-7 {
				t.Errorf("after the upgrade the reader sees δ=%g (%v), want 1e-7", got.Delta, err)
			}
		})
	}
}
