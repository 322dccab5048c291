package sources

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/catalog"
)

// counting wraps a real backend, counting builds; gate, if set, holds each
// build until it is closed (or the build's context ends); started, if set,
// receives a value as each build begins (when it has room).
type counting struct {
	backend
	builds  atomic.Int64
	gate    chan struct{}
	started chan struct{}
}

func (c *counting) count(ctx context.Context, t *catalog.Table, cols []*catalog.Column, counts []float64, rows *atomic.Int64) error {
	c.builds.Add(1)
	select {
	case c.started <- struct{}{}:
	default:
	}
	if c.gate != nil {
		select {
		case <-c.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return c.backend.count(ctx, t, cols, counts, rows)
}

// policySet opens the policy fixture's SQLite file with a counting backend.
func policySet(t *testing.T) (*Set, *counting, string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "d.sqlite")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE t (a INTEGER, b TEXT, c REAL)`); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		if _, err := tx.Exec(`INSERT INTO t VALUES (?, ?, ?)`, i%13, []string{"x", "y", "z", "w"}[i%4], float64(i%11)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	cat := &catalog.Catalog{Sources: map[string]*catalog.Source{"main": {Name: "main", Driver: "sqlite", Path: "d.sqlite"}}}
	s, err := Open(ctx, cat, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c := &counting{backend: s.sources["main"].be}
	s.sources["main"].be = c
	return s, c, path
}

// Identical concurrent requests share one build: the build is held until
// every caller has joined its flight (Set.builds.Joined counts them), so no caller
// can pass by arriving after the build and reading the cache.
func TestSingleFlight(t *testing.T) {
	const callers = 8
	s, c, _ := policySet(t)
	c.gate = make(chan struct{})
	var most atomic.Int64
	s.builds.Joined = func(_ string, waiters int) { // under the group's lock
		most.Store(int64(waiters))
		if waiters == callers {
			close(c.gate)
		}
	}
	tab := policyTable()
	var wg sync.WaitGroup
	results := make([][]float64, callers)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var err error
			if results[i], err = s.Histogram(context.Background(), tab, tab.Columns); err != nil {
				t.Error(err)
			}
		}(i)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute): // a failure bound, not a window the test relies on
		t.Fatalf("after a minute only %d of %d callers had joined the flight", most.Load(), callers)
	}
	if n := most.Load(); n != callers {
		t.Fatalf("%d of %d callers joined the flight", n, callers)
	}
	if n := c.builds.Load(); n != 1 {
		t.Fatalf("%d builds for %d identical requests", n, callers)
	}
	for _, r := range results[1:] {
		if !reflect.DeepEqual(r, results[0]) {
			t.Fatal("requests got different histograms")
		}
	}
}

// A histogram over some of a cached histogram's columns, in any order, is
// summed from it — exactly, dropped rows included — without a build.
func TestSubsetFromCache(t *testing.T) {
	s, c, _ := policySet(t)
	fresh, _, _ := policySet(t)
	tab := policyTable()
	ctx := context.Background()
	if _, err := s.Histogram(ctx, tab, tab.Columns); err != nil {
		t.Fatal(err)
	}
	a, b, cc := tab.Columns[0], tab.Columns[1], tab.Columns[2]
	for _, cols := range [][]*catalog.Column{{b}, {cc, a}, {a, b}, {}, {b, cc}} {
		got, err := s.Histogram(ctx, tab, cols)
		if err != nil {
			t.Fatal(err)
		}
		want, err := fresh.Histogram(ctx, tab, cols)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%v: summed %v, built %v", cols, got, want)
		}
	}
	if n := c.builds.Load(); n != 1 {
		t.Fatalf("%d builds; subsets should come from the cache", n)
	}
}

// A committed change is a new data version: the next request rebuilds.
func TestRebuildAfterWrite(t *testing.T) {
	s, c, path := policySet(t)
	tab := policyTable()
	ctx := context.Background()
	cols := tab.Columns[:1]
	before, err := s.Histogram(ctx, tab, cols)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Histogram(ctx, tab, cols); err != nil || c.builds.Load() != 1 {
		t.Fatalf("unchanged data rebuilt (%d builds, %v)", c.builds.Load(), err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO t VALUES (3, 'x', 1)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	after, err := s.Histogram(ctx, tab, cols)
	if err != nil {
		t.Fatal(err)
	}
	if c.builds.Load() != 2 || after[3] != before[3]+1 {
		t.Fatalf("after a write: %d builds, cell 3 %v → %v", c.builds.Load(), before[3], after[3])
	}
}

// A cached histogram answers while another build is held up; a build
// whose only caller gives up is cancelled.
func TestCachedAnswersDuringBuildAndCancel(t *testing.T) {
	s, c, _ := policySet(t)
	tab := policyTable()
	ctx := context.Background()
	if _, err := s.Histogram(ctx, tab, tab.Columns[:1]); err != nil {
		t.Fatal(err)
	}
	c.gate = make(chan struct{}) // every later build blocks
	c.started = make(chan struct{}, 1)
	bctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := s.Histogram(bctx, tab, tab.Columns[1:]); done <- err }()
	select {
	case <-c.started: // the build holds its slot and waits at the gate
	case <-time.After(time.Minute):
		t.Fatal("the build did not start")
	}
	// The gate stays shut until cancel below: a cached read that waited
	// behind the build would never return.
	cached := make(chan error, 1)
	go func() { _, err := s.Histogram(ctx, tab, tab.Columns[:1]); cached <- err }()
	select {
	case err := <-cached:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a cached histogram waited behind a build")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled request: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelled request did not return")
	}
	// The abandoned build ends (its context is cancelled): the slot is free.
	deadline := time.Now().Add(5 * time.Second)
	for len(s.sources["main"].slots) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("abandoned build still holds its slot")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The cache stays within its byte bound, evicting least recently used
// histograms first.
func TestLRUBound(t *testing.T) {
	c := newHistograms(3 * (8*100 + entryOverhead))
	for i := 0; i < 10; i++ {
		c.put(string(rune('a'+i)), &entry{counts: make([]float64, 100)})
		if c.Bytes() > c.Limit() {
			t.Fatalf("size %d over limit %d", c.Bytes(), c.Limit())
		}
	}
	if c.get("a") != nil || c.get("j") == nil {
		t.Fatal("not least-recently-used eviction")
	}
	c.put("huge", &entry{counts: make([]float64, 10000)})
	if c.get("huge") != nil {
		t.Fatal("an entry larger than the bound was kept")
	}
}
