package main

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// Privacy options outside their ranges are refused with 3900 naming the
// range: at SET time for a literal (nothing is set), and at batch time for
// a value assigned otherwise. Issue 10: SET @dp_epsilon = 1e-20 made the
// next query fail with 3902. EXPLAIN of a top-k without counts works.
func TestEndToEndPrivacyOptionRanges(t *testing.T) {
	p, addr := startProxy(t, "")
	db := connect(t, addr, "analyst", "analyst", "")
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	wantRefusal := func(err error, msg string) {
		t.Helper()
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 3900 || !strings.Contains(me.Message, msg) {
			t.Fatalf("got %v, want 3900 containing %q", err, msg)
		}
	}
	if _, err := conn.ExecContext(ctx, "SET @dp_epsilon = 0.2"); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		"SET @dp_epsilon = 1e-20",
		"SET @DP_EPSILON := -0.5",
		"SET @x = 1, @dp_epsilon = '1e9'",
		"SET @dp_rho = 0",
		"SET @dp_max_stderr = 1e-300",
	} {
		_, err := conn.ExecContext(ctx, stmt)
		wantRefusal(err, "must be a number in [")
	}
	var eps sql.NullFloat64
	if err := conn.QueryRowContext(ctx, "SELECT @dp_epsilon").Scan(&eps); err != nil || eps.Float64 != 0.2 {
		t.Fatalf("after refused SETs @dp_epsilon = %v (%v), want 0.2 unchanged", eps, err)
	}
	// An expression is evaluated by the SET and checked by the batch.
	if _, err := conn.ExecContext(ctx, "SET @dp_epsilon = 1/100000000000"); err != nil {
		t.Fatal(err)
	}
	var n int64
	err = conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM adult").Scan(&n)
	wantRefusal(err, "@dp_epsilon must be a number in [1e-06, 100]")
	if _, err := conn.ExecContext(ctx, "SET @dp_epsilon = NULL"); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.QueryContext(ctx, "EXPLAIN SELECT occupation FROM adult GROUP BY occupation ORDER BY COUNT(*) DESC LIMIT 1")
	if err != nil {
		t.Fatalf("EXPLAIN of a top-k without counts: %v", err)
	}
	rows.Close()
	if got := len(charges(entries(t, p))); got != 0 {
		t.Fatalf("refusals and EXPLAIN charged: %d entries", got)
	}
}
