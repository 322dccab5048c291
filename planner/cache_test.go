package planner

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/catalog"
)

// An optimiser that panics must not leave its cache entry pending: the
// panic reaches its caller, and a later request for the same column runs
// the optimiser again instead of waiting forever.
func TestOptimisedPanicReleasesWaiters(t *testing.T) {
	pl := New()
	calls := 0
	pl.optimiser = func(_ context.Context, g Gram, fam catalog.NoiseFamily, work float64) (*colOpt, optInfo, error) {
		calls++
		if calls == 1 {
			panic("injected optimiser panic")
		}
		return nil, optInfo{}, errors.New("second run")
	}
	g := PrefixGram{Size: 16}
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Fatal("the optimiser's panic did not reach the caller")
			}
		}()
		pl.optimised(context.Background(), g, catalog.Laplace, workOf(1))
	}()
	done := make(chan error, 1)
	go func() {
		_, _, err := pl.optimised(context.Background(), g, catalog.Laplace, workOf(1))
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || err.Error() != "second run" {
			t.Fatalf("second request: err %v, want the second run's", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a request after the optimiser panicked blocked on its cache entry")
	}
}

// A request waiting for another's optimisation of the same column is not
// bound to the other's context: when the other is cancelled, the waiter
// optimises the column itself. A waiter whose own context ends returns at
// once.
func TestOptimisedWaiterOutlivesCancelledRunner(t *testing.T) {
	pl := New()
	started := make(chan struct{})
	var calls atomic.Int32
	pl.optimiser = func(ctx context.Context, g Gram, fam catalog.NoiseFamily, work float64) (*colOpt, optInfo, error) {
		if calls.Add(1) == 1 {
			close(started)
			<-ctx.Done()
			return nil, optInfo{}, stopped(ctx)
		}
		return identityOpt(g.N()), optInfo{work: 7}, nil
	}
	// Both waiters have queued on the runner's optimisation when three
	// callers have joined it.
	queued := make(chan struct{})
	var once sync.Once
	pl.optimising.Joined = func(_ string, waiters int) {
		if waiters == 3 {
			once.Do(func() { close(queued) })
		}
	}
	g := PrefixGram{Size: 16}
	runCtx, cancelRun := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() {
		_, _, err := pl.optimised(runCtx, g, catalog.Laplace, workOf(1))
		runErr <- err
	}()
	<-started

	// A waiter whose context ends first.
	short, cancelShort := context.WithCancel(context.Background())
	shortErr := make(chan error, 1)
	go func() {
		_, _, err := pl.optimised(short, g, catalog.Laplace, workOf(1))
		shortErr <- err
	}()
	// A waiter that outlives the runner.
	type res struct {
		o    *colOpt
		info optInfo
		err  error
	}
	waiter := make(chan res, 1)
	go func() {
		o, info, err := pl.optimised(context.Background(), g, catalog.Laplace, workOf(1))
		waiter <- res{o, info, err}
	}()
	select {
	case <-queued:
	case <-time.After(time.Minute): // a failure bound, not a window the test relies on
		t.Fatal("the waiters never joined the runner's optimisation")
	}
	cancelShort()
	select {
	case err := <-shortErr:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled waiter: err %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiter whose context was cancelled kept waiting")
	}
	cancelRun()
	if err := <-runErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled runner: err %v", err)
	}
	select {
	case r := <-waiter:
		if r.err != nil || r.o == nil || r.info.work != 7 {
			t.Fatalf("waiter after the runner's cancellation: %v, %+v, %v", r.o, r.info, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not optimise the column after the runner was cancelled")
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("optimiser ran %d times, want 2", n)
	}
}

// Concurrent requests for one column run the optimiser once: it is held
// until every request has joined its flight, so none can pass by arriving
// after it and reading the cache.
func TestOptimisedSingleFlight(t *testing.T) {
	const requests = 8
	pl := New()
	all := make(chan struct{})
	pl.optimising.Joined = func(_ string, waiters int) {
		if waiters == requests {
			close(all)
		}
	}
	var calls atomic.Int32
	pl.optimiser = func(_ context.Context, g Gram, _ catalog.NoiseFamily, _ float64) (*colOpt, optInfo, error) {
		calls.Add(1)
		select {
		case <-all:
		case <-time.After(time.Minute): // a failure bound, not a window the test relies on
			t.Error("not every request joined the optimisation")
		}
		return identityOpt(g.N()), optInfo{work: 7, seconds: 1}, nil
	}
	g := PrefixGram{Size: 16}
	type res struct {
		o    *colOpt
		info optInfo
		err  error
	}
	out := make(chan res, requests)
	for range requests {
		go func() {
			o, info, err := pl.optimised(context.Background(), g, catalog.Laplace, workOf(1))
			out <- res{o, info, err}
		}()
	}
	var first *colOpt
	ran := 0
	for range requests {
		r := <-out
		if r.err != nil || r.o == nil || r.info.work != 7 {
			t.Fatalf("%v, %+v, %v", r.o, r.info, r.err)
		}
		if first == nil {
			first = r.o
		} else if r.o != first {
			t.Fatal("requests got different strategies")
		}
		if r.info.seconds != 0 {
			ran++
		}
	}
	if calls.Load() != 1 || ran != 1 {
		t.Fatalf("optimiser ran %d times, %d requests report its time; want 1 and 1", calls.Load(), ran)
	}
}
