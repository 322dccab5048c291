package answers

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/statedb"
	"github.com/dpproxy/dpproxy/internal/testdb"
)

var pg = testdb.NewLazy(testdb.StartPostgres)

// pgDSN returns a DSN for a fresh database of this test's own.
func pgDSN(t *testing.T) string {
	t.Helper()
	dsn, err := pg.Get(t).FreshPostgresDB(context.Background(), "answers")
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

// pgStore opens a Store over a pool of its own (a proxy of its own) of at
// most maxConns connections; it returns the pool too.
func pgStore(t *testing.T, dsn string, maxConns int) (*Store, *statedb.DB) {
	t.Helper()
	ctx := context.Background()
	db, err := statedb.OpenPostgres(ctx, dsn, maxConns)
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenDB(ctx, db)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); db.Close() })
	return s, db
}

// pgHelper claims "k" in the database at dsn, says so, and waits to be
// killed (TestPGClaimOfAKilledProcess).
func pgHelper(dsn string) {
	ctx := context.Background()
	db, err := statedb.OpenPostgres(ctx, dsn, 4)
	if err != nil {
		os.Exit(2)
	}
	s, err := OpenDB(ctx, db)
	if err != nil {
		os.Exit(2)
	}
	if _, claimed, err := s.Claim(ctx, "k"); err != nil || !claimed {
		os.Exit(3)
	}
	os.Stdout.WriteString("claimed\n")
	select {} // until killed
}

