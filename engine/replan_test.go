package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/measure"
)

// replanStatements are the statements replan batches draw from: counts,
// sums and averages, filters, groups over one and two columns.
var replanStatements = []string{
	"SELECT COUNT(*) FROM adult WHERE sex = 'Female'",
	"SELECT sex, COUNT(*) FROM adult GROUP BY sex",
	"SELECT education, COUNT(*) FROM adult GROUP BY education",
	"SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 50",
	"SELECT occupation, sex, COUNT(*) FROM adult GROUP BY occupation, sex",
	"SELECT AVG(hours_per_week) FROM adult WHERE age > 40",
	"SELECT age, COUNT(*) FROM adult GROUP BY age",
	"SELECT SUM(hours_per_week) FROM adult WHERE education = 'Bachelors'",
}

// replanOptions are the session options replan batches run at.
var replanOptions = []map[string]any{
	nil,
	{VarEpsilon: 0.37},
	{VarEpsilon: "1.25"},
	{VarMaxStderr: 30.0},
}

// TestReplanMatchesRecordedDigest: for batches drawn from replanStatements
// at replanOptions, each charge's strategy text carries the plan's digest,
// and an engine with the catalog alone (no data, as `audit verify
// --replan` builds it) re-plans the batch from its replay record to the
// same digest and the entry's query digest. A later batch planned with the
// stored measurements is reported as not re-derivable.
func TestReplanMatchesRecordedDigest(t *testing.T) {
	ctx := context.Background()
	const trials = 8
	for trial := range trials {
		f := newFixture(t)
		n := 1 + trial%3
		var stmts []string
		for k := range n {
			stmts = append(stmts, replanStatements[(trial*5+k*3)%len(replanStatements)])
		}
		s := session("analyst", replanOptions[trial%len(replanOptions)])
		if _, err := f.eng.Answer(ctx, s, stmts); err != nil {
			t.Fatalf("trial %d %q: %v", trial, stmts, err)
		}
		es := f.entries(t)
		e := es[len(es)-1]
		checkReplan(t, f, e, stmts)
	}
}

// TestReplanWithStoredMeasurements: a batch combined with stored
// measurements was planned with the store; its replay record names the
// measurements stored then, and an engine with the catalog and the
// measurement store (no data, as `audit verify --replan` builds it)
// re-decides it to the recorded digest. Without the store, or with a
// measurement the record names since forgotten, it is reported as not
// re-derivable rather than as a mismatch.
func TestReplanWithStoredMeasurements(t *testing.T) {
	ctx := context.Background()
	f := newFixtureCatalog(t, wholeCatalog)
	s := session("analyst", map[string]any{VarEpsilon: 1.0})
	f.answer(t, s, "SELECT age, COUNT(*) FROM adult GROUP BY age")
	f.answer(t, s, "SELECT sex, COUNT(*) FROM adult GROUP BY sex")
	f.answer(t, s, "SELECT age, sex, COUNT(*) FROM adult GROUP BY age, sex")
	es := f.entries(t)
	last := es[len(es)-1]
	if last.Kind != budget.KindCharge || !strings.Contains(last.Strategy, "answered with") || !strings.Contains(last.Strategy, strategyDigestPrefix) {
		t.Fatalf("third batch: %s %q, want a combined charge with its plan's digest", last.Kind, last.Strategy)
	}
	recorded, _ := RecordedPlanDigest(last.Strategy)
	r, err := f.eng.measures.Replay(ctx, last.Seq)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Reused || len(r.Stored) != 2 {
		t.Fatalf("combined charge %d: reused %v, stored %v, want the 2 measurements stored before it", last.Seq, r.Reused, r.Stored)
	}
	auditor := New(Config{Catalog: f.cfg.Catalog, Ledger: f.ledger, Logger: f.cfg.Logger, Measurements: f.eng.measures})
	got, _, err := auditor.ReplanDigest(ctx, r)
	if err != nil || got != recorded {
		t.Fatalf("combined charge %d re-decided: digest %s, %v; recorded %s", last.Seq, got, err, recorded)
	}
	// Planned without the store, the batch's plan is another one: the
	// record's measurements are what made it.
	if alone, _, err := auditor.ReplanDigest(ctx, measure.Replay{LedgerSeq: r.LedgerSeq, Table: r.Table, User: r.User, Texts: r.Texts, Options: r.Options}); err != nil || alone == recorded {
		t.Errorf("re-planned without the stored measurements: digest %s, %v; want a digest other than %s", alone, err, recorded)
	}
	if _, _, err := New(Config{Catalog: f.cfg.Catalog, Ledger: f.ledger}).ReplanDigest(ctx, r); !errors.Is(err, ErrNotRederivable) {
		t.Errorf("without a measurement store: %v, want ErrNotRederivable", err)
	}
	forgot := r
	forgot.Stored = append(append([]int64{}, r.Stored...), 1<<40)
	if _, _, err := auditor.ReplanDigest(ctx, forgot); !errors.Is(err, ErrNotRederivable) || !strings.Contains(err.Error(), "forgotten") {
		t.Errorf("a measurement since forgotten: %v, want ErrNotRederivable naming it", err)
	}
}

