package planner

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
)

// The caches stay within MaxBytes however many shapes are planned, least
// recently used entries going first.
func TestCacheBoundedInBytes(t *testing.T) {
	pl := New()
	pl.MaxBytes = 200_000 // a few 64-cell optimised columns (3·8·64² ≈ 98 kB each)
	seen := 0
	for n := 60; n < 72; n++ {
		if _, err := pl.ChooseKronecker(context.Background(), []Gram{AllRangeGram{Size: n}}, Options{Noise: catalog.Laplace, Epsilon: 1}); err != nil {
			t.Fatal(err)
		}
		used, cols := pl.lru().Bytes(), pl.cachedColumns()
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

// cachedColumns is the number of optimised columns pl caches.
func (pl *Planner) cachedColumns() int {
	n := 0
	pl.lru().Range(func(key string, _ cached) bool {
		if strings.HasPrefix(key, "c") {
			n++
		}
		return true
	})
	return n
}

// Columns and plans share one bound, and the least recently used entry
// goes first: a plan in use outlives older and newer ones that are not,
// and columns without matrices (too small to optimise) are bounded too.
func TestCacheLeastRecentlyUsedFirst(t *testing.T) {
	pl := New()
	pl.MaxBytes = 3 * planBytes(&Plan{}) // three plans without matrices
	for _, k := range []string{"a", "b", "c"} {
		pl.storePlan(k, &Plan{})
	}
	if pl.cachedPlan("a") == nil {
		t.Fatal("plan a not cached")
	}
	pl.storePlan("d", &Plan{})
	for k, want := range map[string]bool{"a": true, "b": false, "c": true, "d": true} {
		if got := pl.cachedPlan(k) != nil; got != want {
			t.Errorf("plan %s cached: %v, want %v", k, got, want)
		}
	}
	for i := range 100 {
		pl.cacheColumn(fmt.Sprint(i), &columnEntry{})
	}
	if used := pl.lru().Bytes(); used > pl.MaxBytes {
		t.Fatalf("%d bytes cached, bound %d", used, pl.MaxBytes)
	}
	if n := pl.cachedColumns(); n == 0 || pl.cachedPlan("d") != nil {
		t.Fatalf("%d columns cached after 100, plan d still cached: the columns did not push the plans out", n)
	}
}
