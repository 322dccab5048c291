package main

import (
	"context"
	"testing"
)

// TestStatusCountersSurviveWrappedQueries checks SHOW GLOBAL STATUS, which
// monitoring reads, through the proxy: a query over a derived table is
// post-processed by go-mysql-server, whose engine construction resets the
// process-wide counters, so an engine per query showed Threads_connected
// 0 with a client connected, and wrapped it below zero (to 2⁶⁴−1) when
// the client left. Other tests' proxies may share the process, so the
// check is a range, not an exact count.
func TestStatusCountersSurviveWrappedQueries(t *testing.T) {
	_, addr := startProxy(t, "")
	for round := range 3 {
		db := connect(t, addr, "analyst", "analyst", "")
		conn, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var n float64
		if err := conn.QueryRowContext(context.Background(), "SELECT AVG(n) FROM (SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex) t").Scan(&n); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		var name string
		var connected uint64
		if err := conn.QueryRowContext(context.Background(), "SHOW GLOBAL STATUS LIKE 'Threads_connected'").Scan(&name, &connected); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if connected < 1 || connected > 1<<20 {
			t.Errorf("round %d: Threads_connected %d with this client connected", round, connected)
		}
		conn.Close()
		db.Close()
	}
}
