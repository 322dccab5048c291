package budget

import (
	"context"
	"slices"
	"sync"
	"testing"
)

func reuseOf(user string, i int) Charge {
	return Charge{User: user, ConnID: uint32(i), Tables: []string{"t"}, Mechanism: "reuse", Strategy: "stored answer",
		QueryDigest: digestOf("q")}
}

// Reuse entries recorded concurrently with charges are all written, in
// batches, on one intact chain; a process reads its own at once.
func TestRecordReuseGroupCommit(t *testing.T) { forBackends(t, testRecordReuseGroupCommit) }

func testRecordReuseGroupCommit(t *testing.T, open opener) {
	l := open(t)
	ctx := context.Background()
	const writers, each = 8, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if err := l.RecordReuse(ctx, reuseOf("u", w*each+i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range 10 {
			if _, err := l.Charge(ctx, lapCharge("u", 0.1, "t"), nil); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	es, err := l.Entries(ctx, Filter{}) // waits for what is pending
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, e := range es {
		n[e.Kind]++
	}
	if n[KindReuse] != writers*each || n[KindCharge] != 10 {
		t.Fatalf("entries by kind %v, want %d reuses and 10 charges", n, writers*each)
	}
	mustVerify(t, l)
	if err := l.RecordReuse(ctx, Charge{User: "u", Cost: Cost{Epsilon: 1}}); err == nil {
		t.Fatal("a reuse entry with a cost was accepted")
	}
}

// Close writes every pending reuse entry before it returns; after it,
// RecordReuse fails.
func TestCloseFlushesReuses(t *testing.T) {
	l, path := openTest(t)
	ctx := context.Background()
	for i := range 300 {
		if err := l.RecordReuse(ctx, reuseOf("u", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.RecordReuse(ctx, reuseOf("u", 0)); err == nil {
		t.Fatal("RecordReuse after Close succeeded")
	}
	l2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if got := count(t, l2); got != 300 {
		t.Fatalf("%d entries after Close, want 300", got)
	}
	mustVerify(t, l2)
}

// A charge writes the pending reuse entries ahead of itself, in its own
// transaction: another reader sees them as soon as the charge returns. A
// refused charge leaves them to the committer.
func TestChargeCarriesPendingReuses(t *testing.T) {
	l, path := openTest(t)
	ctx := context.Background()
	for i := range 3 {
		if err := l.RecordReuse(ctx, reuseOf("u", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Charge(ctx, lapCharge("u", 0.1, "t"), nil); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	es, err := ro.Entries(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range es {
		kinds = append(kinds, e.Kind)
	}
	if want := []string{KindReuse, KindReuse, KindReuse, KindCharge}; !slices.Equal(kinds, want) {
		t.Fatalf("entries %v, want %v", kinds, want)
	}
	// Refused: the reuse still lands (by the committer).
	if err := l.RecordReuse(ctx, reuseOf("u", 9)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Charge(ctx, lapCharge("u", 5, "t"), []Limit{userTable("u", "t", 1)}); err == nil {
		t.Fatal("an overspend was charged")
	}
	if got := count(t, l); got != 5 {
		t.Fatalf("%d entries, want 5", got)
	}
	mustVerify(t, l)
}
