package budget

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func openTest(t testing.TB) (*Ledger, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.sqlite")
	l, err := Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l, path
}

func digestOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func lapCharge(user string, eps float64, tables ...string) Charge {
	return Charge{User: user, ConnID: 7, Tables: tables, Mechanism: "laplace", Strategy: "identity",
		Cost: Cost{Epsilon: eps}, QueryDigest: digestOf("select count(*) from " + strings.Join(tables, ","))}
}

func userTable(user, table string, eps float64) Limit {
	return Limit{Scope: ScopeUserTable, User: user, Table: table, Epsilon: eps}
}

func mustVerify(t *testing.T, l *Ledger) {
	t.Helper()
	if err := l.Verify(context.Background()); err != nil {
		t.Fatalf("Verify: %v", err)
	}
}

func count(t *testing.T, l *Ledger) int {
	t.Helper()
	es, err := l.Entries(context.Background(), Filter{})
	if err != nil {
		t.Fatalf("Entries: %v", err)
	}
	return len(es)
}

// Ten charges of 0.1 against ε=1 must all fit although their float sum is
// 0.9999999999999999 and, in other orders, sums like 0.7+0.2+0.1 come to
// 1.0000000000000002: limits are compared with a relative slack of 1e-9.
func TestChargeTenTenths(t *testing.T) { forBackends(t, testChargeTenTenths) }

func testChargeTenTenths(t *testing.T, open opener) {
	ctx := context.Background()
	l := open(t)
	limits := []Limit{userTable("analyst", "adult", 1), {Scope: ScopeTable, Table: "adult", Epsilon: 1}}
	for i := 0; i < 10; i++ {
		e, err := l.Charge(ctx, lapCharge("analyst", 0.1, "adult"), limits)
		if err != nil {
			t.Fatalf("charge %d: %v", i+1, err)
		}
		if e.Seq != int64(i+1) || e.Kind != KindCharge {
			t.Fatalf("charge %d: entry %+v", i+1, e)
		}
	}
	_, err := l.Charge(ctx, lapCharge("analyst", 0.1, "adult"), limits)
	var ex *ExceededError
	if !errors.As(err, &ex) {
		t.Fatalf("11th charge: err = %v, want *ExceededError", err)
	}
	if ex.Limit.Scope != ScopeUserTable || !near(ex.Spent, 1, 1e-9) || ex.Requested != 0.1 || ex.Remaining > 1e-9 {
		t.Fatalf("ExceededError = %+v", ex)
	}
	if n := count(t, l); n != 10 {
		t.Fatalf("%d entries after refusal, want 10", n)
	}
	s, err := l.Spent(ctx, "analyst", "adult")
	if err != nil {
		t.Fatal(err)
	}
	if s.Epsilon != 0.9999999999999999 || s.Rho != 0 {
		t.Fatalf("Spent = %+v", s)
	}
	mustVerify(t, l)

	// And with sums that land just above the limit.
	l2 := open(t)
	for _, eps := range []float64{0.7, 0.2, 0.1} {
		if _, err := l2.Charge(ctx, lapCharge("a", eps, "t"), []Limit{userTable("a", "t", 1)}); err != nil {
			t.Fatalf("charge %g: %v", eps, err)
		}
	}
	if s, _ := l2.Spent(ctx, "a", "t"); s.Epsilon <= 1 {
		t.Logf("sum is %.17g (the slack was not needed on this platform)", s.Epsilon)
	}
	if _, err := l2.Charge(ctx, lapCharge("a", 1e-6, "t"), []Limit{userTable("a", "t", 1)}); !errors.As(err, &ex) {
		t.Fatalf("charge past the slack: err = %v", err)
	}
}

func TestExceededMessage(t *testing.T) { forBackends(t, testExceededMessage) }

