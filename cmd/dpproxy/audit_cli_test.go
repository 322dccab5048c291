package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/budget"
)

// realLedger makes a real ledger with six charges through a proxy and
// returns its data directory, with the proxy closed.
func realLedger(t *testing.T) string {
	t.Helper()
	p, addr := startProxy(t, "")
	db := connect(t, addr, "analyst", "analyst", "")
	var n int64
	// Six batches over six different columns: none is answered from
	// another's stored measurement, so each is charged.
	for _, where := range []string{"sex = 'Male'", "income = '>50K'", "race = 'White'", "workclass = 'Private'", "marital_status = 'Divorced'", "occupation = 'Sales'"} {
		if err := db.QueryRow("SELECT COUNT(*) FROM adult WHERE " + where).Scan(&n); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	// The proxy recorded the demo's four limits (two per table) at
	// start-up (entries 1-4); the six batches are entries 5-10.
	if got := len(entries(t, p)); got != 10 {
		t.Fatalf("%d entries, want 10", got)
	}
	p.Close()
	return filepath.Dir(p.ledger.Path())
}

func sqliteExec(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// `dpproxy audit verify` on a real ledger: OK untouched; exit 3 naming the
// first bad entry after a cost is edited, an entry deleted, two entries
// swapped or the tail truncated; a non-zero exit when the file itself is cut.
func TestAuditVerifyTamperedLedgerCLI(t *testing.T) {
	src := realLedger(t)
	code, out, errOut := dpproxyCmd("audit", "verify", "--data-dir", src)
	if code != 0 || !strings.Contains(out, "ledger OK: 10 entries") {
		t.Fatalf("untouched ledger: exit %d\n%s%s", code, out, errOut)
	}
	swap := func(a, b int) []string {
		cols := "time, kind, user_name, conn_id, tables_json, mechanism, strategy, epsilon, rho, query_digest, prev_hash, hash"
		return []string{
			fmt.Sprintf("CREATE TEMP TABLE s AS SELECT * FROM entries WHERE seq IN (%d, %d)", a, b),
			fmt.Sprintf("UPDATE entries SET (%s) = (SELECT %s FROM s WHERE s.seq = %d) WHERE seq = %d", cols, cols, b, a),
			fmt.Sprintf("UPDATE entries SET (%s) = (SELECT %s FROM s WHERE s.seq = %d) WHERE seq = %d", cols, cols, a, b),
		}
	}
	tests := []struct {
		name  string
		stmts []string
		want  string
	}{
		{"edit a cost", []string{"UPDATE entries SET epsilon = 0.001 WHERE seq = 3"},
			"ledger verification FAILED at entry 3: hash does not match the entry's contents"},
		{"edit a cost and the spent aggregate", []string{"UPDATE entries SET epsilon = 0 WHERE seq = 5", "UPDATE spent SET epsilon = epsilon - 0.1"},
			"ledger verification FAILED at entry 5: hash does not match"},
		{"delete an entry", []string{"DELETE FROM entries WHERE seq = 2"},
			"ledger verification FAILED at entry 2: entry 2 is missing"},
		{"swap two entries", swap(2, 4),
			"ledger verification FAILED at entry 2: prev_hash does not match"},
		{"truncate the tail", []string{"DELETE FROM entries WHERE seq >= 4"},
			"ledger verification FAILED at entry 4: ledger truncated: the head records 10 entries but only 3 are stored"},
		{"truncate the tail and fix the head", []string{"DELETE FROM entries WHERE seq >= 7", "UPDATE head SET seq = 6, hash = (SELECT hash FROM entries WHERE seq = 6)"},
			"ledger verification FAILED: spent aggregate for"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			copyFile(t, filepath.Join(src, "ledger.sqlite"), filepath.Join(dir, "ledger.sqlite"))
			sqliteExec(t, filepath.Join(dir, "ledger.sqlite"), tc.stmts...)
			code, out, errOut := dpproxyCmd("audit", "verify", "--data-dir", dir)
			if code != 3 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, want 3 with %q\nstdout: %s\nstderr: %s", code, tc.want, out, errOut)
			}
		})
	}
	t.Run("truncate the file", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "ledger.sqlite")
		copyFile(t, filepath.Join(src, "ledger.sqlite"), path)
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, fi.Size()/2); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := dpproxyCmd("audit", "verify", "--data-dir", dir)
		if code != 3 || !strings.Contains(errOut, "ledger verification FAILED: the ledger file is damaged") {
			t.Fatalf("exit %d, want 3\nstdout: %s\nstderr: %s", code, out, errOut)
		}
		t.Logf("%s", strings.TrimSpace(errOut))
	})
}

