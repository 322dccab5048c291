package main

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Python: PyMySQL and mysqlclient (MySQLdb), each with the standard flow
// and with SQLAlchemy 1.4 as Superset drives it: dialect start-up,
// reflection (SHOW schemas, SHOW FULL TABLES, SHOW CREATE TABLE), a chart
// query built by SQLAlchemy Core, SQL Lab's CONNECTION_ID() and row limit,
// pool pre-ping (COM_PING) and ROLLBACK on check-in, and the errors
// Superset parses. Both drivers drop the SQLSTATE, so only codes and
// messages are checked.

func pythonClient(t *testing.T, cp *clientProxy, driver, parts string, flow []flowStep) results {
	t.Helper()
	cmd := exec.Command(python, scriptPath(t, "python_client.py"))
	cmd.Env = append(cp.env("analyst", "analyst"),
		"DPPROXY_DRIVER="+driver, "DPPROXY_PARTS="+parts, "DPPROXY_FLOW="+writeFlow(t, flow))
	return runClient(t, cmd)
}

func checkSQLAlchemy(t *testing.T, rs results) {
	t.Helper()
	r := rs.get(t, "sa_reflect")
	wantOK(t, r)
	info := fmt.Sprint(r.Info)
	for _, want := range []string{"tables:[adult countries events]", "has_table:true", "has_nosuch:false", "pk:[]", "fks:[]", "indexes:[]",
		"columns:[age workclass education marital_status occupation race sex hours_per_week income]"} {
		if !strings.Contains(info, want) {
			t.Fatalf("sa_reflect: %q not in %s", want, info)
		}
	}
	if schemas, _ := r.Info["schemas"].([]any); !slices.Contains(schemas, any("demo")) {
		t.Fatalf("sa_reflect schemas: %v", r.Info["schemas"])
	}
	for _, step := range []string{"sa_chart", "sa_text_chart"} {
		r = rs.get(t, step)
		wantOK(t, r)
		if len(r.Rows) != 2 || fmt.Sprint(r.Columns) != "[sex count]" || num(t, r, 0, 1) < num(t, r, 1, 1) {
			t.Fatalf("%s: %s", step, r)
		}
		if r.cell(0, 0) != "Male" { // men are two thirds of the demo table; no noise flips that
			t.Fatalf("%s: %s", step, r)
		}
	}
	if sql, _ := rs.get(t, "sa_chart").Info["sql"].(string); !strings.Contains(sql, "GROUP BY adult.sex ORDER BY count DESC") {
		t.Fatalf("sa_chart SQL: %s", sql)
	}
	r = rs.get(t, "sa_connection_id")
	wantOK(t, r)
	if len(r.Rows) != 1 || num(t, r, 0, 0) < 1 {
		t.Fatalf("CONNECTION_ID: %s", r)
	}
	r = rs.get(t, "sa_sqllab")
	wantOK(t, r)
	if len(r.Rows) != 3 {
		t.Fatalf("sa_sqllab: %s", r)
	}
	r = rs.get(t, "sa_info_schema")
	wantOK(t, r)
	if r.cell(0, 0) != "1" {
		t.Fatalf("sa_info_schema: %s", r)
	}
	wantError(t, rs.get(t, "sa_raw"), 3900, "")
	// Superset's SYNTAX_ERROR_REGEX.
	wantError(t, rs.get(t, "sa_syntax"), 1064, "", "check the manual that corresponds to your MySQL server version for the right syntax to use near 'SELEC sex FROM adult'")
}

func TestClientsPyMySQL(t *testing.T) {
	t.Parallel()
	needPython(t, "pymysql", "sqlalchemy")
	cp := startClientProxy(t, clientOpts{})
	flow := standardFlow()
	rs := pythonClient(t, cp, "pymysql", "flow,login,sqlalchemy", flow)
	checkStandardFlow(t, cp, rs, false)
	if rs.get(t, "connection").Info["ping"] != true {
		t.Fatalf("ping / select_db: %s", rs.get(t, "connection"))
	}
	wantAccessDenied(t, rs.get(t, "bad_password"), "analyst")
	checkSQLAlchemy(t, rs)
	// flow + the two charts + SQL Lab's top-k
	checkLedger(t, cp, dpSteps(flow)+3)
}

// TestClientsPyMySQLTLSCachingSHA2: PyMySQL over TLS (verified) against a
// proxy announcing caching_sha2_password, then without TLS (RSA).
func TestClientsPyMySQLTLSCachingSHA2(t *testing.T) {
	t.Parallel()
	needPython(t, "pymysql", "cryptography")
	cp := startClientProxy(t, clientOpts{tls: true, authPlugin: "caching_sha2_password"})
	flow := standardFlow()
	rs := pythonClient(t, cp, "pymysql", "flow,login", flow)
	checkStandardFlow(t, cp, rs, false)
	if c, _ := rs.get(t, "connection").Info["cipher"].(string); c == "" {
		t.Fatalf("not over TLS: %s", rs.get(t, "connection"))
	}
	wantAccessDenied(t, rs.get(t, "bad_password"), "analyst")

	ca := cp.certFile
	cp.certFile = "" // now in clear text: full authentication with the RSA key
	rs = pythonClient(t, cp, "pymysql", "flow", flow[:3])
	cp.certFile = ca
	wantOK(t, rs.get(t, "tables"))
	if c, _ := rs.get(t, "connection").Info["cipher"].(string); c != "" {
		t.Fatalf("expected a clear-text connection: %s", rs.get(t, "connection"))
	}
}

func TestClientsMySQLdb(t *testing.T) {
	t.Parallel()
	needPython(t, "MySQLdb", "sqlalchemy")
	cp := startClientProxy(t, clientOpts{})
	flow := standardFlow()
	rs := pythonClient(t, cp, "mysqldb", "flow,login,sqlalchemy", flow)
	checkStandardFlow(t, cp, rs, false)
	wantAccessDenied(t, rs.get(t, "bad_password"), "analyst")
	checkSQLAlchemy(t, rs)
	checkLedger(t, cp, dpSteps(flow)+3)
}