func testExceededMessage(t *testing.T, open opener) {
	ctx := context.Background()
	l := open(t)
	lim := []Limit{userTable("analyst", "adult", 1)}
	if _, err := l.Charge(ctx, lapCharge("analyst", 0.8, "adult"), lim); err != nil {
		t.Fatal(err)
	}
	_, err := l.Charge(ctx, lapCharge("analyst", 0.5, "adult"), lim)
	want := "privacy budget exceeded for user analyst on table adult: requested ε=0.5, remaining ε=0.2"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant  %s", err, want)
	}
	for _, tc := range []struct {
		lim  Limit
		want string
	}{
		{Limit{Scope: ScopeTable, Table: "adult", Epsilon: 1}, "privacy budget exceeded for table adult (all users): requested ε=0.5, remaining ε=0.2"},
		{Limit{Scope: ScopeUser, User: "analyst", Epsilon: 1}, "privacy budget exceeded for user analyst (all tables): requested ε=0.5, remaining ε=0.2"},
	} {
		_, err := l.Charge(ctx, lapCharge("analyst", 0.5, "adult"), []Limit{tc.lim})
		if err == nil || err.Error() != tc.want {
			t.Errorf("err = %v\nwant  %s", err, tc.want)
		}
	}
}

// Each step charges and expects success or refusal; scopes are independent.
func TestChargeScopes(t *testing.T) { forBackends(t, testChargeScopes) }

