//go:build !(linux || darwin || freebsd || openbsd || netbsd || dragonfly)

package budget

// writerLock is a no-op where flock(2) is missing: writers then rely on
// BEGIN IMMEDIATE alone and poll for the database lock (see retryBusy).
type writerLock struct{}

func openWriterLock(string) (*writerLock, error) { return &writerLock{}, nil }
func (*writerLock) tryLock() (bool, error)       { return true, nil }
func (*writerLock) lock() error                  { return nil }
func (*writerLock) unlock() error                { return nil }
func (*writerLock) close() error                 { return nil }
