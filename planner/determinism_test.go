package planner

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/parser"
)

// longTable has a 300-cell column, long enough that its optimiser runs to
// its work budget rather than its tolerance.
func longTable() *catalog.Table {
	return &catalog.Table{Name: "t", Noise: catalog.Laplace, Columns: []*catalog.Column{
		{Name: "x", Kind: catalog.IntegerRange, Min: 0, Max: 299, Width: 1, Null: catalog.PolicyDrop, OutOfDomain: catalog.PolicyClamp},
		{Name: "y", Kind: catalog.IntegerRange, Min: 0, Max: 3, Width: 1, Null: catalog.PolicyDrop, OutOfDomain: catalog.PolicyClamp},
	}}
}

func longWorkload(t testing.TB) *compile.Workload {
	t.Helper()
	var sts []*parser.Statement
	for i := 0; i < 12; i++ {
		lo := (i * 37) % 250
		hi := min(lo+20+(i*29)%120, 299)
		sts = append(sts, &parser.Statement{Kind: parser.KindAggregate, Query: &parser.Query{Table: "t",
			Select: []parser.SelectItem{{Agg: parser.AggCount}},
			Where:  parser.Between{Column: "x", Lo: lit(fmt.Sprint(lo)), Hi: lit(fmt.Sprint(hi))}}})
	}
	sts = append(sts, &parser.Statement{Kind: parser.KindAggregate, Query: &parser.Query{Table: "t", GroupBy: []string{"y"},
		Select: []parser.SelectItem{{Column: "y"}, {Agg: parser.AggCount}},
		Where:  parser.Compare{Column: "x", Op: parser.OpLt, Value: lit("150")}}})
	w, err := compile.Compile(longTable(), sts)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

type detBatch struct {
	name string
	w    *compile.Workload
	opt  Options
}

// detBatches are batches whose plans run every optimiser: short columns
// (every start), a long column (two starts, to the work budget), the
// Gaussian solvers and marginal weights. (Max-variance plans rerun the
// same optimisers with other weights, at several times the cost.)
func detBatches(t *testing.T) []detBatch {
	return []detBatch{
		{"dash/laplace", dashWorkload(t), Options{Noise: catalog.Laplace, Epsilon: 1}},
		{"dash/gaussian", dashWorkload(t), Options{Noise: catalog.Gaussian, Rho: 0.5}},
		{"long/laplace", longWorkload(t), Options{Noise: catalog.Laplace, Epsilon: 1}},
		{"marginals/laplace", smallWorkload(t), Options{Noise: catalog.Laplace, Epsilon: 0.5}},
		{"marginals/gaussian", smallWorkload(t), Options{Noise: catalog.Gaussian, Rho: 0.2}},
	}
}

// planDigests plans every batch with plan and returns the plans' digests.
func planDigests(t *testing.T, batches []detBatch, plan func(detBatch) (*Plan, error)) []string {
	t.Helper()
	out := make([]string, len(batches))
	for i, b := range batches {
		p, err := plan(b)
		if err != nil {
			t.Fatalf("%s: %v", b.name, err)
		}
		out[i] = p.StrategyDigest()
	}
	return out
}

// burnCPU keeps n goroutines busy until the returned function is called.
func burnCPU(n int) (stop func()) {
	var done atomic.Bool
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := uint64(i)
			for !done.Load() {
				for k := 0; k < 1000; k++ {
					x = x*6364136223846793005 + 1442695040888963407
				}
			}
			_ = x
		}()
	}
	return func() {
		done.Store(true)
		wg.Wait()
	}
}