func testChargeScopes(t *testing.T, open opener) {
	type step struct {
		user   string
		tables []string
		eps    float64
		limits []Limit
		ok     bool
	}
	ut := userTable
	tbl := func(table string, eps float64) Limit { return Limit{Scope: ScopeTable, Table: table, Epsilon: eps} }
	usr := func(user string, eps float64) Limit { return Limit{Scope: ScopeUser, User: user, Epsilon: eps} }
	tests := []struct {
		name  string
		steps []step
		spent []SpentRow
	}{
		{"user_table limits are per user", []step{
			{"alice", []string{"adult"}, 0.4, []Limit{ut("alice", "adult", 1)}, true},
			{"alice", []string{"adult"}, 0.4, []Limit{ut("alice", "adult", 1)}, true},
			{"alice", []string{"adult"}, 0.4, []Limit{ut("alice", "adult", 1)}, false},
			{"bob", []string{"adult"}, 0.4, []Limit{ut("bob", "adult", 1)}, true},
			{"alice", []string{"adult"}, 0.2, []Limit{ut("alice", "adult", 1)}, true},
		}, []SpentRow{
			{"", "adult", Cost{Epsilon: 0.4 + 0.4 + 0.4 + 0.2}, ""},
			{"alice", "adult", Cost{Epsilon: 0.4 + 0.4 + 0.2}, ""},
			{"bob", "adult", Cost{Epsilon: 0.4}, ""},
			{"alice", "", Cost{Epsilon: 0.4 + 0.4 + 0.2}, ""},
			{"bob", "", Cost{Epsilon: 0.4}, ""},
		}},
		{"table limit is shared by all users", []step{
			{"alice", []string{"adult"}, 0.5, []Limit{ut("alice", "adult", 1), tbl("adult", 1)}, true},
			{"bob", []string{"adult"}, 0.5, []Limit{ut("bob", "adult", 1), tbl("adult", 1)}, true},
			{"carol", []string{"adult"}, 0.5, []Limit{ut("carol", "adult", 1), tbl("adult", 1)}, false},
			{"carol", []string{"census"}, 0.5, []Limit{ut("carol", "census", 1), tbl("census", 1)}, true},
		}, nil},
		{"user limit spans tables", []step{
			{"alice", []string{"adult"}, 0.6, []Limit{usr("alice", 1)}, true},
			{"alice", []string{"census"}, 0.6, []Limit{usr("alice", 1)}, false},
			{"alice", []string{"census"}, 0.4, []Limit{usr("alice", 1)}, true},
			{"bob", []string{"census"}, 0.6, []Limit{usr("bob", 1)}, true},
		}, nil},
		{"multi-table charge is all or nothing", []step{
			{"alice", []string{"b"}, 0.9, []Limit{tbl("b", 1)}, true},
			{"alice", []string{"a", "b"}, 0.2, []Limit{tbl("a", 1), tbl("b", 1)}, false},
			{"alice", []string{"a"}, 1, []Limit{tbl("a", 1)}, true}, // a untouched by the refusal
		}, []SpentRow{
			{"", "a", Cost{Epsilon: 1}, ""},
			{"alice", "a", Cost{Epsilon: 1}, ""},
			{"", "b", Cost{Epsilon: 0.9}, ""},
			{"alice", "b", Cost{Epsilon: 0.9}, ""},
			{"alice", "", Cost{Epsilon: 1.9}, ""},
		}},
		{"zero limit refuses any cost but not zero cost", []step{
			{"alice", []string{"a"}, 0, []Limit{tbl("a", 0)}, true},
			{"alice", []string{"a"}, 1e-12, []Limit{tbl("a", 0)}, false},
		}, nil},
		{"no limits: always charged", []step{
			{"alice", []string{"a"}, 5, nil, true},
			{"alice", []string{"a"}, 5, nil, true},
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			l := open(t)
			ok := 0
			for i, s := range tc.steps {
				_, err := l.Charge(ctx, lapCharge(s.user, s.eps, s.tables...), s.limits)
				var ex *ExceededError
				switch {
				case s.ok && err != nil:
					t.Fatalf("step %d: %v", i, err)
				case !s.ok && !errors.As(err, &ex):
					t.Fatalf("step %d: err = %v, want *ExceededError", i, err)
				}
				if s.ok {
					ok++
				}
			}
			if n := count(t, l); n != ok {
				t.Fatalf("%d entries, want %d", n, ok)
			}
			mustVerify(t, l)
			rows, err := l.Budgets(ctx)
			if err != nil {
				t.Fatal(err)
			}
			tableRows := rows[:0:0]
			for _, r := range rows {
				s, err := l.Spent(ctx, r.User, r.Table)
				if r.Space != "" {
					// A charge given no space spends in its table's.
					s, err = l.SpentSpace(ctx, r.User, r.Space)
					if tr, terr := l.Spent(ctx, r.User, r.Space); terr != nil || tr != r.Cost {
						t.Fatalf("space %q spent %+v, table %q spent %+v", r.Space, r.Cost, r.Space, tr)
					}
				} else {
					tableRows = append(tableRows, r)
				}
				if err != nil || s != r.Cost {
					t.Fatalf("Spent(%q,%q,%q) = %+v, %v; Budgets says %+v", r.User, r.Table, r.Space, s, err, r.Cost)
				}
			}
			rows = tableRows
			if tc.spent != nil {
				if len(rows) != len(tc.spent) {
					t.Fatalf("Budgets = %+v, want %+v", rows, tc.spent)
				}
				want := map[[2]string]Cost{}
				for _, r := range tc.spent {
					want[[2]string{r.User, r.Table}] = r.Cost
				}
				for _, r := range rows {
					if w, ok := want[[2]string{r.User, r.Table}]; !ok || !near(w.Epsilon, r.Cost.Epsilon, 1e-12) {
						t.Fatalf("Budgets row %+v, want %+v", r, w)
					}
				}
			}
		})
	}
}

// Gaussian charges compose in ρ and convert once at the limit's δ: three
// releases at ε=0.5 each fit in ε=1, not two (see TestZCDPComposesSublinearly).
func TestChargeGaussian(t *testing.T) { forBackends(t, testChargeGaussian) }

