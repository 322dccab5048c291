package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/answers"
	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/parser"
)

// dashboard is a mix of five DP batches a dashboard sends on every refresh.
var dashboard = [][]string{
	{"SELECT COUNT(*) FROM adult WHERE age BETWEEN 33 AND 47"},
	{"SELECT sex, COUNT(*) FROM adult GROUP BY sex"},
	{"SELECT education, COUNT(*) AS n FROM adult GROUP BY education"},
	{"SELECT occupation FROM adult GROUP BY occupation ORDER BY COUNT(*) DESC LIMIT 3"},
	{"SELECT AVG(hours_per_week) FROM adult WHERE sex = 'Female'", "SELECT COUNT(*) FROM adult WHERE sex = 'Male'"},
}

// storm sends every dashboard batch from n goroutines at once, through
// the given engines in turn, and returns the answers by batch.
func storm(t *testing.T, engines []*Engine, n int) [][][]*Result {
	t.Helper()
	got := make([][][]*Result, len(dashboard))
	for b := range got {
		got[b] = make([][]*Result, n)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range n {
		wg.Go(func() {
			<-start
			for k := range dashboard {
				b := (k + g) % len(dashboard) // each goroutine in its own order
				rs, err := engines[g%len(engines)].Answer(context.Background(), &Session{ConnID: uint32(g), User: "analyst"}, dashboard[b])
				if err != nil {
					t.Errorf("batch %d: %v", b, err)
					return
				}
				got[b][g] = rs
			}
		})
	}
	close(start)
	wg.Wait()
	return got
}

func checkStorm(t *testing.T, f *fixture, got [][][]*Result, n int) {
	t.Helper()
	for b, answers := range got {
		for g := 1; g < n; g++ {
			if !reflect.DeepEqual(answers[g], answers[0]) {
				t.Fatalf("batch %d: goroutine %d got %+v, goroutine 0 %+v", b, g, answers[g], answers[0])
			}
		}
	}
	kinds := map[string]int{}
	for _, e := range f.entries(t) {
		kinds[e.Kind]++
	}
	if kinds[budget.KindCharge] != len(dashboard) || kinds[budget.KindReuse] != len(dashboard)*(n-1) {
		t.Fatalf("ledger: %v; want %d charges and %d reuses", kinds, len(dashboard), len(dashboard)*(n-1))
	}
	if err := f.ledger.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// 64 concurrent first requests of each dashboard batch are charged once
// per batch and all get the same answer (issue 10: 64 × 5 charges).
func TestSingleFlightInProcess(t *testing.T) {
	f := newFixture(t)
	const n = 64
	checkStorm(t, f, storm(t, []*Engine{f.eng}, n), n)
}

// The same with two engines on one ledger and one answers file through two
// stores: two processes sharing a data directory.
func TestSingleFlightAcrossStores(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "answers.sqlite")
	var engines []*Engine
	for range 2 {
		st, err := answers.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		cfg := f.cfg
		cfg.Answers = st
		engines = append(engines, New(cfg))
	}
	const n = 32
	checkStorm(t, f, storm(t, engines, n), n)
}

// A leader that releases nothing (refused, failed, panicked) makes each
// waiter start over; the next leader's answer is the one everybody gets.
// A waiter whose context ends stops waiting.
func TestSingleFlightLeaderFailure(t *testing.T) {
	for _, how := range []string{"refused", "panics"} {
		t.Run(how, func(t *testing.T) {
			a := newAnswerStore(nil, 1<<30, slog.New(slog.NewTextHandler(io.Discard, nil)))
			entered := make(chan struct{})
			release := make(chan struct{})
			var calls atomic.Int32
			measure := func(context.Context) ([]*Result, error) {
				if calls.Add(1) == 1 {
					close(entered)
					<-release
					if how == "panics" {
						panic("injected")
					}
					return nil, parser.Errorf(parser.CodeBudgetExceeded, "over budget")
				}
				return []*Result{{Rows: [][]any{{int64(42)}}}}, nil
			}
			leaderErr := make(chan error, 1)
			go func() {
				defer func() {
					if r := recover(); r != nil {
						leaderErr <- fmt.Errorf("panic: %v", r)
					}
				}()
				_, _, err := a.answer(context.Background(), "k", measure)
				leaderErr <- err
			}()
			<-entered
			const waiters = 8
			results := make(chan []*Result, waiters)
			fresh := make(chan bool, waiters)
			for range waiters {
				go func() {
					rs, f, err := a.answer(context.Background(), "k", measure)
					if err != nil {
						t.Error(err)
					}
					results <- rs
					fresh <- f
				}()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			if _, _, err := a.answer(ctx, "k", measure); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("a waiter whose context ended: %v", err)
			}
			close(release)
			if err := <-leaderErr; err == nil {
				t.Fatal("the failed leader returned no error")
			}
			measured := 0
			for range waiters {
				rs := <-results
				if len(rs) != 1 || rs[0].Rows[0][0] != int64(42) {
					t.Fatalf("a waiter got %+v", rs)
				}
				if <-fresh {
					measured++
				}
			}
			if calls.Load() != 2 || measured != 1 {
				t.Fatalf("measured %d times (%d fresh answers), want the failed leader and one more", calls.Load(), measured)
			}
		})
	}
}
