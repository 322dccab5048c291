package main

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/budget"
)

// dashboardMix is a dashboard of five DP queries, as mysqlslap replayed it
// in issue 10 (5 charges at concurrency 1, 40 at 8, 320 at 64 before
// single flight).
var dashboardMix = []string{
	"SELECT COUNT(*) FROM visits WHERE age BETWEEN 33 AND 47",
	"SELECT edu, COUNT(*) AS n FROM visits GROUP BY edu ORDER BY n DESC",
	"SELECT edu FROM visits GROUP BY edu ORDER BY COUNT(*) DESC LIMIT 2",
	"SELECT sex, AVG(hours) FROM visits GROUP BY sex",
	"SELECT COUNT(*) FROM visits WHERE hours >= 41 AND edu IN ('BA', 'MA')",
}

// dashCatalog is a small table for the dashboard (SQLite under the race
// detector is slow; these tests are about charges, not histograms), with a
// budget that never runs out.
func dashCatalog(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "visits.sqlite")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE visits (age INTEGER, sex TEXT, edu TEXT, hours INTEGER)"); err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for range 2000 {
		if _, err := tx.Exec("INSERT INTO visits VALUES (?, ?, ?, ?)", 17+rnd.IntN(74), []string{"F", "M"}[rnd.IntN(2)],
			[]string{"HS", "BA", "MA", "PhD", "None"}[rnd.IntN(5)], 1+rnd.IntN(99)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`database: demo
sources:
  main: {driver: sqlite, path: %q}
tables:
  visits:
    budget: {total: 1000000, per_user: 1000000, default_per_query: 0.1}
    columns:
      age: {type: integer, min: 17, max: 90}
      sex: {type: categorical, values: [F, M]}
      edu: {type: categorical, values: [HS, BA, MA, PhD, None]}
      hours: {type: integer, min: 1, max: 99, width: 10}
users:
  analyst: {password: analyst, role: analyst}
`, path)
}

// runDashboard sends the whole mix, in order, on every connection at once
// (as mysqlslap --concurrency does) and returns each query's answers, one
// rendering per connection.
func runDashboard(t *testing.T, ctx context.Context, conns []*sql.Conn) [][]string {
	t.Helper()
	got := make([][]string, len(dashboardMix))
	for q := range got {
		got[q] = make([]string, len(conns))
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for c, conn := range conns {
		wg.Go(func() {
			<-start
			for q := range dashboardMix {
				s, err := render(ctx, conn, dashboardMix[q])
				if err != nil {
					t.Errorf("connection %d, %s: %v", c, dashboardMix[q], err)
					return
				}
				got[q][c] = s
			}
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return got
}

// render runs a query and writes its result set as text.
func render(ctx context.Context, conn *sql.Conn, q string) (string, error) {
	rows, err := conn.QueryContext(ctx, q)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return "", err
		}
		for _, v := range vals {
			fmt.Fprintf(&b, "%s|", v)
		}
		b.WriteString("\n")
	}
	return b.String(), rows.Err()
}

// checkDashboard asserts one answer per query across connections and one
// charge per query in the ledger entries es.
func checkDashboard(t *testing.T, got [][]string, es []budget.Entry) int {
	t.Helper()
	for q, answers := range got {
		for c, a := range answers {
			if a != answers[0] {
				t.Fatalf("%s: connection %d got\n%s\nconnection 0 got\n%s", dashboardMix[q], c, a, answers[0])
			}
		}
	}
	n := 0
	for _, e := range es {
		if e.Kind == budget.KindCharge {
			n++
		}
	}
	if n != len(dashboardMix) {
		t.Fatalf("%d charges for %d distinct batches", n, len(dashboardMix))
	}
	return n
}

// Concurrent first requests of one batch are charged once and answered
// alike, at any concurrency, through the Go driver against a real proxy.
// The log line of each level is the figure the issue asks for:
//
//	go test -run TestSingleFlightDashboard -v ./cmd/dpproxy
func TestSingleFlightDashboard(t *testing.T) {
	for _, n := range []int{1, 8, 64} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			p, addr := startProxy(t, dashCatalog(t, t.TempDir()))
			conns := openConns(t, ctx, addr, n)
			got := runDashboard(t, ctx, conns)
			charged := checkDashboard(t, got, entries(t, p))
			if err := p.ledger.Verify(ctx); err != nil {
				t.Fatal(err)
			}
			t.Logf("concurrency %d: %d connections × %d queries, %d charges", n, n, len(dashboardMix), charged)
		})
	}
}

// The same with two proxy processes on one data directory, 32 connections
// each: the answers file arbitrates between them.
func TestSingleFlightDashboardTwoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	cfg := writeCatalog(t, dir, dashCatalog(t, dir))
	bin := dpproxyBinary(t)
	a := startChild(t, bin, "--data-dir", dir, "--config", cfg)
	b := startChild(t, bin, "--data-dir", dir, "--config", cfg)
	conns := append(openConns(t, ctx, a.addr, 32), openConns(t, ctx, b.addr, 32)...)
	got := runDashboard(t, ctx, conns)
	for _, c := range conns {
		c.Close()
	}
	a.stop()
	b.stop()
	charged := checkDashboard(t, got, ledgerEntries(t, dir))
	if code, out, errOut := dpproxyCmd("audit", "verify", "--data-dir", dir, "--config", cfg); code != 0 {
		t.Fatalf("audit verify: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("two processes, 64 connections × %d queries: %d charges", len(dashboardMix), charged)
}
