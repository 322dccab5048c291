//go:build !(linux || darwin || freebsd || openbsd || netbsd || dragonfly)

package main

import "os"

// Without flock(2) the pid file is not locked; `dpproxy reload` then
// trusts it (and SIGHUP may not exist at all on the platform).
func lockPidFile(*os.File) (bool, error) { return true, nil }

func pidFileHeld(path string) (bool, error) {
	_, err := os.Stat(path)
	return err == nil, err
}
