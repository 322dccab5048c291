package heappeak

import "testing"

var sink []byte

// A 64 MiB allocation kept live while f runs shows in the peak.
func TestDuring(t *testing.T) {
	const size = 64 << 20
	peak := During(func() { sink = make([]byte, size) })
	sink = nil
	if peak < size {
		t.Errorf("peak %d bytes, want at least %d", peak, size)
	}
}
