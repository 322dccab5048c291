package engine

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/demo"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/sources"
)

// spacesCatalog puts events and a second view of them, visits, in one
// privacy unit space with a small budget, so that concurrent batches on
// the two tables race for it.
const spacesCatalog = `database: demo
sources:
  main: {driver: sqlite, path: demo.sqlite}
tables:
  events:
    budget: {total: 1, per_user: 0.6, default_per_query: 0.05}
    reuse_measurements: false
    privacy_unit: {column: user_id, space: customer, max_rows: 5}
    columns:
      page: {type: categorical, values: [home, search, product, cart, checkout, account, help]}
  visits:
    source_table: events
    budget: {total: 1, per_user: 0.6, default_per_query: 0.05}
    reuse_measurements: false
    privacy_unit: {column: user_id, space: customer, max_rows: 5}
    columns:
      page: {type: categorical, values: [home, search, product, cart, checkout, account, help]}
users:
  alice: {password: a, role: analyst}
  bob: {password: b, role: analyst}
  carol: {password: c, role: analyst}
`

// Concurrent batches on two tables of one space never overspend it
// together: the per-user budget (0.6) and the space's total (1) hold over
// both tables, however the charges interleave, and every batch either is
// charged or refused for the budget.
func TestSpaceBudgetUnderConcurrency(t *testing.T) {
	f := newFixtureCatalog(t, spacesCatalog)
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	answered := map[string]int{}
	for i := range 24 {
		user := []string{"alice", "bob", "carol"}[i%3]
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := session(user, nil)
			for j := 0; ; j++ {
				// A different set of pages each time (of 127), so that few
				// batches are repeats answered for free.
				var in []string
				for b, p := range []string{"home", "search", "product", "cart", "checkout", "account", "help"} {
					if ((i+24*j)%127+1)&(1<<b) != 0 {
						in = append(in, "'"+p+"'")
					}
				}
				table := []string{"events", "visits"}[(i+j)%2]
				q := "SELECT COUNT(*) FROM " + table + " WHERE page IN (" + strings.Join(in, ", ") + ")"
				_, err := f.eng.Answer(ctx, s, []string{q})
				var pe *parser.Error
				switch {
				case err == nil:
					mu.Lock()
					answered[user]++
					mu.Unlock()
				case errors.As(err, &pe) && pe.Code == parser.CodeBudgetExceeded:
					return
				default:
					t.Error(err)
					return
				}
				if j > 40 {
					t.Error("no refusal after 40 batches")
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := f.ledger.Verify(ctx); err != nil {
		t.Fatal(err)
	}
	es := f.entries(t)
	perUser := map[string]float64{}
	var total float64
	tables := map[string]bool{}
	for _, e := range es {
		if e.Kind != budget.KindCharge {
			continue
		}
		if !slices.Equal(e.Spaces, []string{"customer"}) {
			t.Fatalf("entry %d records spaces %v", e.Seq, e.Spaces)
		}
		perUser[e.User] += e.Cost.Epsilon
		total += e.Cost.Epsilon
		tables[e.Tables[0]] = true
	}
	if !tables["events"] || !tables["visits"] {
		t.Fatalf("charges on %v, want both tables", tables)
	}
	for u, eps := range perUser {
		if eps > 0.6*(1+1e-9) {
			t.Errorf("%s spent ε=%g in space customer, over the per-user 0.6", u, eps)
		}
	}
	if total > 1*(1+1e-9) {
		t.Errorf("space customer spent ε=%g, over its total 1", total)
	}
	// Each batch costs 0.05 and the budgets are multiples of it: the space
	// is used up exactly, not left with room for one more batch.
	if total < 1-0.05+1e-9 {
		t.Errorf("space customer spent only ε=%g of 1 before refusing", total)
	}
	if err := budget.CheckSpending(es, Limits(f.cfg.Catalog)); err != nil {
		t.Fatal(err)
	}
	t.Logf("answered %v; spent %v, total %g", answered, perUser, total)
}

// The demo's daily dashboard over a month is readable at the demo's
// default ε: EXPLAIN's standard error of each day's count, times 1.96, is
// at most 10% of the typical (median) June day's count of events after
// contribution bounding, which the engine computes without noise here.
// See docs/privacy-units.md, "Choosing the demo's bounds".
func TestDemoDashboardStandardError(t *testing.T) {
	if testing.Short() {
		t.Skip("generates the full demo data set")
	}
	ctx := context.Background()
	dir := t.TempDir()
	if err := demo.Generate(ctx, filepath.Join(dir, "demo.sqlite"), demo.DefaultRows); err != nil {
		t.Fatal(err)
	}
	cat := catalog.Demo()
	l, err := budget.Open(ctx, filepath.Join(dir, "ledger.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	h, err := sources.Open(ctx, cat, sources.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	eng := New(Config{Catalog: cat, Ledger: l, Histograms: h, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	const dashboard = "SELECT DATE(ts) AS day, COUNT(*) FROM events WHERE ts >= '2025-06-01' AND ts < '2025-07-01' GROUP BY day"
	s := session("analyst", nil)
	rs, err := eng.Answer(ctx, s, []string{"EXPLAIN " + dashboard})
	if err != nil {
		t.Fatal(err)
	}
	stderr := math.NaN()
	for _, row := range rs[0].Rows {
		if k, _ := row[0].(string); strings.HasPrefix(k, "stderr") {
			if stderr, err = strconv.ParseFloat(row[1].(string), 64); err != nil {
				t.Fatalf("%s = %v", k, row[1])
			}
		}
	}
	def := cat.Table("events").Budget.DefaultPerQuery
	if want := math.Sqrt2 * float64(cat.Table("events").Unit.MaxRows) / def; math.IsNaN(stderr) || math.Abs(stderr-want) > 0.01*want {
		t.Fatalf("EXPLAIN stderr %v, want √2·max_rows/ε = %.4g (rows %v)", stderr, want, rs[0].Rows)
	}

	exact := New(Config{Catalog: cat, Ledger: l, Histograms: h, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).withoutNoise()
	rs, err = exact.Answer(ctx, s, []string{dashboard})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs[0].Rows) != 30 {
		t.Fatalf("%d days in June", len(rs[0].Rows))
	}
	var counts []float64
	for _, row := range rs[0].Rows {
		counts = append(counts, toNumber(t, row[1]))
	}
	slices.Sort(counts)
	median := (counts[14] + counts[15]) / 2
	half := 1.96 * stderr
	t.Logf("stderr %.4g, 95%% half-width %.4g; June days after bounding: min %g, median %g, max %g: %.1f%% of the median day, %.1f%% of the smallest",
		stderr, half, counts[0], median, counts[29], 100*half/median, 100*half/counts[0])
	if half > 0.1*median {
		t.Fatalf("95%% half-width %.4g is more than 10%% of the median June day's %g", half, median)
	}
	if spent, err := l.SpentSpace(ctx, "analyst", "customer"); err != nil || !(spent.Epsilon <= cat.Table("events").Budget.PerUser) {
		t.Fatalf("the dashboard spent %+v of the per-user budget, %v", spent, err)
	}
}

func toNumber(t *testing.T, v any) float64 {
	t.Helper()
	switch x := v.(type) {
	case int64:
		return float64(x)
	case float64:
		return x
	case int:
		return float64(x)
	}
	t.Fatalf("count %T %v", v, v)
	return 0
}
