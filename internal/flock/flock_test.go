package flock

import (
	"os"
	"path/filepath"
	"testing"
)

// Two opens of one file are two lock holders (flock locks belong to the
// open file description): the second cannot take the lock until the first
// releases it.
func TestTryLockExcludes(t *testing.T) {
	if !Supported {
		t.Skip("no flock(2) on this platform")
	}
	path := filepath.Join(t.TempDir(), "lock")
	a, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if ok, err := TryLock(a); !ok || err != nil {
		t.Fatalf("first: %v %v", ok, err)
	}
	if ok, err := TryLock(b); ok || err != nil {
		t.Fatalf("second while held: %v %v", ok, err)
	}
	if err := Unlock(a); err != nil {
		t.Fatal(err)
	}
	if ok, err := TryLock(b); !ok || err != nil {
		t.Fatalf("second after release: %v %v", ok, err)
	}
	if err := Unlock(b); err != nil {
		t.Fatal(err)
	}
	if err := Lock(a); err != nil {
		t.Fatal(err)
	}
}
