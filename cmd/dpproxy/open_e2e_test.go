package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
)

// openDemoYAML is the demo catalog with adult.occupation declared open
// (type: text, no list of values) and δ budgets on adult.
func openDemoYAML(t *testing.T) string {
	t.Helper()
	y := string(catalog.DemoYAML())
	i := strings.Index(y, "      occupation:\n")
	j := strings.Index(y, "      race:\n")
	if i < 0 || j < i {
		t.Fatal("the demo catalog's adult.occupation moved")
	}
	y = y[:i] + "      occupation: {type: text}\n" + y[j:]
	old := "budget: {total: 100, per_user: 20, default_per_query: 0.1, max_per_query: 2}"
	if !strings.Contains(y, old) {
		t.Fatal("the demo catalog's adult budget changed")
	}
	return strings.Replace(y, old, "budget: {total: 100, per_user: 20, default_per_query: 0.1, max_per_query: 2, delta: 1e-5, delta_per_query: 1e-6}", 1)
}

// An open column over the wire: the Go driver and the mysql CLI group by
// it (EXPLAIN first, then a selection charged with @dp_delta, then the
// released keys reused for free after the proxy restarts), list its keys,
// match it with LIKE; my_budget shows the δ spent, and `audit verify`
// recomputes it from the ledger.
func TestEndToEndOpenColumn(t *testing.T) {
	bin := mysqlCLI(t)
	p, addr := startProxy(t, openDemoYAML(t))
	ctx := context.Background()
	conn, err := connect(t, addr, "analyst", "analyst", "").Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	props := map[string]string{}
	rows, err := conn.QueryContext(ctx, "EXPLAIN SELECT occupation, COUNT(*) FROM adult GROUP BY occupation")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		props[k] = v
	}
	rows.Close()
	if props["mechanism"] != "truncated_geometric" || props["selection delta"] != "1e-06" || props["units for 99% release"] == "" {
		t.Fatalf("EXPLAIN: %v", props)
	}
	if n := len(charges(entries(t, p))); n != 0 {
		t.Fatalf("EXPLAIN charged %d entries", n)
	}

	if _, err := conn.ExecContext(ctx, "SET @dp_delta = 2e-6"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "SET @dp_epsilon = 1"); err != nil {
		t.Fatal(err)
	}
	rows, err = conn.QueryContext(ctx, "SELECT occupation, COUNT(*) AS n FROM adult GROUP BY occupation ORDER BY occupation")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for rows.Next() {
		var k string
		var n float64
		if err := rows.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	rows.Close()
	if len(keys) < 10 {
		t.Fatalf("%d occupations released from 30,000 rows", len(keys))
	}
	es := charges(entries(t, p))
	if len(es) != 2 || es[0].Cost.Delta != 2e-6 || es[0].Mechanism != "truncated_geometric" || es[1].Cost.Delta != 0 {
		t.Fatalf("ledger %+v, want a selection at δ=2e-6 and a measurement", es)
	}

	// LIKE: evaluated by the pushed-down histogram, no δ.
	var n float64
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM adult WHERE occupation LIKE '%-%'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	within(t, "LIKE '%-%'", n, truth(t, "SELECT COUNT(*) FROM adult WHERE occupation GLOB '*-*'"), 1/0.5*1.5)

	var spentDelta, remDelta, limDelta, perQuery float64
	if err := conn.QueryRowContext(ctx, "SELECT delta, spent_delta, remaining_delta, delta_per_query FROM dpproxy.my_budget WHERE table_name = 'adult'").Scan(&limDelta, &spentDelta, &remDelta, &perQuery); err != nil {
		t.Fatal(err)
	}
	if limDelta != 1e-5 || !approxEq(spentDelta, 2e-6) || !approxEq(remDelta, 8e-6) || perQuery != 1e-6 {
		t.Fatalf("my_budget δ: limit %g, spent %g, remaining %g, per query %g", limDelta, spentDelta, remDelta, perQuery)
	}
	conn.Close()

	// The mysql CLI, after a restart over the same data directory: the
	// released keys are listed and grouped by with no new selection.
	dataDir := filepath.Dir(p.ledger.Path())
	cf := commonFlags{dataDir: dataDir, config: filepath.Join(dataDir, "catalog.yaml")}
	p.Close()
	p2, err := start(ctx, cf, "127.0.0.1:0", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	go p2.front.Start()
	defer p2.Close()
	host, port := splitHostPort(p2.front.Addr().String())
	out, err := runCLI(bin, host, port, "SELECT occupation FROM adult GROUP BY occupation ORDER BY occupation")
	if err != nil || strings.Join(strings.Split(strings.TrimSpace(out), "\n")[1:], ",") != strings.Join(keys, ",") {
		t.Fatalf("domain list over the CLI: %v\n%s\nwant %v", err, out, keys)
	}
	out, err = runCLI(bin, host, port, "SET @dp_epsilon = 1; EXPLAIN SELECT occupation, AVG(age) FROM adult GROUP BY occupation; SELECT occupation, AVG(age) FROM adult GROUP BY occupation")
	if err != nil || strings.Contains(out, "partition selection") || strings.Count(out, "\n") < len(keys)+3 {
		t.Fatalf("CLI after restart: %v\n%s", err, out)
	}
	out, err = runCLI(bin, host, port, "SELECT table_name, delta, spent_delta, remaining_delta, delta_per_query FROM dpproxy.my_budget WHERE table_name = 'adult'")
	if err != nil || !strings.Contains(out, "adult\t1e-05\t2e-06\t8.0000000") && !strings.Contains(out, "adult\t1e-05\t2e-06\t8e-06") {
		t.Fatalf("my_budget over the CLI: %v\n%s", err, out)
	}
	es = charges(entries(t, p2))
	sel := 0
	for _, e := range es {
		if e.Cost.Delta > 0 {
			sel++
		}
	}
	if sel != 1 {
		t.Fatalf("%d selections in the ledger after the restart, want 1: %+v", sel, es)
	}
	p2.Close()

	code, stdout, stderr := dpproxyCmd("audit", "verify", "--data-dir", dataDir, "--config", cf.config)
	if code != 0 || !strings.Contains(stdout, "ledger OK") {
		t.Fatalf("audit verify: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = dpproxyCmd("audit", "budgets", "--data-dir", dataDir, "--config", cf.config)
	if code != 0 || !strings.Contains(stdout, "SPENT_DELTA") || !strings.Contains(stdout, "2e-06") {
		t.Fatalf("audit budgets shows no δ spent: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = dpproxyCmd("audit", "list", "--data-dir", dataDir, "--config", cf.config)
	if code != 0 || !strings.Contains(stdout, "\tDELTA") && !strings.Contains(stdout, " DELTA ") || !strings.Contains(stdout, "truncated_geometric") {
		t.Fatalf("audit list shows no δ: exit %d\n%s%s", code, stdout, stderr)
	}
}