// The same batches and options give the same strategies and calibrations
// on an idle machine and on one whose every core is busy (twice over),
// from a fresh Planner, a warm one and the package-level Choose alike: the
// optimisers stop by counted work, never by the clock.
func TestPlansIgnoreMachineLoad(t *testing.T) {
	batches := detBatches(t)
	ctx := context.Background()
	fresh := func(b detBatch) (*Plan, error) { return New().Choose(ctx, b.w, b.opt) }
	idle := planDigests(t, batches, fresh)

	stop := burnCPU(2 * runtime.NumCPU())
	loaded := planDigests(t, batches, fresh)
	stop()
	// A Planner whose column cache is warm (from the same batches at twice
	// the ε or ρ, so that no whole plan is cached), and the package-level
	// Choose, which caches nothing.
	warm := New()
	for _, b := range batches {
		o := b.opt
		o.Epsilon, o.Rho = 2*o.Epsilon, 2*o.Rho
		if _, err := warm.Choose(ctx, b.w, o); err != nil {
			t.Fatal(err)
		}
	}
	warmed := planDigests(t, batches, func(b detBatch) (*Plan, error) { return warm.Choose(ctx, b.w, b.opt) })
	oneOff := planDigests(t, batches, func(b detBatch) (*Plan, error) { return Choose(ctx, b.w, b.opt) })

	for i, b := range batches {
		for _, c := range []struct {
			name string
			got  []string
		}{{"under load", loaded}, {"warm Planner", warmed}, {"package Choose", oneOff}} {
			if c.got[i] != idle[i] {
				t.Errorf("%s: %s digest %s, idle %s", b.name, c.name, c.got[i], idle[i])
			}
		}
	}
}

// Alternatives are deterministic too (the engine ranks them by the ε each
// needs).
func TestAlternativesIgnoreMachineLoad(t *testing.T) {
	ctx := context.Background()
	w := longWorkload(t)
	opt := Options{Noise: catalog.Laplace, Epsilon: 1}
	alts := func() []string {
		ps, err := New().Alternatives(ctx, w, opt, 4)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range ps {
			out = append(out, p.StrategyDigest())
		}
		return out
	}
	idle := alts()
	stop := burnCPU(2 * runtime.NumCPU())
	loaded := alts()
	stop()
	if fmt.Sprint(idle) != fmt.Sprint(loaded) {
		t.Fatalf("alternatives idle %v, under load %v", idle, loaded)
	}
}

// StrategyDigest covers the strategy and its calibration, and nothing
// else: equal for equal plans however they were made, different when a
// measured entry, the noise or the kind differs.
func TestStrategyDigest(t *testing.T) {
	ctx := context.Background()
	w := dashWorkload(t)
	opt := Options{Noise: catalog.Laplace, Epsilon: 1}
	pl := New()
	p, err := pl.Choose(ctx, w, opt)
	if err != nil {
		t.Fatal(err)
	}
	if p.Kind != Kronecker {
		t.Fatalf("plan %s is not Kronecker", p.Name)
	}
	d := p.StrategyDigest()
	if len(d) != 64 {
		t.Fatalf("digest %q is not hex SHA-256", d)
	}
	cached, err := pl.Choose(ctx, dashWorkload(t), opt)
	if err != nil {
		t.Fatal(err)
	}
	if got := cached.StrategyDigest(); got != d {
		t.Errorf("cached plan digest %s, first %s", got, d)
	}
	// Planning times and candidate figures are not part of it.
	cp := *p
	cp.Candidates = nil
	cp.MaxVariance = 0
	if got := cp.StrategyDigest(); got != d {
		t.Errorf("digest changed with the candidates: %s, %s", got, d)
	}

	differs := func(what string, q *Plan) {
		t.Helper()
		if q.StrategyDigest() == d {
			t.Errorf("digest unchanged when %s", what)
		}
	}
	re, err := p.Recalibrated(Options{Noise: catalog.Laplace, Epsilon: 2})
	if err != nil {
		t.Fatal(err)
	}
	differs("ε doubles", re)
	cp = *p
	cp.NoiseDen++
	differs("the noise scale changes", &cp)
	cp = *p
	cp.Kind = Direct
	differs("the kind changes", &cp)
	cp = *p
	cp.Factors = append([]*ColumnStrategy(nil), p.Factors...)
	f := *cp.Factors[0]
	f.A = mat.DenseCopyOf(f.A)
	r, c := f.A.Dims()
	f.A.Set(r-1, c-1, f.A.At(r-1, c-1)+1)
	cp.Factors[0] = &f
	differs("one measured entry changes", &cp)

	// Batches with different workloads or options (Kronecker, Marginal
	// and Direct plans among them) have different digests.
	seen := map[string]string{}
	for _, b := range detBatches(t) {
		q, err := Choose(ctx, b.w, b.opt)
		if err != nil {
			t.Fatal(err)
		}
		k := q.StrategyDigest()
		if prev, ok := seen[k]; ok {
			t.Errorf("%s (%s) has the digest of %s", b.name, q.Name, prev)
		}
		seen[k] = b.name + " (" + q.Name + ")"
	}
	t.Logf("plans: %v", seen)
}

