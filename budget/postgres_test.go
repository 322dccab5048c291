package budget

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/statedb"
)

// Three proxies (three connection pools, three Ledgers, as three processes
// on three hosts would have) open one new PostgreSQL ledger at once and
// race, from many goroutines each, to charge 1/8 against a table budget of
// 10 shared by six users: exactly 80 charges win, the table's spend is
// exactly 10, the chain verifies and the sequence numbers have no gaps.
// Reuse entries from every proxy ride on the same chain meanwhile.
func TestPostgresChargeRaceAcrossPools(t *testing.T) {
	const (
		proxies    = 3
		goroutines = 16 // per proxy
		cost       = 0.125
		budget     = 10.0
		want       = 80 // budget / cost
	)
	ctx := context.Background()
	dsn := newPGDatabase(t)
	ledgers := make([]*Ledger, proxies)
	errs := make([]error, proxies)
	var wg sync.WaitGroup
	for i := range proxies {
		db := openPGPool(t, dsn, 8)
		wg.Go(func() { ledgers[i], errs[i] = OpenDB(ctx, db) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("OpenDB %d: %v", i, err)
		}
		t.Cleanup(func() { ledgers[i].Close() })
	}
	var won, refused, reuses atomic.Int64
	var failed atomic.Value
	for p := range proxies {
		for g := range goroutines {
			wg.Go(func() {
				user := fmt.Sprintf("u%d", (p*goroutines+g)%6)
				lim := []Limit{{Scope: ScopeTable, Table: "t", Epsilon: budget}, userTable(user, "t", 100)}
				for {
					_, err := ledgers[p].Charge(ctx, lapCharge(user, cost, "t"), lim)
					var ex *ExceededError
					switch {
					case err == nil:
						won.Add(1)
					case errors.As(err, &ex):
						refused.Add(1)
						return
					default:
						failed.Store(err)
						return
					}
					if g%4 == 0 {
						if err := ledgers[p].RecordReuse(ctx, reuseOf(user, g)); err != nil {
							failed.Store(err)
							return
						}
						reuses.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatalf("charge: %v", err)
	}
	if won.Load() != want {
		t.Fatalf("%d charges succeeded, want %d", won.Load(), want)
	}
	for _, l := range ledgers {
		if err := l.FlushReuses(ctx); err != nil {
			t.Fatal(err)
		}
	}
	spent, err := ledgers[1].Spent(ctx, "", "t")
	if err != nil {
		t.Fatal(err)
	}
	if spent.Epsilon != budget {
		t.Fatalf("table spent ε=%v, want exactly %v", spent.Epsilon, budget)
	}
	mustVerify(t, ledgers[2])
	es, err := ledgers[0].Entries(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	charges := 0
	for i, e := range es {
		if e.Seq != int64(i+1) {
			t.Fatalf("entry %d has seq %d", i+1, e.Seq)
		}
		if e.Kind == KindCharge {
			charges++
		}
	}
	if charges != want || int64(len(es)) != want+reuses.Load() {
		t.Fatalf("%d entries (%d charges), want %d charges and %d reuses", len(es), charges, want, reuses.Load())
	}
	t.Logf("%d charged, %d refused, %d reuse entries", won.Load(), refused.Load(), reuses.Load())
}

// A writer that dies in the middle of its transaction (its connection is
// terminated, as when its host fails) leaves nothing behind: the entry and
// the spend it wrote vanish with it, and a charge waiting for the head lock
// meanwhile goes on once the lock is free.
func TestPostgresWriterDiesMidTransaction(t *testing.T) {
	ctx := context.Background()
	db := newPGDB(t, 4)
	l := openPG(t, db)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := tx.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	// Half a charge: the head locked, an entry and a spend written.
	for _, q := range []string{
		"SELECT seq FROM head WHERE id = 1 FOR UPDATE",
		"INSERT INTO entries (seq, time, kind, user_name, conn_id, tables_json, mechanism, strategy, epsilon, rho, query_digest, prev_hash, hash) " +
			"VALUES (1, '2026-01-01T00:00:00.000000000Z', 'charge', 'a', 1, '[\"t\"]', 'laplace', 'identity', 0.5, 0, '', '" + genesisHash + "', 'x')",
		"INSERT INTO spent (user_name, table_name, epsilon, rho, delta) VALUES ('a', 't', 0.5, 0, 0)",
		"UPDATE head SET seq = 1, hash = 'x' WHERE id = 1",
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// A charge whose context ends while it waits for the head lock gives up.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = l.Charge(short, lapCharge("a", 0.75, "t"), nil)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("charge waiting past its deadline: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := l.Charge(ctx, lapCharge("a", 0.75, "t"), []Limit{userTable("a", "t", 1)})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the charge did not wait for the head lock: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	killer := openPGPool(t, pg.Get(t).AdminDSN, 1)
	if _, err := killer.ExecContext(ctx, "SELECT pg_terminate_backend(?)", pid); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("charge after the writer died: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the charge still waits after the writer died")
	}
	tx.Rollback()
	mustVerify(t, l)
	es, err := l.Entries(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].Cost.Epsilon != 0.75 {
		t.Fatalf("entries %+v, want only the waiting charge", es)
	}
}

// Verify finds edits made in PostgreSQL behind the ledger's back.
func TestPostgresVerifyDetectsTampering(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		sql  []string
		seq  int64
	}{
		{"edited cost", []string{"UPDATE entries SET epsilon = 0.01 WHERE seq = 2"}, 2},
		{"edited user", []string{"UPDATE entries SET user_name = 'eve' WHERE seq = 3"}, 3},
		{"edited time", []string{"UPDATE entries SET time = '2000-01-01T00:00:00.000000000Z' WHERE seq = 1"}, 1},
		{"deleted entry", []string{"DELETE FROM entries WHERE seq = 2"}, 2},
		{"truncated tail", []string{"DELETE FROM entries WHERE seq = 4"}, 4},
		{"edited spend", []string{"UPDATE spent SET epsilon = 0 WHERE user_name = 'a' AND table_name = 't'"}, 0},
		{"edited space spend", []string{"UPDATE spent_spaces SET epsilon = 0 WHERE user_name = '' AND space_name = 't'"}, 0},
		{"head removed", []string{"DELETE FROM head"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := openPG(t, newPGDB(t, 2))
			for i := range 4 {
				if _, err := l.Charge(ctx, lapCharge("a", 0.1*float64(i+1), "t"), nil); err != nil {
					t.Fatal(err)
				}
			}
			mustVerify(t, l)
			pgExec(t, l, tc.sql...)
			err := l.Verify(ctx)
			var te *TamperError
			if !errors.As(err, &te) {
				t.Fatalf("Verify: %v, want a TamperError", err)
			}
			if te.Seq != tc.seq {
				t.Fatalf("Verify: %v, want entry %d", te, tc.seq)
			}
			r, err := l.Report(ctx, nil, nil, "")
			if err != nil || r.OK || r.ChainIntact || r.BadSeq != tc.seq {
				t.Fatalf("Report: %+v, %v", r, err)
			}
		})
	}
}

// OpenDBReadOnly reads a ledger in PostgreSQL and refuses every write; it
// never creates one.
func TestPostgresReadOnly(t *testing.T) {
	ctx := context.Background()
	db := newPGDB(t, 4)
	if _, err := OpenDBReadOnly(ctx, db); err == nil || !strings.Contains(err.Error(), "not a ledger") {
		t.Fatalf("OpenDBReadOnly on an empty database: %v", err)
	}
	w := openPG(t, db)
	if _, err := w.Charge(ctx, lapCharge("a", 0.5, "t"), nil); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenDBReadOnly(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if !ro.ReadOnly() {
		t.Fatal("ReadOnly() is false")
	}
	if _, err := ro.Charge(ctx, lapCharge("a", 0.5, "t"), nil); !errors.Is(err, errReadOnly) {
		t.Fatalf("Charge: %v, want errReadOnly", err)
	}
	if _, err := ro.Record(ctx, KindReuse, Charge{User: "a"}); !errors.Is(err, errReadOnly) {
		t.Fatalf("Record: %v", err)
	}
	if err := ro.RecordReuse(ctx, Charge{User: "a"}); !errors.Is(err, errReadOnly) {
		t.Fatalf("RecordReuse: %v", err)
	}
	if _, err := ro.RecordLimits(ctx, []Limit{tableLimit("t", 1)}, nil); !errors.Is(err, errReadOnly) {
		t.Fatalf("RecordLimits: %v", err)
	}
	if _, err := ro.MapSpaces(ctx, map[string]string{"t": "s"}); !errors.Is(err, errReadOnly) {
		t.Fatalf("MapSpaces: %v", err)
	}
	mustVerify(t, ro)
	// Writes of other proxies show as they commit.
	if _, err := w.Charge(ctx, lapCharge("b", 0.25, "t"), nil); err != nil {
		t.Fatal(err)
	}
	if n := count(t, ro); n != 2 {
		t.Fatalf("%d entries, want 2", n)
	}
	if _, err := OpenDB(ctx, &statedb.DB{DB: db.DB, Dialect: statedb.SQLite}); err == nil {
		t.Fatal("OpenDB accepted a SQLite handle")
	}
}

// Costs keep their exact bits in PostgreSQL (the hash covers them): the
// smallest subnormal, sums that are not what they look like, huge values.
func TestPostgresCostsRoundTrip(t *testing.T) {
	ctx := context.Background()
	l := openPG(t, newPGDB(t, 2))
	costs := []Cost{
		{Epsilon: math.SmallestNonzeroFloat64},
		{Epsilon: 0.1 + 0.2, Rho: 1.0 / 3},
		{Epsilon: math.MaxFloat64 / 4, Delta: math.Nextafter(1, 0)},
		{Rho: math.Nextafter(0.5, 1), Delta: 1e-300},
	}
	for _, c := range costs {
		ch := lapCharge("a", 0, "t")
		ch.Cost = c
		if _, err := l.Charge(ctx, ch, nil); err != nil {
			t.Fatal(err)
		}
	}
	mustVerify(t, l)
	es, err := l.Entries(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range es {
		for _, p := range [][2]float64{{e.Cost.Epsilon, costs[i].Epsilon}, {e.Cost.Rho, costs[i].Rho}, {e.Cost.Delta, costs[i].Delta}} {
			if math.Float64bits(p[0]) != math.Float64bits(p[1]) {
				t.Fatalf("entry %d: cost %+v read back, %+v written", e.Seq, e.Cost, costs[i])
			}
		}
	}
}

// A write transaction commits durably even where the server's default
// does not (the test server runs with synchronous_commit off), and keeps a
// stronger setting.
func TestPostgresWritesCommitSynchronously(t *testing.T) {
	ctx := context.Background()
	db := newPGDB(t, 2)
	openPG(t, db)
	for _, tc := range []struct{ before, want string }{{"off", "on"}, {"remote_apply", "remote_apply"}, {"local", "local"}} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, "SET LOCAL synchronous_commit = "+tc.before); err != nil {
			t.Fatal(err)
		}
		if err := lockHead(ctx, tx); err != nil {
			t.Fatal(err)
		}
		var got string
		if err := tx.QueryRowContext(ctx, "SELECT current_setting('synchronous_commit')").Scan(&got); err != nil {
			t.Fatal(err)
		}
		tx.Rollback()
		if got != tc.want {
			t.Fatalf("synchronous_commit %s became %s, want %s", tc.before, got, tc.want)
		}
	}
}
