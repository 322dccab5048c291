// Package flight merges concurrent calls for one key: the first runs, the
// others wait for its result. Each waiter honours its own context: one that
// gives up stops waiting, without failing the others. The histogram builds
// (sources), the answer store (engine) and the strategy optimiser (planner)
// use it.
package flight

import (
	"context"
	"errors"
	"sync"
)

// ErrPanicked is what the callers waiting on a call get when its function
// panicked (the panic itself goes on up the goroutine that ran it).
var ErrPanicked = errors.New("flight: the call panicked")

// Group is a set of calls in flight, by key. The zero Group is ready to
// use; it must not be copied after first use.
type Group[K comparable, V any] struct {
	mu    sync.Mutex
	calls map[K]*call[V]

	// Joined, when set (tests), is called under the group's lock each time
	// a caller joins the call for key, with the number of callers now
	// waiting for it, this one included (for Do, the one running it too).
	// A test can so hold a call until every caller has joined it.
	Joined func(key K, waiters int)
}

type call[V any] struct {
	done    chan struct{}
	val     V
	err     error
	waiters int
	cancel  context.CancelFunc // Detached only
}

// join returns the call for key, a new one if none is in flight (started
// reports that), counting the caller among its waiters. g.mu is held.
func (g *Group[K, V]) join(key K) (c *call[V], started bool) {
	if g.calls == nil {
		g.calls = map[K]*call[V]{}
	}
	c = g.calls[key]
	if c == nil {
		c = &call[V]{done: make(chan struct{})}
		g.calls[key] = c
		started = true
	}
	c.waiters++
	if g.Joined != nil {
		g.Joined(key, c.waiters)
	}
	return c, started
}

// finish ends c with fn's outcome (ErrPanicked when fn did not return) and
// wakes its waiters; callers arriving afterwards start a new call.
func (g *Group[K, V]) finish(key K, c *call[V], v V, err error, returned bool) {
	if !returned {
		var zero V
		v, err = zero, ErrPanicked
	}
	g.mu.Lock()
	if g.calls[key] == c {
		delete(g.calls, key)
	}
	c.val, c.err = v, err
	g.mu.Unlock()
	close(c.done)
}

// wait waits for c or for ctx, whichever is first. A caller that gives up
// gets ctx.Err(), and leaves: left reports it was the last waiter.
func (g *Group[K, V]) wait(ctx context.Context, c *call[V]) (v V, err error, left bool) {
	select {
	case <-c.done:
		g.mu.Lock()
		c.waiters--
		g.mu.Unlock()
		return c.val, c.err, false
	case <-ctx.Done():
		g.mu.Lock()
		c.waiters--
		left = c.waiters == 0
		g.mu.Unlock()
		var zero V
		return zero, ctx.Err(), left
	}
}

// Do runs fn for key in this goroutine, on ctx, unless a call for key is
// in flight: then it waits for that call's result (joined), or until ctx
// is done (joined, and ctx.Err()). Whatever fn returns — an error
// included — is every waiter's result; a waiter that must not inherit
// another's failure (a cancellation, a refusal) calls Do again. A caller
// arriving after fn returned starts a new call: a caller that wants fn's
// result kept should keep it (in a cache) before fn returns, and look there
// first inside fn.
func (g *Group[K, V]) Do(ctx context.Context, key K, fn func(context.Context) (V, error)) (v V, err error, joined bool) {
	g.mu.Lock()
	c, started := g.join(key)
	g.mu.Unlock()
	if !started {
		v, err, _ = g.wait(ctx, c)
		return v, err, true
	}
	returned := false
	defer func() {
		g.finish(key, c, v, err, returned)
		g.mu.Lock()
		c.waiters--
		g.mu.Unlock()
	}()
	v, err = fn(ctx)
	returned = true
	return v, err, false
}

// Detached runs fn for key once for every caller asking for it while it
// runs, in a goroutine of its own, on a context that keeps ctx's values but
// not its deadline or cancellation. Every caller, the first included, waits
// for fn or until its own ctx is done (then it gets ctx.Err()); fn's
// context is cancelled when the last caller waiting gives up. So one
// caller's disconnect does not fail the others, and nobody's disconnect
// leaves fn running for no one.
func (g *Group[K, V]) Detached(ctx context.Context, key K, fn func(context.Context) (V, error)) (V, error) {
	g.mu.Lock()
	c, started := g.join(key)
	if started {
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		c.cancel = cancel
		go func() {
			defer cancel()
			var (
				v        V
				err      error
				returned bool
			)
			defer func() { g.finish(key, c, v, err, returned) }()
			v, err = fn(fctx)
			returned = true
		}()
	}
	g.mu.Unlock()
	v, err, left := g.wait(ctx, c)
	if left {
		c.cancel()
	}
	return v, err
}
