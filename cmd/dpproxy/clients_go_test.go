package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// The Go driver (github.com/go-sql-driver/mysql): the standard flow with
// interpolateParams off (server-side prepared statements,
// COM_STMT_PREPARE/EXECUTE) and on (the driver writes the literals), TLS
// with the proxy's certificate verified, required TLS, caching_sha2_password
// (full authentication over RSA and over TLS, then fast from the cache),
// multi-statement batches and COM_PING.

// goFlow runs steps on one connection of db.
func goFlow(t *testing.T, db *sql.DB, steps []flowStep) results {
	t.Helper()
	// A guard against a hung proxy, not a speed target: a whole flow
	// under the race detector on a loaded machine took 52 s.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rs := results{}
	for _, st := range steps {
		r := &stepResult{Step: st.Step}
		rs[st.Step] = r
		if st.Exec {
			_, err = conn.ExecContext(ctx, st.SQL, st.Params...)
		} else {
			err = goQuery(ctx, conn, r, st.SQL, st.Params...)
		}
		if err != nil {
			setGoError(t, r, err)
		}
	}
	return rs
}

func goQuery(ctx context.Context, conn *sql.Conn, r *stepResult, q string, args ...any) error {
	rows, err := conn.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if r.Columns, err = rows.Columns(); err != nil {
		return err
	}
	r.Rows, err = scanText(rows)
	return err
}

