package budget

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// 64 goroutines, each with its own *Ledger on one file (as separate
// connections or processes would be), race to charge 0.1 against ε=1:
// exactly 10 win, in each of 20 rounds. The 64 ledgers are opened once,
// concurrently, and each round spends a fresh budget (another table) on the
// same file; TestOpenRace covers concurrent creation of a new file.
func TestChargeRace(t *testing.T) {
	const (
		rounds  = 20
		workers = 64
	)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.sqlite")
	ledgers := openConcurrently(t, path, workers)
	total := 0
	for r := 0; r < rounds; r++ {
		table := fmt.Sprintf("adult%d", r)
		var won, lost atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, workers)
		limits := []Limit{userTable("analyst", table, 1), {Scope: ScopeTable, Table: table, Epsilon: 1}}
		for w := range workers {
			wg.Go(func() {
				<-start
				c := lapCharge("analyst", 0.1, table)
				c.ConnID = uint32(w)
				_, err := ledgers[w].Charge(ctx, c, limits)
				var ex *ExceededError
				switch {
				case err == nil:
					won.Add(1)
				case errors.As(err, &ex):
					lost.Add(1)
				default:
					errs <- err
				}
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", r, err)
		}
		if won.Load() != 10 || lost.Load() != workers-10 {
			t.Fatalf("round %d: %d charges succeeded and %d were refused, want 10 and %d", r, won.Load(), lost.Load(), workers-10)
		}
		total += 10
		es, err := ledgers[r%workers].Entries(ctx, Filter{Table: table})
		if err != nil || len(es) != 10 {
			t.Fatalf("round %d: %d entries for %s, %v; want 10", r, len(es), table, err)
		}
	}
	if n := count(t, ledgers[0]); n != total {
		t.Fatalf("%d entries, want %d", n, total)
	}
	mustVerify(t, ledgers[workers-1])
}

// openConcurrently opens n ledgers on path at once and closes them at the
// end of the test.
func openConcurrently(t *testing.T, path string, n int) []*Ledger {
	t.Helper()
	ledgers := make([]*Ledger, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { ledgers[i], errs[i] = Open(context.Background(), path) })
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, l := range ledgers {
			if l != nil {
				l.Close()
			}
		}
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
	}
	return ledgers
}

// Opening one new file from many ledgers at once creates the schema and
// switches to WAL exactly once, and every ledger works.
func TestOpenRace(t *testing.T) {
	ctx := context.Background()
	for r := range 2 {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("ledger-%d.sqlite", r))
		ledgers := openConcurrently(t, path, 64)
		for i, l := range ledgers[:4] {
			if _, err := l.Charge(ctx, lapCharge("a", 0.1, "t"), nil); err != nil {
				t.Fatalf("round %d: ledger %d: %v", r, i, err)
			}
		}
		if n := count(t, ledgers[63]); n != 4 {
			t.Fatalf("round %d: %d entries, want 4", r, n)
		}
		mustVerify(t, ledgers[32])
	}
}

// Goroutines sharing one *Ledger queue on it and get the same guarantee.
func TestChargeRaceSharedLedger(t *testing.T) { forBackends(t, testChargeRaceSharedLedger) }

func testChargeRaceSharedLedger(t *testing.T, open opener) {
	ctx := context.Background()
	l := open(t)
	var won atomic.Int32
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			if _, err := l.Charge(ctx, lapCharge("a", 0.1, "t"), []Limit{userTable("a", "t", 1)}); err == nil {
				won.Add(1)
			}
		})
	}
	wg.Wait()
	if won.Load() != 10 {
		t.Fatalf("%d charges succeeded, want 10", won.Load())
	}
	mustVerify(t, l)
}
