package answers

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// claim is a key this Store answers until Put or Release ends it. On
// SQLite its lease is renewed meanwhile (stop, done); on PostgreSQL it is
// an advisory lock held by a connection of its own (lock).
type claim struct {
	stop chan struct{}
	done chan struct{}
	lock *pgLock
}

// end stops holding the key: the lease stops being renewed, or the
// advisory lock is released.
func (c *claim) end() {
	if c.lock != nil {
		c.lock.unlock()
		return
	}
	close(c.stop)
	<-c.done
}

// Claim asks to answer key. It returns the stored answer if there is one;
// otherwise, unless another live owner holds a current claim on key, it
// claims key (claimed is true): this Store then answers it, and must call
// Put (with the answer) or Release (without). When neither is returned,
// another process is answering key: wait a little and call Claim again.
func (s *Store) Claim(ctx context.Context, key string) (stored []byte, claimed bool, err error) {
	// A read first: waiters poll here without taking the write lock.
	if stored, ok, err := s.Get(ctx, key); err != nil || ok {
		return stored, false, err
	}
	if s.pg != nil {
		return s.claimPG(ctx, key)
	}
	if owner, expires, ok, err := s.pendingOf(ctx, s.db, key); err != nil {
		return nil, false, err
	} else if ok && s.held(key, owner, expires) {
		return nil, false, nil
	}
	tx, err := s.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE (see Open)
	if err != nil {
		return nil, false, fmt.Errorf("answers: claim: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit, a no-op
	err = tx.QueryRowContext(ctx, "SELECT results FROM answers WHERE key = ?", key).Scan(&stored)
	switch {
	case err == nil:
		return stored, false, nil
	case !errors.Is(err, sql.ErrNoRows):
		return nil, false, fmt.Errorf("answers: claim: %w", err)
	}
	if owner, expires, ok, err := s.pendingOf(ctx, tx, key); err != nil {
		return nil, false, err
	} else if ok && s.held(key, owner, expires) {
		return nil, false, nil
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO pending (key, owner, expires) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, expires = excluded.expires",
		key, s.owner, time.Now().Add(leaseTTL).UnixMilli()); err != nil {
		return nil, false, fmt.Errorf("answers: claim: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, false, fmt.Errorf("answers: claim: %w", err)
	}
	c := &claim{stop: make(chan struct{}), done: make(chan struct{})}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.deleteClaim(key)
		return nil, false, errors.New("answers: claim: store is closed")
	}
	if old := s.claims[key]; old != nil {
		defer old.end() // a stale claim of this Store's own (see held)
	}
	s.claims[key] = c
	s.mu.Unlock()
	go s.renew(key, c)
	return nil, true, nil
}

// Release ends this Store's claim on key without an answer: another
// claimant may take the key at once.
func (s *Store) Release(ctx context.Context, key string) {
	s.endClaim(key)
	if s.pg == nil {
		s.deleteClaim(key)
	}
}

func (s *Store) deleteClaim(key string) {
	// Without the caller's context: a cancelled request still frees its
	// claim (if this fails, the lease expires).
	if _, err := s.db.Exec("DELETE FROM pending WHERE key = ? AND owner = ?", key, s.owner); err != nil {
		s.log.Warn("claim not released; it expires with its lease", "err", err)
	}
}

func (s *Store) endClaim(key string) {
	if c := s.takeClaim(key); c != nil {
		c.end()
	}
}

// takeClaim removes this Store's claim on key from its claims, and returns
// it (nil if there is none) for the caller to end.
func (s *Store) takeClaim(key string) *claim {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.claims[key]
	delete(s.claims, key)
	return c
}

// held reports whether a pending row still holds key against this Store:
// its lease is current and its owner alive — another live process, or
// this Store with a claim it has not ended.
func (s *Store) held(key, owner string, expires int64) bool {
	if time.Now().UnixMilli() >= expires {
		return false
	}
	if owner == s.owner {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.claims[key] != nil
	}
	return s.lock.alive(owner)
}

type queryRower interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (s *Store) pendingOf(ctx context.Context, q queryRower, key string) (owner string, expires int64, ok bool, err error) {
	err = q.QueryRowContext(ctx, "SELECT owner, expires FROM pending WHERE key = ?", key).Scan(&owner, &expires)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", 0, false, nil
	case err != nil:
		return "", 0, false, fmt.Errorf("answers: claim: %w", err)
	}
	return owner, expires, true, nil
}

// renew extends the claim's lease every leaseTTL/3 until it ends.
func (s *Store) renew(key string, c *claim) {
	defer close(c.done)
	t := time.NewTicker(leaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			if _, err := s.db.Exec("UPDATE pending SET expires = ? WHERE key = ? AND owner = ?",
				time.Now().Add(leaseTTL).UnixMilli(), key, s.owner); err != nil {
				s.log.Warn("claim not renewed", "err", err)
			}
		}
	}
}
