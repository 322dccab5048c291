package engine

import (
	"context"
	"fmt"
	"github.com/dpproxy/dpproxy/budget"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/reuse"
)

// TestSolvedCacheChangesNothing: two engines answer the same random
// batches (drawn from knownPool, at random ε or under a target) with the
// same seeded noise, one caching solved stored-measurement systems and
// one solving every system anew. Every answer, every EXPLAIN (its
// stderr rows from the stored measurements alone and combined) and every
// ledger entry's kind and cost agree: the cache, its seeding after a
// measurement and the refit of the scored factorisation change when the
// work is done, not what is released.
func TestSolvedCacheChangesNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 3))
	for _, cat := range []struct{ name, yaml string }{{"drop", knownCatalog}, {"nullcell", wholeKnownCatalog}} {
		cached := newFixtureCatalog(t, cat.yaml)
		cached.eng.withNoiseSeed(7)
		fresh := newFixtureCatalog(t, cat.yaml)
		fresh.eng.withNoiseSeed(7)
		fresh.eng.reuse = reuse.New(fresh.eng.planner, EpsilonRange.Min, RhoRange.Min, 0)
		ctx := context.Background()
		for round := range 16 {
			vars := map[string]any{"dp_epsilon": 0.5 + rng.Float64()}
			if rng.IntN(3) == 0 {
				vars["dp_max_stderr"] = 2 + 20*rng.Float64()
			}
			var b []string
			for k := 1 + rng.IntN(3); k > 0; k-- {
				b = append(b, knownPool[rng.IntN(len(knownPool))])
			}
			var explains []string
			for _, q := range b {
				explains = append(explains, "EXPLAIN "+q)
			}
			var got [2]string
			for i, f := range []*fixture{cached, fresh} {
				s := session("analyst", vars)
				ex, err := f.eng.Answer(ctx, s, explains)
				if err != nil {
					t.Fatalf("%s round %d: %q: %v", cat.name, round, b, err)
				}
				rs, err := f.eng.Answer(ctx, s, b)
				if err != nil {
					t.Fatalf("%s round %d: %q: %v", cat.name, round, b, err)
				}
				e := lastEntry(t, f)
				got[i] = fmt.Sprint(ex[0].AllRows(), "\n")
				for _, r := range rs {
					got[i] += fmt.Sprint(r.AllRows(), "\n")
				}
				got[i] += fmt.Sprintf("entry %v %+v", e.Kind, e.Cost)
			}
			if got[0] != got[1] {
				t.Fatalf("%s round %d: %q\ncached:\n%s\nsolved anew:\n%s", cat.name, round, b, got[0], got[1])
			}
		}
	}
}

// TestFoldingChangesNothing: a batch over the 1,024-cell grid that the
// stored measurements do not answer is measured and answered alone, and
// the stored system with its measurement is built and solved in the
// background (reuse.Policy.Fold). Four engines answer the same sequence
// — measured batches (ε growing faster than what is stored), derivable
// ones (ε just above a measured one's), under a target, with EXPLAIN
// before each — with the same seeded noise: folding in the background
// (never waited for, so later batches race it), folding before the
// answer returns, never folding, and caching no system at all. Every
// answer, EXPLAIN and ledger entry agrees: what is released never
// depends on whether, or when, the background work finished. EXPLAIN
// says the batch is answered alone, and the measured batches' answers
// are those of the same batch with reuse off.
func TestFoldingChangesNothing(t *testing.T) {
	dir := t.TempDir()
	writeGrid(t, filepath.Join(dir, "grid.sqlite"), 5_000)
	ctx := context.Background()
	var engs []*Engine
	for _, mode := range []string{"background", "now", "off", "uncached", "reuse off"} {
		e, done := newTimeEngineCatalog(t, dir, gridCatalog)
		t.Cleanup(done)
		switch mode {
		case "now":
			e.reuse.SetFolding(reuse.FoldNow)
		case "off":
			e.reuse.SetFolding(reuse.FoldOff)
		case "uncached":
			e.reuse = reuse.New(e.planner, EpsilonRange.Min, RhoRange.Min, 0)
		case "reuse off":
			e.measures = nil
		}
		engs = append(engs, e)
	}
	reuseOff := len(engs) - 1
	steps := []struct {
		vars     map[string]any
		batch    []string
		measured bool // measured alone: its answers are reuse off's
	}{
		{map[string]any{"dp_epsilon": 0.5}, gridStored[:1], false},
		{map[string]any{"dp_epsilon": 0.6}, gridStored[4:5], false},
		{map[string]any{"dp_epsilon": 0.7}, gridStored[5:6], false},
		{map[string]any{"dp_epsilon": 0.9}, gridFresh, true},
		{map[string]any{"dp_epsilon": 0.901}, gridFresh, false}, // derivable
		{map[string]any{"dp_epsilon": 1.4}, gridFresh[:3], true},
		{map[string]any{"dp_epsilon": 0.902}, gridFresh[3:], false},
		{map[string]any{"dp_epsilon": 2.2}, gridFresh, true},
		{map[string]any{"dp_epsilon": 1, "dp_max_stderr": 4.0}, gridFresh[:2], false},
		{map[string]any{"dp_epsilon": 3.5}, gridFresh, true},
		{map[string]any{"dp_epsilon": 2.21}, gridFresh, false},
	}
	alone, free := 0, 0
	for i, st := range steps {
		var explains []string
		for _, q := range st.batch {
			explains = append(explains, "EXPLAIN "+q)
		}
		got := make([]string, len(engs))
		answers := make([]string, len(engs))
		for k, e := range engs {
			e.withNoiseSeed(uint64(100 + i)) // the same noise for each step, whatever came before
			s := session("analyst", st.vars)
			ex, err := e.Answer(ctx, s, explains)
			if err != nil {
				t.Fatalf("step %d engine %d: EXPLAIN: %v", i, k, err)
			}
			rs, err := e.Answer(ctx, s, st.batch)
			if err != nil {
				t.Fatalf("step %d engine %d: %v", i, k, err)
			}
			for _, r := range rs {
				answers[k] += fmt.Sprint(r.AllRows(), "\n")
			}
			es, err := e.ledger.Entries(ctx, budget.Filter{})
			if err != nil {
				t.Fatal(err)
			}
			last := es[len(es)-1]
			got[k] = fmt.Sprint(ex[0].AllRows(), "\n", answers[k], fmt.Sprintf("entry %v %+v %s", last.Kind, last.Cost, last.Strategy))
			if k == 0 && strings.Contains(got[k], "answered from the new measurement alone") {
				alone++
			}
			if k == 0 && last.Kind == budget.KindDerived {
				free++
			}
		}
		for k := 1; k < reuseOff; k++ {
			if got[k] != got[0] {
				t.Fatalf("step %d: engine %d differs from the one folding in the background:\n%s\nvs\n%s", i, k, got[k], got[0])
			}
		}
		if st.measured && answers[0] != answers[reuseOff] {
			t.Fatalf("step %d: measured alone, but not the answers of reuse off:\n%s\nvs\n%s", i, answers[0], answers[reuseOff])
		}
	}
	if alone == 0 || free == 0 {
		t.Fatalf("%d batches answered alone, %d free: the test tests too little", alone, free)
	}
	for _, e := range engs {
		e.reuse.Wait()
	}
}