func testChargeGaussian(t *testing.T, open opener) {
	ctx := context.Background()
	l := open(t)
	const delta = 1e-5
	rho := RhoForEpsilon(0.5, delta)
	lim := []Limit{{Scope: ScopeUserTable, User: "a", Table: "t", Epsilon: 1, Delta: delta}}
	c := Charge{User: "a", Tables: []string{"t"}, Mechanism: "gaussian", Cost: Cost{Rho: rho}}
	ok := 0
	for i := 0; i < 6; i++ {
		if _, err := l.Charge(ctx, c, lim); err == nil {
			ok++
		} else {
			var ex *ExceededError
			if !errors.As(err, &ex) {
				t.Fatal(err)
			}
			if !near(ex.Requested, 0.5, 1e-12) || !near(ex.Spent, 0.8727631643625003, 1e-12) {
				t.Fatalf("ExceededError = %+v", ex)
			}
		}
	}
	if ok != 3 {
		t.Fatalf("%d Gaussian charges at ε=0.5 fit in ε=1, want 3", ok)
	}
	// A pure-ε charge on top composes by EpsilonFor's min of (a) and (b).
	spent, _ := l.Spent(ctx, "a", "t")
	room := 1 - EpsilonFor(spent, delta)
	pure := Charge{User: "a", Tables: []string{"t"}, Mechanism: "laplace", Cost: Cost{Epsilon: room}}
	if _, err := l.Charge(ctx, pure, lim); err != nil {
		t.Fatalf("pure charge within the room left: %v", err)
	}
	// A Gaussian charge needs δ in (0,1) on every limit.
	bad := []Limit{{Scope: ScopeTable, Table: "t", Epsilon: 100}}
	_, err := l.Charge(ctx, c, bad)
	var ex *ExceededError
	if err == nil || errors.As(err, &ex) || !strings.Contains(err.Error(), "δ") {
		t.Fatalf("Gaussian charge against δ=0 limit: err = %v", err)
	}
	mustVerify(t, l)
}

func TestChargeRejectsBadInput(t *testing.T) { forBackends(t, testChargeRejectsBadInput) }

