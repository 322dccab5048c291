package engine

import (
	"context"
	"fmt"
	"time"
)

// AnswerBackend persists released answers beyond one process's memory and
// arbitrates between processes sharing them (see package answers, which
// implements it): a repeat after a restart, or in another process sharing
// the data directory, is then free too, and concurrent first requests in
// several processes are measured once. Values are the engine's own
// encoding.
type AnswerBackend interface {
	// Get returns the answer stored under key.
	Get(ctx context.Context, key string) (results []byte, ok bool, err error)
	// Claim returns the stored answer; or claims key for this process
	// (claimed), which must then Put or Release it; or neither, when
	// another process is answering key: wait and ask again.
	Claim(ctx context.Context, key string) (stored []byte, claimed bool, err error)
	// Put stores results under key unless an answer is there already, ends
	// the claim, and returns the answer stored under key — the one to
	// release. It is durable when it returns.
	Put(ctx context.Context, key string, results []byte) (stored []byte, err error)
	// Release ends a claim without an answer.
	Release(ctx context.Context, key string)
}

// answered is the outcome of answering a key in this process.
type answered struct {
	rs    []*Result
	fresh bool
}

// claimPoll bounds the wait between two Claims of a key another process is
// answering.
const claimPoll = 50 * time.Millisecond

// answer returns the answer released under key: a stored one (memory,
// then the backend), the answer of a request for the same key in flight —
// in this process, or in another sharing the backend — or, when there is
// none, the answer measure computes now. fresh reports that measure ran
// and its answer was released: measure charged the ledger, and any other
// outcome is a re-release the caller records as a reuse.
//
// Single flight. Requests for one key that arrive while one is being
// answered wait for it (honouring their ctx: a client that gives up stops
// waiting) and get the same answer; so a key is charged once whatever the
// concurrency. If the leader stores no answer — refused (over budget),
// failed, or cancelled — each waiter starts over as if it had just
// arrived: it looks again and, if nothing is stored, answers (and is
// charged for, or refused) the batch itself, one at a time. A refusal is
// never passed on: another user's budget, or the same user's after a
// concurrent change, may allow what the leader's did not.
//
// Store before release. With a backend, the leader's answer is stored
// durably before it is released, and what is released is the answer the
// backend returns as stored under the key: a key never has two different
// answers released, even when a crash or an expired claim let two
// processes measure it (both are charged: conservative).
func (a *answerStore) answer(ctx context.Context, key string, measure func(context.Context) ([]*Result, error)) (rs []*Result, fresh bool, err error) {
	for {
		if rs, ok := a.mem.Get(key); ok {
			return rs, false, nil
		}
		out, err, joined := a.flights.Do(ctx, key, func(ctx context.Context) (answered, error) {
			// A flight for key that ended since the lookup above kept its
			// answer: look again, now that this one is the key's flight.
			if rs, ok := a.mem.Get(key); ok {
				return answered{rs: rs}, nil
			}
			rs, fresh, err := a.lead(ctx, key, measure)
			if rs != nil && err == nil {
				a.remember(key, rs) // before the waiters wake
			}
			return answered{rs, fresh}, err
		})
		if !joined {
			return out.rs, out.fresh, err
		}
		if out.rs != nil && err == nil {
			return out.rs, false, nil
		}
		if ctx.Err() != nil {
			return nil, false, ctx.Err() // this waiter gave up
		}
		// The leader released nothing (refused, failed, cancelled or
		// panicked): start over.
	}
}

// lead answers key for this process (the key's flight in this process).
func (a *answerStore) lead(ctx context.Context, key string, measure func(context.Context) ([]*Result, error)) (rs []*Result, fresh bool, err error) {
	if a.backend == nil {
		rs, err = measure(ctx)
		return rs, err == nil, err
	}
	if b, ok, err := a.backend.Get(ctx, key); err != nil {
		return nil, false, fmt.Errorf("stored answers: %w", err)
	} else if ok {
		if rs, ok := a.decode(b); ok {
			return rs, false, nil
		}
		return a.measureUnstored(ctx, measure)
	}
	wait := time.Millisecond
	for {
		stored, claimed, err := a.backend.Claim(ctx, key)
		if err != nil {
			return nil, false, fmt.Errorf("stored answers: %w", err)
		}
		if stored != nil {
			if rs, ok := a.decode(stored); ok {
				return rs, false, nil
			}
			return a.measureUnstored(ctx, measure)
		}
		if claimed {
			break
		}
		// Another process is answering key.
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, false, ctx.Err()
		}
		wait = min(2*wait, claimPoll)
	}
	released := false
	defer func() {
		if !released {
			a.backend.Release(context.WithoutCancel(ctx), key)
		}
	}()
	own, err := measure(ctx)
	if err != nil {
		return nil, false, err
	}
	enc, err := encodeResults(own)
	if err != nil {
		return nil, false, err
	}
	// Charged: store even if the client has gone, so that the charge buys
	// the answer for every later request.
	stored, err := a.backend.Put(context.WithoutCancel(ctx), key, enc)
	if err != nil {
		return nil, false, fmt.Errorf("stored answers: store before release: %w", err)
	}
	released = true
	if rs, ok := a.decode(stored); ok {
		return rs, true, nil
	}
	return own, true, nil // (unreachable: we wrote it or read it back)
}

// measureUnstored answers a key whose stored answer this version cannot
// read (another version's encoding, or damage): measured anew and
// released, not stored (the stored one is never overwritten).
func (a *answerStore) measureUnstored(ctx context.Context, measure func(context.Context) ([]*Result, error)) ([]*Result, bool, error) {
	rs, err := measure(ctx)
	return rs, err == nil, err
}

func (a *answerStore) decode(b []byte) ([]*Result, bool) {
	rs, err := decodeResults(b)
	if err != nil {
		a.log.Warn("stored answer unreadable; answering anew", "err", err)
		return nil, false
	}
	return rs, true
}
