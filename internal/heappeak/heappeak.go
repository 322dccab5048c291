// Package heappeak measures the peak Go heap while a function runs: the
// proxy's memory benchmarks (cmd/dpproxy) and `dpproxy-bench source` report
// it per histogram cell.
package heappeak

import (
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"time"
)

// During samples the Go heap (live and not yet collected objects) every
// millisecond while f runs, and returns the peak above the level before.
func During(f func()) uint64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			if v := read(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	f()
	close(stop)
	<-done
	if v := read(); v > peak.Load() {
		peak.Store(v)
	}
	if peak.Load() < base {
		return 0
	}
	return peak.Load() - base
}