// claimWithin polls Claim until it claims key or d passes.
func claimWithin(t *testing.T, s *Store, key string, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		_, claimed, err := s.Claim(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		if claimed {
			return time.Since(start)
		}
		if time.Since(start) > d {
			t.Fatalf("%s not claimed within %v", key, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Two proxies (two pools): one claimant at a time; the other gets the
// answer once it is stored; Release and Close free a key at once; a Store
// does not claim a key twice.
func TestPGClaimIsExclusive(t *testing.T) {
	ctx := context.Background()
	dsn := pgDSN(t)
	a, _ := pgStore(t, dsn, 8)
	b, _ := pgStore(t, dsn, 8)
	if stored, claimed, err := a.Claim(ctx, "k"); err != nil || !claimed || stored != nil {
		t.Fatalf("a: %q %v %v", stored, claimed, err)
	}
	if stored, claimed, err := b.Claim(ctx, "k"); err != nil || claimed || stored != nil {
		t.Fatalf("b while a holds the claim: %q %v %v", stored, claimed, err)
	}
	var idle string
	if err := a.claims["k"].lock.conn.QueryRowContext(ctx, "SHOW tcp_keepalives_idle").Scan(&idle); err != nil || (idle != "15" && idle != "15s") {
		t.Fatalf("the claim's keepalive: %q %v", idle, err)
	}
	if stored, claimed, err := a.Claim(ctx, "k"); err != nil || claimed || stored != nil {
		t.Fatalf("a again while it holds the claim: %q %v %v", stored, claimed, err)
	}
	if got, err := a.Put(ctx, "k", []byte("a's answer")); err != nil || string(got) != "a's answer" {
		t.Fatalf("a's put: %q %v", got, err)
	}
	if stored, claimed, err := b.Claim(ctx, "k"); err != nil || claimed || string(stored) != "a's answer" {
		t.Fatalf("b after a's Put: %q %v %v", stored, claimed, err)
	}
	if got, err := b.Put(ctx, "k", []byte("b's answer")); err != nil || string(got) != "a's answer" {
		t.Fatalf("b's late put returned %q %v, want a's answer", got, err)
	}
	if _, claimed, _ := a.Claim(ctx, "r"); !claimed {
		t.Fatal("a could not claim r")
	}
	a.Release(ctx, "r")
	if _, claimed, _ := b.Claim(ctx, "r"); !claimed {
		t.Fatal("b could not claim r after a released it")
	}
	b.Close()
	if _, claimed, _ := a.Claim(ctx, "r"); !claimed {
		t.Fatal("a could not claim r after b closed")
	}
	// Answers outlive the stores: a new proxy reads them.
	c, _ := pgStore(t, dsn, 2)
	if got, ok, err := c.Get(ctx, "k"); err != nil || !ok || string(got) != "a's answer" {
		t.Fatalf("a new store: %q %v %v", got, ok, err)
	}
}

// The claim of a proxy whose connection dies (as when its host does) is
// taken over at once; if it lives on and Puts late, it gets the answer the
// other stored first.
func TestPGClaimOfADeadConnection(t *testing.T) {
	ctx := context.Background()
	dsn := pgDSN(t)
	a, _ := pgStore(t, dsn, 4)
	b, _ := pgStore(t, dsn, 4)
	if _, claimed, _ := a.Claim(ctx, "k"); !claimed {
		t.Fatal("a could not claim")
	}
	var pid int
	if err := a.claims["k"].lock.conn.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, claimed, _ := b.Claim(ctx, "k"); claimed {
		t.Fatal("b claimed a held key")
	}
	if err := pg.Get(t).Exec(ctx, fmt.Sprintf("SELECT pg_terminate_backend(%d)", pid)); err != nil {
		t.Fatal(err)
	}
	took := claimWithin(t, b, "k", 5*time.Second)
	t.Logf("claim taken over %v after the owner's connection died", took)
	if got, err := b.Put(ctx, "k", []byte("b")); err != nil || string(got) != "b" {
		t.Fatalf("b's put: %q %v", got, err)
	}
	if got, err := a.Put(ctx, "k", []byte("a")); err != nil || string(got) != "b" {
		t.Fatalf("a's late put returned %q %v, want b's answer", got, err)
	}
	if n := len(a.pg.slots); n != 0 {
		t.Fatalf("%d claim slots still taken", n)
	}
}

// A claim of a process killed with SIGKILL is taken over at once:
// PostgreSQL drops a dead session's locks.
func TestPGClaimOfAKilledProcess(t *testing.T) {
	ctx := context.Background()
	dsn := pgDSN(t)
	b, _ := pgStore(t, dsn, 4) // creates the table first
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "ANSWERS_HELPER_DSN="+dsn)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "claimed\n" {
		t.Fatalf("helper: %q %v", line, err)
	}
	if _, claimed, _ := b.Claim(ctx, "k"); claimed {
		t.Fatal("claimed a key a live process holds")
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	took := claimWithin(t, b, "k", 5*time.Second)
	t.Logf("claim taken over %v after the owner was killed", took)
}

// Claims pin at most half the pool: past that Claim reports "not yet" and
// the caller polls, never blocking on the pool.
func TestPGClaimSlots(t *testing.T) {
	ctx := context.Background()
	s, _ := pgStore(t, pgDSN(t), 2) // one slot
	if _, claimed, _ := s.Claim(ctx, "k1"); !claimed {
		t.Fatal("k1 not claimed")
	}
	if _, claimed, err := s.Claim(ctx, "k2"); claimed || err != nil {
		t.Fatalf("k2 claimed with every slot taken: %v %v", claimed, err)
	}
	if got, ok, err := s.Get(ctx, "k1"); ok || err != nil || got != nil {
		t.Fatalf("Get beside a claim: %q %v %v", got, ok, err)
	}
	s.Release(ctx, "k1")
	if _, claimed, _ := s.Claim(ctx, "k2"); !claimed {
		t.Fatal("k2 not claimed after k1 was released")
	}
	if got, err := s.Put(ctx, "k2", []byte("x")); err != nil || string(got) != "x" {
		t.Fatalf("put: %q %v", got, err)
	}
	if claimSlots(0) <= 0 || claimSlots(1) != 1 || claimSlots(20) != 10 {
		t.Fatal("claimSlots")
	}
}

// Many keys, many goroutines in three proxies: each key is claimed (and
// would be charged) exactly once, and everybody gets its one answer.
func TestPGClaimOncePerKey(t *testing.T) {
	ctx := context.Background()
	dsn := pgDSN(t)
	const stores, workers, keys = 3, 6, 40
	var ss [stores]*Store
	for i := range ss {
		ss[i], _ = pgStore(t, dsn, 8)
	}
	var claims [keys]atomic.Int32
	var answers [keys]sync.Map // worker → answer
	var wg sync.WaitGroup
	for i := range stores {
		for w := range workers {
			wg.Go(func() {
				for k := range keys {
					key := fmt.Sprint("key", (k+w*7)%keys) // different orders
					kn := (k + w*7) % keys
					for {
						stored, claimed, err := ss[i].Claim(ctx, key)
						if err != nil {
							t.Error(err)
							return
						}
						if stored != nil {
							answers[kn].Store(fmt.Sprint(i, w), string(stored))
							break
						}
						if claimed {
							claims[kn].Add(1)
							time.Sleep(time.Millisecond) // measuring
							got, err := ss[i].Put(ctx, key, fmt.Appendf(nil, "%s by %d/%d", key, i, w))
							if err != nil {
								t.Error(err)
								return
							}
							answers[kn].Store(fmt.Sprint(i, w), string(got))
							break
						}
						time.Sleep(2 * time.Millisecond)
					}
				}
			})
		}
	}
	wg.Wait()
	for k := range keys {
		if n := claims[k].Load(); n != 1 {
			t.Errorf("key%d claimed %d times", k, n)
		}
		seen := map[string]bool{}
		count := 0
		answers[k].Range(func(_, v any) bool { seen[v.(string)] = true; count++; return true })
		if len(seen) != 1 || count != stores*workers {
			t.Errorf("key%d: %d answers seen by %d workers", k, len(seen), count)
		}
	}
	for i, s := range ss {
		if n := len(s.pg.slots); n != 0 {
			t.Errorf("store %d: %d claim slots still taken", i, n)
		}
	}
}

// Migrate copies the answers (not the claims) of a SQLite file into
// PostgreSQL, byte for byte, and may run again.
func TestMigrate(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "answers.sqlite")
	src := openStore(t, path)
	want := map[string][]byte{}
	for i := range 1203 { // more than two batches
		key := fmt.Sprint("k", i)
		want[key] = []byte{byte(i), 0, byte(i >> 8), 0xff}
		if _, err := src.Put(ctx, key, want[key]); err != nil {
			t.Fatal(err)
		}
	}
	if _, claimed, _ := src.Claim(ctx, "pending"); !claimed {
		t.Fatal("no claim")
	}
	dst, _ := pgStore(t, pgDSN(t), 4)
	if _, err := dst.Put(ctx, "k7", []byte("already")); err != nil {
		t.Fatal(err)
	}
	n, err := Migrate(ctx, path, dst)
	if err != nil || n != int64(len(want)-1) {
		t.Fatalf("migrated %d, %v; want %d", n, err, len(want)-1)
	}
	for key, b := range want {
		got, ok, err := dst.Get(ctx, key)
		if key == "k7" {
			b = []byte("already")
		}
		if err != nil || !ok || string(got) != string(b) {
			t.Fatalf("%s: %x %v %v, want %x", key, got, ok, err, b)
		}
	}
	if _, claimed, _ := dst.Claim(ctx, "pending"); !claimed {
		t.Fatal("a claim was migrated")
	}
	if n, err := Migrate(ctx, path, dst); err != nil || n != 0 {
		t.Fatalf("second migration added %d, %v", n, err)
	}
	if _, err := Migrate(ctx, filepath.Join(t.TempDir(), "missing.sqlite"), dst); err == nil {
		t.Fatal("migrated a missing file")
	}
}

// FreshDSN is pgDSN for the engine test (package answers_test).
func FreshDSN(t *testing.T) string { return pgDSN(t) }

// BenchmarkPGClaimPut times what a fresh batch adds on PostgreSQL (Get,
// Claim with its lock, Put with its unlock) and what a repeat costs (Get),
// against the same on a SQLite file.
//
//	CI=true go test -run '^$' -bench PGClaimPut ./answers
func BenchmarkPGClaimPut(b *testing.B) {
	ctx := context.Background()
	dsn, err := pg.Get(b).FreshPostgresDB(ctx, "answers")
	if err != nil {
		b.Fatal(err)
	}
	db, err := statedb.OpenPostgres(ctx, dsn, 8)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	pgs, err := OpenDB(ctx, db)
	if err != nil {
		b.Fatal(err)
	}
	defer pgs.Close()
	lite, err := Open(ctx, filepath.Join(b.TempDir(), "answers.sqlite"))
	if err != nil {
		b.Fatal(err)
	}
	defer lite.Close()
	answer := make([]byte, 2048)
	for _, tc := range []struct {
		name string
		s    *Store
	}{{"postgres", pgs}, {"sqlite", lite}} {
		b.Run(tc.name+"/claim-put", func(b *testing.B) {
			i := 0
			for b.Loop() {
				key := fmt.Sprint("k", i)
				i++
				if _, claimed, err := tc.s.Claim(ctx, key); err != nil || !claimed {
					b.Fatalf("claim: %v %v", claimed, err)
				}
				if _, err := tc.s.Put(ctx, key, answer); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/get", func(b *testing.B) {
			for b.Loop() {
				if _, ok, err := tc.s.Get(ctx, "k0"); err != nil || !ok {
					b.Fatalf("get: %v %v", ok, err)
				}
			}
		})
	}
}
