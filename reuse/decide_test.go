package reuse

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/measure"
	"github.com/dpproxy/dpproxy/planner"
)

// storedGrid is the records of random batches' plans over gridTable at
// ε from 0.05 to 5, with made-up answers, numbered on from *id (a store
// never reuses an ID: the cache identifies measurements by theirs).
func storedGrid(t *testing.T, rng *rand.Rand, pl *planner.Planner, k int, id *int64) []*measure.Measurement {
	t.Helper()
	var ms []*measure.Measurement
	for ; k > 0; k-- {
		w := gridBatch(t, rng)
		p, err := pl.Choose(context.Background(), w, planner.Options{Noise: catalog.Laplace, Epsilon: 0.05 * math.Pow(100, rng.Float64())})
		if err != nil {
			t.Fatal(err)
		}
		recs, _ := Records(w, p, nil)
		for _, r := range recs {
			r.Answers = make([]float64, r.Cells())
			for i := range r.Answers {
				r.Answers[i] = float64(rng.IntN(100))
			}
			*id++
			r.ID = *id
			ms = append(ms, r)
		}
	}
	return ms
}

// TestDecisionsMeetTheirTargets: over random stored measurements and
// batches, a batch answered free has every live answer within its target
// (with the rounding margin when several measurements combine), and a
// combination chosen meets every target as planned: nothing is released
// less accurate than asked. A policy with a cache and one without decide
// alike.
func TestDecisionsMeetTheirTargets(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 24))
	pl := planner.New()
	cached, bare := New(pl, 1e-6, 1e-12, 64<<20), New(pl, 1e-6, 1e-12, 0)
	free, combined := 0, 0
	var id int64
	for round := range 40 {
		ms := storedGrid(t, rng, pl, rng.IntN(5), &id)
		w := gridBatch(t, rng)
		p, err := pl.Choose(ctx, w, planner.Options{Noise: catalog.Laplace, Epsilon: 0.3 + rng.Float64()})
		if err != nil {
			t.Fatal(err)
		}
		r := Request{W: w, Plan: p, Version: "v", Stored: ms}
		if rng.IntN(2) == 0 {
			r.MaxStderr, r.HasTarget = 1+5*rng.Float64(), true
		}
		d, d2 := cached.Decide(ctx, r), cached.Decide(ctx, r) // the second from the cache
		d3 := bare.Decide(ctx, r)
		for _, o := range []*Decision{d2, d3} {
			if (o.Free == nil) != (d.Free == nil) || o.Combine != d.Combine || o.Cost != d.Cost || !sameVars(o.Before(), d.Before()) || !sameVars(o.After, d.After) {
				t.Fatalf("round %d: decisions differ with and without the cache: free %v %v combine %v %v cost %+v %+v before %v after %v", round, o.Free != nil, d.Free != nil, o.Combine, d.Combine, o.Cost, d.Cost, sameVars(o.Before(), d.Before()), sameVars(o.After, d.After))
			}
		}
		margin := 0.0
		if len(d.Joined) > 1 {
			margin = roundingVariance
		}
		if d.Free != nil {
			free++
			if !meets(w, d.Free, d.Target, margin) {
				t.Fatalf("round %d: answered free beyond the target", round)
			}
		}
		if d.Combine {
			combined++
			if !meets(w, d.After, d.Target, roundingVariance) {
				t.Fatalf("round %d: combined beyond the target", round)
			}
		}
	}
	if free == 0 || combined == 0 {
		t.Fatalf("%d free, %d combined: the test tests too little", free, combined)
	}
}

// sameVars reports whether a and b have the same variances to 1e-9
// (relative).
func sameVars(a, b *Estimated) bool {
	if (a == nil) != (b == nil) {
		return false
	}
	if a == nil {
		return true
	}
	for q := range a.Vars {
		if (a.Vars[q] == nil) != (b.Vars[q] == nil) {
			return false
		}
		for i := range a.Vars[q] {
			for g, v := range a.Vars[q][i] {
				if math.Abs(v-b.Vars[q][i][g]) > 1e-9*math.Max(1, v) {
					return false
				}
			}
		}
	}
	return true
}

// TestRememberedSystemIsTheNextOne: the system Combined solves, put in the
// cache by Remember once its records are numbered, is the one the next
// batch over the same domain builds from the store (the stored
// measurements and the new ones, oldest first): the same information
// matrix bit for bit, the same estimate to rounding.
func TestRememberedSystemIsTheNextOne(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(8, 24))
	pl := planner.New()
	remembered := 0
	var id int64
	for round := range 25 {
		pol := New(pl, 1e-6, 1e-12, 64<<20)
		ms := storedGrid(t, rng, pl, 1+rng.IntN(3), &id)
		w := gridBatch(t, rng)
		p, err := pl.Choose(ctx, w, planner.Options{Noise: catalog.Laplace, Epsilon: 1})
		if err != nil {
			t.Fatal(err)
		}
		d := pol.Decide(ctx, Request{W: w, Plan: p, Version: "v", Stored: ms})
		if !d.Combine {
			continue
		}
		recs, _ := Records(d.Measured, d.Plan, nil)
		for i, r := range recs {
			r.Answers = make([]float64, r.Cells())
			for k := range r.Answers {
				r.Answers[k] = float64(rng.IntN(100))
			}
			r.ID = id + 1 + int64(i)
		}
		if _, ok := d.Combined(recs); !ok {
			t.Fatalf("round %d: the planned combination does not combine", round)
		}
		pol.Remember(d)
		next := append(append([]*measure.Measurement(nil), ms...), recs...)
		hit, ok := domainsOf(w, next, nil, pol.solved)
		anew, ok2 := domainsOf(w, next, nil, nil)
		if !ok || !ok2 {
			t.Fatalf("round %d: no domains", round)
		}
		for i := range hit {
			if hit[i].cls != nil {
				continue
			}
			if !hit[i].g.Equal(anew[i].g) {
				t.Fatalf("round %d domain %d: the remembered information matrix differs", round, i)
			}
			a, b := hit[i].solved.estimate(), anew[i].solved.estimate()
			if (a == nil) != (b == nil) {
				t.Fatalf("round %d domain %d: solvable differs", round, i)
			}
			if a == nil {
				continue
			}
			for c := range a.X {
				if math.Abs(a.X[c]-b.X[c]) > 1e-8*math.Max(1, math.Abs(b.X[c])) {
					t.Fatalf("round %d domain %d cell %d: %g remembered, %g anew", round, i, c, a.X[c], b.X[c])
				}
			}
			if hit[i].solved == anew[i].solved || hit[i].solved.est == nil {
				t.Fatalf("round %d domain %d: not from the cache", round, i)
			}
			remembered++
		}
	}
	if remembered == 0 {
		t.Fatal("nothing remembered: the test tests nothing")
	}
}