func testChargeRejectsBadInput(t *testing.T, open opener) {
	ctx := context.Background()
	l := open(t)
	good := lapCharge("a", 0.1, "t")
	lim := []Limit{userTable("a", "t", 1)}
	mod := func(f func(*Charge)) Charge {
		c := good
		c.Tables = append([]string(nil), good.Tables...)
		f(&c)
		return c
	}
	tests := []struct {
		name   string
		c      Charge
		limits []Limit
	}{
		{"no user", mod(func(c *Charge) { c.User = "" }), nil},
		{"no table", mod(func(c *Charge) { c.Tables = nil }), nil},
		{"empty table name", mod(func(c *Charge) { c.Tables = []string{""} }), nil},
		{"negative ε", mod(func(c *Charge) { c.Cost.Epsilon = -0.1 }), lim},
		{"NaN ε", mod(func(c *Charge) { c.Cost.Epsilon = math.NaN() }), lim},
		{"infinite ρ", mod(func(c *Charge) { c.Cost.Rho = math.Inf(1) }), lim},
		{"bad digest", mod(func(c *Charge) { c.QueryDigest = "xyz" }), lim},
		{"invalid UTF-8", mod(func(c *Charge) { c.User = "a\xff" }), nil},
		{"limit of another user", good, []Limit{userTable("b", "t", 1)}},
		{"limit of another table", good, []Limit{userTable("a", "u", 1)}},
		{"table limit with a user", good, []Limit{{Scope: ScopeTable, User: "a", Table: "t", Epsilon: 1}}},
		{"unknown scope", good, []Limit{{Scope: "global", Epsilon: 1}}},
		{"negative limit", good, []Limit{userTable("a", "t", -1)}},
		{"NaN limit", good, []Limit{userTable("a", "t", math.NaN())}},
		{"δ ≥ 1", good, []Limit{{Scope: ScopeTable, Table: "t", Epsilon: 1, Delta: 1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := l.Charge(ctx, tc.c, tc.limits)
			var ex *ExceededError
			if err == nil || errors.As(err, &ex) {
				t.Fatalf("err = %v, want a validation error", err)
			}
		})
	}
	if n := count(t, l); n != 0 {
		t.Fatalf("%d entries appended by rejected charges", n)
	}
	if _, err := l.Spent(ctx, "", ""); err == nil {
		t.Fatal("Spent with neither user nor table: no error")
	}
}

func TestChargeNormalises(t *testing.T) { forBackends(t, testChargeNormalises) }

func testChargeNormalises(t *testing.T, open opener) {
	ctx := context.Background()
	l := open(t)
	c := lapCharge("a", 0.1, "t2", "t1", "t2")
	c.QueryDigest = strings.ToUpper(c.QueryDigest)
	c.Cost.Rho = math.Copysign(0, -1)
	e, err := l.Charge(ctx, c, []Limit{userTable("a", "t1", 1), userTable("a", "t2", 1)})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(e.Tables, ",") != "t1,t2" || e.QueryDigest != strings.ToLower(c.QueryDigest) || math.Signbit(e.Cost.Rho) {
		t.Fatalf("entry not normalised: %+v", e)
	}
	// The table's own total is charged once, not twice.
	if s, _ := l.Spent(ctx, "", "t2"); s.Epsilon != 0.1 {
		t.Fatalf("table t2 spent %g", s.Epsilon)
	}
	mustVerify(t, l)
}

func TestRecord(t *testing.T) { forBackends(t, testRecord) }

func testRecord(t *testing.T, open opener) {
	ctx := context.Background()
	l := open(t)
	if _, err := l.Charge(ctx, lapCharge("a", 0.5, "t"), nil); err != nil {
		t.Fatal(err)
	}
	reuse := lapCharge("a", 0, "t")
	reuse.Strategy = "stored answer of entry 1"
	e, err := l.Record(ctx, KindReuse, reuse)
	if err != nil || e.Seq != 2 || e.Kind != KindReuse {
		t.Fatalf("Record reuse = %+v, %v", e, err)
	}
	e, err = l.Record(ctx, KindLimits, Charge{Strategy: "table t: total ε 1 → 2"})
	if err != nil || e.Seq != 3 || e.User != "" || e.Tables != nil {
		t.Fatalf("Record limits = %+v, %v", e, err)
	}
	derived := lapCharge("a", 0, "t")
	derived.Mechanism, derived.Strategy = "derived", "generalised least squares over measurements 1"
	e, err = l.Record(ctx, KindDerived, derived)
	if err != nil || e.Seq != 4 || e.Kind != KindDerived {
		t.Fatalf("Record derived = %+v, %v", e, err)
	}
	if _, err := l.Record(ctx, KindReuse, lapCharge("a", 0.1, "t")); err == nil {
		t.Fatal("Record with a cost: no error")
	}
	if _, err := l.Record(ctx, KindDerived, lapCharge("a", 0.1, "t")); err == nil {
		t.Fatal("Record derived with a cost: no error")
	}
	if _, err := l.Record(ctx, KindCharge, reuse); err == nil {
		t.Fatal("Record of kind charge: no error")
	}
	if _, err := l.Record(ctx, "other", reuse); err == nil {
		t.Fatal("Record of unknown kind: no error")
	}
	if s, _ := l.Spent(ctx, "a", "t"); s.Epsilon != 0.5 {
		t.Fatalf("Record changed the spend: %+v", s)
	}
	if n := count(t, l); n != 4 {
		t.Fatalf("%d entries, want 4", n)
	}
	mustVerify(t, l)
}

func TestEntriesFilter(t *testing.T) { forBackends(t, testEntriesFilter) }

func testEntriesFilter(t *testing.T, open opener) {
	ctx := context.Background()
	l := open(t)
	steps := []Charge{
		lapCharge("alice", 0.1, "adult"),
		lapCharge("bob", 0.1, "adult"),
		lapCharge("alice", 0.1, "census"),
		lapCharge("alice", 0.1, "adult", "census"),
		lapCharge("bob", 0.1, "census"),
	}
	var times []time.Time
	for _, c := range steps {
		e, err := l.Charge(ctx, c, nil)
		if err != nil {
			t.Fatal(err)
		}
		times = append(times, e.Time)
	}
	all, err := l.Entries(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range all {
		if e.Seq != int64(i+1) || !e.Time.Equal(times[i]) {
			t.Fatalf("entry %d = %+v", i, e)
		}
		if i > 0 && (e.PrevHash != all[i-1].Hash || e.Time.Before(all[i-1].Time)) {
			t.Fatalf("entry %d does not chain: %+v", i, e)
		}
	}
	if all[0].PrevHash != genesisHash {
		t.Fatalf("first PrevHash = %s", all[0].PrevHash)
	}
	seqs := func(es []Entry) []int64 {
		var out []int64
		for _, e := range es {
			out = append(out, e.Seq)
		}
		return out
	}
	tests := []struct {
		name string
		f    Filter
		want []int64
	}{
		{"all", Filter{}, []int64{1, 2, 3, 4, 5}},
		{"user", Filter{User: "alice"}, []int64{1, 3, 4}},
		{"table", Filter{Table: "census"}, []int64{3, 4, 5}},
		{"user and table", Filter{User: "alice", Table: "adult"}, []int64{1, 4}},
		{"since", Filter{Since: times[3]}, []int64{4, 5}},
		{"newest 2", Filter{Limit: 2}, []int64{4, 5}},
		{"newest 2 of bob's", Filter{User: "bob", Limit: 2}, []int64{2, 5}},
		{"nobody", Filter{User: "carol"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			es, err := l.Entries(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if got := seqs(es); len(got) != len(tc.want) || (len(got) > 0 && !equalInts(got, tc.want)) {
				t.Fatalf("seqs = %v, want %v", got, tc.want)
			}
		})
	}
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A charge is committed before Charge returns: a ledger reopened after Close
// (or by another process) has every entry, verifies, and continues the chain.
func TestReopenKeepsEntries(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.sqlite")
	l, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	var last Entry
	for i := 0; i < 5; i++ {
		if last, err = l.Charge(ctx, lapCharge("a", 0.1, "t"), []Limit{userTable("a", "t", 1)}); err != nil {
			t.Fatal(err)
		}
	}
	// A second handle sees the committed entries while the first is open.
	other, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if n := count(t, other); n != 5 {
		t.Fatalf("other handle sees %d entries", n)
	}
	other.Close()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	es, err := l.Entries(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 5 || es[4].Hash != last.Hash || !es[4].Time.Equal(last.Time) {
		t.Fatalf("after reopen: %d entries, last %+v, want %+v", len(es), es[len(es)-1], last)
	}
	mustVerify(t, l)
	e, err := l.Charge(ctx, lapCharge("a", 0.5, "t"), []Limit{userTable("a", "t", 1)})
	if err != nil || e.Seq != 6 || e.PrevHash != last.Hash {
		t.Fatalf("charge after reopen = %+v, %v", e, err)
	}
	var ex *ExceededError
	if _, err := l.Charge(ctx, lapCharge("a", 0.1, "t"), []Limit{userTable("a", "t", 1)}); !errors.As(err, &ex) {
		t.Fatalf("spend survived reopen? err = %v", err)
	}
	mustVerify(t, l)
}

func TestCanceledContext(t *testing.T) { forBackends(t, testCanceledContext) }

func testCanceledContext(t *testing.T, open opener) {
	l := open(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Charge(ctx, lapCharge("a", 0.1, "t"), nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if n := count(t, l); n != 0 {
		t.Fatalf("%d entries", n)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := Open(ctx, ""); err == nil {
		t.Fatal("Open(\"\"): no error")
	}
	if _, err := Open(ctx, filepath.Join(t.TempDir(), "no", "such", "dir", "l.sqlite")); err == nil {
		t.Fatal("Open in a missing directory: no error")
	}
	// Paths with URI-special characters work.
	path := filepath.Join(t.TempDir(), "a ?#%b.sqlite")
	l, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Charge(ctx, lapCharge("a", 0.1, "t"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("ledger not at the given path: %v", err)
	}
}
