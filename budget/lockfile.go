package budget

import (
	"fmt"
	"os"

	"github.com/dpproxy/dpproxy/internal/flock"
)

// writerLock is an flock(2) on a file beside the ledger ("<ledger>-lock"),
// taken around every write transaction. SQLite serialises writers by itself,
// but a writer that finds the database locked can only poll for it; the
// flock puts waiting writers, from any process, to sleep in the kernel until
// the lock is free, which keeps a crowd of writers cheap and quick. The lock
// is advisory and only an optimisation: correctness rests on BEGIN
// IMMEDIATE (where flock(2) is missing, writers poll for the database lock,
// see retryBusy). It is a separate file because SQLite's own POSIX locks on
// the database file are dropped by any close of that file within the
// process.
type writerLock struct{ f *os.File }

func openWriterLock(dbPath string) (*writerLock, error) {
	f, err := os.OpenFile(dbPath+"-lock", os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open writer lock: %w", err)
	}
	return &writerLock{f: f}, nil
}

// tryLock takes the lock if it is free and reports whether it did.
func (w *writerLock) tryLock() (bool, error) { return flock.TryLock(w.f) }

// lock waits for the lock and takes it.
func (w *writerLock) lock() error { return flock.Lock(w.f) }

func (w *writerLock) unlock() error { return flock.Unlock(w.f) }

func (w *writerLock) close() error { return w.f.Close() }
