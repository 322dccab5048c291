package main

// The real-client suite: each clients_<name>_test.go drives one MySQL
// client or driver (the mysql CLI, PyMySQL + SQLAlchemy, mysqlclient, Node
// mysql2, the Go driver, MariaDB Connector/J replaying Metabase) against a
// real dpproxy. This file holds what they share: the proxy, the standard
// flow every client runs, and its checks.
//
// A client that is not installed skips its test, except under CI=true,
// where it fails: .ci/run installs them all (apt-get, and npm for mysql2
// into $DPPROXY_CLIENTS_DIR, by default ~/.cache/dpproxy-clients).
//
// Scripts in testdata/clients run the flow given in the JSON file named by
// $DPPROXY_FLOW and print one JSON object per line and step:
//
//	{"step": "count_range", "columns": ["n", "se"], "rows": [["14544", "14.1"]]}
//	{"step": "raw_read", "error": {"code": 3900, "sqlstate": "HY000", "message": "..."}}
//
// with every value as a string (NULL as null). Connection settings come in
// DPPROXY_HOST, DPPROXY_PORT, DPPROXY_USER, DPPROXY_PASSWORD, DPPROXY_DB
// and, for TLS, DPPROXY_CA (the proxy's self-signed certificate).

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"github.com/dpproxy/dpproxy/catalog"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/mysqlfront"
)

// clientsCatalog is the demo table with a budget that the flows cannot
// exhaust, except on purpose: once anything is spent, @dp_epsilon = 50
// (the per-query maximum) is more than the user's per_user budget of 50
// leaves, so that batch is refused with 3901 and charges nothing.
var clientsCatalog = strings.Replace(clientsAdultCatalog, "\nusers:\n", "\n"+demoEventsYAML()+"users:\n", 1)

const clientsAdultCatalog = `
database: demo
sources:
  main: {driver: sqlite, path: "{{CLIENTS_DEMO}}"}
tables:
  adult:
    source: main
    noise: laplace
    budget: {total: 1000, per_user: 50, default_per_query: 0.1, max_per_query: 50}
    columns:
      age: {type: integer, min: 17, max: 90, width: 1}
      workclass:
        type: categorical
        values: [Private, Self-emp-not-inc, Self-emp-inc, Federal-gov, Local-gov, State-gov, Without-pay, Never-worked]
      education:
        type: categorical
        values: [Preschool, 1st-4th, 5th-6th, 7th-8th, 9th, 10th, 11th, 12th, HS-grad, Some-college,
                 Assoc-voc, Assoc-acdm, Bachelors, Masters, Prof-school, Doctorate]
      marital_status:
        type: categorical
        values: [Married-civ-spouse, Divorced, Never-married, Separated, Widowed, Married-spouse-absent, Married-AF-spouse]
      occupation:
        type: categorical
        values: [Tech-support, Craft-repair, Other-service, Sales, Exec-managerial, Prof-specialty, Handlers-cleaners,
                 Machine-op-inspct, Adm-clerical, Farming-fishing, Transport-moving, Priv-house-serv, Protective-serv, Armed-Forces]
      race:
        type: categorical
        values: [White, Asian-Pac-Islander, Amer-Indian-Eskimo, Other, Black]
      sex: {type: categorical, values: [Female, Male]}
      hours_per_week: {type: integer, min: 1, max: 99, width: 1}
      income: {type: categorical, values: ["<=50K", ">50K"]}
users:
  analyst: {password: analyst, role: analyst}
  bob: {password: bob, role: analyst}
  auditor: {password: auditor, role: auditor}
`

// demoEventsYAML is the embedded demo catalog's events table (an entry of
// tables:) followed by its public_tables section, so that a test catalog
// over the demo data declares them as the demo does: inserted after the
// last table of a catalog, before users:.
func demoEventsYAML() string {
	demo := string(catalog.DemoYAML())
	i, j := strings.Index(demo, "\n  events:\n"), strings.Index(demo, "\n  users:\n")
	p, k := strings.Index(demo, "\npublic_tables:\n"), strings.Index(demo, "\nusers:\n")
	if i < 0 || j < i || p < j || k < p {
		panic("demo.yaml: the events table, users table, public_tables and users section not found")
	}
	// The client tests check the BI tools' SQL against exact counts of the
	// rows: their events are row-private (user_id private, not a privacy
	// unit, whose truncation engine and sources tests check), and they
	// leave out the users table.
	out := strings.Replace(demo[i+1:j+1]+demo[p+1:k+1], "privacy_unit: {column: user_id, space: customer, max_rows: 5}", "private_columns: [user_id]", 1)
	if !strings.Contains(out, "private_columns: [user_id]") {
		panic("demo.yaml: the events table's privacy_unit not found")
	}
	return out
}

