package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
)

// reloadCatalog is a catalog over the small source with the given budgets.
func reloadCatalog(src string, total, perUser float64, extra string) string {
	return fmt.Sprintf(`database: demo
sources:
  main: {driver: sqlite, path: %q}
tables:
  people:
    budget: {total: %v, per_user: %v, default_per_query: 0.1}
    reuse_measurements: false
    columns:
      sex: {type: categorical, values: [Female, Male]}
users:
  analyst: {password: analyst, role: analyst}
  auditor: {password: auditor, role: auditor}
%s`, src, total, perUser, extra)
}

// limitEntries are the recorded limit changes, without the first values
// every scope gets at start-up (see initialLimits).
func limitEntries(es []budget.Entry) []budget.LimitChange {
	var out []budget.LimitChange
	for _, e := range es {
		if ch, ok := budget.ParseLimitEntry(e); ok && !ch.Initial() {
			out = append(out, ch)
		}
	}
	return out
}

// Raising a budget in the catalog and reloading: each changed limit becomes
// a "limits" entry on the chain, the engine and the auditor tables use the
// new limits at once, and a catalog edited while no proxy ran is recorded
// at the next start.
func TestReloadRecordsLimits(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := smallSource(t, dir)
	cf := commonFlags{dataDir: dir, config: filepath.Join(dir, "catalog.yaml")}
	write := func(yaml string) {
		t.Helper()
		if err := os.WriteFile(cf.config, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(reloadCatalog(src, 10, 0.3, ""))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	p, err := start(ctx, cf, "127.0.0.1:0", log)
	if err != nil {
		t.Fatal(err)
	}
	go p.front.Start()
	defer p.Close()
	addr := p.front.Addr().String()
	analyst := connect(t, addr, "analyst", "analyst", "")
	auditor := connect(t, addr, "auditor", "auditor", "")
	q := 0
	ask := func() error {
		q++
		var n int64
		return analyst.QueryRow(fmt.Sprintf("SELECT COUNT(*) AS n FROM people WHERE sex = 'Female' LIMIT %d", q+1)).Scan(&n) // distinct queries: a repeat would be re-released for free
	}
	for range 3 {
		if err := ask(); err != nil {
			t.Fatal(err)
		}
	}
	if err := ask(); mysqlCode(err) != 3901 {
		t.Fatalf("4th batch: %v, want 3901", err)
	}

	// Raise the per-user budget to 0.5 and the table's to 12.
	write(reloadCatalog(src, 12, 0.5, ""))
	next, err := catalog.Load(cf.config)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.live.Reload(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changes) != 2 || len(res.Ignored) != 0 {
		t.Fatalf("reload: %+v", res)
	}
	got := limitEntries(entries(t, p))
	want := []budget.LimitChange{
		{Limit: budget.Limit{Scope: budget.ScopeSpace, Space: "people", Epsilon: 12, Delta: 1e-5, MaxDelta: 1e-5}, Previous: budget.Limit{Scope: budget.ScopeSpace, Space: "people", Epsilon: 10, Delta: 1e-5, MaxDelta: 1e-5}},
		{Limit: budget.Limit{Scope: budget.ScopeUserSpace, Space: "people", Epsilon: 0.5, Delta: 1e-5, MaxDelta: 1e-5}, Previous: budget.Limit{Scope: budget.ScopeUserSpace, Space: "people", Epsilon: 0.3, Delta: 1e-5, MaxDelta: 1e-5}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("limit entries %+v, want %+v", got, want)
	}
	// Entries: the first values recorded at start-up, three charges, the two changes.
	if es := entries(t, p); len(es) != 7 || es[5].Kind != budget.KindLimits || es[6].Kind != budget.KindLimits {
		t.Fatalf("ledger: %+v", es)
	}
	var first []budget.LimitChange
	for _, e := range entries(t, p)[:2] {
		if ch, ok := budget.ParseLimitEntry(e); ok && ch.Initial() {
			first = append(first, ch)
		}
	}
	if len(first) != 2 || first[0].Limit.Epsilon != 10 || first[1].Limit.Epsilon != 0.3 {
		t.Fatalf("first values recorded at start-up: %+v", first)
	}
	// The engine uses the new limit: two more batches, then 3901.
	for range 2 {
		if err := ask(); err != nil {
			t.Fatalf("after the reload: %v", err)
		}
	}
	if err := ask(); mysqlCode(err) != 3901 {
		t.Fatalf("6th batch: %v, want 3901", err)
	}
	// So do the audit tables.
	var limit, spent, remaining float64
	if err := auditor.QueryRow("SELECT limit_epsilon, spent_epsilon FROM dpproxy.dp_budgets WHERE scope = 'user_space' AND user_name = 'analyst'").Scan(&limit, &spent); err != nil || limit != 0.5 || !approxEq(spent, 0.5) {
		t.Fatalf("dp_budgets: %g %g %v", limit, spent, err)
	}
	if err := analyst.QueryRow("SELECT limit_epsilon, remaining_epsilon FROM dpproxy.my_budget WHERE table_name = 'people'").Scan(&limit, &remaining); err != nil || limit != 0.5 || remaining > 1e-9 {
		t.Fatalf("my_budget: %g %g %v", limit, remaining, err)
	}
	var n int
	if err := auditor.QueryRow("SELECT COUNT(*) FROM dpproxy.dp_ledger WHERE kind = 'limits' AND strategy LIKE '% epsilon=0.5 %previous_epsilon=0.3%'").Scan(&n); err != nil || n != 1 {
		t.Fatalf("dp_ledger limits rows: %d %v", n, err)
	}

	// Reloading the same file changes nothing; a column change is not
	// applied, and neither is that table's budget.
	if res, err := p.live.Reload(ctx, next); err != nil || len(res.Changes) != 0 || len(res.Ignored) != 0 {
		t.Fatalf("reload without changes: %+v %v", res, err)
	}
	changed, err := catalog.Parse("x.yaml", []byte(strings.Replace(reloadCatalog(src, 20, 1, ""), "[Female, Male]", "[Female, Male, Other]", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := p.live.Reload(ctx, changed); err != nil || len(res.Changes) != 0 || len(res.Ignored) != 1 || !strings.Contains(res.Ignored[0], "people") {
		t.Fatalf("reload with a column change: %+v %v", res, err)
	}
	if code, out, errOut := dpproxyCmd("audit", "list", "--kind", "limits", "--data-dir", dir, "--config", cf.config); code != 0 || strings.Count(out, "limits") != 4 {
		t.Fatalf("audit list --kind limits: exit %d\n%s%s", code, out, errOut)
	}

	// Edited while no proxy runs: recorded when the next one starts.
	p.Close()
	write(reloadCatalog(src, 12, 0.7, ""))
	p2, err := start(ctx, cf, "127.0.0.1:0", log)
	if err != nil {
		t.Fatal(err)
	}
	got = limitEntries(entries(t, p2))
	if len(got) != 3 || got[2].Limit.Epsilon != 0.7 || got[2].Previous.Epsilon != 0.5 || got[2].Limit.Scope != budget.ScopeUserSpace {
		t.Fatalf("limit entries after restart: %+v", got)
	}
	p2.Close()
	if code, out, errOut := dpproxyCmd("audit", "verify", "--data-dir", dir, "--config", cf.config); code != 0 {
		t.Fatalf("audit verify: exit %d\n%s%s", code, out, errOut)
	}
}

// `dpproxy reload` sends SIGHUP to the running proxy process (found by its
// pid file) after checking the catalog; the proxy applies the new budget and
// records it. On SIGTERM the proxy signs the ledger head with the catalog's
// key, which `audit verify` then checks.
func TestReloadCommandSIGHUP(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	src := smallSource(t, dir)
	if code, out, errOut := dpproxyCmd("audit", "keygen", "--out", filepath.Join(dir, "ledger.key")); code != 0 {
		t.Fatalf("keygen: exit %d\n%s%s", code, out, errOut)
	}
	signing := "ledger: {signing_key: ledger.key}\n"
	cfg := writeCatalog(t, dir, reloadCatalog(src, 10, 0.2, signing))
	c := startChild(t, dpproxyBinary(t), "--data-dir", dir, "--config", cfg)
	analyst := connect(t, c.addr, "analyst", "analyst", "")
	q := 0
	ask := func() error {
		q++
		var n int64
		return analyst.QueryRow(fmt.Sprintf("SELECT COUNT(*) AS n FROM people WHERE sex = 'Male' LIMIT %d", q+1)).Scan(&n)
	}
	for range 2 {
		if err := ask(); err != nil {
			t.Fatal(err)
		}
	}
	if err := ask(); mysqlCode(err) != 3901 {
		t.Fatalf("3rd batch: %v, want 3901", err)
	}

	// An invalid catalog is reported and not signalled.
	writeCatalog(t, dir, strings.Replace(reloadCatalog(src, 10, 0.4, signing), "per_user: 0.4", "per_user: -1", 1))
	if code, out, errOut := dpproxyCmd("reload", "--data-dir", dir); code != 1 || !strings.Contains(errOut, "catalog not valid, nothing reloaded") || !strings.Contains(errOut, "per_user") {
		t.Fatalf("reload of an invalid catalog: exit %d\n%s%s", code, out, errOut)
	}

	writeCatalog(t, dir, reloadCatalog(src, 10, 0.4, signing))
	if code, out, errOut := dpproxyCmd("reload", "--data-dir", dir); code != 0 || !strings.Contains(out, "sent SIGHUP") {
		t.Fatalf("reload: exit %d\n%s%s", code, out, errOut)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := limitEntries(ledgerEntries(t, dir))
		if len(got) == 1 {
			if got[0].Limit.Epsilon != 0.4 || got[0].Previous.Epsilon != 0.2 || got[0].Limit.Scope != budget.ScopeUserSpace {
				t.Fatalf("limit entry %+v", got[0])
			}
			break
		}
		if len(got) > 1 || time.Now().After(deadline) {
			t.Fatalf("limit entries %+v\n%s", got, c.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for range 2 {
		if err := ask(); err != nil {
			t.Fatalf("after the reload: %v", err)
		}
	}
	if err := ask(); mysqlCode(err) != 3901 {
		t.Fatalf("5th batch: %v, want 3901", err)
	}

	analyst.Close()
	c.stop()
	if _, err := os.Stat(filepath.Join(dir, "dpproxy.pid")); !os.IsNotExist(err) {
		t.Fatalf("pid file left behind: %v", err)
	}
	if code, out, errOut := dpproxyCmd("reload", "--data-dir", dir); code != 1 || !strings.Contains(errOut, "no running dpproxy") {
		t.Fatalf("reload without a proxy: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := dpproxyCmd("audit", "verify", "--data-dir", dir, "--config", cfg)
	if code != 0 || !strings.Contains(out, "ledger OK: 7 entries") || !strings.Contains(out, "signed heads OK: 1 checked") || !strings.Contains(out, "seq=7 hash=") {
		t.Fatalf("audit verify: exit %d\n%s%s", code, out, errOut)
	}
}

// A dashboard's query is charged once, not once per proxy run: after a
// restart on the same data directory the repeat returns the identical
// stored answer, and the ledger records a zero-cost reuse.
func TestRepeatAfterRestartIsFree(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := smallSource(t, dir)
	cf := commonFlags{dataDir: dir, config: filepath.Join(dir, "catalog.yaml")}
	if err := os.WriteFile(cf.config, []byte(reloadCatalog(src, 10, 1, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	const query = "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex"
	run := func() ([][2]any, []budget.Entry) {
		t.Helper()
		p, err := start(ctx, cf, "127.0.0.1:0", log)
		if err != nil {
			t.Fatal(err)
		}
		go p.front.Start()
		defer p.Close()
		db := connect(t, p.front.Addr().String(), "analyst", "analyst", "")
		rows, err := db.Query(query)
		if err != nil {
			t.Fatal(err)
		}
		var out [][2]any
		for rows.Next() {
			var sex string
			var n int64
			if err := rows.Scan(&sex, &n); err != nil {
				t.Fatal(err)
			}
			out = append(out, [2]any{sex, n})
		}
		rows.Close()
		db.Close()
		return out, charges(entries(t, p))
	}
	first, _ := run()
	second, es := run()
	if fmt.Sprint(first) != fmt.Sprint(second) || len(first) != 2 {
		t.Fatalf("after a restart: %v, first run %v", second, first)
	}
	if len(es) != 2 || es[0].Kind != budget.KindCharge || es[1].Kind != budget.KindReuse || !es[1].Cost.IsZero() {
		t.Fatalf("ledger: %+v", es)
	}
	if code, out, errOut := dpproxyCmd("audit", "verify", "--data-dir", dir, "--config", cf.config); code != 0 {
		t.Fatalf("audit verify: exit %d\n%s%s", code, out, errOut)
	}
}