// scanText reads the rows of the current result set as text, NULL as nil.
func scanText(rows *sql.Rows) ([][]*string, error) {
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	out := [][]*string{}
	for rows.Next() {
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := make([]*string, len(vals))
		for i, v := range vals {
			if v != nil {
				s := string(v)
				row[i] = &s
			}
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

func setGoError(t *testing.T, r *stepResult, err error) {
	t.Helper()
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		t.Fatalf("step %s: not a MySQL error: %v", r.Step, err)
	}
	r.Error = &struct {
		Code     int    `json:"code"`
		SQLState string `json:"sqlstate"`
		Message  string `json:"message"`
	}{int(me.Number), string(me.SQLState[:]), me.Message}
}

func goLogin(t *testing.T, cp *clientProxy, user, pass, params string) error {
	t.Helper()
	db := connect(t, cp.addr, user, pass, params)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

func TestClientsGoDriver(t *testing.T) {
	t.Parallel()
	cp := startClientProxy(t, clientOpts{})
	flow := standardFlow()
	for _, params := range []string{"interpolateParams=false", "interpolateParams=true"} {
		t.Run(params, func(t *testing.T) {
			before := releasedAnswers(t, cp)
			rs := goFlow(t, connect(t, cp.addr, "analyst", "analyst", params), flow)
			checkStandardFlow(t, cp, rs, true)
			checkLedger(t, cp, before+dpSteps(flow))
		})
	}

	r := &stepResult{Step: "bad_password"}
	if err := goLogin(t, cp, "analyst", "wrong", ""); err == nil {
		t.Fatal("wrong password accepted")
	} else {
		setGoError(t, r, err)
	}
	wantAccessDenied(t, r, "analyst")
	r = &stepResult{Step: "unknown_user"}
	setGoError(t, r, goLogin(t, cp, "nobody", "analyst", ""))
	wantAccessDenied(t, r, "nobody")

	// A multi-statement batch is one measurement; COM_PING works.
	db := connect(t, cp.addr, "analyst", "analyst", "multiStatements=true")
	before := releasedAnswers(t, cp)
	rows, err := db.Query("SELECT COUNT(*) FROM adult WHERE sex = 'Female'; SELECT COUNT(*) FROM adult WHERE sex = 'Male'")
	if err != nil {
		t.Fatal(err)
	}
	sets := 0
	for {
		for rows.Next() {
			sets++
		}
		if !rows.NextResultSet() {
			break
		}
	}
	rows.Close()
	if sets != 2 || releasedAnswers(t, cp) != before+1 {
		t.Fatalf("batch: %d result sets, %d ledger entries", sets, releasedAnswers(t, cp)-before)
	}
	if err := db.Ping(); err != nil {
		t.Fatal(err)
	}

	// The SQL BI tools write, through both kinds of statements.
	for _, params := range []string{"interpolateParams=false", "interpolateParams=true"} {
		before := releasedAnswers(t, cp)
		flow := biToolFlow()
		checkBIToolFlow(t, goFlow(t, connect(t, cp.addr, "analyst", "analyst", params), flow))
		checkLedger(t, cp, before+dpSteps(flow))
	}
}

// The time charts of Grafana, Metabase and Superset through the Go driver,
// with both kinds of statements; with parseTime the DATE and DATETIME
// columns scan as times.
func TestClientsGoDriverTime(t *testing.T) {
	t.Parallel()
	cp := startTimeProxy(t)
	for _, params := range []string{"interpolateParams=false", "interpolateParams=true"} {
		t.Run(params, func(t *testing.T) {
			before := releasedAnswers(t, cp)
			flow := biTimeFlow()
			checkBITimeFlow(t, goFlow(t, connect(t, cp.addr, "analyst", "analyst", params), flow))
			checkLedger(t, cp, before+dpSteps(flow))
		})
	}
	db := connect(t, cp.addr, "analyst", "analyst", "parseTime=true")
	rows, err := db.Query("SELECT DATE(ts) AS d, DATE_ADD(DATE(ts), INTERVAL HOUR(ts) HOUR) AS h, COUNT(*) AS n FROM visits WHERE ts >= '2025-01-21 22:00:00' GROUP BY 1, 2 ORDER BY 2")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	types, err := rows.ColumnTypes()
	if err != nil || types[0].DatabaseTypeName() != "DATE" || types[1].DatabaseTypeName() != "DATETIME" {
		t.Fatalf("column types %v, %v", types, err)
	}
	var got []string
	for rows.Next() {
		var d, h time.Time
		var n float64
		if err := rows.Scan(&d, &h, &n); err != nil {
			t.Fatal(err)
		}
		got = append(got, d.Format(time.DateOnly)+" "+h.Format(time.TimeOnly))
	}
	if strings.Join(got, ",") != "2025-01-21 22:00:00,2025-01-21 23:00:00" {
		t.Fatalf("parseTime rows %v (%v)", got, rows.Err())
	}
}

func TestClientsGoDriverTLS(t *testing.T) {
	t.Parallel()
	cp := startClientProxy(t, clientOpts{tls: true, requireTLS: true})
	name := fmt.Sprintf("dpproxy-%p", t)
	if err := mysql.RegisterTLSConfig(name, cp.tlsConfig(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mysql.DeregisterTLSConfig(name) })

	// The certificate verifies against the generated CA file; the flow runs over TLS.
	flow := standardFlow()
	rs := goFlow(t, connect(t, cp.addr, "analyst", "analyst", "tls="+name), flow)
	checkStandardFlow(t, cp, rs, true)
	checkLedger(t, cp, dpSteps(flow))

	// Clear-text clients get MySQL's 3159 before authenticating.
	r := &stepResult{Step: "clear_text"}
	setGoError(t, r, goLogin(t, cp, "analyst", "analyst", "tls=false"))
	wantError(t, r, 3159, "HY000", "insecure transport")
	// tls=preferred switches when offered.
	if err := goLogin(t, cp, "analyst", "analyst", "tls=preferred"); err != nil {
		t.Fatalf("tls=preferred: %v", err)
	}
	// Wrong password over TLS: 1045.
	r = &stepResult{Step: "bad_password"}
	setGoError(t, r, goLogin(t, cp, "analyst", "nope", "tls="+name))
	wantAccessDenied(t, r, "analyst")
}

func TestClientsGoDriverCachingSHA2(t *testing.T) {
	t.Parallel()
	cp := startClientProxy(t, clientOpts{tls: true, authPlugin: "caching_sha2_password"})
	name := fmt.Sprintf("dpproxy-sha2-%p", t)
	if err := mysql.RegisterTLSConfig(name, cp.tlsConfig(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mysql.DeregisterTLSConfig(name) })

	// First login of bob without TLS: full authentication with the RSA key;
	// then fast authentication from the cache.
	for i := 0; i < 2; i++ {
		if err := goLogin(t, cp, "bob", "bob", "tls=false"); err != nil {
			t.Fatalf("caching_sha2_password login %d without TLS: %v", i+1, err)
		}
	}
	// analyst first logs in over TLS (clear-text password inside TLS).
	if err := goLogin(t, cp, "analyst", "analyst", "tls="+name); err != nil {
		t.Fatalf("caching_sha2_password over TLS: %v", err)
	}
	rs := goFlow(t, connect(t, cp.addr, "analyst", "analyst", "tls=false"), standardFlow())
	checkStandardFlow(t, cp, rs, true)

	for _, c := range []struct{ user, pass, params string }{
		{"bob", "wrong", "tls=false"},     // cached user, wrong password: fast path refuses
		{"auditor", "wrong", "tls=false"}, // full authentication over RSA refuses
		{"analyst", "wrong", "tls=" + name},
		{"nobody", "x", "tls=false"},
	} {
		r := &stepResult{Step: "bad_" + c.user}
		err := goLogin(t, cp, c.user, c.pass, c.params)
		if err == nil {
			t.Fatalf("%s/%s accepted", c.user, c.pass)
		}
		setGoError(t, r, err)
		wantAccessDenied(t, r, c.user)
	}
	// A client that only speaks mysql_native_password is served too.
	if err := goLogin(t, cp, "auditor", "auditor", "tls=false&allowNativePasswords=true"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cp.front.Config().AuthPlugin, "sha2") {
		t.Fatal("proxy does not announce caching_sha2_password")
	}
}

// TestClientsGrafana replays Grafana's MySQL data source, which is the Go
// driver with Grafana's DSN: collation utf8mb4_unicode_ci, parseTime,
// loc=UTC, the session time zone as a DSN variable (SET time_zone at
// connect), its health check (COM_PING), its table and column listings and
// panels' aggregate queries.
func TestClientsGrafana(t *testing.T) {
	t.Parallel()
	cp := startClientProxy(t, clientOpts{})
	dsn := fmt.Sprintf("analyst:analyst@tcp(%s)/demo?collation=utf8mb4_unicode_ci&parseTime=true&loc=UTC&allowNativePasswords=true&time_zone='%%2B00%%3A00'", cp.addr)
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("health check: %v", err)
	}
	var tz string
	if err := db.QueryRowContext(ctx, "SELECT @@session.time_zone").Scan(&tz); err != nil || tz != "+00:00" {
		t.Fatalf("session time zone: %v %q", err, tz)
	}
	var table string
	if err := db.QueryRowContext(ctx, "SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_TYPE IN ('BASE TABLE', 'VIEW') ORDER BY TABLE_NAME").Scan(&table); err != nil || table != "adult" {
		t.Fatalf("tables: %v %q", err, table)
	}
	rows, err := db.QueryContext(ctx, "SELECT COLUMN_NAME, DATA_TYPE, NUMERIC_PRECISION, NUMERIC_SCALE\n\t\t FROM INFORMATION_SCHEMA.COLUMNS\n\t\t WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?\n\t\t ORDER BY ORDINAL_POSITION", "adult")
	if err != nil {
		t.Fatal(err)
	}
	var cols []string
	for rows.Next() {
		var name, typ string
		var p, s sql.NullInt64
		if err := rows.Scan(&name, &typ, &p, &s); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, name+":"+typ)
	}
	rows.Close()
	if len(cols) != 9 || cols[0] != "age:bigint" || cols[1] != "workclass:varchar" {
		t.Fatalf("columns: %v", cols)
	}
	// A bar chart and a stat panel.
	rs := goFlow(t, db, []flowStep{
		{Step: "bars", SQL: "SELECT sex AS metric, COUNT(*) AS value FROM adult GROUP BY sex ORDER BY value DESC"},
		{Step: "stat", SQL: "SELECT COUNT(*) AS value FROM adult WHERE hours_per_week >= 40"},
		// Grafana's query builder lists a column's values with a derived
		// table of SELECT DISTINCT ... WHERE, which dpproxy refuses: it
		// would list the values present in the data.
		{Step: "column_values", SQL: "SELECT 'sex' AS col_name, CAST(`sex` AS CHAR) AS val FROM (SELECT DISTINCT `sex` FROM `adult` WHERE `sex` IS NOT NULL ORDER BY `sex` LIMIT 100) sub_0"},
	})
	if r := rs.get(t, "bars"); r.Error != nil || len(r.Rows) != 2 || r.cell(0, 0) != "Male" {
		t.Fatalf("bars: %s", r)
	}
	if r := rs.get(t, "stat"); r.Error != nil || len(r.Rows) != 1 {
		t.Fatalf("stat: %s", r)
	}
	wantError(t, rs.get(t, "column_values"), 3900, "HY000", "domain list")
	checkLedger(t, cp, 2)
}

// TestClientsDBeaverMetadata replays the metadata statements DBeaver's
// MySQL navigator sends when a connection opens and a table is expanded;
// then its data viewer's raw read, refused.
func TestClientsDBeaverMetadata(t *testing.T) {
	t.Parallel()
	cp := startClientProxy(t, clientOpts{})
	var steps []flowStep
	for i, q := range []string{
		"SHOW ENGINES", "SHOW CHARSET", "SHOW COLLATION", "SHOW PLUGINS", "SHOW VARIABLES LIKE 'lower_case_table_names'",
		"SELECT @@GLOBAL.lower_case_table_names", "SHOW DATABASES", "SELECT * FROM information_schema.SCHEMATA",
		"SHOW CREATE DATABASE `demo`", "SHOW FULL TABLES FROM `demo`", "SHOW TABLE STATUS FROM `demo` LIKE 'adult'",
		"SHOW FULL COLUMNS FROM `demo`.`adult`", "SHOW INDEX FROM `demo`.`adult`",
		"SELECT * FROM information_schema.KEY_COLUMN_USAGE kcu WHERE kcu.TABLE_SCHEMA='demo' AND kcu.TABLE_NAME='adult' ORDER BY kcu.ORDINAL_POSITION",
		"SELECT * FROM information_schema.TABLE_CONSTRAINTS tc WHERE tc.TABLE_SCHEMA='demo' AND tc.TABLE_NAME='adult'",
		"SELECT * FROM information_schema.VIEWS WHERE TABLE_SCHEMA='demo'",
		"SELECT * FROM information_schema.PARTITIONS WHERE TABLE_SCHEMA='demo' AND TABLE_NAME='adult'",
		"SHOW CREATE TABLE `demo`.`adult`", "SHOW FULL PROCESSLIST", "SHOW GRANTS", "SHOW STATUS", "SHOW EVENTS FROM `demo`",
		"SHOW TRIGGERS FROM `demo`",
		"SELECT * FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA='demo' AND EVENT_OBJECT_TABLE='adult'",
		"SELECT * FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA='demo'",
		"SHOW FUNCTION STATUS WHERE Db = 'demo'", "SHOW PROCEDURE STATUS WHERE Db = 'demo'",
	} {
		steps = append(steps, flowStep{Step: fmt.Sprintf("meta%02d", i), SQL: q})
	}
	steps = append(steps, flowStep{Step: "viewer", SQL: "SELECT * FROM `demo`.`adult` LIMIT 0, 200"},
		flowStep{Step: "row_count", SQL: "SELECT COUNT(*) FROM `demo`.`adult`"})
	rs := goFlow(t, connect(t, cp.addr, "analyst", "analyst", ""), steps)
	// Every metadata statement is answered, for the audit schema too (its
	// auditDB embeds an empty memory.Database for the trigger, stored
	// procedure and event lists GMS asks every database for).
	for _, st := range steps[:len(steps)-2] {
		if r := rs.get(t, st.Step); r.Error != nil {
			t.Errorf("%s: %s", st.SQL, r)
		}
	}
	wantError(t, rs.get(t, "viewer"), 3900, "HY000")
	wantOK(t, rs.get(t, "row_count"))
}
