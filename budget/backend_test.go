package budget

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/statedb"
	"github.com/dpproxy/dpproxy/internal/testdb"
)

// pg is a real PostgreSQL server, started by the first test that asks for
// one; under CI=true a server that cannot start fails the test.
var pg = testdb.NewLazy(testdb.StartPostgres)

// pgDurable is a server with PostgreSQL's durable defaults (fsync on), for
// BenchmarkChargeStates only.
var pgDurable = testdb.NewLazy(testdb.StartPostgresDurable)

func TestMain(m *testing.M) {
	code := m.Run()
	pg.Stop()
	pgDurable.Stop()
	os.Exit(code)
}

// opener returns a fresh, empty ledger of one backend, closed when the
// test ends.
type opener func(t testing.TB) *Ledger

// forBackends runs fn on a SQLite ledger file and on a ledger in
// PostgreSQL, as subtests named after the backend.
func forBackends(t *testing.T, fn func(t *testing.T, open opener)) {
	t.Run("sqlite", func(t *testing.T) {
		fn(t, func(t testing.TB) *Ledger {
			l, _ := openTest(t)
			return l
		})
	})
	t.Run("postgres", func(t *testing.T) {
		fn(t, func(t testing.TB) *Ledger { return openPG(t, newPGDB(t, 4)) })
	})
}

// openPG opens the ledger in db, closed when the test ends.
func openPG(t testing.TB, db *statedb.DB) *Ledger {
	t.Helper()
	l, err := OpenDB(context.Background(), db)
	if err != nil {
		t.Fatalf("OpenDB: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// newPGDB creates a database of its own for the caller and connects to it
// with at most maxConns connections; it is dropped when the test ends.
func newPGDB(t testing.TB, maxConns int) *statedb.DB {
	t.Helper()
	dsn := newPGDatabase(t)
	return openPGPool(t, dsn, maxConns)
}

// newPGDatabase creates a database (dropped when the test ends) and
// returns a DSN for it.
func newPGDatabase(t testing.TB) string {
	t.Helper()
	return newPGDatabaseOn(t, pg)
}

// newPGDatabaseOn is newPGDatabase on the given server.
func newPGDatabaseOn(t testing.TB, server *testdb.Lazy) string {
	t.Helper()
	srv := server.Get(t)
	ctx := context.Background()
	var b [6]byte
	rand.Read(b[:])
	name := "ledger_" + hex.EncodeToString(b[:])
	if err := srv.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(srv.AdminDSN)
	if err != nil {
		t.Fatalf("admin DSN: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// openPGPool connects to dsn, as one proxy would; closed when the test
// ends (after the ledgers on it: cleanups run last-registered first).
func openPGPool(t testing.TB, dsn string, maxConns int) *statedb.DB {
	t.Helper()
	db, err := statedb.OpenPostgres(context.Background(), dsn, maxConns)
	if err != nil {
		t.Fatalf("OpenPostgres: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// pgExec runs statements on a ledger's PostgreSQL database behind its back
// (to tamper with it).
func pgExec(t testing.TB, l *Ledger, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := l.db.ExecContext(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}
