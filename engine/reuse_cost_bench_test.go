package engine

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/reuse"
)

// gridCatalog is a table of two integer columns of 32 values each: a
// batch grouping by both is over 1,024 cells, planner.MaxKnownCells.
const gridCatalog = `
database: grid
sources: {main: {driver: sqlite, path: grid.sqlite}}
tables:
  grid:
    noise: laplace
    budget: {total: 1000000000, per_user: 1000000000, default_per_query: 1, max_per_query: 100}
    columns:
      g: {type: integer, min: 0, max: 31}
      n: {type: integer, min: 0, max: 31}
users:
  analyst: {password: analyst, role: analyst}
`

// gridStored are the batches measured before the benchmark: one stored
// measurement each, 8 in all, every one joining the (g, n) domain.
var gridStored = []string{
	"SELECT g, n, COUNT(*) FROM grid GROUP BY g, n",
	"SELECT g, COUNT(*) FROM grid GROUP BY g",
	"SELECT n, COUNT(*) FROM grid GROUP BY n",
	"SELECT COUNT(*) FROM grid",
	"SELECT g, n, COUNT(*) FROM grid WHERE g < 16 GROUP BY g, n",
	"SELECT g, COUNT(*) FROM grid WHERE n >= 8 GROUP BY g",
	"SELECT n, COUNT(*) FROM grid WHERE g BETWEEN 4 AND 27 GROUP BY n",
	"SELECT COUNT(*) FROM grid WHERE g < 10 AND n < 10",
}

// gridFresh is the six-statement batch sent fresh (at a new ε) each time.
var gridFresh = []string{
	"SELECT g, n, COUNT(*) FROM grid GROUP BY g, n",
	"SELECT g, n, COUNT(*) FROM grid WHERE g < 16 GROUP BY g, n",
	"SELECT g, n, COUNT(*) FROM grid WHERE n >= 8 GROUP BY g, n",
	"SELECT g, n, COUNT(*) FROM grid WHERE g BETWEEN 4 AND 27 GROUP BY g, n",
	"SELECT g, n, COUNT(*) FROM grid WHERE g + n < 40 GROUP BY g, n",
	"SELECT g, n, COUNT(*) FROM grid WHERE n < 24 OR g = 3 GROUP BY g, n",
}

