//go:build unix

package mysqlfront

import "syscall"

// descriptorLimit is the process's RLIMIT_NOFILE (its soft limit, which Go
// raises to the hard one at start); ok is false if it cannot be read.
func descriptorLimit() (uint64, bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, false
	}
	return uint64(rl.Cur), true
}
