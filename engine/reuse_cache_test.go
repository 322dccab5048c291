package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
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
