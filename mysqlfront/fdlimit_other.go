//go:build !unix

package mysqlfront

// descriptorLimit: no RLIMIT_NOFILE here.
func descriptorLimit() (uint64, bool) { return 0, false }