var occupations = []string{"Tech-support", "Craft-repair", "Other-service", "Sales", "Exec-managerial", "Prof-specialty", "Handlers-cleaners",
	"Machine-op-inspct", "Adm-clerical", "Farming-fishing", "Transport-moving", "Priv-house-serv", "Protective-serv", "Armed-Forces"}

type clientOpts struct {
	tls        bool   // serve the self-signed certificate
	requireTLS bool   // and require it
	authPlugin string // announced auth plugin ("" = mysql_native_password)
}

// clientProxy is a dpproxy for the client tests.
type clientProxy struct {
	*proxy
	addr, host, port string
	certFile         string // the self-signed certificate, when TLS is on
}

// startClientProxy starts a dpproxy like startProxy, over clientsCatalog,
// with the front rebuilt from the configuration start gave it when the
// options ask for TLS or another auth plugin.
func startClientProxy(t *testing.T, o clientOpts) *clientProxy {
	t.Helper()
	p, addr := startProxy(t, strings.ReplaceAll(clientsCatalog, "{{CLIENTS_DEMO}}", clientsData(t)))
	cp := &clientProxy{proxy: p}
	if o.tls || o.requireTLS || o.authPlugin != "" {
		cfg := p.front.Config()
		p.front.Close()
		cfg.Listener, cfg.Address = nil, "127.0.0.1:0"
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		if o.tls || o.requireTLS {
			dir := t.TempDir()
			tc, err := mysqlfront.SelfSignedTLS(dir)
			if err != nil {
				t.Fatal(err)
			}
			cfg.TLS, cfg.RequireTLS = tc, o.requireTLS
			cp.certFile = filepath.Join(dir, mysqlfront.SelfSignedCertFile)
		}
		cfg.AuthPlugin = o.authPlugin
		front, err := mysqlfront.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		p.front = front
		go front.Start()
		addr = front.Addr().String()
	}
	cp.addr = addr
	cp.host, cp.port = splitHostPort(addr)
	return cp
}

// clientsRows is the size of the client tests' demo table: smaller than the
// demo's, so that a dozen proxies building their histograms stay quick
// under the race detector, and large enough for the accuracy checks.
const clientsRows = 5000

var clientsTable = generatedDemo(clientsRows)

// clientsData generates the client tests' demo table once per test binary.
func clientsData(t *testing.T) string {
	t.Helper()
	path, err := clientsTable()
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// clientsTruth is an exact count over the client tests' table.
func clientsTruth(t *testing.T, query string, args ...any) int64 {
	t.Helper()
	return countIn(t, clientsData(t), query, args...)
}

// env is the connection environment of the client scripts.
func (cp *clientProxy) env(user, password string) []string {
	env := append(os.Environ(),
		"DPPROXY_HOST="+cp.host, "DPPROXY_PORT="+cp.port, "DPPROXY_USER="+user,
		"DPPROXY_PASSWORD="+password, "DPPROXY_DB=demo")
	if cp.certFile != "" {
		env = append(env, "DPPROXY_CA="+cp.certFile)
	}
	return env
}

func (cp *clientProxy) tlsConfig(t *testing.T) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(cp.certFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509CertPool(t, pem)
	return &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
}

// ---- finding clients ----

// onCI reports whether missing clients must fail the suite.
func onCI() bool { return os.Getenv("CI") == "true" }

// needClient skips (or, under CI, fails) when a client is missing.
func needClient(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if onCI() {
		t.Fatalf("%s is not installed (.ci/run installs it): %v", what, err)
	}
	t.Skipf("%s not installed: %v", what, err)
}

// python is Debian's interpreter, where apt installs the client libraries.
const python = "/usr/bin/python3"

// needPython checks that /usr/bin/python3 imports modules.
func needPython(t *testing.T, modules ...string) {
	t.Helper()
	_, err := os.Stat(python)
	if err == nil {
		out, perr := exec.Command(python, "-c", "import "+strings.Join(modules, ", ")).CombinedOutput()
		if perr != nil {
			err = fmt.Errorf("%v: %s", perr, bytes.TrimSpace(out))
		}
	}
	needClient(t, "python3 with "+strings.Join(modules, ", "), err)
}

// clientsDir is where .ci/run installs clients that do not come from apt.
func clientsDir() string {
	if d := os.Getenv("DPPROXY_CLIENTS_DIR"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "dpproxy-clients")
	}
	return filepath.Join(os.TempDir(), "dpproxy-clients")
}

