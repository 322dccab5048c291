package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// MariaDB Connector/J 2.7 (Debian's libmariadb-java, the driver Metabase
// bundles for MySQL) replaying Metabase: connection set-up, sync through
// DatabaseMetaData and the MySQL driver's INFORMATION_SCHEMA queries, the
// privilege probe, field values, row count and the row sample, a compiled
// question, its table view; KILL QUERY / KILL CONNECTION between
// connections; the standard flow with client-side and server-side
// prepared statements. Run in clear text against a proxy announcing
// caching_sha2_password, and over required TLS (certificate verified).

func mariadbJar() string {
	if j := os.Getenv("DPPROXY_MARIADB_JAR"); j != "" {
		return j
	}
	return "/usr/share/java/mariadb-java-client.jar"
}

// writeFlowTSV writes the flow for the Java replay: step, exec flag, SQL,
// params as i:<int> or s:<string> joined by |.
func writeFlowTSV(t *testing.T, steps []flowStep) string {
	t.Helper()
	var b strings.Builder
	for _, s := range steps {
		var ps []string
		for _, p := range s.Params {
			switch v := p.(type) {
			case int:
				ps = append(ps, fmt.Sprintf("i:%d", v))
			default:
				ps = append(ps, fmt.Sprintf("s:%v", v))
			}
		}
		exec := "0"
		if s.Exec {
			exec = "1"
		}
		fmt.Fprintf(&b, "%s\t%s\t%s\t%s\n", s.Step, exec, s.SQL, strings.Join(ps, "|"))
	}
	path := filepath.Join(t.TempDir(), "flow.tsv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// compileReplay finds Java and Connector/J and compiles MetabaseReplay.java;
// it returns the java binary and the class path to run it with.
func compileReplay(t *testing.T) (java, classPath string) {
	t.Helper()
	java, err := exec.LookPath("java")
	needClient(t, "java", err)
	javac, err := exec.LookPath("javac")
	needClient(t, "javac", err)
	_, err = os.Stat(mariadbJar())
	needClient(t, "MariaDB Connector/J (apt-get install libmariadb-java)", err)
	classes := t.TempDir()
	if out, err := exec.Command(javac, "-d", classes, "-cp", mariadbJar(), scriptPath(t, "MetabaseReplay.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	return java, classes + string(os.PathListSeparator) + mariadbJar()
}

func TestClientsConnectorJ(t *testing.T) {
	t.Parallel()
	java, classPath := compileReplay(t)
	for _, c := range []struct {
		name string
		opts clientOpts
	}{
		// caching_sha2_password in clear text: Connector/J fetches the RSA key (allowPublicKeyRetrieval=true)
		{"caching_sha2", clientOpts{authPlugin: "caching_sha2_password"}},
		{"tls", clientOpts{tls: true, requireTLS: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cp := startClientProxy(t, c.opts)
			flow := standardFlow()
			cmd := exec.Command(java, "-cp", classPath, "MetabaseReplay")
			cmd.Env = append(cp.env("analyst", "analyst"), "DPPROXY_FLOW="+writeFlowTSV(t, flow))
			rs := runClient(t, cmd)
			checkMetabase(t, cp, rs)
			checkStandardFlow(t, cp, rs, true)
			checkStandardFlow(t, cp, rs.prefixed("server_"), true)
			wantAccessDenied(t, rs.get(t, "bad_password"), "analyst")
			// row count, the question, the query after KILL QUERY, and the flow twice
			checkLedger(t, cp, 3+2*dpSteps(flow))
		})
	}
}

func checkMetabase(t *testing.T, cp *clientProxy, rs results) {
	t.Helper()
	r := rs.get(t, "mb_connect")
	wantOK(t, r)
	if r.Info["version"] != "8.0.33-dpproxy" || r.Info["valid"] != true {
		t.Fatalf("mb_connect: %s", r)
	}
	for _, step := range []string{"mb_autocommit", "mb_isolation", "mb_time_zone", "mb_partial_revokes", "mb_default_tz", "mb_describe_fks", "mb_get_pks", "mb_get_fks"} {
		wantOK(t, rs.get(t, step))
	}
	r = rs.get(t, "mb_variables")
	wantOK(t, r)
	if len(r.Rows) != 1 || len(r.Columns) != 4 {
		t.Fatalf("mb_variables: %s", r)
	}
	if r = rs.get(t, "mb_isolation_read"); r.cell(0, 0) != "READ-UNCOMMITTED" {
		t.Fatalf("mb_isolation_read: %s", r)
	}
	r = rs.get(t, "mb_get_tables")
	wantOK(t, r)
	if len(r.Rows) != 3 || !strings.Contains(r.flat(), "adult") || !strings.Contains(r.flat(), "countries") {
		t.Fatalf("mb_get_tables: %s", r)
	}
	for _, step := range []string{"mb_get_columns", "mb_describe_fields"} {
		if r = rs.get(t, step); r.Error != nil || len(r.Rows) != 9 {
			t.Fatalf("%s: %s", step, r)
		}
	}
	if r = rs.get(t, "mb_get_catalogs"); !strings.Contains(r.flat(), "demo") {
		t.Fatalf("mb_get_catalogs: %s", r)
	}
	if r = rs.get(t, "mb_probe"); r.Error != nil || len(r.Rows) != 0 || fmt.Sprint(r.Columns) != "[_]" {
		t.Fatalf("mb_probe: %s", r)
	}
	// The declared values. (The engine lists them in the catalog's order;
	// MySQL would sort them by the collation for ORDER BY ... ASC.)
	if r = rs.get(t, "mb_field_values"); r.Error != nil || len(r.Rows) != len(occupations) {
		t.Fatalf("mb_field_values: %s", r)
	}
	for _, o := range occupations {
		if !strings.Contains(r.flat(), o+"\t") {
			t.Fatalf("mb_field_values: %s lacks %s", r, o)
		}
	}
	r = rs.get(t, "mb_row_count")
	wantOK(t, r)
	if n, want := num(t, r, 0, 0), float64(clientsTruth(t, "SELECT COUNT(*) FROM adult")); n < want-300 || n > want+300 {
		t.Fatalf("mb_row_count: %s (truth %v)", r, want)
	}
	wantError(t, rs.get(t, "mb_sample"), 3900, "HY000")
	wantError(t, rs.get(t, "mb_table_view"), 3900, "HY000")
	if r = rs.get(t, "mb_question"); r.Error != nil || len(r.Rows) != 3 || fmt.Sprint(r.Columns) != "[occupation count]" {
		t.Fatalf("mb_question: %s", r)
	}

	wantOK(t, rs.get(t, "kill_query_own"))
	wantOK(t, rs.get(t, "after_kill_query"))
	wantError(t, rs.get(t, "kill_other_user"), 1095, "HY000", "You are not owner of thread")
	wantError(t, rs.get(t, "kill_unknown"), 1094, "HY000", "Unknown thread id: 4000000000")
	if r = rs.get(t, "processlist"); r.Error != nil || len(r.Rows) < 2 || strings.Contains(r.flat(), "bob") {
		t.Fatalf("processlist: %s", r)
	}
	if r = rs.get(t, "grants"); !strings.Contains(r.flat(), "GRANT SELECT ON `demo`.* TO `analyst`@`%`") {
		t.Fatalf("grants: %s", r)
	}
	wantOK(t, rs.get(t, "kill_connection"))
	if r = rs.get(t, "after_kill_connection"); r.Info["valid_after_kill"] != false {
		t.Fatalf("after_kill_connection: %s", r)
	}
}
