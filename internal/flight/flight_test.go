package flight

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// failAfter bounds a wait the test expects to end; it is not a window the
// tests rely on.
const failAfter = time.Minute

// Concurrent callers of one key share one run of fn and its result, an
// error included; fn is held until every caller has joined (Joined), so
// none can pass by arriving after it.
func TestShared(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name     string
		detached bool
		err      error
	}{
		{"Do value", false, nil},
		{"Do error", false, boom},
		{"Detached value", true, nil},
		{"Detached error", true, boom},
	}
	const callers = 8
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var g Group[string, int]
			all := make(chan struct{})
			g.Joined = func(key string, n int) {
				if key != "k" {
					t.Errorf("joined key %q", key)
				}
				if n == callers {
					close(all)
				}
			}
			var runs atomic.Int32
			fn := func(context.Context) (int, error) {
				runs.Add(1)
				select {
				case <-all:
				case <-time.After(failAfter):
					t.Error("not every caller joined")
				}
				return 42, tc.err
			}
			var wg sync.WaitGroup
			var joined atomic.Int32
			for range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var v int
					var err error
					if tc.detached {
						v, err = g.Detached(context.Background(), "k", fn)
					} else {
						var j bool
						v, err, j = g.Do(context.Background(), "k", fn)
						if j {
							joined.Add(1)
						}
					}
					if v != 42 || err != tc.err {
						t.Errorf("got %d, %v", v, err)
					}
				}()
			}
			wg.Wait()
			if n := runs.Load(); n != 1 {
				t.Fatalf("fn ran %d times", n)
			}
			if !tc.detached && joined.Load() != callers-1 {
				t.Fatalf("%d callers joined, want %d", joined.Load(), callers-1)
			}
			// Done: the next caller runs fn again.
			all = make(chan struct{})
			close(all)
			g.Joined = nil
			if tc.detached {
				g.Detached(context.Background(), "k", fn)
			} else {
				g.Do(context.Background(), "k", fn)
			}
			if n := runs.Load(); n != 2 {
				t.Fatalf("a call after the flight ran fn %d times in all, want 2", n)
			}
		})
	}
}

// A waiter that gives up gets its own ctx's error; the others still get
// the result. Detached: fn's context is cancelled only once every caller
// has given up.
func TestWaiterGivesUp(t *testing.T) {
	tests := []struct {
		name     string
		detached bool
		allGive  bool // every caller gives up
	}{
		{"Do one gives up", false, false},
		{"Detached one gives up", true, false},
		{"Detached all give up", true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var g Group[int, string]
			joined := make(chan int, 10)
			g.Joined = func(_ int, n int) { joined <- n }
			release := make(chan struct{})
			fnCancelled := make(chan struct{})
			fn := func(ctx context.Context) (string, error) {
				select {
				case <-release:
					return "v", nil
				case <-ctx.Done():
					close(fnCancelled)
					return "", ctx.Err()
				}
			}
			first := make(chan error, 1)
			ctx1, cancel1 := context.WithCancel(context.Background())
			defer cancel1()
			go func() {
				var err error
				if tc.detached {
					_, err = g.Detached(ctx1, 1, fn)
				} else {
					_, err, _ = g.Do(ctx1, 1, fn)
				}
				first <- err
			}()
			<-joined
			ctx2, cancel2 := context.WithCancel(context.Background())
			second := make(chan error, 1)
			go func() {
				var err error
				if tc.detached {
					_, err = g.Detached(ctx2, 1, fn)
				} else {
					_, err, _ = g.Do(ctx2, 1, fn)
				}
				second <- err
			}()
			<-joined
			cancel2()
			if err := <-second; !errors.Is(err, context.Canceled) {
				t.Fatalf("the waiter that gave up got %v", err)
			}
			if !tc.allGive {
				close(release)
				if err := <-first; err != nil {
					t.Fatalf("the other caller got %v", err)
				}
				return
			}
			select {
			case <-fnCancelled:
				t.Fatal("fn cancelled while a caller still waits")
			default:
			}
			cancel1()
			<-first
			select {
			case <-fnCancelled:
			case <-time.After(failAfter):
				t.Fatal("fn not cancelled once every caller gave up")
			}
		})
	}
}

// A panic goes up the goroutine running fn; the waiters get ErrPanicked,
// and the key is free again.
func TestPanic(t *testing.T) {
	var g Group[string, int]
	joined := make(chan int, 2)
	g.Joined = func(_ string, n int) { joined <- n }
	release := make(chan struct{})
	waiter := make(chan error, 1)
	go func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not reach the caller running fn")
			}
		}()
		g.Do(context.Background(), "k", func(context.Context) (int, error) { <-release; panic("x") })
	}()
	<-joined
	go func() {
		_, err, _ := g.Do(context.Background(), "k", func(context.Context) (int, error) { return 0, nil })
		waiter <- err
	}()
	<-joined
	close(release)
	if err := <-waiter; !errors.Is(err, ErrPanicked) {
		t.Fatalf("waiter got %v, want ErrPanicked", err)
	}
	g.Joined = nil
	if v, err, j := g.Do(context.Background(), "k", func(context.Context) (int, error) { return 7, nil }); v != 7 || err != nil || j {
		t.Fatalf("after the panic: %d, %v, joined %v", v, err, j)
	}
}

// Different keys do not wait for each other.
func TestKeysIndependent(t *testing.T) {
	var g Group[int, int]
	hold := make(chan struct{})
	started := make(chan struct{})
	go g.Do(context.Background(), 1, func(context.Context) (int, error) { close(started); <-hold; return 1, nil })
	<-started
	if v, _, j := g.Do(context.Background(), 2, func(context.Context) (int, error) { return 2, nil }); v != 2 || j {
		t.Fatalf("key 2: %d, joined %v", v, j)
	}
	close(hold)
}
