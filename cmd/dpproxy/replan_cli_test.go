package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/budget"
)

// replanLedger runs measured batches through a real proxy — at the
// default ε, at a session ε and at an accuracy target, one a batch of two
// statements — and returns its data directory, with the proxy closed, and
// the charges' ledger sequence numbers.
func replanLedger(t *testing.T) (string, []int64) {
	t.Helper()
	p, addr := startProxy(t, "")
	db := connect(t, addr, "analyst", "analyst", "multiStatements=true")
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, q := range []string{
		"SELECT COUNT(*) FROM adult WHERE sex = 'Male'",
		"SET @dp_epsilon = 0.3",
		"SELECT COUNT(*) FROM adult WHERE race = 'White'",
		"SET @dp_epsilon = NULL",
		"SET @dp_max_stderr = 40",
		"SELECT COUNT(*) FROM adult WHERE workclass = 'Private'",
		"SET @dp_max_stderr = NULL",
	} {
		if strings.HasPrefix(q, "SET") {
			if _, err := conn.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			continue
		}
		if err := conn.QueryRowContext(ctx, q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// Two statements of one request are one batch, one charge.
	rows, err := conn.QueryContext(ctx, "SELECT COUNT(*) FROM adult WHERE occupation = 'Sales'; SELECT COUNT(*) FROM adult WHERE occupation = 'Sales' AND income = '>50K'")
	if err != nil {
		t.Fatal(err)
	}
	for more := true; more; more = rows.NextResultSet() {
		for rows.Next() {
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	conn.Close()
	db.Close()
	var seqs []int64
	for _, e := range entries(t, p) {
		if e.Kind == budget.KindCharge {
			seqs = append(seqs, e.Seq)
		}
	}
	p.Close()
	if len(seqs) != 4 {
		t.Fatalf("%d charges, want 4", len(seqs))
	}
	return filepath.Dir(p.ledger.Path()), seqs
}

// `dpproxy audit verify --replan N` re-plans a real proxy's charges from
// their replay records and finds every strategy digest matching; a replay
// record whose text was edited is exit 3 naming the entry, and an edited
// digest in the ledger is caught by the hash chain.
func TestAuditVerifyReplanCLI(t *testing.T) {
	src, seqs := replanLedger(t)
	code, out, errOut := dpproxyCmd("audit", "verify", "--data-dir", src, "--replan", "10")
	if code != 0 || !strings.Contains(out, "ledger OK") || !strings.Contains(out, "replanned 4: 4 match\n") {
		t.Fatalf("untouched: exit %d\n%s%s", code, out, errOut)
	}
	if got := len(regexp.MustCompile(`(?m)^entry \d+: .* re-planned: sha256:[0-9a-f]{64} match$`).FindAllString(out, -1)); got != 4 {
		t.Fatalf("%d match lines, want 4:\n%s", got, out)
	}
	t.Logf("%s", out)
	code, out, errOut = dpproxyCmd("audit", "verify", "--data-dir", src, "--replan", "2")
	if code != 0 || !strings.Contains(out, "replanned 2: 2 match\n") || !strings.Contains(out, fmt.Sprintf("entry %d:", seqs[3])) || strings.Contains(out, fmt.Sprintf("entry %d:", seqs[1])) {
		t.Fatalf("--replan 2 (the newest two): exit %d\n%s%s", code, out, errOut)
	}
	copyState := func(t *testing.T) string {
		dir := t.TempDir()
		for _, f := range []string{"ledger.sqlite", "measurements.sqlite"} {
			copyFile(t, filepath.Join(src, f), filepath.Join(dir, f))
		}
		return dir
	}
	t.Run("edited replay text", func(t *testing.T) {
		dir := copyState(t)
		sqliteExec(t, filepath.Join(dir, "measurements.sqlite"),
			fmt.Sprintf("UPDATE replays SET texts = replace(texts, 'White', 'Black') WHERE ledger_seq = %d", seqs[1]))
		code, out, errOut := dpproxyCmd("audit", "verify", "--data-dir", dir, "--replan", "10")
		want := fmt.Sprintf("replan verification FAILED at entry %d: replay record's statements do not match the entry's query digest", seqs[1])
		if code != 3 || !strings.Contains(errOut, want) || !strings.Contains(out, "replanned 4: 3 match") {
			t.Fatalf("exit %d, want 3 with %q\nstdout: %s\nstderr: %s", code, want, out, errOut)
		}
	})
	t.Run("edited replay options", func(t *testing.T) {
		// Options are not covered by the query digest: a re-plan at
		// another ε gives another digest.
		dir := copyState(t)
		sqliteExec(t, filepath.Join(dir, "measurements.sqlite"),
			fmt.Sprintf(`UPDATE replays SET options = '{"dp_epsilon":"0.5"}' WHERE ledger_seq = %d`, seqs[1]))
		code, out, errOut := dpproxyCmd("audit", "verify", "--data-dir", dir, "--replan", "10")
		want := fmt.Sprintf("replan verification FAILED at entry %d: strategy digest MISMATCH", seqs[1])
		if code != 3 || !strings.Contains(errOut, want) {
			t.Fatalf("exit %d, want 3 with %q\nstdout: %s\nstderr: %s", code, want, out, errOut)
		}
	})
	t.Run("edited strategy digest", func(t *testing.T) {
		dir := copyState(t)
		sqliteExec(t, filepath.Join(dir, "ledger.sqlite"),
			fmt.Sprintf("UPDATE entries SET strategy = substr(strategy, 1, length(strategy) - 1) || CASE WHEN substr(strategy, -1) = '0' THEN '1' ELSE '0' END WHERE seq = %d", seqs[2]))
		code, out, errOut := dpproxyCmd("audit", "verify", "--data-dir", dir, "--replan", "10")
		want := fmt.Sprintf("ledger verification FAILED at entry %d: hash does not match", seqs[2])
		if code != 3 || !strings.Contains(errOut, want) {
			t.Fatalf("exit %d, want 3 with %q\nstdout: %s\nstderr: %s", code, want, out, errOut)
		}
	})
}

// With shared PostgreSQL state the replay records are in the state
// database: `audit verify --replan` from another host (an empty data
// directory) re-plans a proxy's charges there.
func TestAuditVerifyReplanSharedState(t *testing.T) {
	srv := pgServer.Get(t)
	t.Setenv("DPPROXY_STATE_DSN", stateDatabase(t, srv, "dpstate_replan"))
	yaml := dashCatalog(t, t.TempDir()) + "state: {driver: postgres, dsn_env: DPPROXY_STATE_DSN}\n"
	p, addr := startProxy(t, yaml)
	db := connect(t, addr, "analyst", "analyst", "")
	var n float64
	for _, q := range []string{"SELECT COUNT(*) FROM visits WHERE sex = 'F'", "SELECT AVG(hours) FROM visits WHERE edu = 'MA'"} {
		if err := db.QueryRow(q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	p.Close()
	cfg := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := dpproxyCmd("audit", "verify", "--config", cfg, "--data-dir", t.TempDir(), "--replan", "10")
	if code != 0 || !strings.Contains(out, "replanned 2: 2 match\n") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

// A charge combined with stored measurements (`… answered with …`) is
// re-decided by `audit verify --replan` over the measurements its replay
// record names, read from the data directory's measurement store, and
// matches like any other.
func TestAuditVerifyReplanCombined(t *testing.T) {
	// Columns that count every row (NULL a cell of its own), so that a
	// measurement over age joins a batch over age and sex.
	const catalog = `
database: demo
sources: {main: {driver: sqlite, path: "{{DEMO}}"}}
tables:
  adult:
    noise: laplace
    budget: {total: 1000, per_user: 1000, default_per_query: 1, max_per_query: 5}
    columns:
      age: {type: integer, min: 17, max: 90, null: cell}
      sex: {type: categorical, values: [Female, Male], null: cell, out_of_domain: other}
users:
  analyst: {password: analyst, role: analyst}
`
	p, addr := startProxy(t, catalog)
	db := connect(t, addr, "analyst", "analyst", "")
	for _, q := range []string{
		"SELECT age, COUNT(*) FROM adult GROUP BY age",
		"SELECT sex, COUNT(*) FROM adult GROUP BY sex",
		"SELECT age, sex, COUNT(*) FROM adult GROUP BY age, sex",
	} {
		rows, err := db.Query(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		rows.Close()
	}
	db.Close()
	es := entries(t, p)
	last := es[len(es)-1]
	if last.Kind != budget.KindCharge || !strings.Contains(last.Strategy, "answered with") {
		t.Fatalf("last batch: %s %q, want a charge combined with stored measurements", last.Kind, last.Strategy)
	}
	dir := filepath.Dir(p.ledger.Path())
	p.Close()
	code, out, errOut := dpproxyCmd("audit", "verify", "--config", filepath.Join(dir, "catalog.yaml"), "--data-dir", dir, "--replan", "1")
	if code != 0 || !strings.Contains(out, "replanned 1: 1 match\n") || !strings.Contains(out, fmt.Sprintf("entry %d: ", last.Seq)) {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}