// An Ed25519 key in the catalog: `audit sign` appends a signed head, `audit
// verify` checks it with the catalog's key or with the public key alone,
// and exposes a ledger rolled back behind a signed head and a signature
// made with another key.
func TestAuditSignAndVerifyCLI(t *testing.T) {
	src := realLedger(t)
	dir := t.TempDir()
	copyFile(t, filepath.Join(src, "ledger.sqlite"), filepath.Join(dir, "ledger.sqlite"))
	code, out, errOut := dpproxyCmd("audit", "keygen", "--out", filepath.Join(dir, "ledger.key"))
	if code != 0 || !strings.Contains(out, "public key: ") {
		t.Fatalf("keygen: exit %d\n%s%s", code, out, errOut)
	}
	pub := strings.TrimSpace(out[strings.Index(out, "public key: ")+len("public key: "):])
	if fi, err := os.Stat(filepath.Join(dir, "ledger.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	demo, err := os.ReadFile("../../catalog/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "catalog.yaml")
	if err := os.WriteFile(cfg, append(demo, "ledger: {signing_key: ledger.key}\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = dpproxyCmd("audit", "sign", "--data-dir", dir, "--config", cfg)
	if code != 0 || !strings.Contains(out, "dpproxy-ledger-head/v1 seq=10 hash=") {
		t.Fatalf("sign: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = dpproxyCmd("audit", "verify", "--data-dir", dir, "--config", cfg)
	if code != 0 || !strings.Contains(out, "signed heads OK: 1 checked with key "+pub) {
		t.Fatalf("verify with the catalog's key: exit %d\n%s%s", code, out, errOut)
	}
	// An auditor with only the public key (the demo catalog has no key).
	code, out, errOut = dpproxyCmd("audit", "verify", "--data-dir", dir, "--public-key", pub)
	if code != 0 || !strings.Contains(out, "signed heads OK") {
		t.Fatalf("verify with --public-key: exit %d\n%s%s", code, out, errOut)
	}
	// Another key does not verify the head.
	code, out, errOut = dpproxyCmd("audit", "verify", "--data-dir", dir, "--public-key", strings.Repeat("ab", 32))
	if code != 3 || !strings.Contains(errOut, "signed head 1 (") || !strings.Contains(errOut, "does not verify") {
		t.Fatalf("verify with another key: exit %d\n%s%s", code, out, errOut)
	}
	// A consistent rollback (tail removed, head and aggregate rewritten)
	// passes the chain check but not the signed head.
	path := filepath.Join(dir, "ledger.sqlite")
	sqliteExec(t, path, "DELETE FROM entries WHERE seq = 10",
		"UPDATE head SET seq = 9, hash = (SELECT hash FROM entries WHERE seq = 9)")
	l, err := budget.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := l.Budgets(context.Background())
	l.Close()
	if err != nil {
		t.Fatal(err)
	}
	fix := []string{"DELETE FROM spent", "DELETE FROM spent_spaces"}
	for _, r := range rows {
		table, name := "spent", r.Table
		if r.Space != "" {
			table, name = "spent_spaces", r.Space
		}
		fix = append(fix, fmt.Sprintf("INSERT INTO %s VALUES ('%s', '%s', %v, %v, %v)", table, r.User, name,
			strconv.FormatFloat(r.Cost.Epsilon, 'g', -1, 64), strconv.FormatFloat(r.Cost.Rho, 'g', -1, 64),
			strconv.FormatFloat(r.Cost.Delta, 'g', -1, 64)))
	}
	sqliteExec(t, path, fix...)
	code, out, errOut = dpproxyCmd("audit", "verify", "--data-dir", dir, "--public-key", pub)
	if code != 3 || !strings.Contains(out, "ledger OK: 9 entries") || !strings.Contains(errOut, "FAILED at entry 10: a signed head records 10 entries") {
		t.Fatalf("verify a rolled-back ledger: exit %d\n%s%s", code, out, errOut)
	}
}

// `audit verify` replays the charges against the limits the ledger itself
// records. The demo ledger recorded its limits (per-user ε = 20) at
// start-up, so a catalog claiming a per-user limit of 0.35 changes nothing:
// the ledger, not the catalog, says what was in force. A ledger whose
// recorded limit is 0.35 and whose writer ignored it (six charges of 0.1
// appended without limits) fails at the charge that crossed it.
func TestAuditVerifyFindsOverspending(t *testing.T) {
	src := realLedger(t)
	cat := filepath.Join(src, "tight.yaml")
	yaml := strings.ReplaceAll(tinyBudget, "{{DEMO}}", demoData(t))
	yaml = strings.Replace(yaml, "per_user: 0.3", "per_user: 0.35", 1)
	if err := os.WriteFile(cat, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := dpproxyCmd("audit", "verify", "--data-dir", src, "--config", cat); code != 0 {
		t.Fatalf("the ledger's recorded limits should win over the catalog: exit %d\n%s%s", code, out, errOut)
	}

	ctx := context.Background()
	dir := t.TempDir()
	l, err := budget.Open(ctx, filepath.Join(dir, "ledger.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	limits := []budget.Limit{
		{Scope: budget.ScopeSpace, Space: "adult", Epsilon: 10},
		{Scope: budget.ScopeUserSpace, Space: "adult", Epsilon: 0.35},
	}
	if _, err := l.RecordLimits(ctx, limits, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		c := budget.Charge{User: "analyst", Tables: []string{"adult"}, Mechanism: "laplace", Strategy: "workload",
			Cost: budget.Cost{Epsilon: 0.1}, QueryDigest: fmt.Sprintf("%064x", i)}
		if _, err := l.Charge(ctx, c, nil); err != nil { // a writer that enforced nothing
			t.Fatal(err)
		}
	}
	l.Close()
	code, out, errOut := dpproxyCmd("audit", "verify", "--data-dir", dir)
	if code != 3 || !strings.Contains(errOut, "entry 6 overspends user analyst in space adult") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

// `dpproxy audit` reads a ledger written before δ (schema version 2)
// without upgrading it: verify, list and budgets succeed, and the file
// keeps its version for the next proxy to upgrade.
func TestAuditOlderLedgerCLI(t *testing.T) {
	dir := realLedger(t)
	path := filepath.Join(dir, "ledger.sqlite")
	sqliteExec(t, path, "ALTER TABLE entries DROP COLUMN delta", "ALTER TABLE spent DROP COLUMN delta", "PRAGMA user_version = 2")
	for _, sub := range []string{"verify", "list", "budgets"} {
		code, out, errOut := dpproxyCmd("audit", sub, "--data-dir", dir)
		if code != 0 || sub == "verify" && !strings.Contains(out, "ledger OK: 10 entries") {
			t.Fatalf("audit %s on a version 2 ledger: exit %d\n%s%s", sub, code, out, errOut)
		}
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v int
	if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != 2 {
		t.Fatalf("after audit the ledger is version %d (%v), want 2: audit wrote to it", v, err)
	}
}