// writeGrid writes rows rows of (g, n) over 0..31 each, deterministically.
func writeGrid(tb testing.TB, path string, rows int) {
	tb.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE grid (g INTEGER, n INTEGER)"); err != nil {
		tb.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		tb.Fatal(err)
	}
	for i := 0; i < rows; i++ {
		h := uint64(i) * 2654435761
		if _, err := tx.Exec("INSERT INTO grid VALUES (?, ?)", h%32, (h/32)%(1+h%32)); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkReuseDecisionCost answers the six-statement GROUP BY g, n
// batch over 1,024 cells fresh (at a new ε each time, so no stored answer
// repeats it) with stored-measurement reuse on — 8 measurements stored
// before the first — and off (reuse_measurements: false), alternately in
// the same run on the same data, through Engine.Answer, and reports the
// mean latency of each and their ratio (on/off). Each fresh batch with
// reuse on that is measured is stored in its turn, as in serving.
//
// derivable: ε = 1, 1.001, 1.002, …: the first batch is measured (alone:
// the domain is over reuse.CombineCells), and every later one is
// answered from the store, free, the first of them solving the stored
// system. measured: ε = 0.6·1.5^i, growing faster than the stored
// information, so every batch is measured (ε reaches 100, the largest
// allowed, at i = 12, so at most 12 iterations).
//
// A batch measured alone has the stored system with its measurement
// built and solved in the background (reuse.Policy.Fold); between
// requests the benchmark waits for that, untimed, as a server between
// requests would have time for it, and reports the wait (background_ms,
// per request). The "nofold" variants turn the background work off: each
// batch builds and solves what it needs itself.
//
//	go test ./engine/ -run '^$' -bench ReuseDecisionCost -benchtime 12x
func BenchmarkReuseDecisionCost(b *testing.B) {
	for _, mode := range []struct {
		name string
		eps  func(i int) float64
	}{
		{"derivable", func(i int) float64 { return 1 + 1e-3*float64(i) }},
		{"measured", func(i int) float64 { return 0.6 * math.Pow(1.5, float64(i)) }},
	} {
		for _, fold := range []reuse.Folding{reuse.FoldBackground, reuse.FoldOff} {
			name := mode.name
			if fold == reuse.FoldOff {
				name += "/nofold"
			}
			b.Run(name, func(b *testing.B) {
				if mode.name == "measured" && b.N > 12 {
					b.Fatalf("at most 12 iterations (-benchtime 12x): ε would pass 100")
				}
				benchmarkReuseCost(b, mode.eps, fold)
			})
		}
	}
}

// benchmarkReuseCost is BenchmarkReuseDecisionCost at ε = eps(i) in
// iteration i, folding as fold says.
func benchmarkReuseCost(b *testing.B, eps func(i int) float64, fold reuse.Folding) {
	dir := b.TempDir()
	writeGrid(b, filepath.Join(dir, "grid.sqlite"), 20_000)
	ctx := context.Background()
	on, doneOn := newTimeEngineCatalog(b, dir, gridCatalog)
	defer doneOn()
	off, doneOff := newTimeEngineCatalog(b, dir, gridCatalog)
	defer doneOff()
	off.measures = nil
	on.reuse.SetFolding(fold)
	for i, q := range gridStored {
		s := session("analyst", map[string]any{"dp_epsilon": 0.5 + 0.01*float64(i)})
		if _, err := on.Answer(ctx, s, []string{q}); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	if n := storedCount(b, on); n != len(gridStored) {
		b.Fatalf("%d measurements stored, want %d", n, len(gridStored))
	}
	on.reuse.Wait()
	var took, later [2]time.Duration // later: after the first request
	var background time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := session("analyst", map[string]any{"dp_epsilon": eps(i)})
		for k, eng := range []*Engine{on, off} {
			start := time.Now()
			if _, err := eng.Answer(ctx, s, gridFresh); err != nil {
				b.Fatal(err)
			}
			took[k] += time.Since(start)
			if i > 0 {
				later[k] += time.Since(start)
			}
			if k == 0 {
				b.StopTimer()
				start := time.Now()
				on.reuse.Wait()
				background += time.Since(start)
				b.StartTimer()
			}
		}
	}
	es, err := on.ledger.Entries(ctx, budget.Filter{})
	if err != nil {
		b.Fatal(err)
	}
	derived := 0
	for _, e := range es {
		if e.Kind == budget.KindDerived {
			derived++
		}
	}
	b.ReportMetric(float64(derived)/float64(b.N), "free/op")
	b.ReportMetric(float64(took[0].Microseconds())/1e3/float64(b.N), "ms_reuse_on")
	b.ReportMetric(float64(background.Microseconds())/1e3/float64(b.N), "background_ms")
	b.ReportMetric(float64(took[1].Microseconds())/1e3/float64(b.N), "ms_reuse_off")
	b.ReportMetric(float64(took[0])/float64(took[1]), "on/off")
	if later[1] > 0 {
		b.ReportMetric(float64(later[0])/float64(later[1]), "later_on/off")
	}
}

// storedCount is how many measurements e keeps for the grid table.
func storedCount(tb testing.TB, e *Engine) int {
	tb.Helper()
	t := e.cat.Table("grid")
	v, err := e.measurementVersion(context.Background(), t)
	if err != nil || v == "" {
		tb.Fatalf("version %q: %v", v, err)
	}
	ms, err := e.measures.Load(context.Background(), t.Name, tableDef(t), v)
	if err != nil {
		tb.Fatal(fmt.Errorf("load: %w", err))
	}
	return len(ms)
}
