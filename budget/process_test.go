package budget

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/statedb"
)

// The helper runs in a child process (this test binary, re-executed) when
// BUDGET_HELPER is set:
//
//	race:  8 goroutines charge 0.1 against ε=1 once each; prints "won N".
//	crash: charges forever without limits; prints "seq hash" after each
//	       Charge returns, until killed.
//
// BUDGET_LEDGER is a ledger file, or a PostgreSQL DSN (postgres://…).
func TestHelperProcess(t *testing.T) {
	mode, path := os.Getenv("BUDGET_HELPER"), os.Getenv("BUDGET_LEDGER")
	if mode == "" {
		t.Skip("helper for TestMultiProcess* only")
	}
	ctx := context.Background()
	var l *Ledger
	var err error
	if strings.HasPrefix(path, "postgres://") {
		var db *statedb.DB
		if db, err = statedb.OpenPostgres(ctx, path, 4); err == nil {
			l, err = OpenDB(ctx, db)
		}
	} else {
		l, err = Open(ctx, path)
	}
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	switch mode {
	case "race":
		var won atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				_, err := l.Charge(ctx, lapCharge("analyst", 0.1, "adult"), []Limit{userTable("analyst", "adult", 1)})
				var ex *ExceededError
				switch {
				case err == nil:
					won.Add(1)
				case !errors.As(err, &ex):
					fmt.Println("error", err)
				}
			})
		}
		wg.Wait()
		l.Close()
		fmt.Println("won", won.Load())
	case "crash":
		for {
			e, err := l.Charge(ctx, lapCharge("analyst", 0.001, "adult"), nil)
			if err != nil {
				fmt.Println("error", err)
				os.Exit(2)
			}
			fmt.Println(e.Seq, e.Hash)
		}
	}
	os.Exit(0)
}

func helper(ctx context.Context, mode, path string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), "BUDGET_HELPER="+mode, "BUDGET_LEDGER="+path)
	return cmd
}

// forTargets runs fn on a ledger file and on a PostgreSQL database: the
// target that helper processes open, and how the test opens it.
func forTargets(t *testing.T, fn func(t *testing.T, target string, open func(t *testing.T) *Ledger)) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "ledger.sqlite")
		fn(t, path, func(t *testing.T) *Ledger {
			l, err := Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			return l
		})
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := newPGDatabase(t)
		fn(t, dsn, func(t *testing.T) *Ledger { return openPG(t, openPGPool(t, dsn, 4)) })
	})
}

// Four processes with eight goroutines each race for ten charges.
func TestMultiProcessRace(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	forTargets(t, testMultiProcessRace)
}

func testMultiProcessRace(t *testing.T, path string, open func(t *testing.T) *Ledger) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	outs := make([]string, 4)
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range outs {
		wg.Go(func() {
			b, err := helper(ctx, "race", path).CombinedOutput()
			outs[i], errs[i] = string(b), err
		})
	}
	wg.Wait()
	won := 0
	for i, out := range outs {
		if errs[i] != nil {
			t.Fatalf("process %d: %v\n%s", i, errs[i], out)
		}
		var n int
		for _, line := range strings.Split(out, "\n") {
			if s, ok := strings.CutPrefix(line, "won "); ok {
				n, _ = strconv.Atoi(s)
			} else if strings.HasPrefix(line, "error") {
				t.Fatalf("process %d: %s", i, line)
			}
		}
		won += n
	}
	if won != 10 {
		t.Fatalf("%d charges succeeded across processes, want 10\n%v", won, outs)
	}
	l := open(t)
	if n := count(t, l); n != 10 {
		t.Fatalf("%d entries, want 10", n)
	}
	mustVerify(t, l)
}

// A process killed (SIGKILL) while charging loses no entry whose Charge
// returned, and leaves a ledger that verifies and accepts more charges; in
// PostgreSQL the transaction it was in is rolled back and its head lock
// freed.
func TestMultiProcessCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	forTargets(t, testMultiProcessCrash)
}

func testMultiProcessCrash(t *testing.T, path string, open func(t *testing.T) *Ledger) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := helper(ctx, "crash", path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]string{}
	sc := bufio.NewScanner(stdout)
	for len(seen) < 25 && sc.Scan() {
		f := strings.Fields(sc.Text())
		seq, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || len(f) != 2 {
			t.Fatalf("helper said %q", sc.Text())
		}
		seen[seq] = f[1]
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait() //nolint:errcheck // killed on purpose
	if len(seen) < 25 {
		t.Fatalf("helper reported only %d charges", len(seen))
	}

	l := open(t)
	mustVerify(t, l)
	es, err := l.Entries(context.Background(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for seq, hash := range seen {
		if seq > int64(len(es)) || es[seq-1].Hash != hash {
			t.Fatalf("entry %d, reported committed before the kill, is lost", seq)
		}
	}
	if _, err := l.Charge(context.Background(), lapCharge("analyst", 0.1, "adult"), nil); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, l)
}
