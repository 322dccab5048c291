package exec

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/planner"
	"github.com/dpproxy/dpproxy/sources"
)

// The statistical test of unit privacy for a join on the unit: two
// datasets that differ by one whole unit — 60 events and 3 sessions, so
// 180 joined rows — in every table, events JOIN sessions ON the unit,
// COUNT(*) sampled 4000 times on each. The empirical privacy loss stays
// below ε plus the slack of TestUnitPrivacyEmpirical (0.6: over 5 standard
// deviations of a log-ratio from ≥ 150 draws per side, false failure below
// 10⁻⁵; seeded ChaCha8, reproducible); with noise calibrated per row it is
// well above ε (the test has power).
func TestUnitJoinPrivacyEmpirical(t *testing.T) {
	const k, eps, draws, slack = 5, 1.0, 4000, 0.6
	ctx := context.Background()
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(5, 6))
	write := func(name string, heavy bool) string {
		path := filepath.Join(dir, name)
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, s := range []string{"CREATE TABLE events (user_id INTEGER, a INTEGER)", "CREATE TABLE sessions (user_id INTEGER, b TEXT)"} {
			if _, err := db.Exec(s); err != nil {
				t.Fatal(err)
			}
		}
		ins := func(q string, args ...any) {
			if _, err := db.Exec(q, args...); err != nil {
				t.Fatal(err)
			}
		}
		for u := 1; u <= 60; u++ {
			ins("INSERT INTO events VALUES (?, ?)", u, r.IntN(10))
			ins("INSERT INTO sessions VALUES (?, ?)", u, []string{"x", "y"}[r.IntN(2)])
		}
		if heavy {
			for range 60 {
				ins("INSERT INTO events VALUES (0, 7)")
			}
			for range 3 {
				ins("INSERT INTO sessions VALUES (0, 'y')")
			}
		}
		return path
	}
	open := func(path string) (*catalog.Table, *sources.Set) {
		y := fmt.Sprintf(`database: d
sources:
  main: {driver: sqlite, path: %s}
tables:
  events:
    budget: {total: 10, per_user: 10, default_per_query: 1}
    privacy_unit: {column: user_id, max_rows: %d, space: people}
    columns:
      a: {type: integer, min: 0, max: 9}
  sessions:
    budget: {total: 10, per_user: 10, default_per_query: 1}
    privacy_unit: {column: user_id, max_rows: 3, space: people}
    columns:
      b: {type: categorical, values: [x, y]}
`, path, k)
		cat, err := catalog.Parse("d.yaml", []byte(y))
		if err != nil {
			t.Fatal(err)
		}
		set, err := sources.Open(ctx, cat, sources.Options{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { set.Close() })
		tab, err := catalog.JoinTables(cat, &catalog.UnitJoin{Tables: []catalog.JoinedTable{{Table: "events"}, {Table: "sessions"}}})
		if err != nil {
			t.Fatal(err)
		}
		return tab, set
	}
	tab, without := open(write("without.sqlite", false))
	_, with := open(write("with.sqlite", true))
	env := parser.Env{
		Protected: func(_, table string) bool { return table == "events" || table == "sessions" },
		Units:     func(string) string { return "user_id" },
	}
	sts, err := parser.ParseEnv("SELECT COUNT(*) FROM events e JOIN sessions s ON s.user_id = e.user_id", env)
	if err != nil {
		t.Fatal(err)
	}
	if sts[0].Query.Table != tab.Name {
		t.Fatalf("parsed table %q, joined table %q", sts[0].Query.Table, tab.Name)
	}
	w, err := compile.Compile(tab, []*parser.Statement{&sts[0]})
	if err != nil {
		t.Fatal(err)
	}
	sample := func(set *sources.Set, unit planner.Contribution, seed byte) []float64 {
		p, err := planner.Choose(context.Background(), w, planner.Options{Noise: catalog.Laplace, Epsilon: eps, Unit: unit})
		if err != nil {
			t.Fatal(err)
		}
		c, err := Fetch(ctx, p, set)
		if err != nil {
			t.Fatal(err)
		}
		rnd := noise.NewRandFrom(rand.NewChaCha8([32]byte{seed}))
		out := make([]float64, draws)
		for i := range out {
			ans, err := MeasureCounts(p, c, rnd)
			if err != nil {
				t.Fatal(err)
			}
			out[i] = ans.Values[0][0][0]
		}
		return out
	}
	bounded := planner.Contribution{Rows: k}
	loss := tailLoss(sample(without, bounded, 1), sample(with, bounded, 2), 150)
	if loss > eps+slack {
		t.Errorf("empirical privacy loss %.3f > ε = %g (+%g)", loss, eps, slack)
	}
	rowLoss := tailLoss(sample(without, planner.Contribution{}, 3), sample(with, planner.Contribution{}, 4), 150)
	if rowLoss < 2*eps {
		t.Errorf("row-level calibration: empirical loss %.3f, want well above ε = %g", rowLoss, eps)
	}
	t.Logf("join on the unit: empirical loss %.3f at ε = %g per unit; %.3f with noise calibrated per row", loss, eps, rowLoss)
}
