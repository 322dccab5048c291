package measure

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/dpproxy/dpproxy/internal/statedb"
	"github.com/dpproxy/dpproxy/internal/testdb"
)

var pg = testdb.NewLazy(testdb.StartPostgres)

func TestMain(m *testing.M) {
	code := m.Run()
	pg.Stop()
	os.Exit(code)
}

// opener opens a Store over the test's one backing file or database: each
// call is another process (a pool of its own on PostgreSQL) sharing it.
// The Store is closed when the test ends.
type opener func(t *testing.T, maxBytes int64) *Store

// onBackends runs test on a SQLite file and on a PostgreSQL database of
// its own.
func onBackends(t *testing.T, test func(t *testing.T, open opener)) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "m.sqlite")
		test(t, func(t *testing.T, maxBytes int64) *Store {
			t.Helper()
			s, err := Open(context.Background(), path, maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		})
	})
	t.Run("postgres", func(t *testing.T) {
		dsn, err := pg.Get(t).FreshPostgresDB(context.Background(), "measure")
		if err != nil {
			t.Fatal(err)
		}
		test(t, func(t *testing.T, maxBytes int64) *Store {
			t.Helper()
			ctx := context.Background()
			db, err := statedb.OpenPostgres(ctx, dsn, 4)
			if err != nil {
				t.Fatal(err)
			}
			s, err := OpenDB(ctx, db, maxBytes)
			if err != nil {
				db.Close()
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close(); db.Close() })
			return s
		})
	})
}
