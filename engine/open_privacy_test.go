package engine

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"testing"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/sources"
)

// End-to-end privacy of partition selection through the engine: over
// many seeded runs on a small unit table, a key held by n units after
// contribution bounding is released at most as often as (ε, δ)-DP allows
// for a key whose n units could all be absent, δ·(1 + e^ε + … +
// e^((n−1)ε)) (group privacy over n units from a dataset where the key
// does not occur), however many rows those units hold and however many
// keys one unit holds. Each run is a fresh engine (no released keys) on
// the same data, sources and ledger; the selection is the one a domain
// list (SELECT k FROM t GROUP BY k) runs, at ε_sel = 1 (half of
// @dp_epsilon = 2) and δ = 0.01, with max_groups 1: the truncated
// geometric mechanism.
//
// Each count is checked against the binomial quantile of its bound at a
// false-failure rate of 10⁻⁶ (computed exactly below); 4 such checks, so
// the test falsely fails with probability under 4·10⁻⁶ for a correct
// engine, and never for these seeds. A key counted by rows (solo's 40)
// or a unit left in all its keys (multi's 10) would be released about
// every run, or 10 times as often, and fail.
func TestOpenSelectionPrivacyEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("statistical: many runs")
	}
	const (
		runs  = 1500
		eps   = 1.0 // ε_sel
		delta = 0.01
	)
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "p.sqlite")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE t (uid INTEGER, k TEXT)"); err != nil {
		t.Fatal(err)
	}
	ins := func(uid int, k string, rows int) {
		for range rows {
			if _, err := db.Exec("INSERT INTO t VALUES (?, ?)", uid, k); err != nil {
				t.Fatal(err)
			}
		}
	}
	for u := 1000; u < 1300; u++ {
		ins(u, "big", 1) // 300 units: released every run
	}
	ins(1, "solo", 40) // one unit, many rows
	ins(2, "pair", 5)
	ins(3, "pair", 7)
	for u := 4; u <= 6; u++ {
		ins(u, "trio", 3)
	}
	for i := range 10 {
		ins(7, fmt.Sprintf("multi%d", i), 2) // one unit in 10 keys; max_groups 1 keeps one
	}
	db.Close()
	y := `database: p
sources: {main: {driver: sqlite, path: ` + path + `}}
tables:
  t:
    budget: {total: 1000000, per_user: 1000000, default_per_query: 2, delta: 0.99, delta_per_query: 0.01}
    privacy_unit: {column: uid, max_rows: 100, max_groups: 1}
    columns:
      k: {type: text}
users:
  analyst: {password: analyst, role: analyst}
`
	cat, err := catalog.Parse("p.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	h, err := sources.Open(ctx, cat, sources.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var ledger *budget.Ledger
	defer func() { ledger.Close() }()
	s := session("analyst", map[string]any{"dp_epsilon": 2.0})
	released := map[string]int{}
	for run := range runs {
		if run%90 == 0 { // δ budget 0.99: 99 selections per ledger
			if ledger != nil {
				ledger.Close()
			}
			if ledger, err = budget.Open(ctx, filepath.Join(dir, fmt.Sprintf("ledger%d.sqlite", run))); err != nil {
				t.Fatal(err)
			}
		}
		e := New(Config{Catalog: cat, Ledger: ledger, Histograms: h, Logger: log}).withSelectionSeed(uint64(run) + 1)
		rs, err := e.Answer(ctx, s, []string{"SELECT k FROM t GROUP BY k"})
		if err != nil {
			t.Fatal(err)
		}
		multi := false
		for _, r := range rs[0].Rows {
			k := r[0].(string)
			if len(k) > 5 && k[:5] == "multi" {
				multi = true
				continue
			}
			released[k]++
		}
		if multi {
			released["multi"]++
		}
		e.measures.Close()
	}
	bound := func(n int) float64 { return delta * (math.Exp(float64(n)*eps) - 1) / (math.Exp(eps) - 1) }
	for _, c := range []struct {
		key   string
		units int
	}{{"solo", 1}, {"pair", 2}, {"trio", 3}, {"multi", 1}} {
		limit := binomialQuantile(runs, bound(c.units), 1e-6)
		t.Logf("%s (%d units): released in %d of %d runs; bound %.4f, limit %d", c.key, c.units, released[c.key], runs, bound(c.units), limit)
		if released[c.key] > limit {
			t.Errorf("%s, held by %d units, released in %d of %d runs: more than the (ε=%g, δ=%g) bound %.4f allows (limit %d at false-failure rate 10⁻⁶)",
				c.key, c.units, released[c.key], runs, eps, delta, bound(c.units), limit)
		}
	}
	if released["big"] != runs {
		t.Errorf("big, held by 300 units, released in %d of %d runs", released["big"], runs)
	}
}

// binomialQuantile is the smallest c with P(Bin(n, p) > c) ≤ alpha.
func binomialQuantile(n int, p, alpha float64) int {
	lp, lq := math.Log(p), math.Log1p(-p)
	lg := func(x int) float64 { v, _ := math.Lgamma(float64(x) + 1); return v }
	tail := 0.0 // P(X > c), summed from the top
	for c := n; c >= 0; c-- {
		pc := math.Exp(lg(n) - lg(c) - lg(n-c) + float64(c)*lp + float64(n-c)*lq)
		if tail+pc > alpha {
			return c
		}
		tail += pc
	}
	return 0
}
