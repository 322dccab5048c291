package answers

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/dpproxy/dpproxy/internal/statedb"
)

// On PostgreSQL a claim is a session-level advisory lock on the key's
// 64-bit hash, taken with pg_try_advisory_lock on a connection pinned for
// the claim and released (pg_advisory_unlock) by Put, after the answer is
// committed, or by Release. When the owning process dies its connection
// closes and PostgreSQL drops the lock at once: no lease, no owner files.

// lockNamespace keeps answer locks apart from other advisory locks on the
// same database (statedb.LockKey).
const lockNamespace = "dpproxy answers"

// unlockTimeout bounds an unlock; past it the connection is dropped, which
// releases the lock as surely.
const unlockTimeout = 10 * time.Second

// keepaliveAndLock tries the lock, and first sets the session's TCP
// keepalives (15 s idle, then 3 probes 5 s apart), so that when the host
// of a claim's owner vanishes without closing its connection (power lost,
// network cut) PostgreSQL notices within about half a minute and drops the
// lock, rather than after the operating system's default of hours. The
// settings stay with the pooled connection, where they do no harm; over a
// Unix socket they are ignored.
const keepaliveAndLock = `SELECT set_config('tcp_keepalives_idle', '15', false), set_config('tcp_keepalives_interval', '5', false),
	set_config('tcp_keepalives_count', '3', false), pg_try_advisory_lock(?)`

// pgClaims bounds the connections claims pin. Each claim holds one pooled
// connection from Claim until Put or Release, while its owner measures,
// which itself needs connections of the same pool (ledger, measurements):
// claims may pin at most half of the pool, so that the holders always
// find connections to finish with. When every slot is taken Claim does not
// wait: it reports the key as not claimed yet, and the engine polls again
// (engine.claimPoll), as it does for a key another proxy answers.
type pgClaims struct {
	slots chan struct{}
}

// claimSlots is how many claims a pool of maxOpen connections (0:
// unbounded) may hold at once.
func claimSlots(maxOpen int) int {
	if maxOpen <= 0 {
		return 32
	}
	return max(1, maxOpen/2)
}

// OpenDB opens the store in the PostgreSQL database db (creating its table
// if needed), where every proxy pointed at db shares the stored answers and
// the claims. Close ends the Store's claims but leaves db open.
func OpenDB(ctx context.Context, db *statedb.DB) (*Store, error) {
	if db.Dialect != statedb.Postgres {
		return nil, fmt.Errorf("answers: open %s: OpenDB takes a PostgreSQL database; SQLite files open with Open", db.Where)
	}
	if err := statedb.CreateSchema(ctx, db, "answers", fmt.Sprintf(answersTable, "BYTEA")); err != nil {
		return nil, fmt.Errorf("answers: %w", err)
	}
	return &Store{db: db.DB, wdb: db.DB, claims: map[string]*claim{},
		pg:  &pgClaims{slots: make(chan struct{}, claimSlots(db.Stats().MaxOpenConnections))},
		log: slog.Default().With("component", "answers", "db", db.Where)}, nil
}

// pgLock is a held advisory lock and the connection holding it.
type pgLock struct {
	conn *sql.Conn
	id   int64
	free func() // returns the claim slot
	log  *slog.Logger
}

// claimPG is Claim's PostgreSQL half, after Get found no answer.
func (s *Store) claimPG(ctx context.Context, key string) (stored []byte, claimed bool, err error) {
	s.mu.Lock()
	closed, mine := s.closed, s.claims[key] != nil
	s.mu.Unlock()
	switch {
	case closed:
		return nil, false, errors.New("answers: claim: store is closed")
	case mine:
		return nil, false, nil // this Store answers key already
	}
	select {
	case s.pg.slots <- struct{}{}:
	default:
		return nil, false, nil // every slot taken: the caller polls
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		<-s.pg.slots
		return nil, false, fmt.Errorf("answers: claim: %w", err)
	}
	l := &pgLock{conn: conn, id: statedb.LockKey(lockNamespace, key), free: func() { <-s.pg.slots }, log: s.log}
	var got bool
	var idle, interval, count string
	if err := conn.QueryRowContext(ctx, keepaliveAndLock, l.id).Scan(&idle, &interval, &count, &got); err != nil {
		l.drop() // the lock may have been taken before the error
		return nil, false, fmt.Errorf("answers: claim: %w", err)
	}
	if !got {
		l.conn.Close() // held by nobody on this connection: back to the pool
		l.free()
		return nil, false, nil
	}
	// The owner before us may have stored its answer and unlocked between
	// our Get and our lock.
	err = conn.QueryRowContext(ctx, "SELECT results FROM answers WHERE key = ?", key).Scan(&stored)
	switch {
	case err == nil:
		l.unlock()
		return stored, false, nil
	case !errors.Is(err, sql.ErrNoRows):
		l.unlock()
		return nil, false, fmt.Errorf("answers: claim: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		l.unlock()
		return nil, false, errors.New("answers: claim: store is closed")
	}
	s.claims[key] = &claim{lock: l}
	return nil, true, nil
}

// unlock releases the lock and returns the connection to the pool; if the
// unlock fails, it drops the connection instead, which releases the lock
// too. A pooled connection must never keep a lock: its key would stay
// claimed for as long as this process lives.
func (l *pgLock) unlock() {
	ctx, cancel := context.WithTimeout(context.Background(), unlockTimeout)
	defer cancel()
	var ok bool
	if err := l.conn.QueryRowContext(ctx, "SELECT pg_advisory_unlock(?)", l.id).Scan(&ok); err != nil {
		l.log.Warn("claim not unlocked; dropping its connection", "err", err)
		l.drop()
		return
	}
	if !ok { // not held: the connection was replaced under us, or worse
		l.log.Warn("claim was not locked at unlock; dropping its connection")
		l.drop()
		return
	}
	l.conn.Close()
	l.free()
}

// drop closes the connection rather than pooling it: its server session
// ends, and every advisory lock it held with it.
func (l *pgLock) drop() {
	l.conn.Raw(func(any) error { return driver.ErrBadConn }) //nolint:errcheck // the error is ours
	l.conn.Close()
	l.free()
}
