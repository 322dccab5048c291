package answers_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"github.com/dpproxy/dpproxy/answers"
	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/demo"
	"github.com/dpproxy/dpproxy/engine"
	"github.com/dpproxy/dpproxy/internal/statedb"
	"github.com/dpproxy/dpproxy/sources"
)

const engineCatalog = `
database: demo
sources: {main: {driver: sqlite, path: demo.sqlite}}
tables:
  adult:
    noise: laplace
    budget: {total: 1000, per_user: 1000, default_per_query: 0.1, max_per_query: 5}
    columns:
      age: {type: integer, min: 17, max: 90}
      sex: {type: categorical, values: [Female, Male]}
      hours_per_week: {type: integer, min: 1, max: 99}
users:
  analyst: {password: analyst, role: analyst}
`

// Three engines, each with stored answers in one PostgreSQL database
// through a pool of its own (three proxies), answering the same batches
// from many goroutines at once: each batch is charged once, and every
// request gets the same answer.
func TestEnginesShareAnswersInPostgres(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := demo.Generate(ctx, filepath.Join(dir, "demo.sqlite"), 1000); err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Parse("test.yaml", []byte(engineCatalog))
	if err != nil {
		t.Fatal(err)
	}
	dsn := answers.FreshDSN(t)
	batches := [][]string{
		{"SELECT COUNT(*) FROM adult WHERE age BETWEEN 33 AND 47"},
		{"SELECT sex, COUNT(*) FROM adult GROUP BY sex"},
		{"SELECT AVG(hours_per_week) FROM adult WHERE sex = 'Female'", "SELECT COUNT(*) FROM adult WHERE sex = 'Male'"},
	}
	const proxies, workers = 3, 8
	var engines []*engine.Engine
	var ledgers []*budget.Ledger
	for range proxies {
		l, err := budget.Open(ctx, filepath.Join(dir, "ledger.sqlite"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		ledgers = append(ledgers, l)
		h, err := sources.Open(ctx, cat, sources.Options{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		db, err := statedb.OpenPostgres(ctx, dsn, 4)
		if err != nil {
			t.Fatal(err)
		}
		st, err := answers.OpenDB(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close(); db.Close() })
		engines = append(engines, engine.New(engine.Config{Catalog: cat, Ledger: l, Histograms: h, Answers: st,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	}
	got := make([][][]*engine.Result, len(batches))
	for b := range got {
		got[b] = make([][]*engine.Result, proxies*workers)
	}
	var wg sync.WaitGroup
	for g := range proxies * workers {
		wg.Go(func() {
			for k := range batches {
				b := (k + g) % len(batches)
				rs, err := engines[g%proxies].Answer(ctx, &engine.Session{ConnID: uint32(g), User: "analyst"}, batches[b])
				if err != nil {
					t.Errorf("batch %d: %v", b, err)
					return
				}
				got[b][g] = rs
			}
		})
	}
	wg.Wait()
	for b := range got {
		for g := 1; g < len(got[b]); g++ {
			if !reflect.DeepEqual(got[b][g], got[b][0]) {
				t.Fatalf("batch %d: request %d got another answer", b, g)
			}
		}
	}
	for _, l := range ledgers { // the reuse entries each groups in the background
		if err := l.FlushReuses(ctx); err != nil {
			t.Fatal(err)
		}
	}
	es, err := ledgers[0].Entries(ctx, budget.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, e := range es {
		kinds[e.Kind]++
	}
	if kinds[budget.KindCharge] != len(batches) || kinds[budget.KindReuse] != len(batches)*(proxies*workers-1) {
		t.Fatalf("ledger: %v; want %d charges and %d reuses", kinds, len(batches), len(batches)*(proxies*workers-1))
	}
}
