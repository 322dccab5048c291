package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/dpproxy/dpproxy/budget"
)

// loadDashboard is what every connection refreshes: five fixed DP batches.
var loadDashboard = []string{
	"SELECT COUNT(*) FROM people",
	"SELECT sex, COUNT(*) FROM people GROUP BY sex",
	"SELECT COUNT(*) FROM people WHERE sex = 'Female'",
	"SELECT sex FROM people GROUP BY sex ORDER BY COUNT(*) DESC LIMIT 1",
	"SELECT COUNT(*) AS n FROM people WHERE sex <> 'Male'",
}

// queryDigest is the engine's digest of a one-statement batch (see
// engine.digest): the SHA-256 of the normalised text and a NUL.
func queryDigest(q string) string {
	n := strings.ToLower(strings.Join(strings.Fields(strings.TrimRight(strings.TrimSpace(q), ";")), " "))
	h := sha256.Sum256([]byte(n + "\x00"))
	return hex.EncodeToString(h[:])
}

// vmHWM reads a process's peak resident set size (kB) from /proc.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// loadLog is what the clients saw, for the checks after the run.
type loadLog struct {
	mu        sync.Mutex
	answered  map[string][]string // query text → answers received (rendered)
	preKill   map[string]bool     // dashboard texts answered before the kill
	sent      map[string]bool     // every DP text sent
	counts    map[string]int      // outcome → how many
	unexpects []string
}

func (l *loadLog) note(outcome string) {
	l.mu.Lock()
	l.counts[outcome]++
	l.mu.Unlock()
}

