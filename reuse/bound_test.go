package reuse

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/measure"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/planner"
)

// gridTable has two integer columns of 8 values (64 cells), one keeping
// NULLs in a cell (so measurements over the other join summed over it).
func gridTable() *catalog.Table {
	return &catalog.Table{Name: "t", Noise: catalog.Laplace, Columns: []*catalog.Column{
		{Name: "a", Kind: catalog.IntegerRange, Min: 0, Max: 7, Width: 1, Null: catalog.PolicyDrop, OutOfDomain: catalog.PolicyClamp},
		{Name: "b", Kind: catalog.IntegerRange, Min: 0, Max: 7, Width: 1, Null: catalog.PolicyDrop, OutOfDomain: catalog.PolicyClamp},
	}}
}

func lit(s string) parser.Literal { return parser.Literal{Text: s} }

// gridQueries are what random batches over gridTable draw from.
var gridQueries = []*parser.Query{
	{Table: "t", GroupBy: []string{"a", "b"}, Select: []parser.SelectItem{{Column: "a"}, {Column: "b"}, {Agg: parser.AggCount}}},
	{Table: "t", GroupBy: []string{"a"}, Select: []parser.SelectItem{{Column: "a"}, {Agg: parser.AggCount}}},
	{Table: "t", GroupBy: []string{"b"}, Select: []parser.SelectItem{{Column: "b"}, {Agg: parser.AggCount}}},
	{Table: "t", Select: []parser.SelectItem{{Agg: parser.AggCount}}, Where: parser.Between{Column: "a", Lo: lit("2"), Hi: lit("5")}},
	{Table: "t", GroupBy: []string{"a", "b"}, Select: []parser.SelectItem{{Column: "a"}, {Column: "b"}, {Agg: parser.AggCount}},
		Where: parser.Compare{Column: "b", Op: parser.OpLt, Value: lit("4")}},
	{Table: "t", GroupBy: []string{"b"}, Select: []parser.SelectItem{{Column: "b"}, {Agg: parser.AggCount}},
		Where: parser.Compare{Column: "a", Op: parser.OpGe, Value: lit("3")}},
}

// gridBatch compiles a random batch of 1 to 3 of gridQueries.
func gridBatch(t *testing.T, rng *rand.Rand) *compile.Workload {
	t.Helper()
	var sts []*parser.Statement
	for k := 1 + rng.IntN(3); k > 0; k-- {
		sts = append(sts, &parser.Statement{Kind: parser.KindAggregate, Query: gridQueries[rng.IntN(len(gridQueries))]})
	}
	w, err := compile.Compile(gridTable(), sts)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestBoundNeverRejectsWhatTheSolveAccepts: over random stored
// measurements (the structure of random batches' plans at ε from 0.01 to
// 3) and a random batch's plan at ε = 1, whenever the public bound says
// the combination cannot meet the targets (the plan's own variances, or
// a random @dp_max_stderr), solving it agrees, and the same for the
// stored measurements alone (the check before deciding a batch free);
// and the bound does fire (when the stored measurements are weak), so it
// is tested at all.
func TestBoundNeverRejectsWhatTheSolveAccepts(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(24, 25))
	pl := planner.New()
	fired, accepted, storedFired := 0, 0, 0
	for round := range 60 {
		var ms []*measure.Measurement
		for k := rng.IntN(4); k > 0; k-- {
			w := gridBatch(t, rng)
			p, err := pl.Choose(ctx, w, planner.Options{Noise: catalog.Laplace, Epsilon: 0.01 * math.Pow(300, rng.Float64())})
			if err != nil {
				t.Fatal(err)
			}
			recs, _ := Records(w, p, nil)
			for _, r := range recs {
				r.ID = int64(len(ms) + 1)
				ms = append(ms, r)
			}
		}
		w := gridBatch(t, rng)
		p, err := pl.Choose(ctx, w, planner.Options{Noise: catalog.Laplace, Epsilon: 1})
		if err != nil {
			t.Fatal(err)
		}
		doms, ok := domainsOf(w, ms, nil, nil)
		recs, all := Records(w, p, nil)
		if !ok || !all {
			continue
		}
		target := targets(w, p, 0, false)
		if rng.IntN(2) == 0 {
			target = targets(w, p, 0.5+2*rng.Float64(), true)
		}
		// The stored measurements alone, as Decide checks them first.
		margin := 0.0
		if len(joinedOf(doms)) > 1 {
			margin = roundingVariance
		}
		if len(joinedOf(doms)) > 0 {
			before, _, ok, _ := estimate(w, doms, nil, 1, nil, nil)
			free := ok && meets(w, before, target, margin)
			if cannotMeet(w, doms, nil, target, margin) {
				if free {
					t.Fatalf("round %d: the bound rejects stored measurements that answer every query", round)
				}
				storedFired++
			}
		}
		es, _, ok, _ := estimate(w, doms, recs, 1, nil, nil)
		solved := ok && meets(w, es, target, roundingVariance)
		bound := cannotMeet(w, doms, recs, target, roundingVariance)
		if bound && solved {
			t.Fatalf("round %d: the bound rejects a combination that meets every target", round)
		}
		if bound {
			fired++
		}
		if solved {
			accepted++
		}
	}
	if fired == 0 || accepted == 0 || storedFired == 0 {
		t.Fatalf("the bound fired %d times, the solve accepted %d: the test tests nothing", fired, accepted)
	}
	t.Logf("bound fired %d (on the stored measurements alone %d), solve accepted %d of 60", fired, storedFired, accepted)
}
