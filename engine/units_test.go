package engine

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/sources"
)

const unitsCatalog = `
database: shop
sources: {main: {driver: sqlite, path: events.sqlite}}
tables:
  events:
    budget: {total: 1000, per_user: 1000, default_per_query: 0.5, max_per_query: 50}
    privacy_unit: {column: user_id, max_rows: 5}
    columns:
      kind: {type: categorical, values: [view, cart, buy]}
      hour: {type: integer, min: 0, max: 23, width: 6}
  events_g:
    source_table: events
    noise: gaussian
    budget: {total: 1000, per_user: 1000, default_per_query: 0.5, max_per_query: 50, delta: 1e-6}
    privacy_unit: {column: user_id, max_rows: 6, max_groups: 2, max_rows_per_group: 2}
    columns:
      kind: {type: categorical, values: [view, cart, buy]}
      hour: {type: integer, min: 0, max: 23, width: 6}
users:
  analyst: {password: analyst, role: analyst}
`

// unitsFixture is an engine over an events table: 100 users with one to
// five events, one user with 400 'view' events, and 10 events of no user.
func unitsFixture(t *testing.T) (*fixture, int) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(dir, "events.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE events (user_id INTEGER, kind TEXT, hour INTEGER)"); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	truncated := 0 // Σ min(rows, 5) over users
	for u := 1; u <= 100; u++ {
		n := 1 + r.IntN(5)
		truncated += n
		for range n {
			if _, err := tx.Exec("INSERT INTO events VALUES (?, ?, ?)", u, []string{"view", "cart", "buy"}[r.IntN(3)], r.IntN(24)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 400 {
		if _, err := tx.Exec("INSERT INTO events VALUES (0, 'view', ?)", i%24); err != nil {
			t.Fatal(err)
		}
	}
	truncated += 5
	for range 10 {
		if _, err := tx.Exec("INSERT INTO events VALUES (NULL, 'buy', 3)"); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	cat, err := catalog.Parse("units.yaml", []byte(unitsCatalog))
	if err != nil {
		t.Fatal(err)
	}
	l, err := budget.Open(ctx, filepath.Join(dir, "ledger.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	h, err := sources.Open(ctx, cat, sources.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	cfg := Config{Catalog: cat, Ledger: l, Histograms: h, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	return &fixture{eng: New(cfg), ledger: l, data: filepath.Join(dir, "events.sqlite"), cfg: cfg}, truncated
}

// The unit column is never selected, grouped by, filtered on or counted:
// every such query is refused with 3900 and charges nothing.
func TestUnitColumnRefused(t *testing.T) {
	f, _ := unitsFixture(t)
	s := session("analyst", nil)
	for _, q := range []string{
		"SELECT user_id, COUNT(*) FROM events GROUP BY user_id",
		"SELECT COUNT(*) FROM events WHERE user_id = 3",
		"SELECT kind, COUNT(*) FROM events GROUP BY kind, user_id",
		"SELECT COUNT(user_id) FROM events",
		"SELECT SUM(user_id) FROM events",
		"SELECT user_id FROM events GROUP BY user_id",
		"SELECT user_id FROM events LIMIT 0",
		"SELECT kind, COUNT(*) FROM events GROUP BY kind HAVING SUM(user_id) > 3",
		"EXPLAIN SELECT COUNT(*) FROM events WHERE user_id > 0",
		"SELECT kind, COUNT(*) FROM events GROUP BY kind ORDER BY user_id",
	} {
		_, err := f.eng.Answer(context.Background(), s, []string{q})
		var pe *parser.Error
		if !asParserError(err, &pe) || pe.Code != parser.CodeDPRefused || !strings.Contains(pe.Message, "user_id") {
			t.Errorf("%s: %v, want a 3900 refusal naming user_id", q, err)
		}
	}
	if n := len(f.entries(t)); n != 0 {
		t.Fatalf("refusals charged %d entries", n)
	}
}

func asParserError(err error, pe **parser.Error) bool {
	e, ok := err.(*parser.Error)
	*pe = e
	return ok
}

// A query on a table with a privacy unit: EXPLAIN names the unit, its
// bounds and the per-unit sensitivity; the charge records them and verifies;
// a 400-row user moves a high-ε count by at most max_rows; NULL units are
// not counted.
func TestUnitQueryEndToEnd(t *testing.T) {
	f, truncated := unitsFixture(t)
	ctx := context.Background()
	s := session("analyst", map[string]any{"dp_epsilon": 50.0})
	ex := f.answer(t, s, "EXPLAIN SELECT COUNT(*) FROM events")
	props := map[string]string{}
	for _, row := range ex.AllRows() {
		props[fmt.Sprint(row[0])] = fmt.Sprint(row[1])
	}
	if !strings.Contains(props["privacy unit"], "user_id (max_rows 5)") || !strings.Contains(props["privacy unit"], "NULL user_id are not counted") {
		t.Errorf("privacy unit: %q", props["privacy unit"])
	}
	if !strings.Contains(props["sensitivity"], "5 per unit (1 per row × 5 rows)") {
		t.Errorf("sensitivity: %q", props["sensitivity"])
	}
	r := f.answer(t, s, "SELECT COUNT(*) FROM events")
	got, _ := toFloat(r.AllRows()[0][0])
	// Laplace noise of scale 5/50 = 0.1: beyond 2 with probability e^-20.
	if math.Abs(got-float64(truncated)) > 2 {
		t.Errorf("COUNT(*) = %v, want the truncated count %d (400-row user keeps 5, NULL units dropped)", got, truncated)
	}
	es := f.entries(t)
	if len(es) != 1 || es[0].Unit == nil || es[0].Unit.Column != "user_id" || es[0].Unit.MaxRows != 5 || math.Abs(es[0].Unit.RowEpsilon-10) > 1e-9 || es[0].Cost.Epsilon != 50 {
		t.Fatalf("entry %+v unit %+v", es, es[0].Unit)
	}
	// Gaussian, with group bounds: ρ per unit, calibrated at ρ/min(k, g·r)².
	f.answer(t, s, "SELECT kind, COUNT(*) FROM events_g GROUP BY kind")
	// Top-k: one cell per group, Δ = min(k, r) = 5.
	f.answer(t, session("analyst", nil), "SELECT kind FROM events GROUP BY kind ORDER BY COUNT(*) DESC LIMIT 1")
	// An accuracy target under a unit.
	f.answer(t, session("analyst", map[string]any{"dp_max_stderr": 20.0}), "SELECT hour, COUNT(*) FROM events GROUP BY hour")
	es = f.entries(t)
	if len(es) != 4 {
		t.Fatalf("%d entries", len(es))
	}
	if u := es[1].Unit; u == nil || u.MaxGroups != 2 || u.RowRho == 0 || math.Abs(u.RowRho*16-es[1].Cost.Rho) > 1e-9*es[1].Cost.Rho {
		t.Errorf("gaussian entry %+v unit %+v", es[1], u)
	}
	if u := es[2].Unit; u == nil || u.SelectionSensitivity != 5 || u.SelectionEpsilon == 0 {
		t.Errorf("top-k entry %+v unit %+v", es[2], u)
	}
	if u := es[3].Unit; u == nil || math.Abs(u.RowEpsilon*5-es[3].Cost.Epsilon) > 1e-9*es[3].Cost.Epsilon {
		t.Errorf("target entry %+v unit %+v", es[3], u)
	}
	if err := f.ledger.Verify(ctx); err != nil {
		t.Fatal(err)
	}
}

// COUNT(DISTINCT user_id) counts people per group and predicate, with noise
// for a unit counted once in at most min(k, g) groups; other COUNT(DISTINCT)
// and mixing it with other aggregates are refused.
func TestCountDistinctUnits(t *testing.T) {
	f, _ := unitsFixture(t)
	ctx := context.Background()
	db, err := sql.Open("sqlite", f.data)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Only user 0 has more than 5 rows, all 'view': truncation keeps every
	// other row, so the exact answers are SQL's.
	exact := func(q string) map[string]float64 {
		rows, err := db.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]float64{}
		for rows.Next() {
			var k string
			var n float64
			if err := rows.Scan(&k, &n); err != nil {
				t.Fatal(err)
			}
			out[k] = n
		}
		return out
	}
	s := session("analyst", map[string]any{"dp_epsilon": 50.0})
	for _, tc := range []struct{ q, truth string }{
		{"SELECT COUNT(DISTINCT user_id) FROM events", "SELECT '', COUNT(DISTINCT user_id) FROM events"},
		{"SELECT kind, COUNT(DISTINCT user_id) AS people FROM events GROUP BY kind", "SELECT kind, COUNT(DISTINCT user_id) FROM events GROUP BY kind"},
		{"SELECT COUNT(DISTINCT user_id) FROM events WHERE kind IN ('view', 'cart') AND hour < 12", "SELECT '', COUNT(DISTINCT user_id) FROM events WHERE kind IN ('view', 'cart') AND hour < 12"},
		{"SELECT COUNT(DISTINCT events_g.user_id) FROM events_g WHERE kind = 'buy'", "SELECT '', COUNT(DISTINCT user_id) FROM events WHERE kind = 'buy'"},
	} {
		r := f.answer(t, s, tc.q)
		want := exact(tc.truth)
		for _, row := range r.AllRows() {
			key := ""
			if len(row) == 2 {
				key = fmt.Sprint(row[0])
			}
			got, _ := toFloat(row[len(row)-1])
			// Noise scale at most 3/50 (Laplace) here; beyond 1.5 w.p. < e^-25.
			if math.Abs(got-want[key]) > 1.5 && !strings.Contains(tc.q, "events_g") {
				t.Errorf("%s: %s = %v, want %v", tc.q, key, got, want[key])
			}
		}
	}
	for _, bad := range []struct{ q, want string }{
		{"SELECT COUNT(*), COUNT(DISTINCT user_id) FROM events", "measured on its own"},
		{"SELECT COUNT(DISTINCT kind) FROM events", "only COUNT(DISTINCT user_id)"},
		{"SELECT COUNT(DISTINCT user_id + 1) FROM events", "is private"},
	} {
		_, err := f.eng.Answer(ctx, s, []string{bad.q})
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want %q", bad.q, err, bad.want)
		}
	}
	ex := f.answer(t, s, "EXPLAIN SELECT kind, COUNT(DISTINCT user_id) FROM events GROUP BY kind")
	props := map[string]string{}
	for _, row := range ex.AllRows() {
		props[fmt.Sprint(row[0])] = fmt.Sprint(row[1])
	}
	if props["sensitivity"] != "3 per unit" {
		t.Errorf("EXPLAIN sensitivity %q (want min(k=5, 3 groups) = 3)", props["sensitivity"])
	}
	es := f.entries(t)
	if len(es) != 4 || es[1].Unit == nil || !strings.Contains(es[1].Strategy, "count-distinct-units (sensitivity 3)") {
		t.Fatalf("entries %+v", es)
	}
	if err := f.ledger.Verify(ctx); err != nil {
		t.Fatal(err)
	}
}
