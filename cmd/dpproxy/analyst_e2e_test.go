package main

import (
	"strings"
	"testing"
)

// The analyst forms of issue 4 through the Go driver: top-k, AVG per
// group, HAVING, error bars, EXPLAIN and session options.
func TestEndToEndAnalystForms(t *testing.T) {
	p, addr := startProxy(t, "")
	db := connect(t, addr, "analyst", "analyst", "")
	db.SetMaxOpenConns(1) // one session, so SET applies to the next queries

	rows, err := db.Query("SELECT occupation, COUNT(*) AS n FROM adult WHERE age > 50 GROUP BY occupation ORDER BY n DESC LIMIT 3")
	if err != nil {
		t.Fatal(err)
	}
	var top []string
	for rows.Next() {
		var occ string
		var n int64
		if err := rows.Scan(&occ, &n); err != nil {
			t.Fatal(err)
		}
		top = append(top, occ)
	}
	rows.Close()
	if len(top) != 3 {
		t.Fatalf("top-3: %v", top)
	}
	es := entries(t, p)
	if es[len(es)-1].Mechanism != "exponential+laplace" {
		t.Fatalf("top-k charged as %q", es[len(es)-1].Mechanism)
	}

	rows, err = db.Query("SELECT education, AVG(hours_per_week) AS h, DP_STDERR(AVG(hours_per_week)) FROM adult GROUP BY education")
	if err != nil {
		t.Fatal(err)
	}
	groups := 0
	for rows.Next() {
		var edu string
		var h, se float64
		if err := rows.Scan(&edu, &h, &se); err != nil {
			t.Fatal(err)
		}
		if h < 1 || h > 99 || se <= 0 {
			t.Fatalf("%s: avg %v se %v", edu, h, se)
		}
		groups++
	}
	rows.Close()
	if groups != 16 {
		t.Fatalf("AVG by education: %d groups", groups)
	}

	rows, err = db.Query("SELECT education, COUNT(*) AS n FROM adult GROUP BY education HAVING COUNT(*) > 5000")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var edu string
		var n int64
		if err := rows.Scan(&edu, &n); err != nil || n <= 5000 {
			t.Fatalf("HAVING row %s %d %v", edu, n, err)
		}
	}
	rows.Close()

	before := len(entries(t, p))
	var prop, val string
	if err := db.QueryRow("EXPLAIN SELECT COUNT(*) FROM adult WHERE age > 40").Scan(&prop, &val); err != nil || prop != "table" {
		t.Fatalf("EXPLAIN: %s %s %v", prop, val, err)
	}
	if len(entries(t, p)) != before {
		t.Fatal("EXPLAIN charged the ledger")
	}

	if _, err := db.Exec("SET @dp_epsilon = 0.5"); err != nil {
		t.Fatal(err)
	}
	var eps float64
	if err := db.QueryRow("SELECT @dp_epsilon").Scan(&eps); err != nil || eps != 0.5 {
		t.Fatalf("@dp_epsilon = %v %v", eps, err)
	}
	var n int64
	if err := db.QueryRow("SELECT COUNT(*) FROM adult").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if es := entries(t, p); es[len(es)-1].Cost.Epsilon != 0.5 {
		t.Fatalf("charged ε %v, want 0.5", es[len(es)-1].Cost.Epsilon)
	}
	_, err = db.Query("SELECT AVG(sex) FROM adult")
	if mysqlCode(err) != 3900 || !strings.Contains(err.Error(), "categorical") {
		t.Fatalf("AVG(sex): %v", err)
	}
}

// The same forms through the mysql CLI.
func TestEndToEndAnalystFormsCLI(t *testing.T) {
	bin := mysqlCLI(t)
	_, addr := startProxy(t, "")
	host, port := splitHostPort(addr)
	out, err := runCLI(bin, host, port, "SET @dp_epsilon = 1; SELECT occupation, COUNT(*) AS n FROM adult WHERE age > 50 GROUP BY occupation ORDER BY n DESC LIMIT 3; SELECT education, AVG(hours_per_week) FROM adult GROUP BY education; SELECT education, COUNT(*) FROM adult GROUP BY education HAVING COUNT(*) > 5000; EXPLAIN SELECT COUNT(*) FROM adult")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"occupation\tn", "education\tAVG(hours_per_week)", "HS-grad", "strategy"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
}
