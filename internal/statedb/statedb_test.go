package statedb

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/internal/testdb"
)

var pgServer = testdb.NewLazy(testdb.StartPostgres)

func TestMain(m *testing.M) {
	code := m.Run()
	pgServer.Stop()
	os.Exit(code)
}

func TestRebind(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"SELECT 1", "SELECT 1"},
		{"SELECT ? , ?", "SELECT $1 , $2"},
		{"SELECT '?', ? FROM t WHERE a = '' || ?", "SELECT '?', $1 FROM t WHERE a = '' || $2"},
		{`SELECT "a?""b", ?`, `SELECT "a?""b", $1`},
		{"SELECT 'it''s ?', ?", "SELECT 'it''s ?', $1"},
		{"SELECT ? -- why?\n, ?", "SELECT $1 -- why?\n, $2"},
		{"SELECT /* ? */ ?", "SELECT /* ? */ $1"},
		{"SELECT 'open ?", "SELECT 'open ?"},
		{"SELECT ? -- ?", "SELECT $1 -- ?"},
	} {
		if got := Rebind(tc.in); got != tc.want {
			t.Errorf("Rebind(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func FuzzRebind(f *testing.F) {
	f.Add("SELECT ? FROM t WHERE a = '?' -- ?\n AND b = ?")
	f.Fuzz(func(t *testing.T, q string) {
		out := Rebind(q)
		if len(out) < len(q) {
			t.Fatalf("Rebind(%q) = %q is shorter", q, out)
		}
	})
}

// TestOpenPostgres runs "?" queries and a transaction through the
// rebinding handle, on a real PostgreSQL.
func TestOpenPostgres(t *testing.T) {
	srv := pgServer.Get(t)
	ctx := context.Background()
	db, err := OpenPostgres(ctx, srv.AdminDSN, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Dialect != Postgres || db.Where == "" {
		t.Fatalf("dialect %q where %q", db.Dialect, db.Where)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE rebind_t (k TEXT PRIMARY KEY, v BIGINT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO rebind_t (k, v) VALUES (?, ?), (?, ?)", "a?", 1, "b", 2); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	var sum int64
	if err := db.QueryRowContext(ctx, "SELECT SUM(v) FROM rebind_t WHERE k IN (?, ?) AND k <> '?'", "a?", "b").Scan(&sum); err != nil {
		t.Fatal(err)
	}
	if sum != 3 {
		t.Fatalf("sum %d, want 3", sum)
	}
	_, err = db.ExecContext(ctx, "INSERT INTO rebind_t (k, v) VALUES (?, ?)", "b", 3)
	if !IsUniqueViolation(err) {
		t.Fatalf("duplicate key: %v, want a unique violation", err)
	}
	if _, err := OpenPostgres(ctx, "postgres://u:secret@127.0.0.1:1/x?connect_timeout=1", 1); err == nil {
		t.Fatal("connected to a closed port")
	} else if strings.Contains(err.Error(), "secret") {
		t.Fatalf("error %q shows the password", err)
	}
}
