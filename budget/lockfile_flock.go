//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package budget

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// writerLock is an flock(2) on a file beside the ledger ("<ledger>-lock"),
// taken around every write transaction. SQLite serialises writers by itself,
// but a writer that finds the database locked can only poll for it; the
// flock puts waiting writers, from any process, to sleep in the kernel until
// the lock is free, which keeps a crowd of writers cheap and quick. The lock
// is advisory and only an optimisation: correctness rests on BEGIN
// IMMEDIATE. It is a separate file because SQLite's own POSIX locks on the
// database file are dropped by any close of that file within the process.
type writerLock struct{ f *os.File }

func openWriterLock(dbPath string) (*writerLock, error) {
	f, err := os.OpenFile(dbPath+"-lock", os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open writer lock: %w", err)
	}
	return &writerLock{f: f}, nil
}

// tryLock takes the lock if it is free and reports whether it did.
func (w *writerLock) tryLock() (bool, error) {
	for {
		err := syscall.Flock(int(w.f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		}
		return false, fmt.Errorf("flock %s: %w", w.f.Name(), err)
	}
}

// lock waits for the lock and takes it.
func (w *writerLock) lock() error {
	for {
		err := syscall.Flock(int(w.f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			if err != nil {
				return fmt.Errorf("flock %s: %w", w.f.Name(), err)
			}
			return nil
		}
	}
}

func (w *writerLock) unlock() error {
	if err := syscall.Flock(int(w.f.Fd()), syscall.LOCK_UN); err != nil {
		return fmt.Errorf("unlock %s: %w", w.f.Name(), err)
	}
	return nil
}

func (w *writerLock) close() error { return w.f.Close() }
