//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

// Package flock takes advisory flock(2) locks on open files: the one
// wrapper the ledger's writer lock, the answer store's owner locks and the
// proxy's pid file share. The kernel drops a process's locks when it ends,
// however it ends, so a held lock means a live holder. Where flock(2) does
// not exist (Supported is false), every call succeeds without locking.
package flock

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Supported reports whether the platform has flock(2).
const Supported = true

// TryLock takes an exclusive lock on f if it is free, without waiting, and
// reports whether it did.
func TryLock(f *os.File) (bool, error) {
	err := retry(f, syscall.LOCK_EX|syscall.LOCK_NB)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, syscall.EWOULDBLOCK):
		return false, nil
	}
	return false, fmt.Errorf("flock %s: %w", f.Name(), err)
}

// Lock waits for an exclusive lock on f and takes it.
func Lock(f *os.File) error {
	if err := retry(f, syscall.LOCK_EX); err != nil {
		return fmt.Errorf("flock %s: %w", f.Name(), err)
	}
	return nil
}

// Unlock releases f's lock.
func Unlock(f *os.File) error {
	if err := retry(f, syscall.LOCK_UN); err != nil {
		return fmt.Errorf("unlock %s: %w", f.Name(), err)
	}
	return nil
}

// retry calls flock(2) again when a signal interrupts it.
func retry(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
