package planner

import (
	"context"
	"errors"
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
