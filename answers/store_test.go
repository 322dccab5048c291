package answers

import (
	"bufio"
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// TestMain runs a claiming helper process when ANSWERS_HELPER_PATH or
// ANSWERS_HELPER_DSN is set (see TestClaimOfAKilledOwner and
// TestPGClaimOfAKilledProcess).
func TestMain(m *testing.M) {
	if dsn := os.Getenv("ANSWERS_HELPER_DSN"); dsn != "" {
		pgHelper(dsn)
	}
	if path := os.Getenv("ANSWERS_HELPER_PATH"); path != "" {
		s, err := Open(context.Background(), path)
		if err != nil {
			os.Exit(2)
		}
		if _, claimed, err := s.Claim(context.Background(), "k"); err != nil || !claimed {
			os.Exit(3)
		}
		os.Stdout.WriteString("claimed\n")
		select {} // until killed
	}
	code := m.Run()
	pg.Stop()
	os.Exit(code)
}

func openStore(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Answers survive reopening the file; the first put under a key wins, also
// between stores (processes) sharing the file, and Put returns it.
func TestStorePersistsFirstAnswer(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "answers.sqlite")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Get(ctx, "k"); ok || err != nil {
		t.Fatalf("empty store: %v %v", ok, err)
	}
	if got, err := s.Put(ctx, "k", []byte("first")); err != nil || string(got) != "first" {
		t.Fatalf("first put: %q %v", got, err)
	}
	if got, err := s.Put(ctx, "k", []byte("second")); err != nil || string(got) != "first" {
		t.Fatalf("second put returned %q %v, want the first answer", got, err)
	}
	s.Close()

	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			s, err := Open(ctx, path)
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Close()
			if _, err := s.Put(ctx, "other", []byte{byte(i)}); err != nil {
				t.Error(err)
			}
			got, ok, err := s.Get(ctx, "k")
			if err != nil || !ok || string(got) != "first" {
				t.Errorf("reopened: %q %v %v", got, ok, err)
			}
		})
	}
	wg.Wait()
	s = openStore(t, path)
	if got, ok, err := s.Get(ctx, "other"); err != nil || !ok || len(got) != 1 {
		t.Fatalf("concurrent puts: %v %v %v", got, ok, err)
	}
}

// One claimant at a time: a second store sharing the file waits while the
// first holds its claim, then reads the first's answer.
func TestClaimIsExclusive(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "answers.sqlite")
	a, b := openStore(t, path), openStore(t, path)
	if stored, claimed, err := a.Claim(ctx, "k"); err != nil || !claimed || stored != nil {
		t.Fatalf("a: %q %v %v", stored, claimed, err)
	}
	if stored, claimed, err := b.Claim(ctx, "k"); err != nil || claimed || stored != nil {
		t.Fatalf("b while a holds the claim: %q %v %v", stored, claimed, err)
	}
	if _, err := a.Put(ctx, "k", []byte("a's answer")); err != nil {
		t.Fatal(err)
	}
	if stored, claimed, err := b.Claim(ctx, "k"); err != nil || claimed || string(stored) != "a's answer" {
		t.Fatalf("b after a's Put: %q %v %v", stored, claimed, err)
	}
	// Release frees a key without an answer; Close frees every claim.
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
}

// A lease that expired is taken over; if the first owner was alive after
// all and both store answers, Put returns the first one stored to both.
func TestExpiredClaimAndFirstPutWins(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "answers.sqlite")
	a, b := openStore(t, path), openStore(t, path)
	if _, claimed, _ := a.Claim(ctx, "k"); !claimed {
		t.Fatal("a could not claim")
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("UPDATE pending SET expires = 0"); err != nil {
		t.Fatal(err)
	}
	if _, claimed, _ := b.Claim(ctx, "k"); !claimed {
		t.Fatal("b could not take over an expired claim")
	}
	if got, err := b.Put(ctx, "k", []byte("b")); err != nil || string(got) != "b" {
		t.Fatalf("b's put: %q %v", got, err)
	}
	if got, err := a.Put(ctx, "k", []byte("a")); err != nil || string(got) != "b" {
		t.Fatalf("a's late put returned %q %v, want b's answer", got, err)
	}
}

// A claim of a process killed with SIGKILL is taken over at once (flock
// shows its owner gone), not after the lease.
func TestClaimOfAKilledOwner(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "answers.sqlite")
	openStore(t, path).Close() // create the file first
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "ANSWERS_HELPER_PATH="+path)
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
	b := openStore(t, path)
	if _, claimed, _ := b.Claim(ctx, "k"); claimed {
		t.Fatal("claimed a key a live process holds")
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	// Its lease has most of leaseTTL to run: only liveness lets b in.
	if _, claimed, err := b.Claim(ctx, "k"); err != nil || !claimed {
		t.Fatalf("after the owner was killed: claimed %v, %v", claimed, err)
	}
}
