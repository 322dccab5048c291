package budget

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// fillQueryLedger charges analyst and bob on adult and census, with a reuse
// and a limits entry, and returns the ledger.
func fillQueryLedger(t *testing.T) (*Ledger, string) {
	t.Helper()
	l, path := openTest(t)
	fillQuery(t, l)
	return l, path
}

// fillQueryLedgerWith is fillQueryLedger on a ledger of the given backend.
func fillQueryLedgerWith(t *testing.T, open opener) *Ledger {
	t.Helper()
	l := open(t)
	fillQuery(t, l)
	return l
}

func fillQuery(t *testing.T, l *Ledger) {
	t.Helper()
	ctx := context.Background()
	if _, err := l.RecordLimits(ctx, []Limit{tableLimit("adult", 10)}, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		u := "analyst"
		if i%3 == 0 {
			u = "bob"
		}
		tb := "adult"
		if i%4 == 0 {
			tb = "census"
		}
		if _, err := l.Charge(ctx, lapCharge(u, 0.25, tb), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Record(ctx, KindReuse, Charge{User: "analyst", Tables: []string{"adult"}, Mechanism: "reuse", Strategy: "stored answer"}); err != nil {
		t.Fatal(err)
	}
}

func TestPage(t *testing.T) { forBackends(t, testPage) }

func testPage(t *testing.T, open opener) {
	ctx := context.Background()
	l := fillQueryLedgerWith(t, open)
	all, err := l.Entries(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	seqs := func(es []Entry) []int64 {
		var out []int64
		for _, e := range es {
			out = append(out, e.Seq)
		}
		return out
	}
	// Paging through everything, 5 at a time, newest first, gives every entry once.
	var got []int64
	q := Query{Limit: 5, Count: true}
	for pages := 0; ; pages++ {
		p, err := l.Page(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if p.Total != int64(len(all)) {
			t.Fatalf("Total = %d, want %d", p.Total, len(all))
		}
		got = append(got, seqs(p.Entries)...)
		if p.Next == 0 {
			break
		}
		q.Before = p.Next
	}
	want := seqs(all)
	slices.Reverse(want)
	if !slices.Equal(got, want) {
		t.Fatalf("pages = %v, want %v", got, want)
	}

	for _, tc := range []struct {
		name string
		q    Query
		keep func(Entry) bool
	}{
		{"user", Query{User: "bob"}, func(e Entry) bool { return e.User == "bob" }},
		{"table", Query{Table: "census"}, func(e Entry) bool { return slices.Contains(e.Tables, "census") }},
		{"kind", Query{Kind: KindReuse}, func(e Entry) bool { return e.Kind == KindReuse }},
		{"since", Query{Since: all[5].Time}, func(e Entry) bool { return !e.Time.Before(all[5].Time) }},
		{"until", Query{Until: all[5].Time}, func(e Entry) bool { return e.Time.Before(all[5].Time) }},
		{"user and table", Query{User: "analyst", Table: "adult", Kind: KindCharge}, func(e Entry) bool {
			return e.User == "analyst" && slices.Contains(e.Tables, "adult") && e.Kind == KindCharge
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.q.Count = true
			p, err := l.Page(ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			var want []int64
			for i := len(all) - 1; i >= 0; i-- {
				if tc.keep(all[i]) {
					want = append(want, all[i].Seq)
				}
			}
			if !slices.Equal(seqs(p.Entries), want) || p.Total != int64(len(want)) || p.Next != 0 {
				t.Fatalf("page = %v (total %d, next %d), want %v", seqs(p.Entries), p.Total, p.Next, want)
			}
		})
	}
	p, err := l.Page(ctx, Query{})
	if err != nil || p.Total != -1 {
		t.Fatalf("without Count: total %d, err %v", p.Total, err)
	}
}

func TestSpending(t *testing.T) { forBackends(t, testSpending) }

func testSpending(t *testing.T, open opener) {
	ctx := context.Background()
	l := fillQueryLedgerWith(t, open)
	s, err := l.Spending(ctx, SeriesQuery{Table: "adult"})
	if err != nil {
		t.Fatal(err)
	}
	// All charges fall within a second or so: millisecond buckets.
	if s.Width > 100*time.Millisecond || s.From.IsZero() || s.To.Before(s.From) {
		t.Fatalf("series span %v..%v width %v", s.From, s.To, s.Width)
	}
	sum := map[string]Cost{}
	var n int64
	for _, p := range s.Points {
		sum[p.User] = sum[p.User].Add(p.Cost)
		n += p.Charges
		if p.Start.Before(s.From) || p.Start.After(s.To) {
			t.Errorf("bucket %v outside %v..%v", p.Start, s.From, s.To)
		}
	}
	for _, u := range []string{"analyst", "bob"} {
		want, err := l.Spent(ctx, u, "adult")
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(sum[u].Epsilon-want.Epsilon) > 1e-12 {
			t.Errorf("%s: series sums to ε=%g, spent ε=%g", u, sum[u].Epsilon, want.Epsilon)
		}
	}
	// Each charge is in the bucket its time (to the millisecond) falls in.
	es, err := l.Entries(ctx, Filter{Table: "adult"})
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		start time.Time
		user  string
	}
	want := map[key]Cost{}
	for _, e := range es {
		if e.Kind != KindCharge {
			continue
		}
		b := s.From.Add(e.Time.Truncate(time.Millisecond).Sub(s.From) / s.Width * s.Width)
		want[key{b, e.User}] = want[key{b, e.User}].Add(e.Cost)
	}
	if len(want) != len(s.Points) {
		t.Fatalf("%d buckets, want %d", len(s.Points), len(want))
	}
	for _, p := range s.Points {
		if w := want[key{p.Start, p.User}]; math.Abs(w.Epsilon-p.Cost.Epsilon) > 1e-12 {
			t.Errorf("bucket %v %s: ε=%g, want %g", p.Start, p.User, p.Cost.Epsilon, w.Epsilon)
		}
	}
	if n != 7 { // i = 1,2,3,5,6,7,9
		t.Errorf("%d charges in the series, want 7", n)
	}
	s, err = l.Spending(ctx, SeriesQuery{Table: "adult", User: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range s.Points {
		if p.User != "bob" {
			t.Errorf("user filter: point of %s", p.User)
		}
	}
	s, err = l.Spending(ctx, SeriesQuery{Table: "nosuch"})
	if err != nil || len(s.Points) != 0 || !s.From.IsZero() {
		t.Fatalf("no charges: %+v, %v", s, err)
	}
	if _, err := l.Spending(ctx, SeriesQuery{}); err == nil {
		t.Fatal("no table: no error")
	}
}

func TestSpentRowsMatchBudgets(t *testing.T) { forBackends(t, testSpentRowsMatchBudgets) }

func testSpentRowsMatchBudgets(t *testing.T, open opener) {
	ctx := context.Background()
	l := fillQueryLedgerWith(t, open)
	a, err := l.SpentRows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Budgets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a, b) {
		t.Fatalf("SpentRows = %v\nBudgets = %v", a, b)
	}
	seq, hash, err := l.Head(ctx)
	if err != nil || seq != 12 || len(hash) != 64 {
		t.Fatalf("Head = %d %q %v", seq, hash, err)
	}
}

func TestOpenReadOnly(t *testing.T) {
	ctx := context.Background()
	l, path := fillQueryLedger(t)
	l.Close() // no writer: the -wal and -shm files are gone
	ro, err := OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if !ro.ReadOnly() {
		t.Fatal("ReadOnly() = false")
	}
	if n := count(t, ro); n != 12 {
		t.Fatalf("%d entries, want 12", n)
	}
	mustVerify(t, ro)
	if _, err := ro.Charge(ctx, lapCharge("analyst", 0.1, "adult"), nil); !errors.Is(err, errReadOnly) {
		t.Fatalf("Charge on a read-only ledger: %v", err)
	}
	if _, err := ro.Record(ctx, KindReuse, Charge{User: "analyst"}); !errors.Is(err, errReadOnly) {
		t.Fatalf("Record on a read-only ledger: %v", err)
	}
	if _, err := ro.RecordLimits(ctx, []Limit{tableLimit("adult", 1)}, nil); !errors.Is(err, errReadOnly) {
		t.Fatalf("RecordLimits on a read-only ledger: %v", err)
	}
	// Even SQL through its connection cannot write: SQLite has the file read-only.
	if _, err := ro.db.ExecContext(ctx, "DELETE FROM entries"); err == nil {
		t.Fatal("DELETE through the read-only connection succeeded")
	}

	// A writer in the same process appends; the reader sees it.
	w, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Charge(ctx, lapCharge("bob", 0.1, "adult"), nil); err != nil {
		t.Fatal(err)
	}
	if n := count(t, ro); n != 13 {
		t.Fatalf("after a write: %d entries, want 13", n)
	}

	if _, err := OpenReadOnly(ctx, filepath.Join(t.TempDir(), "none.sqlite")); err == nil {
		t.Fatal("OpenReadOnly of a missing file: no error")
	}
	other := filepath.Join(t.TempDir(), "other.sqlite")
	db, err := sql.Open("sqlite", other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE x (a)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := OpenReadOnly(ctx, other); err == nil {
		t.Fatal("OpenReadOnly of a database that is not a ledger: no error")
	}
}

func TestReport(t *testing.T) {
	ctx := context.Background()
	l, path := fillQueryLedger(t)
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	heads := filepath.Join(t.TempDir(), "ledger.heads")
	r, err := l.Report(ctx, nil, pub, heads)
	if err != nil || !r.OK || !r.ChainIntact || !r.WithinLimits || r.Entries != 12 || r.Heads == nil || r.Heads.Found {
		t.Fatalf("fresh ledger, no heads file: %+v %+v, %v", r, r.Heads, err)
	}
	if _, err := l.AppendSignedHead(ctx, priv, heads); err != nil {
		t.Fatal(err)
	}
	r, err = l.Report(ctx, nil, pub, heads)
	if err != nil || !r.OK || r.Heads.Checked != 1 || !r.Heads.OK {
		t.Fatalf("signed: %+v %+v, %v", r, r.Heads, err)
	}
	// A limit lower than the spend: entry over it. (Charges given no space
	// spend in their table's, and are checked against the space scopes.)
	r, err = l.Report(ctx, []Limit{{Scope: ScopeSpace, Space: "census", Epsilon: 0.3}}, nil, "")
	if err != nil || r.OK || !r.ChainIntact || r.WithinLimits || r.BadSeq == 0 {
		t.Fatalf("over a limit: %+v, %v", r, err)
	}
	// Tamper with entry 4 behind the ledger's back.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("UPDATE entries SET epsilon = 0.01 WHERE seq = 4"); err != nil {
		t.Fatal(err)
	}
	r, err = l.Report(ctx, nil, pub, heads)
	if err != nil || r.OK || r.ChainIntact || r.BadSeq != 4 || r.Problem == "" {
		t.Fatalf("tampered: %+v, %v", r, err)
	}
}

// A series built incrementally (fine buckets, then only the entries after
// its LastSeq, merged and coarsened) equals the series summed at once.
func TestSpendingIncremental(t *testing.T) { forBackends(t, testSpendingIncremental) }

func testSpendingIncremental(t *testing.T, open opener) {
	ctx := context.Background()
	l := fillQueryLedgerWith(t, open)
	fine, err := l.Spending(ctx, SeriesQuery{Table: "adult", Width: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if fine.LastSeq != 12 || fine.Width != time.Millisecond {
		t.Fatalf("fine series: last seq %d width %v", fine.LastSeq, fine.Width)
	}
	for range 3 {
		if _, err := l.Charge(ctx, lapCharge("carol", 0.5, "adult"), nil); err != nil {
			t.Fatal(err)
		}
	}
	delta, err := l.Spending(ctx, SeriesQuery{Table: "adult", Width: time.Millisecond, AfterSeq: fine.LastSeq})
	if err != nil {
		t.Fatal(err)
	}
	if delta.LastSeq != 15 || len(delta.Points) == 0 {
		t.Fatalf("delta: %+v", delta)
	}
	for _, p := range delta.Points {
		if p.User != "carol" {
			t.Fatalf("delta has an old entry of %s", p.User)
		}
	}
	merged := fine
	merged.Points = append(slices.Clone(fine.Points), delta.Points...)
	merged.To, merged.LastSeq = delta.To, delta.LastSeq
	got := Coarsen(merged, 120)
	want, err := l.Spending(ctx, SeriesQuery{Table: "adult", Buckets: 120})
	if err != nil {
		t.Fatal(err)
	}
	if got.Width != want.Width || !got.From.Equal(want.From) || len(got.Points) != len(want.Points) || got.LastSeq != want.LastSeq {
		t.Fatalf("incremental %v %v %d points, at once %v %v %d points", got.Width, got.From, len(got.Points), want.Width, want.From, len(want.Points))
	}
	for i := range got.Points {
		g, w := got.Points[i], want.Points[i]
		if !g.Start.Equal(w.Start) || g.User != w.User || g.Charges != w.Charges || math.Abs(g.Cost.Epsilon-w.Cost.Epsilon) > 1e-12 {
			t.Errorf("point %d: %+v, want %+v", i, g, w)
		}
	}
	if c := Coarsen(Series{Table: "x", Width: time.Second}, 0); len(c.Points) != 0 || c.Width != time.Second {
		t.Errorf("Coarsen of nothing: %+v", c)
	}
}