// scriptPath is a helper script under testdata/clients.
func scriptPath(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "testdata", "clients", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// ---- the standard flow ----

// flowStep is one statement of the flow. SQL has ? placeholders for
// Params; Literal is the same statement with the parameters written in.
type flowStep struct {
	Step    string `json:"step"`
	SQL     string `json:"sql"`
	Params  []any  `json:"params,omitempty"`
	Literal string `json:"literal"`
	Exec    bool   `json:"exec,omitempty"` // no result set expected
	DP      bool   `json:"-"`              // measured: one ledger entry when it succeeds
}

// standardFlow is what every client runs: browse, a COUNT over a range, a
// GROUP BY, a top-k, a refused raw read, the errors, and a batch refused
// for overspending.
func standardFlow() []flowStep {
	steps := []flowStep{
		{Step: "version", SQL: "SELECT @@version_comment LIMIT 1"},
		{Step: "tables", SQL: "SHOW TABLES"},
		{Step: "columns", SQL: "SHOW COLUMNS FROM adult"},
		{Step: "count_range", SQL: "SELECT COUNT(*) AS n, DP_STDERR(COUNT(*)) AS se FROM adult WHERE age BETWEEN ? AND ?", Params: []any{30, 40}, DP: true},
		{Step: "group_by", SQL: "SELECT sex, COUNT(*) AS n, DP_STDERR(COUNT(*)) AS se FROM adult GROUP BY sex", DP: true},
		{Step: "topk", SQL: "SELECT occupation, COUNT(*) AS n FROM adult WHERE age > ? GROUP BY occupation ORDER BY n DESC LIMIT 3", Params: []any{50}, DP: true},
		{Step: "domain", SQL: "SELECT `adult`.`sex` AS `sex` FROM `adult` GROUP BY `adult`.`sex` ORDER BY `adult`.`sex` ASC LIMIT 1000"},
		{Step: "empty", SQL: "SELECT TRUE AS `_` FROM `adult` WHERE 1 <> 1 LIMIT 0"},
		{Step: "raw_read", SQL: "SELECT age, sex FROM adult LIMIT 10"},
		{Step: "syntax", SQL: "SELEC COUNT(*) FROM adult"},
		{Step: "syntax_other", SQL: "SELEC 1"},
		{Step: "no_table", SQL: "SELECT COUNT(*) FROM nosuch"},
		{Step: "no_column", SQL: "SELECT COUNT(*) FROM adult WHERE nosuch = 1"},
		{Step: "no_column_read", SQL: "SELECT nosuchcol FROM adult"},
		{Step: "set_eps", SQL: "SET @dp_epsilon = 50", Exec: true},
		{Step: "overspend", SQL: "SELECT COUNT(*) FROM adult WHERE sex = ?", Params: []any{"Female"}},
		{Step: "reset_eps", SQL: "SET @dp_epsilon = NULL", Exec: true},
		{Step: "after", SQL: "SELECT 1 AS one"},
	}
	for i := range steps {
		steps[i].Literal = literalSQL(steps[i].SQL, steps[i].Params)
	}
	return steps
}

// literalSQL writes params into the ? of q as SQL literals.
func literalSQL(q string, params []any) string {
	for _, p := range params {
		var lit string
		switch v := p.(type) {
		case string:
			lit = "'" + strings.ReplaceAll(v, "'", "''") + "'"
		default:
			lit = fmt.Sprint(v)
		}
		q = strings.Replace(q, "?", lit, 1)
	}
	return q
}

// writeFlow writes steps where scripts find them ($DPPROXY_FLOW).
func writeFlow(t *testing.T, steps []flowStep) string {
	t.Helper()
	b, err := json.Marshal(steps)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "flow.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// stepResult is what a client reports for one step.
type stepResult struct {
	Step    string      `json:"step"`
	Columns []string    `json:"columns"`
	Rows    [][]*string `json:"rows"`
	Error   *struct {
		Code     int    `json:"code"`
		SQLState string `json:"sqlstate"`
		Message  string `json:"message"`
	} `json:"error"`
	Info map[string]any `json:"info"` // client-specific facts
}

func (r *stepResult) String() string {
	b, _ := json.Marshal(r)
	return string(b)
}

func (r *stepResult) cell(row, col int) string {
	if row >= len(r.Rows) || col >= len(r.Rows[row]) || r.Rows[row][col] == nil {
		return "NULL"
	}
	return *r.Rows[row][col]
}

// results indexes a client's step results by name.
type results map[string]*stepResult

func (rs results) get(t *testing.T, step string) *stepResult {
	t.Helper()
	r, ok := rs[step]
	if !ok {
		t.Fatalf("the client reported no step %q", step)
	}
	return r
}

// runClient runs a client command to completion (with a deadline) and
// parses its JSON lines.
func runClient(t *testing.T, cmd *exec.Cmd) results {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	c.Env, c.Dir, c.Stdin = cmd.Env, cmd.Dir, cmd.Stdin
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	start := time.Now()
	err := c.Run()
	t.Logf("%s ran in %v", filepath.Base(cmd.Path), time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(cmd.Args, " "), err, stdout.String(), stderr.String())
	}
	rs := results{}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var r stepResult
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("bad line from client: %v: %s", err, line)
		}
		if _, dup := rs[r.Step]; dup {
			t.Fatalf("step %q reported twice", r.Step)
		}
		rs[r.Step] = &r
	}
	if len(rs) == 0 {
		t.Fatalf("client reported nothing\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
	return rs
}

// wantOK fails unless the step succeeded.
func wantOK(t *testing.T, r *stepResult) {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("step %s failed: %s", r.Step, r)
	}
}

