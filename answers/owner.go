package answers

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dpproxy/dpproxy/internal/flock"
)

// ownerLock shows other processes that a Store is alive: the Store holds
// an exclusive flock(2) on the file <dir>/<owner> for as long as it is
// open, and the kernel drops it when the process dies, however it dies.
// A claim whose owner's file is missing or unlocked belongs to a dead
// owner and is taken over at once. Without flock(2) every owner counts as
// alive, so a crashed owner's claim is taken over when its lease expires.
type ownerLock struct {
	dir, path string // path: this Store's file
	f         *os.File
}

func openOwnerLock(dir, owner string) (*ownerLock, error) {
	if !flock.Supported {
		return &ownerLock{}, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("owner lock: %w", err)
	}
	// Lock a temporary file, then rename it into place, so that no other
	// process ever sees this owner's file unlocked.
	f, err := os.CreateTemp(dir, ".new-*")
	if err != nil {
		return nil, fmt.Errorf("owner lock: %w", err)
	}
	if ok, err := flock.TryLock(f); !ok || err != nil {
		f.Close()
		os.Remove(f.Name())
		if err == nil {
			err = errors.New("a fresh file is locked")
		}
		return nil, fmt.Errorf("owner lock: %w", err)
	}
	path := filepath.Join(dir, owner)
	if err := os.Rename(f.Name(), path); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("owner lock: %w", err)
	}
	l := &ownerLock{dir: dir, path: path, f: f}
	l.sweep()
	return l, nil
}

// alive reports whether the owner's Store is open, in this process or
// another.
func (l *ownerLock) alive(owner string) bool {
	if !flock.Supported {
		return true
	}
	if owner == "" || filepath.Base(owner) != owner || owner[0] == '.' {
		return false
	}
	f, err := os.Open(filepath.Join(l.dir, owner))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist) // unsure: alive (its lease still expires)
	}
	defer f.Close()
	if ok, err := flock.TryLock(f); !ok || err != nil {
		return true // held (or unsure: alive, its lease still expires)
	}
	// Nobody holds it: the owner is gone. Remove its file while holding
	// the lock (a later check finds no file: gone too).
	os.Remove(f.Name())
	flock.Unlock(f)
	return false
}

// sweep removes the files of owners that are gone.
func (l *ownerLock) sweep() {
	es, err := os.ReadDir(l.dir)
	if err != nil {
		return
	}
	for _, e := range es {
		if n := e.Name(); n[0] != '.' && filepath.Join(l.dir, n) != l.path {
			l.alive(n)
		}
	}
}

func (l *ownerLock) close() error {
	if l.f == nil {
		return nil
	}
	os.Remove(l.path)
	return l.f.Close()
}
