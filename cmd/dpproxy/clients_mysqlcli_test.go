package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The mysql command-line client (MariaDB's, as Debian ships it): the
// standard flow in batch mode, --init-command, TLS (the CLI switches when
// the server offers it; --ssl-verify-server-cert with the generated
// certificate; refused in clear text when TLS is required), and an
// interactive session through a pseudo-terminal: start-up with table and
// column completion (show databases, show tables, COM_FIELD_LIST per
// table), status (COM_STATISTICS), use (COM_INIT_DB), tab completion of a
// column name, queries and errors as the CLI prints them.

func findMySQLCLI(t *testing.T) string {
	t.Helper()
	var err error
	for _, name := range []string{"mysql", "mariadb"} {
		var p string
		if p, err = exec.LookPath(name); err == nil {
			return p
		}
	}
	needClient(t, "the mysql client (apt-get install mariadb-client)", err)
	return ""
}

var cliError = regexp.MustCompile(`(?m)^ERROR (\d+) \(([0-9A-Z]{5})\)(?: at line \d+)?: (.*)$`)

// cliRun runs one batch invocation; the result is parsed like a step's.
func cliRun(t *testing.T, bin string, args []string, step, sql string) *stepResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, "--batch", "-e", sql)...)
	out, err := cmd.Output()
	r := &stepResult{Step: step}
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		m := cliError.FindSubmatch(stderr)
		if m == nil {
			t.Fatalf("step %s: %v\n%s%s", step, err, out, stderr)
		}
		code, _ := strconv.Atoi(string(m[1]))
		r.Error = &struct {
			Code     int    `json:"code"`
			SQLState string `json:"sqlstate"`
			Message  string `json:"message"`
		}{code, string(m[2]), string(m[3])}
		return r
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	r.Rows = [][]*string{}
	if len(lines) == 1 && lines[0] == "" {
		return r // no result set
	}
	r.Columns = strings.Split(lines[0], "\t")
	for _, l := range lines[1:] {
		var row []*string
		for _, f := range strings.Split(l, "\t") {
			if f == "NULL" {
				row = append(row, nil)
				continue
			}
			v := strings.NewReplacer(`\t`, "\t", `\n`, "\n", `\\`, `\`, `\0`, "\x00").Replace(f)
			row = append(row, &v)
		}
		r.Rows = append(r.Rows, row)
	}
	return r
}

func cliArgs(cp *clientProxy, user, password string, extra ...string) []string {
	return append([]string{"-h", cp.host, "-P", cp.port, "--protocol=tcp", "-u", user, "-p" + password, "demo"}, extra...)
}

func TestClientsMySQLCLI(t *testing.T) {
	t.Parallel()
	bin := findMySQLCLI(t)
	cp := startClientProxy(t, clientOpts{})
	flow := standardFlow()
	rs := results{}
	args := cliArgs(cp, "analyst", "analyst")
	// The CLI runs each statement of the flow in its own session, so the
	// overspending batch sets its ε in the same invocation.
	for _, st := range flow {
		switch st.Step {
		case "set_eps", "reset_eps":
			rs[st.Step] = &stepResult{Step: st.Step}
			continue
		case "overspend":
			rs[st.Step] = cliRun(t, bin, args, st.Step, "SET @dp_epsilon = 50; "+st.Literal)
			continue
		}
		rs[st.Step] = cliRun(t, bin, args, st.Step, st.Literal)
	}
	checkStandardFlow(t, cp, rs, true)
	checkLedger(t, cp, dpSteps(flow))

	wantAccessDenied(t, cliRun(t, bin, cliArgs(cp, "analyst", "nope"), "bad_password", "SELECT 1"), "analyst")

	// --init-command runs before the statements: here it sets the batch's ε.
	r := cliRun(t, bin, cliArgs(cp, "analyst", "analyst", "--init-command=SET @dp_epsilon = 0.25"), "init_command",
		"SELECT COUNT(*) AS n FROM adult WHERE income = '>50K'")
	wantOK(t, r)
	es := entries(t, cp.proxy)
	if last := es[len(es)-1]; last.Cost.Epsilon != 0.25 {
		t.Fatalf("--init-command: last charge %+v, want ε = 0.25", last.Cost)
	}

	// A request of several statements with another delimiter is one batch.
	r = cliRun(t, bin, args, "batch", "delimiter //\nSELECT COUNT(*) AS f FROM adult WHERE sex='Female'; SELECT COUNT(*) AS m FROM adult WHERE sex='Male' //")
	wantOK(t, r)
	if got := len(entries(t, cp.proxy)); got != len(es)+1 {
		t.Fatalf("batch: %d new ledger entries, want 1", got-len(es))
	}

	// The SQL BI tools write; each statement in its own session at ε = 1.
	checkBIToolFlow(t, cliFlowAt(t, bin, args, biToolFlow(), "1"))
}

// The time charts of Grafana, Metabase and Superset through the mysql CLI,
// each statement in its own session at ε = 1.
func TestClientsMySQLCLITime(t *testing.T) {
	t.Parallel()
	bin := findMySQLCLI(t)
	cp := startTimeProxy(t)
	checkBITimeFlow(t, cliFlowAt(t, bin, cliArgs(cp, "analyst", "analyst"), biTimeFlow(), "1"))
}

// cliFlowAt runs a flow's queries through the mysql CLI, each in its own
// session (so each sets ε itself), skipping its SET steps.
func cliFlowAt(t *testing.T, bin string, args []string, flow []flowStep, epsilon string) results {
	t.Helper()
	rs := results{}
	for _, st := range flow {
		if st.Exec {
			continue
		}
		rs[st.Step] = cliRun(t, bin, args, st.Step, "SET @dp_epsilon = "+epsilon+"; "+st.SQL)
	}
	return rs
}

func TestClientsMySQLCLITLS(t *testing.T) {
	t.Parallel()
	bin := findMySQLCLI(t)
	needPython(t, "pty")
	cp := startClientProxy(t, clientOpts{tls: true, requireTLS: true})

	// Offered TLS is taken without any option; the certificate verifies.
	r := cliRun(t, bin, cliArgs(cp, "analyst", "analyst"), "plain", "SELECT COUNT(*) AS n FROM adult WHERE age < 30")
	wantOK(t, r)
	r = cliRun(t, bin, cliArgs(cp, "analyst", "analyst", "--ssl-verify-server-cert", "--ssl-ca="+cp.certFile), "verified", "SHOW TABLES")
	wantOK(t, r)
	wantError(t, cliRun(t, bin, cliArgs(cp, "analyst", "analyst", "--skip-ssl"), "clear", "SELECT 1"), 3159, "HY000", "insecure transport")

	// The interactive session.
	inputs := []map[string]string{
		{"step": "status", "input": "status"},
		{"step": "use", "input": "use demo"},
		{"step": "complete", "input": "SELECT COUNT(*) AS n FROM adult WHERE hours_p\t > 40;"},
		{"step": "topk", "input": "SELECT occupation, COUNT(*) AS n FROM adult WHERE age > 50 GROUP BY occupation ORDER BY n DESC LIMIT 3;"},
		{"step": "raw", "input": "SELECT * FROM adult;"},
		{"step": "syntax", "input": "SELEC 1;"},
		{"step": "processlist", "input": "SHOW PROCESSLIST;"},
		{"step": "ping", "input": "SELECT 'still here' AS s;"},
	}
	b, _ := json.Marshal(inputs)
	flowFile := filepath.Join(t.TempDir(), "inputs.json")
	if err := os.WriteFile(flowFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, append([]string{scriptPath(t, "mysql_pty.py"), bin}, cliArgs(cp, "analyst", "analyst")...)...)
	cmd.Env = append(os.Environ(), "DPPROXY_FLOW="+flowFile)
	rs := runClient(t, cmd)
	out := func(step string) string {
		s, _ := rs.get(t, step).Info["output"].(string)
		return s
	}
	wantIn := func(step string, parts ...string) {
		t.Helper()
		for _, p := range parts {
			if !strings.Contains(out(step), p) {
				t.Fatalf("interactive %s: %q not in\n%s", step, p, out(step))
			}
		}
	}
	wantIn("startup", "Reading table information for completion", "Server version: 8.0.33-dpproxy")
	wantIn("status", "SSL:\t\t\tCipher in use is TLS", "Uptime:", "Threads: 1  Questions: ", "Queries per second avg")
	wantIn("use", "Database changed")
	// The completion of hours_p comes from the column names the CLI read
	// with COM_FIELD_LIST at start-up.
	wantIn("complete", "hours_per_week", "| n ", "1 row in set")
	wantIn("topk", "3 rows in set")
	wantIn("raw", "ERROR 3900 (HY000): ")
	wantIn("syntax", "ERROR 1064 (42000): You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near 'SELEC 1' at line 1")
	wantIn("processlist", "| analyst |", "SHOW PROCESSLIST", "1 row in set")
	wantIn("ping", "still here")
}

// TestClientsMySQLCLICachingSHA2: against a proxy announcing
// caching_sha2_password. Offered TLS, the CLI logs in over it, and with
// --skip-ssl it asks for the RSA public key. Offered no TLS, libmariadb
// sends the password itself in clear text, which dpproxy refuses as MySQL
// does; --default-auth=mysql_native_password logs in.
func TestClientsMySQLCLICachingSHA2(t *testing.T) {
	t.Parallel()
	bin := findMySQLCLI(t)
	cp := startClientProxy(t, clientOpts{tls: true, authPlugin: "caching_sha2_password"})
	wantOK(t, cliRun(t, bin, cliArgs(cp, "analyst", "analyst"), "tls", "SELECT COUNT(*) AS n FROM adult WHERE sex = 'Male'"))
	wantOK(t, cliRun(t, bin, cliArgs(cp, "auditor", "auditor", "--skip-ssl"), "rsa", "SHOW TABLES"))
	wantAccessDenied(t, cliRun(t, bin, cliArgs(cp, "analyst", "wrong"), "bad_password", "SELECT 1"), "analyst")

	plain := startClientProxy(t, clientOpts{authPlugin: "caching_sha2_password"})
	wantAccessDenied(t, cliRun(t, bin, cliArgs(plain, "bob", "bob"), "clear_sha2", "SELECT 1"), "bob")
	wantOK(t, cliRun(t, bin, cliArgs(plain, "bob", "bob", "--default-auth=mysql_native_password"), "native", "SHOW TABLES"))
}
