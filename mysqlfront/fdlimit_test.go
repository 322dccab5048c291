package mysqlfront

import "testing"

// needDescriptors skips the test unless the process may open n more
// descriptors (Go raises the soft RLIMIT_NOFILE to the hard one at start;
// the test does not raise it further).
func needDescriptors(t testing.TB, n uint64) {
	t.Helper()
	limit, ok := descriptorLimit()
	if !ok {
		t.Skip("RLIMIT_NOFILE unknown")
	}
	if limit < n+256 {
		t.Skipf("needs %d descriptors, RLIMIT_NOFILE is %d", n+256, limit)
	}
}