// checkReplan compares entry e's recorded digests with a fresh re-plan.
func checkReplan(t *testing.T, f *fixture, e budget.Entry, stmts []string) {
	t.Helper()
	ctx := context.Background()
	if e.Kind != budget.KindCharge {
		t.Fatalf("%q: last entry is a %s", stmts, e.Kind)
	}
	i := strings.LastIndex(e.Strategy, strategyDigestPrefix)
	if i < 0 || len(e.Strategy)-i-len(strategyDigestPrefix) != 64 {
		t.Fatalf("%q: strategy %q has no plan digest", stmts, e.Strategy)
	}
	recorded := e.Strategy[i+len(strategyDigestPrefix):]
	r, err := f.eng.measures.Replay(ctx, e.Seq)
	if err != nil {
		t.Fatal(err)
	}
	if r.Reused {
		t.Fatalf("%q: the first batch of a fresh engine recorded as planned with stored measurements", stmts)
	}
	fresh := New(Config{Catalog: f.cfg.Catalog, Ledger: f.ledger, Logger: f.cfg.Logger})
	got, query, err := fresh.ReplanDigest(ctx, r)
	if err != nil {
		t.Fatalf("%q: replan: %v", stmts, err)
	}
	if got != recorded {
		t.Errorf("%q at %v: re-planned digest %s, recorded %s", stmts, r.Options, got, recorded)
	}
	if query != e.QueryDigest {
		t.Errorf("%q: re-parsed query digest %s, entry's %s", stmts, query, e.QueryDigest)
	}
}

// TestReplanAfterDefaultChanged: a batch run at the catalog's default ε
// (on a Gaussian table, the ρ of the default ε) records that value, so it
// re-plans to the same digest after the default changed; at a session ε
// it re-plans likewise on the Gaussian table.
func TestReplanAfterDefaultChanged(t *testing.T) {
	ctx := context.Background()
	f := newFixtureCatalog(t, gaussCatalog)
	changed, err := catalog.Parse("changed.yaml", []byte(strings.ReplaceAll(gaussCatalog, "default_per_query: 0.1", "default_per_query: 0.7")))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		sql  string
		vars map[string]any
	}{
		{"SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 40", nil},
		{"SELECT age, sex, COUNT(*) FROM gauss WHERE hours_per_week > 40 GROUP BY age, sex", nil},
		{"SELECT sex, AVG(hours_per_week) FROM gauss GROUP BY sex", map[string]any{VarEpsilon: 0.9}},
	} {
		f.answer(t, session("analyst", c.vars), c.sql)
		es := f.entries(t)
		e := es[len(es)-1]
		checkReplan(t, f, e, []string{c.sql})
		recorded, _ := RecordedPlanDigest(e.Strategy)
		r, err := f.eng.measures.Replay(ctx, e.Seq)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := New(Config{Catalog: changed, Ledger: f.ledger, Logger: f.cfg.Logger}).ReplanDigest(ctx, r)
		if err != nil || got != recorded {
			t.Errorf("%s after the default changed: %s, %v; recorded %s (options %v)", c.sql, got, err, recorded, r.Options)
		}
	}
}
