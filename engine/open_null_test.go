package engine

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/sources"
)

// NULL in an open column follows the column's null policy (drop, the
// default, or cell; an open column has no other cell to send it to) under
// =, <>, IN, LIKE, NOT LIKE and IS NULL, as on a declared column: drop
// leaves NULL rows out of every predicate on the column, cell gives them
// a cell of their own that IS NULL counts and no comparison or LIKE
// matches. Checked without noise against counts written out here.
func TestOpenNullPolicy(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "n.sqlite")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE v (a TEXT, b TEXT)"); err != nil {
		t.Fatal(err)
	}
	// 3 'apple', 2 'avocado', 4 'banana', 5 NULL in each column.
	for _, x := range []struct {
		v any
		n int
	}{{"apple", 3}, {"avocado", 2}, {"banana", 4}, {nil, 5}} {
		for range x.n {
			if _, err := db.Exec("INSERT INTO v VALUES (?, ?)", x.v, x.v); err != nil {
				t.Fatal(err)
			}
		}
	}
	db.Close()
	cat, err := catalog.Parse("n.yaml", []byte(`database: n
sources: {main: {driver: sqlite, path: `+path+`}}
tables:
  v:
    budget: {total: 100, per_user: 100, default_per_query: 1}
    columns:
      a: {type: text}
      b: {type: text, null: cell}
users:
  analyst: {password: analyst, role: analyst}
`))
	if err != nil {
		t.Fatal(err)
	}
	h, err := sources.Open(ctx, cat, sources.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	l, err := budget.Open(ctx, filepath.Join(dir, "ledger.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	e := New(Config{Catalog: cat, Ledger: l, Histograms: h, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).withoutNoise()
	s := session("analyst", nil)
	for _, c := range []struct {
		where string
		a, b  int // the count for columns a (drop) and b (cell)
	}{
		{"%s LIKE 'a%%'", 5, 5},
		{"%s NOT LIKE 'a%%'", 4, 4},
		{"%s = 'banana'", 4, 4},
		{"%s <> 'banana'", 5, 5},
		{"%s NOT IN ('apple', 'banana')", 2, 2},
		{"%s IS NULL", 0, 5},
		{"%s IS NOT NULL", 9, 9},
		{"%s LIKE 'a%%' OR %[1]s IS NULL", 5, 10},
		{"%s NOT LIKE 'b%%' AND %[1]s <> 'apple'", 2, 2},
	} {
		for k, col := range []string{"a", "b"} {
			q := "SELECT COUNT(*) FROM v WHERE " + fmt.Sprintf(c.where, col)
			rs, err := e.Answer(ctx, s, []string{q})
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			want := []int{c.a, c.b}[k]
			if got := fmt.Sprint(rs[0].Rows[0][0]); got != fmt.Sprint(want) {
				t.Errorf("%s: %s, want %d", q, got, want)
			}
		}
	}
}
