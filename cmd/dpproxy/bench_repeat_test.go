package main

import (
	"database/sql"
	"testing"
	"time"
)

// BenchmarkRepeat compares, through a real proxy and the Go driver on one
// connection, a stored-answer repeat of a DP query (parse, compile, reuse
// lookup, zero-cost ledger entry, wire) with the proxy's own `SELECT 1`
// (go-mysql-server end to end). Each iteration sends one of each, so both
// see the same machine load; it reports their mean latencies and the ratio
// repeat/select1, whose target (issue 10) is at most 1.5:
//
//	go test -run X -bench Repeat -benchtime 5000x ./cmd/dpproxy
func BenchmarkRepeat(b *testing.B) {
	_, addr := startProxy(b, benchCatalog)
	db := connect(b, addr, "analyst", "analyst", "")
	db.SetMaxOpenConns(1)
	one := func(q string) time.Duration {
		start := time.Now()
		var n sql.NullFloat64
		if err := db.QueryRow(q).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	const repeat = "SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 40"
	one(repeat) // the one charge
	for range 200 {
		one("SELECT 1")
		one(repeat)
	}
	var sel, rep time.Duration
	for b.Loop() {
		sel += one("SELECT 1")
		rep += one(repeat)
	}
	b.ReportMetric(float64(sel.Nanoseconds())/float64(b.N), "select1-ns/op")
	b.ReportMetric(float64(rep.Nanoseconds())/float64(b.N), "repeat-ns/op")
	b.ReportMetric(float64(rep)/float64(sel), "repeat/select1")
}
