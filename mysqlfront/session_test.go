package mysqlfront

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	vtmysql "github.com/dolthub/vitess/go/mysql"
	gomysql "github.com/go-sql-driver/mysql"
)

// Tests of what the front answers or repairs itself: errors in MySQL's
// shapes, the schema-only tables' refusal, quotes under sql_mode, KILL,
// SHOW PROCESSLIST, SHOW GRANTS, COM_STATISTICS, authentication messages,
// caching_sha2_password and TLS.

func wantCode(t *testing.T, what string, err error, code uint16, state, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %d", what, code)
	}
	me := mysqlErr(t, err)
	if me.Number != code || (state != "" && string(me.SQLState[:]) != state) || !strings.Contains(me.Message, msg) {
		t.Fatalf("%s: got %d (%s) %q, want %d (%s) containing %q", what, me.Number, me.SQLState, me.Message, code, state, msg)
	}
}

func TestGMSErrorsInMySQLShape(t *testing.T) {
	h := start(t)
	db := h.analyst("")
	db.SetMaxOpenConns(1)
	cases := []struct {
		q     string
		code  uint16
		state string
		msg   string
	}{
		{"SELEC 1", 1064, "42000", "You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near 'SELEC 1' at line 1"},
		{"SELECT 1 FROM", 1064, "42000", "near '' at line 1"},
		{"SELECT 1,\n 2 FROM WHERE", 1064, "42000", "near 'WHERE' at line 2"},
		{"SELECT 'unterminated", 1064, "42000", "near ''unterminated' at line 1"},
		{"SELECT * FROM nosuch", 1146, "42S02", "Table 'demo.nosuch' doesn't exist"},
		{"SHOW CREATE TABLE nosuch", 1146, "42S02", "Table 'demo.nosuch' doesn't exist"},
		{"SELECT nosuch FROM information_schema.tables", 1054, "42S22", "Unknown column 'nosuch' in 'field list'"},
		{"SELECT t.nosuch FROM information_schema.tables t", 1054, "42S22", "Unknown column 't.nosuch' in 'field list'"},
		{"USE nosuchdb", 1049, "42000", "Unknown database 'nosuchdb'"},
		{"SELECT * FROM nosuchdb.t", 1049, "42000", "Unknown database 'nosuchdb'"},
		{"USE mysql", 1044, "42000", "Access denied for user 'analyst'@'%' to database 'mysql'"},
		{"CREATE TABLE demo.t (x int)", 1142, "42000", "CREATE command denied to user 'analyst'@'%'"},
		{"SELECT nosuchfunc(1)", 1305, "42000", "FUNCTION demo.nosuchfunc does not exist"},
		{"SELECT @@nosuchvar", 1193, "HY000", "Unknown system variable 'nosuchvar'"},
		{"SET autocommit = 'banana'", 1231, "42000", "Variable 'autocommit' can't be set to the value of 'banana'"},
	}
	for _, c := range cases {
		_, err := db.ExecContext(ctx(t), c.q)
		wantCode(t, c.q, err, c.code, c.state, c.msg)
	}
	// vitess answers a COM_STMT_PREPARE that does not parse itself; the
	// packet layer gives it MySQL's shape too.
	_, err := db.QueryContext(ctx(t), "SELEC ? FROM adult", 1)
	wantCode(t, "prepared", err, 1064, "42000", "near 'SELEC ? FROM adult' at line 1")
	var s string
	if err := db.QueryRowContext(ctx(t), "SELECT 'in sync'").Scan(&s); err != nil || s != "in sync" {
		t.Fatalf("after errors: %v %q", err, s)
	}
}

