//go:build !(linux || darwin || freebsd || openbsd || netbsd || dragonfly)

package flock

import "os"

// Supported reports whether the platform has flock(2).
const Supported = false

// TryLock, Lock and Unlock do nothing where flock(2) is missing.
func TryLock(*os.File) (bool, error) { return true, nil }
func Lock(*os.File) error            { return nil }
func Unlock(*os.File) error          { return nil }
