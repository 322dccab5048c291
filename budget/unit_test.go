package budget

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
)

// A charge under a privacy unit records the unit and its bounds, verifies,
// and is refused when its ε or ρ does not cover its row-level calibration
// times min(k, g·r).
func TestChargeRecordsUnit(t *testing.T) { forBackends(t, testChargeRecordsUnit) }

func testChargeRecordsUnit(t *testing.T, open opener) {
	ctx := context.Background()
	l := open(t)
	c := lapCharge("alice", 0.5, "events")
	c.Unit = &UnitBound{Column: "user_id", MaxRows: 10, MaxGroups: 2, MaxRowsPerGroup: 3, RowEpsilon: 0.5 / 6}
	if _, err := l.Charge(ctx, c, nil); err != nil {
		t.Fatal(err)
	}
	g := Charge{User: "alice", Tables: []string{"events"}, Mechanism: "gaussian", Strategy: "identity",
		Cost: Cost{Rho: 0.02}, Unit: &UnitBound{Column: "user_id", MaxRows: 4, RowRho: 0.02 / 16}}
	if _, err := l.Charge(ctx, g, nil); err != nil {
		t.Fatal(err)
	}
	top := lapCharge("alice", 0.3, "events")
	top.Unit = &UnitBound{Column: "user_id", MaxRows: 4, MaxRowsPerGroup: 2, RowEpsilon: 0.1 / 4, SelectionEpsilon: 0.2, SelectionSensitivity: 2}
	if _, err := l.Charge(ctx, top, nil); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, l)
	es, err := l.Entries(ctx, Filter{})
	if err != nil || len(es) != 3 || es[0].Unit == nil || *es[0].Unit != *c.Unit {
		t.Fatalf("entries %+v %v", es, err)
	}
	for _, bad := range []struct {
		unit UnitBound
		cost Cost
		want string
	}{
		{UnitBound{Column: "user_id", MaxRows: 10, RowEpsilon: 0.1}, Cost{Epsilon: 0.5}, "does not cover"},
		{UnitBound{Column: "user_id", MaxRows: 3, RowRho: 0.01}, Cost{Rho: 0.05}, "does not cover"},
		{UnitBound{Column: "user_id", MaxRows: 4, RowEpsilon: 0.01, SelectionEpsilon: 0.2, SelectionSensitivity: 1}, Cost{Epsilon: 0.3}, "sensitivity 1 is below"},
		{UnitBound{MaxRows: 4}, Cost{Epsilon: 0.3}, "no column"},
	} {
		c := lapCharge("alice", 0, "events")
		c.Cost, c.Unit = bad.cost, &bad.unit
		if _, err := l.Charge(ctx, c, nil); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: %v, want %q", bad.unit, err, bad.want)
		}
	}
	mustVerify(t, l)
}

// A ledger of schema version 1 (before privacy units) is upgraded when
// opened: its entries keep their hashes and verify, and new charges record
// units.
func TestLedgerUpgradeKeepsOldEntries(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.sqlite")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	v1 := strings.Replace(withoutDelta(t, schema), ",\n\tunit_json    TEXT    NOT NULL DEFAULT ''", "", 1)
	if v1 == withoutDelta(t, schema) {
		t.Fatal("the version 1 schema is not derived")
	}
	old := Entry{Seq: 1, Kind: KindCharge, Charge: lapCharge("bob", 0.1, "adult"), PrevHash: genesisHash}
	ts := "2026-01-02T03:04:05.000000000Z"
	old.Hash = hashEntry(&old, ts)
	for _, q := range []string{"PRAGMA journal_mode = WAL", v1,
		"INSERT INTO entries VALUES (1, '" + ts + "', 'charge', 'bob', 7, '[\"adult\"]', 'laplace', 'identity', 0.1, 0, '" + old.QueryDigest + "', '" + genesisHash + "', '" + old.Hash + "')",
		"INSERT INTO spent VALUES ('bob', 'adult', 0.1, 0), ('bob', '', 0.1, 0), ('', 'adult', 0.1, 0)",
		"INSERT INTO head VALUES (1, 1, '" + old.Hash + "')", "PRAGMA user_version = 1"} {
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
	c := lapCharge("bob", 0.4, "adult")
	c.Unit = &UnitBound{Column: "user_id", MaxRows: 4, RowEpsilon: 0.1}
	if _, err := l.Charge(ctx, c, nil); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, l)
}