func TestSyntaxErrorShape(t *testing.T) {
	for text, near := range map[string]string{
		"SELEC 1":                       "near 'SELEC 1' at line 1",
		"SELECT 1 +":                    "near '' at line 1",
		"SELECT * FROM t WHERE x = ":    "near '' at line 1",
		"SELECT * FROM t WHERE x ==  1": "near '=  1' at line 1",
		"SELECT 1;":                     "", // parses
		"SELECT \"a":                    `near '"a' at line 1`,
		"SELECT 1 /* open":              "near '/* open' at line 1",
		"SELECT " + strings.Repeat("x,", 60) + " FROM":                     "near '' at line 1",
		"SELECT\n1\nFROM\nFROM":                                            "near 'FROM' at line 4",
		"SELECT x FROM t LIMIT " + strings.Repeat("9", 100) + " junk junk": "at line 1",
	} {
		err := syntaxError(text)
		var se *vtmysql.SQLError
		if !errors.As(err, &se) || se.Num != 1064 || se.State != "42000" {
			t.Fatalf("%q: %v", text, err)
		}
		if near != "" && !strings.HasSuffix(se.Message, near) {
			t.Errorf("%q: %q, want ...%s", text, se.Message, near)
		}
		if i := strings.Index(se.Message, "near '"); i >= 0 {
			quoted := se.Message[i+6 : strings.LastIndex(se.Message, "' at line")]
			if len([]rune(quoted)) > 80 {
				t.Errorf("%q: near text longer than 80 characters", text)
			}
		}
	}
}

func TestSQLModeQuotes(t *testing.T) {
	h := start(t)
	conn, err := h.analyst("").Conn(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx(t), "SET SESSION sql_mode = 'ANSI_QUOTES,NO_BACKSLASH_ESCAPES'"); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := conn.QueryRowContext(ctx(t), `SELECT COUNT(*) FROM "adult" WHERE "sex" = 'a\'`).Scan(&n); err != nil || n != 1234 {
		t.Fatalf("ANSI_QUOTES: %v %d", err, n)
	}
	calls := h.fb.Calls()
	if len(calls) != 1 || calls[0].stmts[0] != "SELECT COUNT(*) FROM `adult` WHERE `sex` = 'a\\\\'" {
		t.Fatalf("backend got %+v", calls)
	}
	// GMS still reads the statements it answers under the session's mode.
	var s string
	if err := conn.QueryRowContext(ctx(t), `SELECT "TABLE_NAME" FROM information_schema.tables WHERE "TABLE_SCHEMA" = 'demo'`).Scan(&s); err != nil || s != "adult" {
		t.Fatalf("ANSI_QUOTES in GMS: %v %q", err, s)
	}
}

// TestSchemaOnlyTablesRefuseReads: a statement the backend does not claim
// that scans a protected table fails with 3900, not an empty answer.
func TestSchemaOnlyTablesRefuseReads(t *testing.T) {
	h := start(t)
	db := h.analyst("")
	for _, q := range []string{
		"SELECT COUNT(*) FROM information_schema.tables JOIN adult",
		"SELECT COUNT(*) FROM information_schema.tables t, demo.adult a WHERE a.age > 1",
	} {
		_, err := db.QueryContext(ctx(t), q)
		wantCode(t, q, err, 3900, "HY000", "only aggregate queries")
	}
	// Schema statements and COM_FIELD_LIST's query still work.
	got := queryStrings(t, db, "SHOW FULL TABLES FROM `demo`")
	if fmt.Sprint(got) != "[[adult BASE TABLE]]" {
		t.Fatalf("SHOW FULL TABLES: %v", got)
	}
	got = queryStrings(t, db, "SHOW CREATE TABLE `adult`")
	if len(got) != 1 || !strings.Contains(got[0][1], "`hours` double") {
		t.Fatalf("SHOW CREATE TABLE: %v", got)
	}
	got = queryStrings(t, db, "SELECT TABLE_ROWS FROM information_schema.tables WHERE table_name = 'adult'")
	if fmt.Sprint(got) != "[[0]]" {
		t.Fatalf("TABLE_ROWS: %v", got)
	}
}

