package exec

import (
	"context"
	"database/sql"
	"fmt"
	"math"
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

// unitNeighbours builds two SQLite tables that differ by one whole unit,
// user 0, with 300 rows (all with a = 7, b = 'y'), over 80 other users with
// three rows each, and opens both through package sources with the
// privacy unit {user_id, max_rows: k}.
func unitNeighbours(t *testing.T, k int) (tab *catalog.Table, without, with *sources.Set) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(3, 4))
	var base [][3]any
	// Every value of a has the same count (24), so that the heavy unit's
	// a = 7 decides a top-k selection.
	for i := range 240 {
		u := 1 + i%80 // 80 users with 3 rows each
		base = append(base, [3]any{int64(u), int64(i % 10), []string{"x", "y", "z"}[r.IntN(3)]})
	}
	var heavy [][3]any
	for range 300 {
		heavy = append(heavy, [3]any{int64(0), int64(7), "y"})
	}
	write := func(name string, rows [][3]any) {
		db, err := sql.Open("sqlite", filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec("CREATE TABLE t (user_id INTEGER, a INTEGER, b TEXT)"); err != nil {
			t.Fatal(err)
		}
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range rows {
			if _, err := tx.Exec("INSERT INTO t VALUES (?, ?, ?)", row[:]...); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	write("without.sqlite", base)
	write("with.sqlite", append(append([][3]any(nil), base...), heavy...))
	open := func(file string) (*catalog.Table, *sources.Set) {
		y := fmt.Sprintf(`database: d
sources:
  main: {driver: sqlite, path: %s}
tables:
  t:
    budget: {total: 10, per_user: 10, default_per_query: 1}
    privacy_unit: {column: user_id, max_rows: %d}
    columns:
      a: {type: integer, min: 0, max: 9}
      b: {type: categorical, values: [x, y, z]}
`, file, k)
		cat, err := catalog.Parse("d.yaml", []byte(y))
		if err != nil {
			t.Fatal(err)
		}
		set, err := sources.Open(ctx, cat, sources.Options{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { set.Close() })
		return cat.Table("t"), set
	}
	tab, without = open("without.sqlite")
	_, with = open("with.sqlite")
	return tab, without, with
}

func unitWorkload(t *testing.T, tab *catalog.Table, texts ...string) *compile.Workload {
	t.Helper()
	var sts []*parser.Statement
	for _, text := range texts {
		st, err := parser.Parse(text, func(_, table string) bool { return table == "t" })
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		sts = append(sts, &st[0])
	}
	w, err := compile.Compile(tab, sts)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// tailLoss estimates the privacy loss between two samples of a scalar
// output: the largest |ln(p/p')| over the events {x ≥ τ} and {x < τ}, τ
// on a grid of the pooled sample's range, that hold at least minCount draws
// of each sample.
func tailLoss(a, b []float64, minCount int) float64 {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range append(append([]float64(nil), a...), b...) {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	above := func(s []float64, tau float64) int {
		n := 0
		for _, x := range s {
			if x >= tau {
				n++
			}
		}
		return n
	}
	loss := 0.0
	for i := 1; i < 200; i++ {
		tau := lo + (hi-lo)*float64(i)/200
		na, nb := above(a, tau), above(b, tau)
		for _, pair := range [][2]int{{na, nb}, {len(a) - na, len(b) - nb}} {
			if pair[0] >= minCount && pair[1] >= minCount {
				loss = math.Max(loss, math.Abs(math.Log(float64(pair[0])/float64(pair[1]))))
			}
		}
	}
	return loss
}

// empiricalLoss estimates the privacy loss between two samples of a
// discrete output: the largest |ln(p/p')| over bins of the given width that
// hold at least minCount draws of each sample.
func empiricalLoss(a, b []float64, width float64, minCount int) float64 {
	ca, cb := map[int64]int{}, map[int64]int{}
	for _, x := range a {
		ca[int64(math.Floor(x/width))]++
	}
	for _, x := range b {
		cb[int64(math.Floor(x/width))]++
	}
	loss := 0.0
	for bin, n := range ca {
		if m := cb[bin]; n >= minCount && m >= minCount {
			loss = math.Max(loss, math.Abs(math.Log(float64(n)/float64(m))))
		}
	}
	return loss
}

// The statistical test of unit privacy: two datasets that differ by one
// whole unit with 300 rows, a COUNT, a GROUP BY with range queries (a
// Kronecker plan), a SUM and a top-k selection, each sampled many times
// on both. The empirical privacy loss of the answer the heavy unit moves
// most stays below the claimed ε (plus the estimate's statistical slack);
// with row-level calibration on the same data it is several times ε (the
// test has power).
//
// Error rate: each bin's log-ratio from n ≥ 150 draws per side has a
// standard deviation of at most √(2/150) ≈ 0.115; the slack 0.6 is over 5
// of those, and with at most a few dozen bins per statistic a false failure
// has probability below 10⁻⁵. The generators are seeded (ChaCha8), so the
// test is reproducible.
func TestUnitPrivacyEmpirical(t *testing.T) {
	const k, eps, draws, slack = 5, 1.0, 4000, 0.6
	ctx := context.Background()
	tab, without, with := unitNeighbours(t, k)
	for _, tc := range []struct {
		name  string
		texts []string
		q, a  int // the answer sampled: query q, aggregate a, group g
		g     int
		kind  planner.Kind
	}{
		{"count", []string{"SELECT COUNT(*) FROM t"}, 0, 0, 0, planner.Direct},
		{"group by under a Kronecker plan", []string{"SELECT COUNT(*) FROM t WHERE a BETWEEN 2 AND 8", "SELECT COUNT(*) FROM t WHERE a < 5", "SELECT COUNT(*) FROM t WHERE a >= 3", "SELECT a, COUNT(*) FROM t GROUP BY a"}, 3, 0, 7, planner.Kronecker},
		{"sum", []string{"SELECT SUM(a) FROM t"}, 0, 0, 0, planner.Direct},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := unitWorkload(t, tab, tc.texts...)
			sample := func(set *sources.Set, unit planner.Contribution, seed uint64) []float64 {
				p, err := planner.Choose(context.Background(), w, planner.Options{Noise: catalog.Laplace, Epsilon: eps, Unit: unit})
				if err != nil {
					t.Fatal(err)
				}
				if p.Kind != tc.kind {
					t.Fatalf("plan %s, kind %v, want %v", p.Name, p.Kind, tc.kind)
				}
				c, err := Fetch(ctx, p, set)
				if err != nil {
					t.Fatal(err)
				}
				r := noise.NewRandFrom(rand.NewChaCha8([32]byte{byte(seed)}))
				out := make([]float64, draws)
				for i := range out {
					ans, err := MeasureCounts(p, c, r)
					if err != nil {
						t.Fatal(err)
					}
					out[i] = ans.Values[tc.q][tc.a][tc.g]
				}
				return out
			}
			bounded := planner.Contribution{Rows: k}
			loss := tailLoss(sample(without, bounded, 1), sample(with, bounded, 2), 150)
			if loss > eps+slack {
				t.Errorf("empirical privacy loss %.3f > ε = %g (+%g)", loss, eps, slack)
			}
			// Power: noise calibrated per row on the same truncated data.
			rowLoss := tailLoss(sample(without, planner.Contribution{}, 3), sample(with, planner.Contribution{}, 4), 150)
			if rowLoss < 2*eps {
				t.Errorf("row-level calibration: empirical loss %.3f, want well above ε = %g", rowLoss, eps)
			}
			t.Logf("%s: empirical loss %.3f at ε = %g per unit; %.3f with noise calibrated per row", tc.name, loss, eps, rowLoss)
		})
	}
	t.Run("top-k", func(t *testing.T) {
		// The selection of the largest group of a (all tie without the
		// heavy unit; its a = 7 leads with it): the exponential mechanism with
		// Δ = min(k, r) = k, ε per round.
		w := unitWorkload(t, tab, "SELECT a, COUNT(*) FROM t GROUP BY a")
		delta := planner.Contribution{Rows: k}.UtilitySensitivity(true)
		choose := func(set *sources.Set, delta int64, seed uint64) []float64 {
			x, err := set.Histogram(ctx, tab, w.Columns)
			if err != nil {
				t.Fatal(err)
			}
			util := make([]int64, 10)
			for c, v := range Contract(w.Queries[0].Aggregates[0], x, w.Sizes(), w.Queries[0].GroupCols) {
				util[c] = int64(v)
			}
			r := noise.NewRandFrom(rand.NewChaCha8([32]byte{byte(seed)}))
			out := make([]float64, draws)
			for i := range out {
				out[i] = float64(r.TopK(util, 1, 1, 1, delta)[0]) // ε = 1/1
			}
			return out
		}
		loss := empiricalLoss(choose(without, delta, 5), choose(with, delta, 6), 1, 150)
		if loss > eps+slack {
			t.Errorf("top-k: empirical privacy loss %.3f > ε = %g (+%g)", loss, eps, slack)
		}
		rowLoss := empiricalLoss(choose(without, 1, 7), choose(with, 1, 8), 1, 150)
		if rowLoss < 2*eps {
			t.Errorf("top-k at Δ = 1: empirical loss %.3f, want well above ε", rowLoss)
		}
		t.Logf("top-k: empirical loss %.3f at ε = %g per unit (Δ = %d); %.3f at Δ = 1", loss, eps, delta, rowLoss)
	})
}

// A unit with 300 rows moves a high-ε COUNT by at most max_rows (plus the
// noise, whose scale is k/ε = 0.05 here), where without truncation it would
// move it by 300.
func TestUnitBeyondMaxRowsMovesAnswerByAtMostK(t *testing.T) {
	const k = 5
	ctx := context.Background()
	tab, without, with := unitNeighbours(t, k)
	w := unitWorkload(t, tab, "SELECT COUNT(*) FROM t", "SELECT b, COUNT(*) FROM t GROUP BY b")
	p, err := planner.Choose(context.Background(), w, planner.Options{Noise: catalog.Laplace, Epsilon: 100, Unit: planner.Contribution{Rows: k}})
	if err != nil {
		t.Fatal(err)
	}
	answer := func(set *sources.Set, seed byte) *Answers {
		c, err := Fetch(ctx, p, set)
		if err != nil {
			t.Fatal(err)
		}
		ans, err := MeasureCounts(p, c, noise.NewRandFrom(rand.NewChaCha8([32]byte{seed})))
		if err != nil {
			t.Fatal(err)
		}
		return ans
	}
	a, b := answer(without, 1), answer(with, 2)
	// The noise exceeds 1 with probability about e^-20 per answer.
	for q := range a.Values {
		for g := range a.Values[q][0] {
			if d := math.Abs(b.Values[q][0][g] - a.Values[q][0][g]); d > k+1 {
				t.Errorf("query %d group %d moved by %v > k = %d", q, g, d, k)
			}
		}
	}
	if d := b.Values[0][0][0] - a.Values[0][0][0]; d < k-1 {
		t.Errorf("COUNT moved by %v: the heavy unit kept fewer than k rows", d)
	}
}