// A cancelled context stops every planning entry point with an error
// wrapping context.Canceled, and no plan.
func TestPlanningCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := dashWorkload(t)
	opt := Options{Noise: catalog.Laplace, Epsilon: 1}
	check := func(name string, got any, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s: err %v, want context.Canceled", name, err)
		}
		if fmt.Sprint(got) != "<nil>" && fmt.Sprint(got) != "[]" {
			t.Errorf("%s: returned %v with a cancelled context", name, got)
		}
	}
	p, err := Choose(ctx, w, opt)
	check("Choose", p, err)
	p, err = New().Choose(ctx, w, opt)
	check("Planner.Choose", p, err)
	alts, err := New().Alternatives(ctx, w, opt, 3)
	check("Alternatives", alts, err)
	p, err = New().ForTarget(ctx, w, Options{Noise: catalog.Laplace, Objective: ObjectiveMaxVariance}, 10)
	check("ForTarget", p, err)
	gp, err := New().ChooseKronecker(ctx, []Gram{AllRangeGram{Size: 64}}, opt)
	check("ChooseKronecker", gp, err)
	gp, err = New().ChooseMarginals(ctx, AllMarginals([]int{4, 4, 4}, 2), opt)
	check("ChooseMarginals", gp, err)
}

// Cancelling a planning in the middle of a long optimisation (a
// 2,048-cell column, whose budget is about 3 s of work) returns promptly:
// the optimisers check the context between iterations and line-search
// steps, each of which costs tens of milliseconds here (ten times that
// under the race detector). The 10 s bound leaves room for the race
// detector on a loaded machine; it fails only if cancellation is not
// checked inside the optimiser. A Planner so cancelled has cached nothing.
func TestPlanningStopsPromptlyWhenCancelled(t *testing.T) {
	pl := New()
	running := make(chan struct{})
	var once sync.Once
	pl.optimiser = func(ctx context.Context, g Gram, fam catalog.NoiseFamily, work float64) (*colOpt, optInfo, error) {
		once.Do(func() { close(running) })
		return runOptimiser(ctx, g, fam, work)
	}
	ctx, cancel := context.WithCancel(context.Background())
	opt := Options{Noise: catalog.Laplace, Epsilon: 1}
	done := make(chan error, 1)
	go func() {
		_, err := pl.ChooseKronecker(ctx, []Gram{AllRangeGram{Size: 2048}}, opt)
		done <- err
	}()
	select {
	case <-running:
	case err := <-done:
		t.Fatalf("planning ended before its optimiser ran: %v", err)
	}
	time.Sleep(100 * time.Millisecond) // into the optimiser's iterations
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
		t.Logf("returned %v after the cancel", time.Since(start))
	case <-time.After(10 * time.Second):
		t.Fatal("planning did not stop within 10 s of its context's cancellation")
	}
	n := pl.cachedColumns()
	if n != 0 {
		t.Fatalf("a cancelled optimisation left %d cache entries", n)
	}
}