// wantError checks a step's error code, SQLSTATE and message.
func wantError(t *testing.T, r *stepResult, code int, state string, msgParts ...string) {
	t.Helper()
	if r.Error == nil {
		t.Fatalf("step %s: want error %d, got %s", r.Step, code, r)
	}
	// PyMySQL and mysqlclient drop the SQLSTATE: an empty one is not checked.
	if r.Error.Code != code || (state != "" && r.Error.SQLState != "" && r.Error.SQLState != state) {
		t.Fatalf("step %s: got error %d (%s) %q, want %d (%s)", r.Step, r.Error.Code, r.Error.SQLState, r.Error.Message, code, state)
	}
	for _, m := range msgParts {
		if !strings.Contains(r.Error.Message, m) {
			t.Fatalf("step %s: message %q lacks %q", r.Step, r.Error.Message, m)
		}
	}
}

func num(t *testing.T, r *stepResult, row, col int) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(r.cell(row, col), 64)
	if err != nil {
		t.Fatalf("step %s row %d col %d: %v (%s)", r.Step, row, col, err, r)
	}
	return f
}

// checkStandardFlow checks the results of standardFlow; the ledger must
// hold exactly one entry per measured step (refusals charge nothing).
func checkStandardFlow(t *testing.T, cp *clientProxy, rs results, checkState bool) {
	t.Helper()
	state := func(s string) string {
		if checkState {
			return s
		}
		return ""
	}
	r := rs.get(t, "version")
	wantOK(t, r)
	if r.cell(0, 0) != mysqlfront.VersionComment {
		t.Fatalf("version: %s", r)
	}
	r = rs.get(t, "tables")
	wantOK(t, r)
	if len(r.Rows) != 3 || r.cell(0, 0) != "adult" || r.cell(1, 0) != "countries" || r.cell(2, 0) != "events" {
		t.Fatalf("tables: %s", r)
	}
	r = rs.get(t, "columns")
	wantOK(t, r)
	if len(r.Rows) != 9 || r.cell(0, 0) != "age" || r.cell(8, 0) != "income" {
		t.Fatalf("columns: %s", r)
	}

	r = rs.get(t, "count_range")
	wantOK(t, r)
	if len(r.Rows) != 1 || len(r.Columns) != 2 || r.Columns[0] != "n" {
		t.Fatalf("count_range: %s", r)
	}
	near(t, "count_range", num(t, r, 0, 0), clientsTruth(t, "SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 40"), num(t, r, 0, 1))

	r = rs.get(t, "group_by")
	wantOK(t, r)
	if len(r.Rows) != 2 || r.cell(0, 0) != "Female" || r.cell(1, 0) != "Male" {
		t.Fatalf("group_by: %s", r)
	}
	for i, sex := range []string{"Female", "Male"} {
		near(t, "group_by "+sex, num(t, r, i, 1), clientsTruth(t, "SELECT COUNT(*) FROM adult WHERE sex = ?", sex), num(t, r, i, 2))
	}

	r = rs.get(t, "topk")
	wantOK(t, r)
	if len(r.Rows) != 3 || len(r.Columns) != 2 || r.Columns[1] != "n" {
		t.Fatalf("topk: %s", r)
	}
	prev := math.Inf(1)
	for i := range r.Rows {
		if !slices.Contains(occupations, r.cell(i, 0)) {
			t.Fatalf("topk: %q is not an occupation: %s", r.cell(i, 0), r)
		}
		if n := num(t, r, i, 1); n > prev {
			t.Fatalf("topk: not in descending order: %s", r)
		} else {
			prev = n
		}
	}

	r = rs.get(t, "domain")
	wantOK(t, r)
	if len(r.Rows) != 2 || r.cell(0, 0) != "Female" || r.cell(1, 0) != "Male" {
		t.Fatalf("domain: %s", r)
	}
	r = rs.get(t, "empty")
	wantOK(t, r)
	if len(r.Rows) != 0 {
		t.Fatalf("empty: %s", r)
	}

	wantError(t, rs.get(t, "raw_read"), 3900, state("HY000"), "aggregate")
	wantError(t, rs.get(t, "syntax"), 1064, state("42000"), "You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near 'SELEC COUNT(*) FROM adult' at line 1")
	wantError(t, rs.get(t, "syntax_other"), 1064, state("42000"), "near 'SELEC 1' at line 1")
	wantError(t, rs.get(t, "no_table"), 1146, state("42S02"), "Table 'demo.nosuch' doesn't exist")
	wantError(t, rs.get(t, "no_column"), 1054, state("42S22"), "Unknown column 'nosuch'")
	wantError(t, rs.get(t, "no_column_read"), 1054, state("42S22"), "Unknown column 'nosuchcol' in 'field list'")
	wantOK(t, rs.get(t, "set_eps"))
	wantError(t, rs.get(t, "overspend"), 3901, state("HY000"), "remaining")
	wantOK(t, rs.get(t, "reset_eps"))
	wantOK(t, rs.get(t, "after"))
}

