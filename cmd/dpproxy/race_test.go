package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/budget"
)

const (
	raceReps  = 20 // repetitions, one fresh table budget each
	raceConns = 64 // concurrent connections per repetition
)

// smallSource writes a SQLite file with a 200-row table people(sex) into
// dir. The race and crash tests use it instead of the 50,000-row demo
// table: SQLite (pure Go) is slow under the race detector, and they test
// the ledger, not the histograms.
func smallSource(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "small.sqlite")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE people (sex TEXT)"); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if _, err := db.Exec("INSERT INTO people VALUES (?)", []string{"Female", "Male"}[i%3%2]); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// raceCatalog declares n tables r00, r01, ... over the table people of the
// SQLite file src, each with a budget that allows exactly ten batches at the
// default ε of 0.1 (per user and in total).
func raceCatalog(src string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "database: demo\nsources:\n  main: {driver: sqlite, path: %q}\ntables:\n", src)
	for i := range n {
		fmt.Fprintf(&b, `  r%02d:
    source_table: people
    budget: {total: 1, per_user: 1, default_per_query: 0.1}
    reuse_measurements: false  # every batch is measured: the race is for the budget
    columns:
      sex: {type: categorical, values: [Female, Male]}
`, i)
	}
	b.WriteString("users:\n  analyst: {password: analyst, role: analyst}\n  auditor: {password: auditor, role: auditor}\n")
	return b.String()
}

// race sends one batch on every connection at once, each a different query
// text (so that no stored answer can be re-released) on table, and counts
// the answers and the budget refusals (3901). The domain is tiny, so that
// the time goes to the race, not to planning.
func race(t *testing.T, ctx context.Context, conns []*sql.Conn, table string) (won, refused int) {
	t.Helper()
	start := make(chan struct{})
	var mu sync.Mutex
	var other []error
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			<-start
			var n int64
			err := c.QueryRowContext(ctx, fmt.Sprintf("SELECT COUNT(*) AS n FROM %s WHERE sex = 'Male' LIMIT %d", table, i+1)).Scan(&n)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case mysqlCode(err) == 3901:
				refused++
			default:
				other = append(other, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(other) > 0 {
		t.Fatalf("%s: %d unexpected errors, e.g. %v", table, len(other), other[0])
	}
	return won, refused
}

func checkRaceLedger(t *testing.T, es []budget.Entry, table string) {
	t.Helper()
	n := 0
	for _, e := range es {
		if e.Kind == budget.KindCharge && len(e.Tables) == 1 && e.Tables[0] == table {
			n++
		}
	}
	if n != 10 {
		t.Fatalf("%s: %d charges in the ledger, want 10", table, n)
	}
}

// 64 connections race for a budget of exactly ten batches, 20 times: ten
// win, the others get 3901, and the ledger verifies.
func TestRace64Connections(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, addr := startProxy(t, raceCatalog(smallSource(t, t.TempDir()), raceReps))
	conns := openConns(t, ctx, addr, raceConns)
	for rep := range raceReps {
		table := fmt.Sprintf("r%02d", rep)
		won, refused := race(t, ctx, conns, table)
		if won != 10 || refused != raceConns-10 {
			t.Fatalf("%s: %d answered, %d refused; want 10 and %d", table, won, refused, raceConns-10)
		}
		checkRaceLedger(t, entries(t, p), table)
		if err := p.ledger.Verify(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// The same with two proxy processes on one ledger, 32 connections each.
func TestRace64ConnectionsTwoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	cfg := writeCatalog(t, dir, raceCatalog(smallSource(t, dir), raceReps))
	bin := dpproxyBinary(t)
	a := startChild(t, bin, "--data-dir", dir, "--config", cfg)
	b := startChild(t, bin, "--data-dir", dir, "--config", cfg)
	conns := append(openConns(t, ctx, a.addr, raceConns/2), openConns(t, ctx, b.addr, raceConns/2)...)
	for rep := range raceReps {
		table := fmt.Sprintf("r%02d", rep)
		won, refused := race(t, ctx, conns, table)
		if won != 10 || refused != raceConns-10 {
			t.Fatalf("%s: %d answered, %d refused; want 10 and %d", table, won, refused, raceConns-10)
		}
		checkRaceLedger(t, ledgerEntries(t, dir), table)
	}
	for _, c := range conns {
		c.Close()
	}
	a.stop()
	b.stop()
	if code, out, errOut := dpproxyCmd("audit", "verify", "--data-dir", dir, "--config", cfg); code != 0 {
		t.Fatalf("audit verify: exit %d\n%s%s", code, out, errOut)
	}
	if got := len(charges(ledgerEntries(t, dir))); got != 10*raceReps {
		t.Fatalf("ledger has %d entries, want %d", got, 10*raceReps)
	}
}
