package planner

import (
	"context"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
)

// The caches stay within MaxBytes however many shapes are planned, oldest
// entries going first, and a repeated shape still plans from the cache when
// it fits.
func TestCacheBoundedInBytes(t *testing.T) {
	pl := New()
	pl.MaxBytes = 200_000 // a few 64-cell optimised columns (3·8·64² ≈ 98 kB each)
	seen := 0
	for n := 60; n < 72; n++ {
		if _, err := pl.ChooseKronecker(context.Background(), []Gram{AllRangeGram{Size: n}}, Options{Noise: catalog.Laplace, Epsilon: 1}); err != nil {
			t.Fatal(err)
		}
		pl.mu.Lock()
		used, cols := pl.used, len(pl.columns)
		pl.mu.Unlock()
		if used > pl.MaxBytes {
			t.Fatalf("after %d cells: %d bytes cached, bound %d", n, used, pl.MaxBytes)
		}
		seen = max(seen, cols)
		if cols > 3 {
			t.Fatalf("%d optimised columns kept within %d bytes", cols, pl.MaxBytes)
		}
	}
	if seen == 0 {
		t.Fatal("no optimised column was cached")
	}
}