// releasedAnswers counts the ledger's entries for released answers: charges, and
// zero-cost reuses of stored answers.
func releasedAnswers(t *testing.T, cp *clientProxy) int {
	t.Helper()
	n := 0
	for _, e := range entries(t, cp.proxy) {
		if e.Kind == budget.KindCharge || e.Kind == budget.KindReuse || e.Kind == budget.KindDerived {
			n++
		}
	}
	return n
}

// checkLedger checks that the ledger holds want entries for released
// answers (a charge or a reuse each) and verifies.
func checkLedger(t *testing.T, cp *clientProxy, want int) {
	t.Helper()
	if got := releasedAnswers(t, cp); got != want {
		t.Fatalf("ledger: %d entries, want %d (one per measured statement; refusals charge nothing)", got, want)
	}
	if err := cp.ledger.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// dpSteps counts the measured steps of a flow.
func dpSteps(steps []flowStep) int {
	n := 0
	for _, s := range steps {
		if s.DP {
			n++
		}
	}
	return n
}

// wantAccessDenied checks a failed login's 1045 and MySQL's message.
func wantAccessDenied(t *testing.T, r *stepResult, user string) {
	t.Helper()
	wantError(t, r, 1045, "28000", fmt.Sprintf("Access denied for user '%s'@'localhost' (using password: YES)", user))
}

func x509CertPool(t *testing.T, pemData []byte) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		t.Fatal("cannot read the proxy's certificate")
	}
	return pool
}

