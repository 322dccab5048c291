package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

func errSQLState(err error) string {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return string(me.SQLState[:])
	}
	return ""
}

func approxEq(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// The auditor reads the ledger and the budgets over SQL with WHERE, ORDER
// BY and LIMIT; analysts are refused those tables but see their own budget;
// an auditor cannot run a DP query.
func TestAuditorSQL(t *testing.T) {
	p, addr := startProxy(t, "")
	analyst := connect(t, addr, "analyst", "analyst", "")
	bob := connect(t, addr, "bob", "bob", "")
	auditor := connect(t, addr, "auditor", "auditor", "parseTime=true")
	var n int64
	for i := range 3 {
		if err := analyst.QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM adult WHERE age > %d", 20+i)).Scan(&n); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		if err := bob.QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM adult WHERE age < %d", 50+i)).Scan(&n); err != nil {
			t.Fatal(err)
		}
	}
	want := entries(t, p)
	if len(want) != 9 { // the four limits recorded at start-up (two per demo table), then five charges
		t.Fatalf("%d entries, want 9", len(want))
	}

	// WHERE, ORDER BY, LIMIT over dp_ledger.
	rows, err := auditor.Query("SELECT seq, time, user_name, table_names, epsilon, hash FROM dpproxy.dp_ledger WHERE user_name = 'analyst' AND kind = 'charge' ORDER BY seq DESC LIMIT 2")
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for rows.Next() {
		var seq int64
		var tm time.Time
		var user, tables, hash string
		var eps float64
		if err := rows.Scan(&seq, &tm, &user, &tables, &eps, &hash); err != nil {
			t.Fatal(err)
		}
		e := want[seq-1]
		if user != "analyst" || tables != "adult" || eps != 0.1 || hash != e.Hash || e.User != "analyst" {
			t.Fatalf("row seq %d: %s %s %g %s; ledger has %+v", seq, user, tables, eps, hash, e)
		}
		if d := tm.Sub(e.Time); d < -time.Microsecond || d > time.Microsecond {
			t.Fatalf("row seq %d: time %v, ledger %v", seq, tm, e.Time)
		}
		got = append(got, seq)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	var analystSeqs []int64
	for _, e := range want {
		if e.User == "analyst" {
			analystSeqs = append(analystSeqs, e.Seq)
		}
	}
	slices.Reverse(analystSeqs)
	if !slices.Equal(got, analystSeqs[:2]) {
		t.Fatalf("ORDER BY seq DESC LIMIT 2 gave %v, want %v", got, analystSeqs[:2])
	}
	var count int64
	var sum float64
	if err := auditor.QueryRow("SELECT COUNT(*), SUM(epsilon) FROM dpproxy.dp_ledger").Scan(&count, &sum); err != nil || count != 9 || !approxEq(sum, 0.5) {
		t.Fatalf("COUNT, SUM over dp_ledger: %d %g %v", count, sum, err)
	}

	// dp_budgets: spend recomputed from the entries, limits from the catalog.
	var limit, spent, remaining float64
	err = auditor.QueryRow("SELECT limit_epsilon, spent_epsilon, remaining_epsilon FROM dpproxy.dp_budgets WHERE scope = 'user_space' AND user_name = 'bob' AND table_name = 'adult'").Scan(&limit, &spent, &remaining)
	if err != nil || limit != 20 || !approxEq(spent, 0.2) || !approxEq(remaining, 19.8) {
		t.Fatalf("bob's budget: %g %g %g %v", limit, spent, remaining, err)
	}
	err = auditor.QueryRow("SELECT limit_epsilon, spent_epsilon FROM dpproxy.dp_budgets WHERE scope = 'space' AND table_name = 'adult'").Scan(&limit, &spent)
	if err != nil || limit != 100 || !approxEq(spent, 0.5) {
		t.Fatalf("table budget: %g %g %v", limit, spent, err)
	}

	// Analysts are refused the ledger and the budgets, as MySQL refuses a table.
	for _, table := range []string{"dp_ledger", "dp_budgets"} {
		for _, q := range []string{"SELECT * FROM dpproxy." + table, "SELECT COUNT(*) FROM dpproxy." + table + " WHERE 1 = 1"} {
			_, err := analyst.Query(q)
			if mysqlCode(err) != 1142 || errSQLState(err) != "42000" || !strings.Contains(err.Error(), "SELECT command denied to user 'analyst'") {
				t.Fatalf("analyst %s: %v, want 1142 (42000)", q, err)
			}
		}
	}
	// ... but see their own budget, and only theirs.
	rows, err = analyst.Query("SELECT table_name, space_name, limit_epsilon, delta, spent_epsilon, remaining_epsilon, default_epsilon, max_epsilon, spent_delta, remaining_delta, delta_per_query FROM dpproxy.my_budget")
	if err != nil {
		t.Fatal(err)
	}
	cols, _ := rows.Columns()
	nrows := 0
	for rows.Next() {
		var table, space string
		var lim, delta, sp, rem, def, spentDelta, remDelta, deltaPerQuery float64
		var maxEps *float64
		if err := rows.Scan(&table, &space, &lim, &delta, &sp, &rem, &def, &maxEps, &spentDelta, &remDelta, &deltaPerQuery); err != nil {
			t.Fatal(err)
		}
		if (table == "events" || table == "users") && space == "customer" && lim == 30 && sp == 0 {
			continue // the demo's other space, unspent
		}
		if table != "adult" || lim != 20 || !approxEq(sp, 0.3) || !approxEq(rem, 19.7) || def != 0.1 || maxEps == nil || *maxEps != 2 ||
			spentDelta != 0 || remDelta != delta || deltaPerQuery <= 0 || deltaPerQuery > delta {
			t.Fatalf("my_budget %v: %s %g %g %g %g %v", cols, table, lim, sp, rem, def, maxEps)
		}
		nrows++
	}
	rows.Close()
	if nrows != 1 {
		t.Fatalf("my_budget: %d rows", nrows)
	}
	showTables := func(who string, db *sql.DB) []string {
		rows, err := db.Query("SHOW TABLES FROM dpproxy")
		if err != nil {
			t.Fatalf("%s: SHOW TABLES: %v", who, err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var s string
			rows.Scan(&s)
			out = append(out, s)
		}
		return out
	}
	if got := showTables("analyst", analyst); !slices.Equal(got, []string{"my_budget"}) {
		t.Fatalf("analyst SHOW TABLES FROM dpproxy: %v", got)
	}
	if got := showTables("auditor", auditor); !slices.Equal(got, []string{"dp_budgets", "dp_ledger", "my_budget"}) {
		t.Fatalf("auditor SHOW TABLES FROM dpproxy: %v", got)
	}

	// The audit tables are read-only.
	if _, err := auditor.Exec("DELETE FROM dpproxy.dp_ledger WHERE seq = 1"); err == nil {
		t.Fatal("DELETE FROM dp_ledger succeeded")
	}

	// An auditor runs no DP query, and nothing is charged.
	err = auditor.QueryRow("SELECT COUNT(*) FROM adult WHERE age > 30").Scan(&n)
	if mysqlCode(err) != 3900 || !strings.Contains(err.Error(), "auditor") {
		t.Fatalf("auditor DP query: %v, want 3900", err)
	}
	if got := len(entries(t, p)); got != 9 {
		t.Fatalf("ledger has %d entries after the auditor's query, want 9", got)
	}
	if err := p.ledger.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
}
