package budget

import (
	"context"
	"errors"
	"sync"
	"testing"
)

func tableLimit(table string, eps float64) Limit {
	return Limit{Scope: ScopeTable, Table: table, Epsilon: eps}
}

func perUser(table string, eps, delta float64) Limit {
	return Limit{Scope: ScopeUserTable, Table: table, Epsilon: eps, Delta: delta}
}

func TestRecordLimits(t *testing.T) { forBackends(t, testRecordLimits) }

func testRecordLimits(t *testing.T, open opener) {
	ctx := context.Background()
	l := open(t)
	if _, err := l.Charge(ctx, lapCharge("a", 0.1, "t"), nil); err != nil {
		t.Fatal(err)
	}
	base := []Limit{tableLimit("t", 10), perUser("t", 1, 0)}

	// First values (no base, nothing recorded) are recorded as such, so
	// the ledger alone holds every limit ever in force.
	if got, err := l.RecordLimits(ctx, base, nil); err != nil || len(got) != 2 || !got[0].Initial() || !got[1].Initial() {
		t.Fatalf("first values: %+v %v", got, err)
	}
	// Unchanged against base: nothing.
	if got, err := l.RecordLimits(ctx, base, base); err != nil || len(got) != 0 {
		t.Fatalf("unchanged: %+v %v", got, err)
	}
	// One limit raised, one δ changed, a new table: two entries.
	next := []Limit{tableLimit("t", 12), perUser("t", 1, 1e-6), tableLimit("u", 5)}
	got, err := l.RecordLimits(ctx, next, base)
	if err != nil {
		t.Fatal(err)
	}
	want := []LimitChange{{Limit: next[0], Previous: base[0]}, {Limit: next[1], Previous: base[1]}, {Limit: next[2], Previous: next[2]}}
	if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[0].Initial() || !got[2].Initial() {
		t.Fatalf("changes %+v, want %+v", got, want)
	}
	es, err := l.Entries(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 6 {
		t.Fatalf("%d entries, want 6", len(es))
	}
	es = append(es[:1], es[3:]...) // the charge, then this call's entries
	for i, e := range es[1:] {
		ch, ok := ParseLimitEntry(e)
		if !ok || ch != want[i] || e.Kind != KindLimits || !e.Cost.IsZero() || e.Mechanism != MechanismLimit {
			t.Fatalf("entry %d: %+v parsed %+v %v", e.Seq, e, ch, ok)
		}
	}
	if es[1].Strategy != "scope=table epsilon=12 delta=0 previous_epsilon=10 previous_delta=0" || es[1].User != "" || len(es[1].Tables) != 1 {
		t.Fatalf("entry 2: %+v", es[1])
	}
	mustVerify(t, l)

	// The ledger's record wins over a stale base: applying the same change
	// again (another process, or a repeated reload) records nothing.
	if got, err := l.RecordLimits(ctx, next, base); err != nil || len(got) != 0 {
		t.Fatalf("repeated: %+v %v", got, err)
	}
	// A scope recorded once is recorded at every later change, base or not.
	got, err = l.RecordLimits(ctx, []Limit{tableLimit("t", 8)}, nil)
	if err != nil || len(got) != 1 || got[0].Previous.Epsilon != 12 {
		t.Fatalf("later change: %+v %v", got, err)
	}
	rec, err := l.RecordedLimits(ctx)
	if err != nil || len(rec) != 3 {
		t.Fatalf("RecordedLimits: %+v %v", rec, err)
	}
	for _, r := range rec {
		if r.Scope == ScopeTable && r.Table == "t" && r.Epsilon != 8 || r.Scope == ScopeUserTable && r.Delta != 1e-6 {
			t.Fatalf("RecordedLimits: %+v", rec)
		}
	}
	// Spends are unaffected; the charge's limits are the caller's.
	if c, err := l.Spent(ctx, "a", "t"); err != nil || c.Epsilon != 0.1 {
		t.Fatalf("spent %+v %v", c, err)
	}
	mustVerify(t, l)

	// Malformed rules are refused before anything is written.
	for _, bad := range []Limit{
		{Scope: ScopeTable, Epsilon: 1},
		{Scope: ScopeTable, Table: "t", User: "a", Epsilon: 1},
		{Scope: ScopeUser, Table: "t", Epsilon: 1},
		{Scope: "other", Table: "t", Epsilon: 1},
		{Scope: ScopeTable, Table: "t", Epsilon: -1},
		{Scope: ScopeTable, Table: "t", Epsilon: 1, Delta: 1},
	} {
		if _, err := l.RecordLimits(ctx, []Limit{bad}, base); err == nil {
			t.Errorf("RecordLimits(%+v): no error", bad)
		}
	}
	if n := count(t, l); n != 7 {
		t.Fatalf("%d entries, want 7", n)
	}
}

// Processes (here: Ledgers) sharing a file that apply the same change at
// once record it once: the previous value is read in the write transaction.
func TestRecordLimitsConcurrent(t *testing.T) {
	ctx := context.Background()
	_, path := openTest(t)
	base := []Limit{tableLimit("t", 1)}
	next := []Limit{tableLimit("t", 2)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for range 8 {
		wg.Go(func() {
			l, err := Open(ctx, path)
			if err != nil {
				t.Error(err)
				return
			}
			defer l.Close()
			got, err := l.RecordLimits(ctx, next, base)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			total += len(got)
			mu.Unlock()
		})
	}
	wg.Wait()
	if total != 1 {
		t.Fatalf("%d limit entries recorded, want 1", total)
	}
}

func TestParseLimitEntryRejects(t *testing.T) {
	good := Entry{Kind: KindLimits, Charge: Charge{Tables: []string{"t"}, Mechanism: MechanismLimit,
		Strategy: "scope=table epsilon=2 delta=0 previous_epsilon=1 previous_delta=0"}}
	if _, ok := ParseLimitEntry(good); !ok {
		t.Fatal("good entry rejected")
	}
	for name, mod := range map[string]func(*Entry){
		"kind":      func(e *Entry) { e.Kind = KindCharge },
		"free form": func(e *Entry) { e.Mechanism = "" },
		"strategy":  func(e *Entry) { e.Strategy = "table t: total ε 1 → 2" },
		"number":    func(e *Entry) { e.Strategy = "scope=table epsilon=x delta=0 previous_epsilon=1 previous_delta=0" },
		"extra":     func(e *Entry) { e.Strategy += " more=1" },
		"tables":    func(e *Entry) { e.Tables = []string{"t", "u"} },
		"no table":  func(e *Entry) { e.Tables = nil },
	} {
		e := good
		mod(&e)
		if _, ok := ParseLimitEntry(e); ok {
			t.Errorf("%s: accepted", name)
		}
	}
}

// A process that has not reloaded a lowered budget yet still cannot spend
// past it: a charge is checked at the caller's limit and at the one the
// ledger last recorded for the scope, whichever is stricter, so audit
// verify's replay never finds an overspend.
func TestChargeMeetsTheRecordedLimit(t *testing.T) {
	ctx := context.Background()
	a, path := openTest(t)
	b, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	stale := []Limit{tableLimit("t", 10), perUser("t", 1, 0)}
	if _, err := a.RecordLimits(ctx, stale, nil); err != nil {
		t.Fatal(err)
	}
	// a reloads: the per-user budget drops to 0.25 (a rule for every user).
	if got, err := a.RecordLimits(ctx, []Limit{tableLimit("t", 10), perUser("t", 0.25, 0)}, stale); err != nil || len(got) != 1 {
		t.Fatalf("reload: %+v %v", got, err)
	}
	// b still enforces its stale catalog (per-user 1, as a concrete user limit).
	bLimits := []Limit{tableLimit("t", 10), userTable("ann", "t", 1)}
	for i := range 2 {
		if _, err := b.Charge(ctx, lapCharge("ann", 0.1, "t"), bLimits); err != nil {
			t.Fatalf("charge %d: %v", i, err)
		}
	}
	_, err = b.Charge(ctx, lapCharge("ann", 0.1, "t"), bLimits)
	var ex *ExceededError
	if !errors.As(err, &ex) || ex.Limit.Epsilon != 0.25 || ex.Limit.User != "ann" {
		t.Fatalf("third charge: %v, want the recorded 0.25 exceeded", err)
	}
	// A raised recorded limit does not loosen a stricter caller.
	if got, err := a.RecordLimits(ctx, []Limit{tableLimit("t", 10), perUser("t", 5, 0)}, nil); err != nil || len(got) != 1 {
		t.Fatalf("raise: %+v %v", got, err)
	}
	if _, err := b.Charge(ctx, lapCharge("ann", 0.9, "t"), bLimits); !errors.As(err, &ex) || ex.Limit.Epsilon != 1 {
		t.Fatalf("charge past the caller's limit: %v", err)
	}
	es, err := a.Entries(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckSpending(es, nil); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, a)
}
