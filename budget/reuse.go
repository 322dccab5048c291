package budget

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// maxPendingReuses bounds the reuse entries waiting to be committed; a
// caller that finds the queue full waits for the committer (backpressure
// instead of unbounded memory).
const maxPendingReuses = 4096

// reuseCommitDelay is how long the committer lets reuse entries gather
// before it writes them: one fsync per this interval at most (unless
// maxPendingReuses/4 gather first, or a flush is asked for), whatever the
// rate of repeats. Entries are at risk in a crash for about this long; they
// cost nothing, so no accounting is.
const reuseCommitDelay = 50 * time.Millisecond

// reuseQueue is the group commit of KindReuse entries: RecordReuse appends
// to pending and returns; one goroutine (commitReuses) writes everything
// pending in one transaction — one fsync for however many entries arrived
// while the previous batch was being written — on the same hash chain as
// every other entry.
type reuseQueue struct {
	mu       chan struct{} // a one-slot lock, so waiters can also watch ctx
	pending  []Charge
	enqueued uint64 // entries ever enqueued
	done     uint64 // entries ever written (or dropped after a failed write)
	closed   bool
	urgent   bool          // a flush waits: write without delay
	wake     chan struct{} // buffered(1): work for the committer
	progress chan struct{} // closed and replaced after each batch
	exited   chan struct{} // closed when the committer returns
}

func (l *Ledger) startReuses() {
	q := &reuseQueue{
		mu:       make(chan struct{}, 1),
		wake:     make(chan struct{}, 1),
		progress: make(chan struct{}),
		exited:   make(chan struct{}),
	}
	l.reuses = q
	go l.commitReuses()
}

func (q *reuseQueue) lock()   { q.mu <- struct{}{} }
func (q *reuseQueue) unlock() { <-q.mu }

// RecordReuse appends a zero-cost KindReuse entry (a stored answer
// re-released) to the chain in the background and returns without waiting
// for it to be written: repeats are frequent and cost nothing, so they are
// group-committed instead of fsync'd one by one — within reuseCommitDelay,
// or sooner in the transaction of this Ledger's next charge, ahead of it. Entries keep their order
// and land on the same hash chain as the charges, and every one is written
// before Close returns; a crash can lose entries still pending (only
// zero-cost ones: no accounting). [Ledger.Entries], [Ledger.Budgets] and
// [Ledger.Verify] first wait for what is pending ([Ledger.FlushReuses]),
// so a process reads its own repeats. c is validated as [Ledger.Record]
// does; RecordReuse blocks (honouring ctx) only while maxPendingReuses
// entries wait.
func (l *Ledger) RecordReuse(ctx context.Context, c Charge) error {
	c, err := normaliseCharge(c, false)
	if err != nil {
		return fmt.Errorf("budget: record reuse: %w", err)
	}
	if !c.Cost.IsZero() {
		return fmt.Errorf("budget: record reuse: a reuse entry costs nothing, got ε=%g ρ=%g", c.Cost.Epsilon, c.Cost.Rho)
	}
	q := l.reuses
	if q == nil {
		return fmt.Errorf("budget: record reuse: %w", errReadOnly)
	}
	for {
		q.lock()
		if q.closed {
			q.unlock()
			return fmt.Errorf("budget: record reuse: %w", errClosed)
		}
		if len(q.pending) < maxPendingReuses {
			q.pending = append(q.pending, c)
			q.enqueued++
			q.unlock()
			select {
			case q.wake <- struct{}{}:
			default:
			}
			return nil
		}
		progress := q.progress
		q.unlock()
		select {
		case <-progress:
		case <-ctx.Done():
			return fmt.Errorf("budget: record reuse: %w", ctx.Err())
		}
	}
}

// FlushReuses waits until every reuse entry recorded before the call is
// written (or, after a failed write, dropped and logged).
func (l *Ledger) FlushReuses(ctx context.Context) error {
	q := l.reuses
	if q == nil { // read-only: nothing of its own to flush
		return nil
	}
	q.lock()
	target := q.enqueued
	if q.done < target {
		q.urgent = true
	}
	q.unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	for {
		q.lock()
		done, progress := q.done, q.progress
		q.unlock()
		if done >= target {
			return nil
		}
		select {
		case <-progress:
		case <-q.exited:
			return nil // closed: the committer wrote everything before exiting
		case <-ctx.Done():
			return fmt.Errorf("budget: flush reuse entries: %w", ctx.Err())
		}
	}
}

// commitReuses writes pending reuse entries in batches until the queue is
// closed and empty.
func (l *Ledger) commitReuses() {
	q := l.reuses
	defer close(q.exited)
	delay := time.NewTimer(0)
	<-delay.C
	for {
		q.lock()
		n, closed, urgent := len(q.pending), q.closed, q.urgent
		q.unlock()
		if n == 0 {
			if closed {
				return
			}
			<-q.wake
			continue
		}
		if !closed && !urgent && n < maxPendingReuses/4 {
			// Let more gather; a flush, Close or a full batch cuts it short.
			delay.Reset(reuseCommitDelay)
		gather:
			for {
				select {
				case <-delay.C:
					break gather
				case <-q.wake:
					q.lock()
					n, closed, urgent = len(q.pending), q.closed, q.urgent
					q.unlock()
					if closed || urgent || n >= maxPendingReuses/4 {
						if !delay.Stop() {
							<-delay.C
						}
						break gather
					}
				}
			}
		}
		q.lock()
		batch := q.pending
		q.pending = nil
		q.urgent = false
		q.unlock()
		// The batch is written even while Close waits: Close stops new
		// records first, then waits for this goroutine.
		err := l.write(context.Background(), func(tx *sql.Tx) error {
			for _, c := range batch {
				if _, err := l.appendEntry(context.Background(), tx, KindReuse, c); err != nil {
					return err
				}
			}
			return nil
		}, nil)
		if err != nil && !errors.Is(err, errClosed) {
			l.log.Error("reuse entries not written (zero-cost: no accounting lost)", "entries", len(batch), "err", err)
		}
		q.lock()
		q.done += uint64(len(batch))
		close(q.progress)
		q.progress = make(chan struct{})
		q.unlock()
	}
}

// takeReuses removes and returns the pending reuse entries, for a charge to
// write ahead of itself in its own transaction (see Charge); the caller
// then calls settleReuses.
func (l *Ledger) takeReuses() []Charge {
	q := l.reuses
	if q == nil {
		return nil
	}
	q.lock()
	defer q.unlock()
	batch := q.pending
	q.pending = nil
	return batch
}

// settleReuses records the outcome of a batch from takeReuses: written, or
// (the transaction failed) put back in front of what arrived since.
func (l *Ledger) settleReuses(batch []Charge, written bool) {
	if len(batch) == 0 {
		return
	}
	q := l.reuses
	q.lock()
	defer q.unlock()
	if !written {
		q.pending = append(batch, q.pending...)
		select {
		case q.wake <- struct{}{}:
		default:
		}
		return
	}
	q.done += uint64(len(batch))
	close(q.progress)
	q.progress = make(chan struct{})
}

// stopReuses refuses new reuse entries and waits until the committer has
// written every pending one and exited.
func (l *Ledger) stopReuses() {
	q := l.reuses
	if q == nil {
		return
	}
	q.lock()
	q.closed = true
	q.unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	<-q.exited
}
