package state

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/internal/statedb"
	"github.com/dpproxy/dpproxy/internal/testdb"
	"github.com/dpproxy/dpproxy/sources"
)

var pgServer = testdb.NewLazy(testdb.StartPostgres)

func TestMain(m *testing.M) {
	code := m.Run()
	pgServer.Stop()
	os.Exit(code)
}

// database creates an empty database and returns its DSN.
func database(t *testing.T, name string) string {
	t.Helper()
	srv := pgServer.Get(t)
	if err := srv.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d/%s?sslmode=disable", testdb.PostgresPassword, srv.Port, name)
}

func charge(t *testing.T, l *budget.Ledger, eps float64) budget.Entry {
	t.Helper()
	e, err := l.Charge(context.Background(), budget.Charge{User: "analyst", Tables: []string{"adult"}, Mechanism: "laplace",
		Strategy: "identity", Cost: budget.Cost{Epsilon: eps}}, []budget.Limit{{Scope: budget.ScopeUser, User: "analyst", Epsilon: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestOpenFiles(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(context.Background(), catalog.State{Driver: catalog.StateSQLite}, dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	charge(t, s.Ledger, 0.25)
	if s.UnitKey != "" || s.DB != nil || s.Where != dir {
		t.Fatalf("SQLite state: unit key %q, db %v, where %q", s.UnitKey, s.DB, s.Where)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{LedgerFile, AnswersFile, MeasurementsFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	l, err := OpenLedger(context.Background(), catalog.State{Driver: catalog.StateSQLite}, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if es, err := l.Entries(context.Background(), budget.Filter{}); err != nil || len(es) != 1 {
		t.Fatalf("%v %d entries", err, len(es))
	}
	if _, err := OpenLedger(context.Background(), catalog.State{Driver: catalog.StateSQLite}, t.TempDir(), false); err == nil || !strings.Contains(err.Error(), "no ledger at") {
		t.Fatalf("missing ledger: %v", err)
	}
}

func TestDSN(t *testing.T) {
	t.Setenv("DPPROXY_TEST_STATE_DSN", "postgres://u:p@h/db")
	if d, err := DSN(catalog.State{Driver: catalog.StatePostgres, DSNEnv: "DPPROXY_TEST_STATE_DSN"}); err != nil || d != "postgres://u:p@h/db" {
		t.Fatalf("%q %v", d, err)
	}
	_, err := DSN(catalog.State{Driver: catalog.StatePostgres, DSNEnv: "DPPROXY_TEST_STATE_UNSET"})
	if err == nil || !strings.Contains(err.Error(), "DPPROXY_TEST_STATE_UNSET") {
		t.Fatalf("unset variable: %v", err)
	}
	st := catalog.State{Driver: catalog.StatePostgres, DSN: "postgres://u:hunter2@127.0.0.1:1/x?connect_timeout=1"}
	if _, err := Open(context.Background(), st, t.TempDir(), 0); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("closed port: %v", err)
	}
}

// The first proxy to start chooses the unit-hash key; every other one,
// however many start at once, reads the same.
func TestUnitKeyShared(t *testing.T) {
	dsn := database(t, "dpstate_unitkey")
	ctx := context.Background()
	keys := make([]string, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			db, err := statedb.OpenPostgres(ctx, dsn, 2)
			if err != nil {
				t.Error(err)
				return
			}
			defer db.Close()
			if keys[i], err = unitKey(ctx, db, ""); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, k := range keys {
		if k != keys[0] || len(k) != 64 {
			t.Fatalf("keys %q", keys)
		}
	}
	db, err := statedb.OpenPostgres(ctx, dsn, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if k, err := unitKey(ctx, db, strings.Repeat("ab", 32)); err != nil || k != keys[0] {
		t.Fatalf("a later key does not replace the first: %q %v", k, err)
	}
}

// Migrate copies a SQLite data directory into PostgreSQL: the same
// entries with the same hashes, verified; the unit-hash key; and a
// database already keeping another key is refused.
func TestMigrate(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, catalog.State{Driver: catalog.StateSQLite}, dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		charge(t, s.Ledger, 0.1)
	}
	if _, err := s.Answers.Put(ctx, "batch-key", []byte("released")); err != nil {
		t.Fatal(err)
	}
	src, err := s.Ledger.Entries(ctx, budget.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	key := strings.Repeat("5a", 32)
	if err := os.WriteFile(filepath.Join(dir, sources.UnitKeyFile), []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	st := catalog.State{Driver: catalog.StatePostgres, DSN: database(t, "dpstate_migrate")}
	m, err := Migrate(ctx, dir, st)
	if err != nil {
		t.Fatal(err)
	}
	if m.Entries != int64(len(src)) || m.Answers != 1 || !m.UnitKey {
		t.Fatalf("migrated %+v, want %d entries, 1 answer and the key", m, len(src))
	}
	pg, err := Open(ctx, st, t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	if pg.UnitKey != key {
		t.Fatalf("unit key %q, want the data directory's", pg.UnitKey)
	}
	if err := pg.Ledger.Verify(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := pg.Ledger.Entries(ctx, budget.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(src) {
		t.Fatalf("%d entries, want %d", len(got), len(src))
	}
	for i := range got {
		if got[i].Hash != src[i].Hash || got[i].PrevHash != src[i].PrevHash || !got[i].Time.Equal(src[i].Time) {
			t.Fatalf("entry %d: %+v, want %+v", i+1, got[i], src[i])
		}
	}
	if b, ok, err := pg.Answers.Get(ctx, "batch-key"); err != nil || !ok || string(b) != "released" {
		t.Fatalf("stored answer: %q %v %v", b, ok, err)
	}
	// The copy goes on: a new charge extends the same chain.
	if e := charge(t, pg.Ledger, 0.1); e.Seq != int64(len(src))+1 || e.PrevHash != src[len(src)-1].Hash {
		t.Fatalf("next entry %+v", e)
	}
	// A second migration into it is refused, and so is another key.
	if _, err := Migrate(ctx, dir, st); err == nil {
		t.Fatal("migrated twice into one database")
	}
	if err := os.WriteFile(filepath.Join(dir, sources.UnitKeyFile), []byte(strings.Repeat("77", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Migrate(ctx, dir, st); err == nil || !strings.Contains(err.Error(), "another unit-hash key") {
		t.Fatalf("another key: %v", err)
	}
}
