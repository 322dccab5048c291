package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/dpproxy/dpproxy/budget"
)

// A client storm while the proxy process is killed with SIGKILL at random
// moments, 20 times. After each restart `audit verify` passes, and the clients never received more answers than the ledger holds
// charges: the charge is durable before the first byte of an answer is
// written.
func TestCrashStorm(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns and kills processes")
	}
	const (
		kills   = 20
		clients = 8
	)
	dir := t.TempDir()
	cfg := writeCatalog(t, dir, fmt.Sprintf(`database: demo
sources:
  main: {driver: sqlite, path: %q}
tables:
  people:
    budget: {total: 1000000, per_user: 1000000, default_per_query: 0.1}
    columns:
      sex: {type: categorical, values: [Female, Male]}
users:
  analyst: {password: analyst, role: analyst}
`, smallSource(t, dir)))
	bin := dpproxyBinary(t)
	// The driver logs every connection the kills break.
	mysql.SetLogger(log.New(io.Discard, "", 0))
	defer mysql.SetLogger(log.New(os.Stderr, "[mysql] ", log.Ldate|log.Ltime|log.Lshortfile))
	// verify runs `dpproxy audit verify` as its own process, as an auditor would.
	verify := func(when string) {
		t.Helper()
		out, err := command(bin, "audit", "verify", "--data-dir", dir, "--config", cfg).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "ledger OK") {
			t.Fatalf("audit verify %s: %v\n%s", when, err, out)
		}
	}
	// charges counts the charges, straight from the file. (Zero-cost reuse
	// entries are group-committed and may be lost in a kill; none are
	// expected here.)
	charges := func() int64 {
		db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "ledger.sqlite")+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var n int64
		// A charge, or a derived entry (an answer from stored
		// measurements, written before its release), covers each answer.
		if err := db.QueryRow("SELECT COUNT(*) FROM entries WHERE kind IN (?, ?)", budget.KindCharge, budget.KindDerived).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var answered, charged, maxPerRun int64
	for i := range kills {
		c := startChild(t, bin, "--data-dir", dir, "--config", cfg)
		if i > 0 {
			verify(fmt.Sprintf("after restart %d", i))
		}
		db, err := sql.Open("mysql", fmt.Sprintf("analyst:analyst@tcp(%s)/demo?timeout=2s&readTimeout=10s", c.addr))
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(clients)
		var got atomic.Int64
		var stop atomic.Bool
		var wg sync.WaitGroup
		for w := range clients {
			wg.Go(func() {
				for q := 0; !stop.Load(); q++ {
					var n int64
					// A new text each time, also across restarts, so that no
					// stored answer can be re-released: every answer needs a
					// charge, or a derived entry once stored measurements answer it.
					err := db.QueryRowContext(context.Background(), fmt.Sprintf("SELECT COUNT(*) AS n FROM people WHERE sex = 'Male' LIMIT %d", 1+i*100000000+w*1000000+q)).Scan(&n)
					if err == nil {
						got.Add(1)
					} else if mysqlCode(err) != 0 {
						t.Errorf("client %d: %v", w, err) // a refusal: the budget is ample
						return
					}
				}
			})
		}
		time.Sleep(time.Duration(10+rand.IntN(300)) * time.Millisecond)
		c.kill()
		stop.Store(true)
		wg.Wait()
		db.Close()
		if t.Failed() {
			t.FailNow()
		}
		now := charges()
		answered += got.Load()
		if got.Load() > now-charged {
			t.Fatalf("kill %d: clients received %d answers, but only %d charges were recorded", i+1, got.Load(), now-charged)
		}
		if answered > now {
			t.Fatalf("after kill %d: %d answers received in all, %d charges", i+1, answered, now)
		}
		maxPerRun = max(maxPerRun, got.Load())
		charged = now
	}
	if answered == 0 {
		t.Fatal("no client ever got an answer: the storm tested nothing")
	}
	// The killed proxy left its pid file; its lock went with the process.
	if code, out, errOut := dpproxyCmd("reload", "--data-dir", dir); code != 1 || !strings.Contains(errOut, "is stale") {
		t.Fatalf("reload after a kill: exit %d\n%s%s", code, out, errOut)
	}
	c := startChild(t, bin, "--data-dir", dir, "--config", cfg)
	verify("after the last restart")
	c.stop()
	t.Logf("%d kills: %d answers received, %d charges recorded (at most %d answers in one run)", kills, answered, charged, maxPerRun)
}
