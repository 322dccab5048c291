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

// wideBatch compiles GROUP BY a, b over two columns of 32 values (1,024
// cells, over CombineCells), with a random WHERE on a.
func wideBatch(t *testing.T, rng *rand.Rand) *compile.Workload {
	t.Helper()
	tab := &catalog.Table{Name: "wide", Noise: catalog.Laplace, Columns: []*catalog.Column{
		{Name: "a", Kind: catalog.IntegerRange, Min: 0, Max: 31, Width: 1, Null: catalog.PolicyDrop, OutOfDomain: catalog.PolicyClamp},
		{Name: "b", Kind: catalog.IntegerRange, Min: 0, Max: 31, Width: 1, Null: catalog.PolicyDrop, OutOfDomain: catalog.PolicyClamp},
	}}
	q := &parser.Query{Table: "wide", GroupBy: []string{"a", "b"}, Select: []parser.SelectItem{{Column: "a"}, {Column: "b"}, {Agg: parser.AggCount}}}
	if k := rng.IntN(3); k > 0 {
		q.Where = parser.Compare{Column: "a", Op: parser.OpLt, Value: lit([]string{"", "16", "24"}[k])}
	}
	w, err := compile.Compile(tab, []*parser.Statement{{Kind: parser.KindAggregate, Query: q}})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// measured is the records of plan p over w with made-up answers,
// numbered on from *id.
func measured(t *testing.T, rng *rand.Rand, w *compile.Workload, p *planner.Plan, id *int64) []*measure.Measurement {
	t.Helper()
	recs, all := Records(w, p, nil)
	if !all {
		t.Fatal("not stored")
	}
	for _, r := range recs {
		r.Answers = make([]float64, r.Cells())
		for i := range r.Answers {
			r.Answers[i] = float64(rng.IntN(100))
		}
		*id++
		r.ID = *id
	}
	return recs
}

// TestFoldedSystemIsTheNextOne: a batch over 1,024 cells that the stored
// measurements do not answer is measured alone (Decision.Alone, nothing
// combined, no system solved to decide it); the system Fold puts in the
// cache once its records are stored is the one the next batch builds
// from the store, bit for bit, already solved, to the same estimate. A
// policy that does not fold builds the next system from the cached
// stored one plus the new records (a prefix), also bit for bit the
// system built anew.
func TestFoldedSystemIsTheNextOne(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 24))
	pl := planner.New()
	var id int64
	for round := range 4 {
		var ms []*measure.Measurement
		for k := 1 + rng.IntN(2); k > 0; k-- {
			w := wideBatch(t, rng)
			p, err := pl.Choose(ctx, w, planner.Options{Noise: catalog.Laplace, Epsilon: 0.3 + 0.2*rng.Float64()})
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, measured(t, rng, w, p, &id)...)
		}
		w := wideBatch(t, rng)
		p, err := pl.Choose(ctx, w, planner.Options{Noise: catalog.Laplace, Epsilon: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, mode := range []Folding{FoldNow, FoldOff} {
			pol := New(pl, 1e-6, 1e-12, 64<<20)
			pol.SetFolding(mode)
			d := pol.Decide(ctx, Request{W: w, Plan: p, Version: "v", Stored: ms})
			if d.Alone != 1024 || d.Combine || d.Free != nil || d.Plan != p || len(d.Joined) == 0 {
				t.Fatalf("round %d: alone %d combine %v free %v joined %v: want measured alone at the batch's plan", round, d.Alone, d.Combine, d.Free != nil, d.Joined)
			}
			if d.doms[0].solved.est != nil {
				t.Fatalf("round %d: the stored system was solved to decide what the bound shows", round)
			}
			nid := id
			recs := measured(t, rng, d.Measured, d.Plan, &nid)
			pol.Fold(d, recs)
			next := append(append([]*measure.Measurement(nil), ms...), recs...)
			hit, ok := domainsOf(w, next, nil, pol.solved)
			anew, ok2 := domainsOf(w, next, nil, nil)
			if !ok || !ok2 || len(hit) != 1 || hit[0].cls != nil {
				t.Fatalf("round %d: domains %v %v", round, ok, ok2)
			}
			if !hit[0].g.Equal(anew[0].g) {
				t.Fatalf("round %d %v: the next system differs from the one built anew", round, mode)
			}
			if mode == FoldNow && hit[0].solved.est == nil {
				t.Fatalf("round %d: the folded system was not solved", round)
			}
			a, b := hit[0].solved.estimate(), anew[0].solved.estimate()
			for c := range a.X {
				if math.Abs(a.X[c]-b.X[c]) > 1e-8*math.Max(1, math.Abs(b.X[c])) {
					t.Fatalf("round %d cell %d: %g folded, %g anew", round, c, a.X[c], b.X[c])
				}
			}
		}
		id += 100
	}
}
