package main

import (
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"
)

// heapPeak samples the Go heap (live and not yet collected objects) every
// millisecond while f runs, and returns the peak above the level before.
func heapPeak(f func()) uint64 {
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

// BenchmarkGroupByMemory measures the peak heap of one large GROUP BY
// through a real proxy and the Go driver, per domain cell: the demo table's
// age × education × hours_per_week × race × sex (1,172,160 cells, every
// group returned), each run with a distinct LIMIT above the group count so
// no answer comes from the store. Reported as bytes/cell (peak heap above
// the level before the query, the client's rows included).
func BenchmarkGroupByMemory(b *testing.B) {
	_, addr := startProxy(b, "")
	db := connect(b, addr, "analyst", "analyst", "")
	const cells = 74 * 16 * 99 * 5 * 2
	var worst uint64
	for i := 0; i < b.N; i++ {
		q := "SELECT age, education, hours_per_week, race, sex, COUNT(*) FROM adult GROUP BY age, education, hours_per_week, race, sex LIMIT " + itoa(2000000+i)
		peak := heapPeak(func() {
			rows, err := db.Query(q)
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for rows.Next() {
				n++
			}
			if err := rows.Err(); err != nil {
				b.Fatal(err)
			}
			rows.Close()
			if n != cells {
				b.Fatalf("%d rows, want %d", n, cells)
			}
		})
		worst = max(worst, peak)
	}
	b.ReportMetric(float64(worst)/cells, "peak-bytes/cell")
}

func itoa(i int) string {
	const digits = "0123456789"
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{digits[i%10]}, b...)
	}
	return string(b)
}
