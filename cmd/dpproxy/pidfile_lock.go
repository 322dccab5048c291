package main

import (
	"os"

	"github.com/dpproxy/dpproxy/internal/flock"
)

// lockPidFile takes an exclusive flock(2) on the open pid file, without
// waiting; ok is false if another process holds it. The kernel drops the
// lock when the process ends, however it ends (SIGKILL included), so a held
// lock means a live proxy. Without flock(2) the pid file is not locked, and
// `dpproxy reload` trusts it.
func lockPidFile(f *os.File) (ok bool, err error) { return flock.TryLock(f) }

// pidFileHeld reports whether a live process holds the pid file's lock
// (without flock(2): whether the file exists).
func pidFileHeld(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close() // closing f drops a lock taken here
	if !flock.Supported {
		return true, nil
	}
	ok, err := flock.TryLock(f)
	return !ok && err == nil, err
}