func connID(t *testing.T, c *sql.Conn) int64 {
	t.Helper()
	var id int64
	if err := c.QueryRowContext(ctx(t), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestKill(t *testing.T) {
	h := start(t)
	a, err := h.analyst("").Conn(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := h.analyst("").Conn(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	other, err := h.db("auditor", "audit pw", "").Conn(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ida := connID(t, a)

	// KILL QUERY interrupts a running DP query with 1317; the connection stays.
	errc := make(chan error, 1)
	go func() {
		_, err := a.QueryContext(context.Background(), "SELECT COUNT(*) FROM adult WHERE sex = 'slow'")
		errc <- err
	}()
	select {
	case <-h.fb.slow:
	case <-time.After(5 * time.Second):
		t.Fatal("backend never reached")
	}
	_, err = other.ExecContext(ctx(t), fmt.Sprintf("KILL QUERY %d", ida))
	wantCode(t, "other user's KILL", err, 1095, "HY000", fmt.Sprintf("You are not owner of thread %d", ida))
	if _, err := b.ExecContext(ctx(t), fmt.Sprintf("KILL QUERY %d", ida)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		wantCode(t, "killed query", err, 1317, "70100", "Query execution was interrupted")
	case <-time.After(5 * time.Second):
		t.Fatal("KILL QUERY did not interrupt the query")
	}
	var n int64
	if err := a.QueryRowContext(ctx(t), "SELECT COUNT(*) FROM adult").Scan(&n); err != nil || n != 1234 {
		t.Fatalf("after KILL QUERY: %v %d", err, n)
	}

	_, err = b.ExecContext(ctx(t), "KILL 4000000000")
	wantCode(t, "unknown id", err, 1094, "HY000", "Unknown thread id: 4000000000")
	_, err = b.ExecContext(ctx(t), "KILL 99999999999")
	wantCode(t, "huge id", err, 1094, "HY000", "Unknown thread id")

	// SHOW PROCESSLIST: the user's own connections only.
	rows := queryStrings(t, b, "SHOW FULL PROCESSLIST")
	if len(rows) != 2 {
		t.Fatalf("processlist: %v", rows)
	}
	for _, r := range rows {
		if r[1] != "analyst" || r[3] != "demo" {
			t.Fatalf("processlist row: %v", r)
		}
		if r[0] == fmt.Sprint(connID(t, b)) && (r[4] != "Query" || r[7] != "SHOW FULL PROCESSLIST") {
			t.Fatalf("own row: %v", r)
		}
	}
	// KILL CONNECTION closes it.
	if _, err := b.ExecContext(ctx(t), fmt.Sprintf("KILL CONNECTION %d", ida)); err != nil {
		t.Fatal(err)
	}
	// KILL answers only after it has closed the target's socket
	// (Server.kill), so its answer is the event to wait for: the killed
	// connection is dead by now.
	if err := a.PingContext(ctx(t)); err == nil {
		t.Fatal("killed connection still alive")
	}
	// KILL of one's own connection closes it too.
	_, _ = b.ExecContext(ctx(t), "KILL CONNECTION_ID()")
	if err := b.PingContext(ctx(t)); err == nil {
		t.Fatal("self-killed connection still alive")
	}
}

func TestShowGrants(t *testing.T) {
	h := start(t)
	db := h.analyst("")
	for _, q := range []string{"SHOW GRANTS", "SHOW GRANTS FOR CURRENT_USER()", "SHOW GRANTS FOR CURRENT_USER", "SHOW GRANTS FOR analyst"} {
		got := fmt.Sprint(queryStrings(t, db, q))
		for _, want := range []string{"[[GRANT USAGE ON *.* TO `analyst`@`%`] ", "[GRANT SELECT ON `demo`.* TO `analyst`@`%`]", "[GRANT SELECT ON `information_schema`.* TO `analyst`@`%`]"} {
			if !strings.Contains(got, want) {
				t.Fatalf("%s: %v lacks %s", q, got, want)
			}
		}
	}
	_, err := db.QueryContext(ctx(t), "SHOW GRANTS FOR auditor")
	wantCode(t, "others' grants", err, 1044, "42000", "to database 'mysql'")
}

// rawConn is a vitess client connection, for commands database/sql cannot send.
func rawConn(t *testing.T, addr, user, pass string) *vtmysql.Conn {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	var p int
	fmt.Sscan(port, &p)
	c, err := vtmysql.Connect(ctx(t), &vtmysql.ConnParams{Host: host, Port: p, Uname: user, Pass: pass, DbName: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func writePacket(t *testing.T, c net.Conn, seq byte, payload []byte) {
	t.Helper()
	if _, err := c.Write(append([]byte{byte(len(payload)), byte(len(payload) >> 8), byte(len(payload) >> 16), seq}, payload...)); err != nil {
		t.Fatal(err)
	}
}

func readPacket(t *testing.T, c net.Conn) (byte, []byte) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, int(hdr[0])|int(hdr[1])<<8|int(hdr[2])<<16)
	if _, err := io.ReadFull(c, data); err != nil {
		t.Fatal(err)
	}
	return hdr[3], data
}

func TestComStatistics(t *testing.T) {
	h := start(t)
	c := rawConn(t, h.addr, "analyst", "analyst")
	if _, err := c.ExecuteFetch("SELECT 1", 1, false); err != nil {
		t.Fatal(err)
	}
	writePacket(t, c.Conn, 0, []byte{comStatistics})
	seq, data := readPacket(t, c.Conn)
	s := string(data)
	if seq != 1 || !strings.HasPrefix(s, "Uptime: ") || !strings.Contains(s, "  Threads: 1  Questions: ") || !strings.Contains(s, "Queries per second avg: ") {
		t.Fatalf("COM_STATISTICS: seq %d %q", seq, s)
	}
	// The connection carries on.
	if r, err := c.ExecuteFetch("SELECT 2", 1, false); err != nil || r.Rows[0][0].ToString() != "2" {
		t.Fatalf("after COM_STATISTICS: %v", err)
	}
}

func TestAccessDeniedMessages(t *testing.T) {
	h := start(t)
	for _, c := range []struct{ user, pw, using string }{
		{"analyst", "wrong", "YES"}, {"nobody", "x", "YES"}, {"analyst", "", "NO"},
	} {
		err := h.db(c.user, c.pw, "").PingContext(ctx(t))
		wantCode(t, c.user+"/"+c.pw, err, 1045, "28000", fmt.Sprintf("Access denied for user '%s'@'localhost' (using password: %s)", c.user, c.using))
	}
}

func certPool(t *testing.T, cfg *tls.Config) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	cert, err := x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	pool.AddCert(cert)
	return pool
}

func TestCachingSHA2(t *testing.T) {
	dir := t.TempDir()
	tc, err := SelfSignedTLS(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := startWith(t, func(c *Config) { c.AuthPlugin = "caching_sha2_password"; c.TLS = tc })
	if err := gomysql.RegisterTLSConfig("sha2test", &tls.Config{RootCAs: certPool(t, tc), ServerName: "localhost"}); err != nil {
		t.Fatal(err)
	}
	defer gomysql.DeregisterTLSConfig("sha2test")

	if h.srv.creds.sha2Verifier("analyst") != nil {
		t.Fatal("cache filled before any login")
	}
	// Full authentication without TLS: the RSA key.
	if err := h.db("analyst", "analyst", "tls=false").PingContext(ctx(t)); err != nil {
		t.Fatalf("RSA full authentication: %v", err)
	}
	if h.srv.creds.sha2Verifier("analyst") == nil {
		t.Fatal("full authentication did not fill the cache")
	}
	// Then fast authentication.
	if err := h.db("analyst", "analyst", "tls=false").PingContext(ctx(t)); err != nil {
		t.Fatalf("fast authentication: %v", err)
	}
	err = h.db("analyst", "nope", "tls=false").PingContext(ctx(t))
	wantCode(t, "fast, wrong password", err, 1045, "28000", "(using password: YES)")
	// Full authentication over TLS: the password in clear inside TLS.
	if err := h.db("auditor", "audit pw", "tls=sha2test").PingContext(ctx(t)); err != nil {
		t.Fatalf("TLS full authentication: %v", err)
	}
	err = h.db("nobody", "x", "tls=sha2test").PingContext(ctx(t))
	wantCode(t, "unknown user over TLS", err, 1045, "28000", "Access denied for user 'nobody'@'localhost'")

	if _, err := New(Config{Catalog: testCatalog(), Backend: newFakeBackend(), Address: "127.0.0.1:0", AuthPlugin: "sha256_password"}); err == nil {
		t.Fatal("unsupported auth plugin accepted")
	}
}

func TestRequireTLSRefusesClearText(t *testing.T) {
	dir := t.TempDir()
	tc, err := SelfSignedTLS(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := startWith(t, func(c *Config) { c.TLS = tc; c.RequireTLS = true })
	err = h.db("analyst", "analyst", "tls=false").PingContext(ctx(t))
	wantCode(t, "clear text", err, 3159, "HY000", "Connections using insecure transport are prohibited while --require_secure_transport=ON.")
	if err := gomysql.RegisterTLSConfig("reqtest", &tls.Config{RootCAs: certPool(t, tc), ServerName: "127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	defer gomysql.DeregisterTLSConfig("reqtest")
	var n int64
	if err := h.db("analyst", "analyst", "tls=reqtest").QueryRowContext(ctx(t), "SELECT COUNT(*) FROM adult").Scan(&n); err != nil || n != 1234 {
		t.Fatalf("verified TLS: %v %d", err, n)
	}
}

func TestSelfSignedTLS(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	a, err := SelfSignedTLS(dir, "proxy.example", "10.1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, SelfSignedKeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", err, st)
	}
	b, err := SelfSignedTLS(dir)
	if err != nil {
		t.Fatal(err)
	}
	if Fingerprint(a) != Fingerprint(b) || len(Fingerprint(a)) != 95 {
		t.Fatalf("certificate not reused: %s vs %s", Fingerprint(a), Fingerprint(b))
	}
	cert, err := x509.ParseCertificate(a.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := cert.VerifyHostname("proxy.example"); err != nil {
		t.Fatal(err)
	}
	if err := cert.VerifyHostname("127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if err := cert.VerifyHostname("10.1.2.3"); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, SelfSignedKeyFile))
	if _, err := SelfSignedTLS(dir); err == nil {
		t.Fatal("a lone certificate file was accepted")
	}
	if _, err := LoadTLS(filepath.Join(dir, "nope.pem"), filepath.Join(dir, "nope.key")); err == nil {
		t.Fatal("missing files accepted")
	}
}

func TestParseKill(t *testing.T) {
	for stmt, want := range map[string]string{
		"KILL 12":                     "true 12",
		"kill query 7;":               "false 7",
		"/* x */ KILL CONNECTION 3":   "true 3",
		"KILL CONNECTION_ID()":        "true 99",
		"KILL QUERY connection_id( )": "false 99",
		"KILL 1+1":                    "1064",
		"KILL":                        "1064",
		"KILL QUERY abc":              "1064",
		"KILL 99999999999":            "1094",
	} {
		conn, id, err := parseKill(stmt, 99)
		got := fmt.Sprint(conn, " ", id)
		if err != nil {
			got = fmt.Sprint(mysqlErrNum(err))
		}
		if got != want {
			t.Errorf("%q: %s, want %s", stmt, got, want)
		}
	}
}

func mysqlErrNum(err error) int {
	var se *vtmysql.SQLError
	if errors.As(err, &se) {
		return se.Num
	}
	return -1
}
