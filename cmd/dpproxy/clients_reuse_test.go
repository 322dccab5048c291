package main

import (
	"context"
	"database/sql"
	"testing"

	"github.com/dpproxy/dpproxy/budget"
)

// TestClientsRepeatedQueriesAreFree: what BI tools repeat on their own —
// Metabase's sync counting rows, a dashboard refreshing its cards — must
// not drain the budget. A query the proxy has already answered for a table
// (same normalised text and options) returns the stored noisy answer,
// identical and free, and the ledger records the reuse at zero cost.
func TestClientsRepeatedQueriesAreFree(t *testing.T) {
	t.Parallel()
	cp := startClientProxy(t, clientOpts{})
	db := connect(t, cp.addr, "analyst", "analyst", "")
	db.SetMaxOpenConns(1)
	count := func(q string) int64 {
		t.Helper()
		var n int64
		if err := db.QueryRow(q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	kinds := func() (charges, reuses int) {
		for _, e := range entries(t, cp.proxy) {
			switch e.Kind {
			case budget.KindCharge:
				charges++
			case budget.KindReuse:
				reuses++
				if !e.Cost.IsZero() {
					t.Fatalf("a reuse entry costs %+v", e.Cost)
				}
			}
		}
		return
	}

	const rowCount = "-- Metabase:: userID: 1 queryType: MBQL queryHash: 1a2b\nSELECT COUNT(*) AS `count` FROM `adult`"
	first := count(rowCount)
	second := count(rowCount)
	if c, r := kinds(); c != 1 || r != 1 {
		t.Fatalf("after a repeat: %d charges and %d reuses, want 1 and 1", c, r)
	}
	if first != second {
		t.Fatalf("a repeat gave %d then %d: not the stored answer", first, second)
	}
	// Another comment, case and spacing: the same normalised query.
	if n := count("/* dashboard 7 */ select count(*)   as `count` from adult"); n != first {
		t.Fatalf("normalised repeat: %d, want %d", n, first)
	}
	// Through the binary protocol (a prepared statement) too.
	stmt, err := db.Prepare("SELECT COUNT(*) AS `count` FROM `adult`")
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := stmt.QueryRow().Scan(&n); err != nil || n != first {
		t.Fatalf("prepared repeat: %v %d, want %d", err, n, first)
	}
	stmt.Close()
	if c, _ := kinds(); c != 1 {
		t.Fatalf("repeats charged: %d charges", c)
	}
	// Other options are another query: measured and charged.
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "SET @dp_epsilon = 0.3"); err != nil {
		t.Fatal(err)
	}
	var m sql.NullInt64
	if err := conn.QueryRowContext(context.Background(), rowCount).Scan(&m); err != nil {
		t.Fatal(err)
	}
	if c, _ := kinds(); c != 2 {
		t.Fatalf("a query with another ε: %d charges, want 2", c)
	}
	if err := cp.ledger.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
}