// flat is the rows as text, for looking values up.
func (r *stepResult) flat() string {
	var b strings.Builder
	for i := range r.Rows {
		for j := range r.Rows[i] {
			b.WriteString(r.cell(i, j))
			b.WriteByte('\t')
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// near checks a noisy answer against the truth: within 10 standard errors.
// The client tests check plumbing, not accuracy; Laplace noise's tails make
// a tighter bound fail now and then (6 standard errors: about 2e-4 per
// check).
func near(t *testing.T, what string, got float64, want int64, stderr float64) {
	t.Helper()
	if stderr <= 0 || math.IsNaN(stderr) {
		t.Fatalf("%s: bad stderr %v", what, stderr)
	}
	if d := math.Abs(got - float64(want)); d > 10*stderr {
		t.Fatalf("%s: %v is %.1f standard errors from the truth %d (stderr %.3g)", what, got, d/stderr, want, stderr)
	}
}

// ---- the SQL BI tools write ----

// biToolFlow is what Tableau, Superset, Looker and Metabase write for
// common charts, as they write it: counts as SUM(1), conditional sums and
// counts with CASE, numeric binning (FLOOR(x / w) * w and DIV), LIKE. Each
// is one DP query, answered at ε = 1.
func biToolFlow() []flowStep {
	return []flowStep{
		{Step: "bi_eps", SQL: "SET @dp_epsilon = 1", Exec: true},
		// Tableau's "Number of Records".
		{Step: "tableau_records", SQL: "SELECT `adult`.`sex` AS `sex`, SUM(1) AS `sum_Number of Records_ok` FROM `adult` GROUP BY 1", DP: true},
		// Superset and Looker: a conditional sum and a conditional count.
		{Step: "superset_case_sum", SQL: "SELECT sex AS sex, SUM(CASE WHEN income = '>50K' THEN 1 ELSE 0 END) AS rich FROM adult GROUP BY sex ORDER BY rich DESC LIMIT 10000", DP: true},
		{Step: "looker_case_count", SQL: "SELECT COUNT(CASE WHEN (adult.income = '>50K') THEN 1 ELSE NULL END) AS `adult.rich_count` FROM adult", DP: true},
		// Metabase's numeric binning (its alias shadows the column) and
		// Superset's, by alias; DIV.
		{Step: "metabase_bins", SQL: "SELECT (FLOOR((`adult`.`age` / 10)) * 10) AS `age`, count(*) AS `count` FROM `adult` GROUP BY (FLOOR((`adult`.`age` / 10)) * 10) ORDER BY (FLOOR((`adult`.`age` / 10)) * 10) ASC", DP: true},
		{Step: "decade_alias", SQL: "SELECT FLOOR(age / 10) * 10 AS decade, COUNT(*) AS n FROM adult GROUP BY decade ORDER BY decade", DP: true},
		{Step: "div", SQL: "SELECT age DIV 10 AS d, COUNT(*) AS n FROM adult GROUP BY age DIV 10 ORDER BY d", DP: true},
		{Step: "like", SQL: "SELECT COUNT(*) AS n, DP_STDERR(COUNT(*)) AS se FROM adult WHERE education LIKE 'B%'", DP: true},
		// The demo's public dimension table: read freely, and joined to
		// the protected events as Tableau (an inner join) and Metabase (a
		// LEFT JOIN through a foreign key, aliased) write it.
		{Step: "public_read", SQL: "SELECT code, name, region FROM countries WHERE region = 'Europe' ORDER BY code"},
		{Step: "tableau_join", SQL: "SELECT `countries`.`region` AS `region`, SUM(1) AS `sum_Number of Records_ok` FROM `events` INNER JOIN `countries` ON (`events`.`country` = `countries`.`code`) GROUP BY 1", DP: true},
		{Step: "metabase_join", SQL: "SELECT `countries__via__country`.`region` AS `countries__via__country__region`, count(*) AS `count` FROM `events` LEFT JOIN `countries` `countries__via__country` ON `events`.`country` = `countries__via__country`.`code` WHERE `events`.`device` = 'mobile' GROUP BY `countries__via__country`.`region` ORDER BY `countries__via__country`.`region` ASC", DP: true},
		{Step: "bi_reset", SQL: "SET @dp_epsilon = NULL", Exec: true},
	}
}

// checkBIToolFlow checks biToolFlow's answers against the truth: at ε = 1
// a count's standard error is about 1.4 (2 for a query of two
// aggregates), so 30 is over 10 standard errors.
func checkBIToolFlow(t *testing.T, rs results) {
	t.Helper()
	const tol = 30.0
	within := func(step string, got float64, truth int64) {
		t.Helper()
		if math.Abs(got-float64(truth)) > tol {
			t.Fatalf("%s: %v, truth %d", step, got, truth)
		}
	}
	r := rs.get(t, "tableau_records")
	wantOK(t, r)
	if len(r.Rows) != 2 || r.cell(0, 0) != "Female" || r.Columns[1] != "sum_Number of Records_ok" {
		t.Fatalf("tableau_records: %s", r)
	}
	within("tableau_records", num(t, r, 0, 1), clientsTruth(t, "SELECT COUNT(*) FROM adult WHERE sex = 'Female'"))
	r = rs.get(t, "superset_case_sum")
	wantOK(t, r)
	if len(r.Rows) != 2 || r.cell(0, 0) != "Male" {
		t.Fatalf("superset_case_sum: %s", r)
	}
	within("superset_case_sum", num(t, r, 0, 1), clientsTruth(t, "SELECT COUNT(*) FROM adult WHERE sex = 'Male' AND income = '>50K'"))
	r = rs.get(t, "looker_case_count")
	wantOK(t, r)
	within("looker_case_count", num(t, r, 0, 0), clientsTruth(t, "SELECT COUNT(*) FROM adult WHERE income = '>50K'"))
	for _, step := range []string{"metabase_bins", "decade_alias"} {
		r = rs.get(t, step)
		wantOK(t, r)
		if len(r.Rows) != 9 || r.cell(0, 0) != "10" || r.cell(8, 0) != "90" {
			t.Fatalf("%s: %s", step, r)
		}
		within(step, num(t, r, 2, 1), clientsTruth(t, "SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 39"))
	}
	if r := rs.get(t, "metabase_bins"); r.Columns[0] != "age" {
		t.Fatalf("metabase_bins columns %v", r.Columns)
	}
	r = rs.get(t, "div")
	wantOK(t, r)
	if len(r.Rows) != 9 || r.cell(3, 0) != "4" {
		t.Fatalf("div: %s", r)
	}
	within("div", num(t, r, 3, 1), clientsTruth(t, "SELECT COUNT(*) FROM adult WHERE age BETWEEN 40 AND 49"))
	r = rs.get(t, "like")
	wantOK(t, r)
	within("like", num(t, r, 0, 0), clientsTruth(t, "SELECT COUNT(*) FROM adult WHERE education LIKE 'B%'"))
	r = rs.get(t, "public_read")
	wantOK(t, r)
	if len(r.Rows) != 8 || r.cell(0, 0) != "DE" || r.cell(0, 1) != "Germany" || r.cell(7, 2) != "Europe" {
		t.Fatalf("public_read: %s", r)
	}
	r = rs.get(t, "tableau_join")
	wantOK(t, r)
	europe := -1
	for i := range r.Rows {
		if r.cell(i, 0) == "Europe" {
			europe = i
		}
	}
	if len(r.Rows) != 5 || europe < 0 || r.Columns[0] != "region" {
		t.Fatalf("tableau_join: %s", r)
	}
	within("tableau_join", num(t, r, europe, 1), clientsTruth(t, "SELECT COUNT(*) FROM events WHERE country IN ('GB', 'DE', 'FR', 'ES', 'IT', 'NL', 'SE', 'PL')"))
	r = rs.get(t, "metabase_join")
	wantOK(t, r)
	if len(r.Rows) != 5 || r.cell(0, 0) != "Africa" || r.cell(4, 0) != "North America" || r.Columns[0] != "countries__via__country__region" {
		t.Fatalf("metabase_join: %s", r)
	}
	within("metabase_join", num(t, r, 0, 1), clientsTruth(t, "SELECT COUNT(*) FROM events WHERE country IN ('ZA', 'NG') AND device = 'mobile'"))
}