// A load-and-fault run (issue 10, item 9): 64 connections mix dashboard
// repeats, fresh queries, refusals (3900 and 3901), KILL QUERY of each
// other and abrupt disconnects, while the proxy is killed with SIGKILL
// mid-run and restarted on the same data directory. Afterwards the ledger
// verifies; every batch is charged at most once (a dashboard batch twice
// only if its first charge's answer died unreleased with the process), so
// charges equal the distinct batches charged; every answer received has
// its charge; every dashboard batch had one answer throughout; and the
// proxy's peak resident memory stayed under a generous bound. Bounded: a
// few seconds of load on each side of the kill.
func TestLoadAndFault(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns and kills processes")
	}
	const (
		conns    = 64
		phase    = 3 * time.Second
		maxHWMkB = 1 << 20 // 1 GiB: generous; a leak or an unbounded cache under load would pass it
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
  tight:
    source_table: people
    budget: {total: 0.3, per_user: 0.3, default_per_query: 0.1}
    columns:
      sex: {type: categorical, values: [Female, Male]}
users:
  analyst: {password: analyst, role: analyst}
`, smallSource(t, dir)))
	bin := dpproxyBinary(t)
	mysql.SetLogger(log.New(io.Discard, "", 0))
	defer mysql.SetLogger(log.New(os.Stderr, "[mysql] ", log.Ldate|log.Ltime|log.Lshortfile))

	var addr atomic.Value
	p1 := startChild(t, bin, "--data-dir", dir, "--config", cfg)
	addr.Store(p1.addr)
	var killed atomic.Bool
	lg := &loadLog{answered: map[string][]string{}, preKill: map[string]bool{}, sent: map[string]bool{}, counts: map[string]int{}}
	ids := make([]atomic.Int64, conns) // each worker's current connection id
	var fresh atomic.Int64
	stop := make(chan struct{})

	worker := func(w int) {
		rnd := rand.New(rand.NewPCG(uint64(w), 10))
		var db *sql.DB
		var dbAddr string
		defer func() {
			if db != nil {
				db.Close()
			}
		}()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if a := addr.Load().(string); db == nil || a != dbAddr {
				if db != nil {
					db.Close()
				}
				var err error
				if db, err = sql.Open("mysql", fmt.Sprintf("analyst:analyst@tcp(%s)/demo?timeout=2s&readTimeout=20s", a)); err != nil {
					t.Error(err)
					return
				}
				db.SetMaxOpenConns(1)
				dbAddr = a
				var id int64
				if err := db.QueryRow("SELECT CONNECTION_ID()").Scan(&id); err == nil {
					ids[w].Store(id)
				}
			}
			ctx := context.Background()
			var q string
			kind := rnd.IntN(100)
			switch {
			case kind < 45: // a dashboard refresh
				q = loadDashboard[rnd.IntN(len(loadDashboard))]
			case kind < 70: // a fresh query
				q = fmt.Sprintf("SELECT COUNT(*) FROM people WHERE sex = 'Male' LIMIT %d", fresh.Add(1))
			case kind < 78: // a refusal: reads rows
				q = "SELECT * FROM people"
			case kind < 84: // a fresh query on a table whose budget runs out: 3901
				q = fmt.Sprintf("SELECT COUNT(*) FROM tight LIMIT %d", fresh.Add(1))
			case kind < 92: // KILL QUERY another connection's statement
				victim := ids[rnd.IntN(conns)].Load()
				_, err := db.Exec(fmt.Sprintf("KILL QUERY %d", victim))
				switch code := mysqlCode(err); {
				case err == nil:
					lg.note("kill query")
				case code == 1094 || code == 1095:
					// The victim reconnected (ids restart with the
					// proxy), or the id is a socket not yet logged in.
					lg.note("kill query: no such thread of ours")
				case code == 0:
					lg.note("connection error")
				default:
					lg.mu.Lock()
					lg.unexpects = append(lg.unexpects, fmt.Sprintf("KILL QUERY: %v", err))
					lg.mu.Unlock()
				}
				continue
			default: // an abrupt disconnect: a fresh query whose client hangs up
				q = fmt.Sprintf("SELECT COUNT(*) FROM people WHERE sex = 'Female' LIMIT %d", fresh.Add(1))
				lg.mu.Lock()
				lg.sent[q] = true
				lg.mu.Unlock()
				if rnd.IntN(2) == 0 {
					// Mid-query: the driver closes the socket when ctx ends.
					dctx, cancel := context.WithTimeout(ctx, time.Duration(rnd.IntN(3000))*time.Microsecond)
					if s, err := renderDB(dctx, db, q); err == nil {
						lg.answer(q, s, killed.Load())
					}
					cancel()
				} else {
					// Before authentication: a socket that sends nothing.
					if c, err := net.DialTimeout("tcp", dbAddr, time.Second); err == nil {
						c.Close()
					}
				}
				lg.note("abrupt disconnect")
				continue
			}
			lg.mu.Lock()
			lg.sent[q] = true
			lg.mu.Unlock()
			s, err := renderDB(ctx, db, q)
			switch code := mysqlCode(err); {
			case err == nil:
				lg.answer(q, s, killed.Load())
				lg.note("answered")
			case code == 3900 && strings.HasPrefix(q, "SELECT *"):
				lg.note("refused 3900")
			case code == 3901 && strings.Contains(q, "tight"):
				lg.note("refused 3901")
			case code == 1317:
				lg.note("interrupted 1317")
			case code == 0:
				if killed.Load() {
					lg.note("connection error")
				} else {
					lg.note("connection error before the kill: " + err.Error())
				}
				time.Sleep(10 * time.Millisecond) // the proxy may be restarting
			default:
				lg.mu.Lock()
				lg.unexpects = append(lg.unexpects, fmt.Sprintf("%s: %v", q, err))
				lg.mu.Unlock()
			}
		}
	}
	var wg sync.WaitGroup
	for w := range conns {
		wg.Go(func() { worker(w) })
	}
	time.Sleep(phase / 2)
	time.Sleep(time.Duration(rand.IntN(int(phase / 2))))
	hwm1 := vmHWM(t, p1.cmd.Process.Pid)
	killed.Store(true)
	p1.kill()
	t0 := time.Now()
	p2 := startChild(t, bin, "--data-dir", dir, "--config", cfg)
	addr.Store(p2.addr)
	t.Logf("restarted in %v", time.Since(t0))
	time.Sleep(phase)
	close(stop)
	t0 = time.Now()
	wg.Wait()
	t.Logf("clients stopped in %v", time.Since(t0))
	hwm2 := vmHWM(t, p2.cmd.Process.Pid)
	t0 = time.Now()
	p2.stop()
	t.Logf("stopped in %v", time.Since(t0))

	if len(lg.unexpects) > 0 {
		t.Fatalf("%d unexpected errors, e.g. %v", len(lg.unexpects), lg.unexpects[:min(5, len(lg.unexpects))])
	}
	if out, err := command(bin, "audit", "verify", "--data-dir", dir, "--config", cfg).CombinedOutput(); err != nil || !strings.Contains(string(out), "ledger OK") {
		t.Fatalf("audit verify: %v\n%s", err, out)
	}
	// Charges by batch digest.
	digestOf := map[string]string{}
	for q := range lg.sent {
		digestOf[queryDigest(q)] = q
	}
	charged := map[string]int{}
	derived := map[string]int{}
	reuses := 0
	for _, e := range ledgerEntries(t, dir) {
		switch e.Kind {
		case budget.KindDerived:
			if _, ok := digestOf[e.QueryDigest]; !ok {
				t.Fatalf("derived entry %d for a batch no client sent", e.Seq)
			}
			derived[e.QueryDigest]++
		case budget.KindCharge:
			if _, ok := digestOf[e.QueryDigest]; !ok {
				t.Fatalf("charge %d for a batch no client sent", e.Seq)
			}
			charged[e.QueryDigest]++
		case budget.KindReuse:
			reuses++
		}
	}
	dashboard := map[string]bool{}
	for _, q := range loadDashboard {
		dashboard[q] = true
	}
	charges := 0
	for d, n := range charged {
		charges += n
		q := digestOf[d]
		switch {
		case n == 1:
		case n == 2 && dashboard[q] && !lg.preKill[q]:
			// Charged before the kill, killed before its answer was stored:
			// nothing was released, and the restarted proxy charged anew.
		default:
			t.Errorf("%q charged %d times", q, n)
		}
	}
	for q, as := range lg.answered {
		if charged[queryDigest(q)] == 0 && derived[queryDigest(q)] == 0 {
			t.Errorf("%q was answered %d times but never charged nor derived", q, len(as))
		}
		for _, a := range as[1:] {
			if a != as[0] {
				t.Errorf("%q answered differently: %q and %q", q, as[0], a)
			}
		}
	}
	for _, hwm := range []int64{hwm1, hwm2} {
		if hwm > maxHWMkB {
			t.Errorf("peak resident memory %d kB, bound %d kB", hwm, int64(maxHWMkB))
		}
	}
	t.Logf("outcomes %v; %d distinct batches charged, %d charges, %d answered texts, %d reuse entries; VmHWM %d kB before the kill, %d kB after",
		lg.counts, len(charged), charges, len(lg.answered), reuses, hwm1, hwm2)
	if lg.counts["answered"] == 0 || lg.counts["refused 3900"] == 0 || lg.counts["kill query"] == 0 {
		t.Fatalf("the mix tested too little: %v", lg.counts)
	}
}

func (l *loadLog) answer(q, s string, afterKill bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.answered[q] = append(l.answered[q], s)
	if !afterKill {
		l.preKill[q] = true
	}
}

// renderDB is render on a pool's connection.
func renderDB(ctx context.Context, db *sql.DB, q string) (string, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return render(ctx, conn, q)
}
