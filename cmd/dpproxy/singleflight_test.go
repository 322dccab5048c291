package main

import (
	"context"
	"database/sql"
	"fmt"
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
	"SELECT COUNT(*) FROM adult WHERE age BETWEEN 33 AND 47",
	"SELECT education, COUNT(*) AS n FROM adult GROUP BY education ORDER BY n DESC",
	"SELECT occupation FROM adult GROUP BY occupation ORDER BY COUNT(*) DESC LIMIT 3",
	"SELECT occupation, AVG(hours_per_week) FROM adult GROUP BY occupation",
	"SELECT COUNT(*) FROM adult WHERE hours_per_week >= 40 AND education IN ('Bachelors', 'Masters')",
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
			p, addr := startProxy(t, benchCatalog) // budgets that never run out
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
	cfg := writeCatalog(t, dir, benchCatalog)
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
