package main

import (
	"math"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// ---- the SQL BI tools send once a dataset, model or custom SQL sits
// between the chart and the table ----

// wrappedPair is a statement as a BI tool wraps it and the same question
// written against the table.
type wrappedPair struct {
	name           string
	wrapped, plain string
}

// wrappedPairs are written from each tool's SQL generator: Superset's
// virtual dataset (its FROM (<dataset SQL>) AS virtual_table, with a time
// grain), Metabase's nested questions and models (FROM (...) AS source,
// its binning over them), Tableau's Custom SQL (FROM (...)
// Custom_SQL_Query, and its LIMIT 0 metadata probe), Looker's WITH derived
// tables, Power BI's folded native query (FROM ((...)) AS t0, in MySQL's
// quoting), and a Grafana panel over a subquery.
func wrappedPairs() []wrappedPair {
	return []wrappedPair{
		{"superset_virtual",
			"SELECT sex AS sex, COUNT(*) AS count FROM (SELECT * FROM adult) AS virtual_table GROUP BY sex ORDER BY count DESC LIMIT 10000",
			"SELECT sex AS sex, COUNT(*) AS count FROM adult GROUP BY sex ORDER BY count DESC LIMIT 10000"},
		{"superset_grain",
			"SELECT DATE(ts) AS __timestamp, COUNT(*) AS count FROM (SELECT * FROM events WHERE device = 'mobile') AS virtual_table WHERE ts >= STR_TO_DATE('2025-06-01 00:00:00', '%Y-%m-%d %H:%i:%s') AND ts < STR_TO_DATE('2025-06-08 00:00:00', '%Y-%m-%d %H:%i:%s') GROUP BY DATE(ts) ORDER BY __timestamp LIMIT 10000",
			"SELECT DATE(ts) AS __timestamp, COUNT(*) AS count FROM events WHERE device = 'mobile' AND ts >= STR_TO_DATE('2025-06-01 00:00:00', '%Y-%m-%d %H:%i:%s') AND ts < STR_TO_DATE('2025-06-08 00:00:00', '%Y-%m-%d %H:%i:%s') GROUP BY DATE(ts) ORDER BY __timestamp LIMIT 10000"},
		{"metabase_nested",
			"SELECT `source`.`device` AS `device`, count(*) AS `count` FROM (SELECT `events`.`device` AS `device`, `events`.`ts` AS `ts` FROM `events`) AS `source` GROUP BY `source`.`device` ORDER BY `source`.`device` ASC",
			"SELECT `events`.`device` AS `device`, count(*) AS `count` FROM `events` GROUP BY `events`.`device` ORDER BY `events`.`device` ASC"},
		{"metabase_model_bins",
			"SELECT (FLOOR((`source`.`age` / 10)) * 10) AS `age`, count(*) AS `count` FROM (SELECT `adult`.`age` AS `age`, `adult`.`sex` AS `sex` FROM `adult` WHERE `adult`.`sex` = 'Female') AS `source` GROUP BY (FLOOR((`source`.`age` / 10)) * 10) ORDER BY (FLOOR((`source`.`age` / 10)) * 10) ASC",
			"SELECT (FLOOR((`adult`.`age` / 10)) * 10) AS `age`, count(*) AS `count` FROM `adult` WHERE `adult`.`sex` = 'Female' GROUP BY (FLOOR((`adult`.`age` / 10)) * 10) ORDER BY (FLOOR((`adult`.`age` / 10)) * 10) ASC"},
		{"tableau_custom_sql",
			"SELECT `Custom_SQL_Query`.`income` AS `income`, SUM(1) AS `sum_Number of Records_ok` FROM (SELECT * FROM adult WHERE age >= 18) `Custom_SQL_Query` GROUP BY 1",
			"SELECT `adult`.`income` AS `income`, SUM(1) AS `sum_Number of Records_ok` FROM adult WHERE age >= 18 GROUP BY 1"},
		{"tableau_probe",
			"SELECT * FROM (SELECT * FROM adult WHERE age >= 18) `Custom_SQL_Query` LIMIT 0",
			"SELECT * FROM adult WHERE age >= 18 LIMIT 0"},
		{"looker_with",
			"WITH adults_over_30 AS (SELECT * FROM adult WHERE age > 30) SELECT adults_over_30.education AS `adults_over_30.education`, COUNT(*) AS `adults_over_30.count` FROM adults_over_30 GROUP BY 1 ORDER BY 1",
			"SELECT adult.education AS `adults_over_30.education`, COUNT(*) AS `adults_over_30.count` FROM adult WHERE age > 30 GROUP BY 1 ORDER BY 1"},
		{"powerbi_folded",
			"SELECT `t0`.`race`, COUNT(1) AS `a0` FROM ((SELECT `$Table`.`race`, `$Table`.`age` FROM `adult` AS `$Table`)) AS `t0` GROUP BY `t0`.`race`",
			"SELECT `race`, COUNT(1) AS `a0` FROM `adult` GROUP BY `race`"},
		{"grafana_subquery",
			"SELECT UNIX_TIMESTAMP(ts) DIV 86400 * 86400 AS \"time\", count(*) AS \"views\" FROM (SELECT ts, device FROM events WHERE device = 'desktop') AS t WHERE ts BETWEEN FROM_UNIXTIME(1748736000) AND FROM_UNIXTIME(1749340799) GROUP BY 1 ORDER BY 1",
			"SELECT UNIX_TIMESTAMP(ts) DIV 86400 * 86400 AS \"time\", count(*) AS \"views\" FROM events WHERE device = 'desktop' AND ts BETWEEN FROM_UNIXTIME(1748736000) AND FROM_UNIXTIME(1749340799) GROUP BY 1 ORDER BY 1"},
	}
}

// wrappedFlow runs each pair at ε = 1, the plain statement first: the
// wrapped one is then a repeat of it (the same values, no new charge). Then DP results
// used as inputs, UNION ALL, and Superset's series limit.
func wrappedFlow() []flowStep {
	steps := []flowStep{{Step: "wrapped_eps", SQL: "SET @dp_epsilon = 1", Exec: true}}
	for _, p := range wrappedPairs() {
		steps = append(steps,
			flowStep{Step: p.name + "_plain", SQL: p.plain, DP: !strings.HasSuffix(p.name, "_probe")},
			flowStep{Step: p.name, SQL: p.wrapped})
	}
	steps = append(steps,
		flowStep{Step: "inner_groups", SQL: "SELECT occupation, COUNT(*) AS n FROM adult GROUP BY occupation", DP: true},
		// Post-processing: the same inner batch (a stored answer), no charge.
		flowStep{Step: "avg_of_groups", SQL: "SELECT AVG(n) AS avg_n, MAX(n) AS max_n, COUNT(*) AS n_groups FROM (SELECT occupation, COUNT(*) AS n FROM adult GROUP BY occupation) t"},
		flowStep{Step: "union_all", SQL: "SELECT 'under 30' AS band, COUNT(*) AS n FROM adult WHERE age < 30 UNION ALL SELECT '30 and over', COUNT(*) FROM adult WHERE age >= 30", DP: true},
		// Superset's series limit: the top 2 devices' daily counts. Two
		// measurements: the top-2 selection and the daily counts.
		flowStep{Step: "superset_series_limit", SQL: "SELECT DATE(ts) AS __timestamp, device AS device, COUNT(*) AS count FROM (SELECT * FROM events) AS virtual_table " +
			"JOIN (SELECT device AS device__, COUNT(*) AS mme_inner__ FROM (SELECT * FROM events) AS virtual_table WHERE ts >= '2025-06-01 00:00:00' AND ts < '2025-06-08 00:00:00' GROUP BY device ORDER BY mme_inner__ DESC LIMIT 2) AS series_limit ON device = device__ " +
			"WHERE ts >= '2025-06-01 00:00:00' AND ts < '2025-06-08 00:00:00' GROUP BY device, DATE(ts) ORDER BY count DESC LIMIT 10000", DP: true},
		// Tableau's top-N filter: a null-safe join to a SUM(1) top-2.
		flowStep{Step: "tableau_top_n", SQL: "SELECT `adult`.`race` AS `race`, `adult`.`sex` AS `sex`, SUM(1) AS `sum_Number of Records_ok` FROM `adult` INNER JOIN (SELECT `adult`.`race` AS `race`, SUM(1) AS `$__alias__0` FROM `adult` GROUP BY 1 ORDER BY `$__alias__0` DESC LIMIT 2) `t0` ON (`adult`.`race` <=> `t0`.`race`) GROUP BY 1, 2 ORDER BY 1, 2", DP: true},
		flowStep{Step: "wrapped_limit_inside", SQL: "SELECT COUNT(*) AS n FROM (SELECT * FROM adult LIMIT 10) t"},
		flowStep{Step: "wrapped_reset", SQL: "SET @dp_epsilon = NULL", Exec: true},
	)
	for i := range steps {
		steps[i].Literal = steps[i].SQL
	}
	return steps
}

// wrappedCharges is how many ledger entries for released answers the flow
// adds: one per measured step (Tableau's top-N is one: its SUM(1) top-2
// is an ordinary GROUP BY, cut after, batched with the outer groups), the
// series limit's second measurement (its top-n is a selection, measured
// on its own), and a zero-cost entry for each wrapped statement answered
// from a stored answer (a merged statement's answer key is its IR, which
// is its plain twin's).
func wrappedCharges() int {
	return dpSteps(wrappedFlow()) + 1 + len(wrappedPairs()) - 1 + 1
}

// checkWrappedFlow checks that each wrapped statement returned what its
// plain twin did (columns, rows, values), that post-processing computed
// from the released groups, and the refusal.
func checkWrappedFlow(t *testing.T, rs results) {
	t.Helper()
	for _, p := range wrappedPairs() {
		w, pl := rs.get(t, p.name), rs.get(t, p.name+"_plain")
		wantOK(t, w)
		wantOK(t, pl)
		if !slices.Equal(w.Columns, pl.Columns) || w.flat() != pl.flat() {
			t.Fatalf("%s: wrapped %s\nplain %s", p.name, w, pl)
		}
		if p.name != "tableau_probe" && len(w.Rows) == 0 {
			t.Fatalf("%s: no rows", p.name)
		}
	}
	// (The mysql CLI prints no header for an empty result.)
	if r := rs.get(t, "tableau_probe"); (r.Columns != nil && len(r.Columns) < 5) || len(r.Rows) != 0 {
		t.Fatalf("tableau_probe: %s", r)
	}
	groups := rs.get(t, "inner_groups")
	wantOK(t, groups)
	sum, max := 0.0, math.Inf(-1)
	for i := range groups.Rows {
		v := num(t, groups, i, 1)
		sum += v
		max = math.Max(max, v)
	}
	r := rs.get(t, "avg_of_groups")
	wantOK(t, r)
	if !slices.Equal(r.Columns, []string{"avg_n", "max_n", "n_groups"}) || math.Abs(num(t, r, 0, 0)-sum/float64(len(groups.Rows))) > 1e-6 ||
		num(t, r, 0, 1) != max || num(t, r, 0, 2) != float64(len(groups.Rows)) {
		t.Fatalf("avg_of_groups: %s over %s", r, groups)
	}
	r = rs.get(t, "union_all")
	wantOK(t, r)
	if !slices.Equal(r.Columns, []string{"band", "n"}) || len(r.Rows) != 2 || r.cell(0, 0) != "under 30" || r.cell(1, 0) != "30 and over" {
		t.Fatalf("union_all: %s", r)
	}
	near(t, "union_all under 30", num(t, r, 0, 1), clientsTruth(t, "SELECT COUNT(*) FROM adult WHERE age < 30"), 1.5)
	r = rs.get(t, "superset_series_limit")
	wantOK(t, r)
	devices := map[string]bool{}
	for i := range r.Rows {
		devices[r.cell(i, 1)] = true
		if i > 0 && num(t, r, i, 2) > num(t, r, i-1, 2) {
			t.Fatalf("superset_series_limit: not ordered by count: %s", r)
		}
	}
	if !slices.Equal(r.Columns, []string{"__timestamp", "device", "count"}) || len(devices) != 2 || len(r.Rows) != 14 {
		t.Fatalf("superset_series_limit: %d devices, %s", len(devices), r)
	}
	r = rs.get(t, "tableau_top_n")
	wantOK(t, r)
	races := map[string]bool{}
	for i := range r.Rows {
		races[r.cell(i, 0)] = true
	}
	if len(r.Rows) != 4 || len(races) != 2 || r.cell(0, 1) != "Female" || r.cell(1, 1) != "Male" {
		t.Fatalf("tableau_top_n: %s", r)
	}
	wantError(t, rs.get(t, "wrapped_limit_inside"), 3900, "HY000", "LIMIT inside")
}

func TestClientsWrappedGoDriver(t *testing.T) {
	t.Parallel()
	cp := startClientProxy(t, clientOpts{})
	checkWrappedFlow(t, goFlow(t, connect(t, cp.addr, "analyst", "analyst", "interpolateParams=false"), wrappedFlow()))
	checkLedger(t, cp, wrappedCharges())
}

func TestClientsWrappedPyMySQL(t *testing.T) {
	t.Parallel()
	needPython(t, "pymysql")
	cp := startClientProxy(t, clientOpts{})
	checkWrappedFlow(t, pythonClient(t, cp, "pymysql", "flow", wrappedFlow()))
	checkLedger(t, cp, wrappedCharges())
}

// The mysql CLI runs each statement in its own session, so each sets its ε.
func TestClientsWrappedMySQLCLI(t *testing.T) {
	t.Parallel()
	bin := findMySQLCLI(t)
	cp := startClientProxy(t, clientOpts{})
	rs := cliFlowAt(t, bin, cliArgs(cp, "analyst", "analyst"), wrappedFlow(), "1")
	checkWrappedFlow(t, rs)
	checkLedger(t, cp, wrappedCharges())
}

// MariaDB Connector/J, as Metabase and Tableau's JDBC connections use it.
func TestClientsWrappedConnectorJ(t *testing.T) {
	t.Parallel()
	java, classPath := compileReplay(t)
	cp := startClientProxy(t, clientOpts{})
	cmd := exec.Command(java, "-cp", classPath, "MetabaseReplay")
	cmd.Env = append(cp.env("analyst", "analyst"), "DPPROXY_FLOW="+writeFlowTSV(t, wrappedFlow()), "DPPROXY_FLOW_ONLY=1")
	checkWrappedFlow(t, runClient(t, cmd))
	checkLedger(t, cp, wrappedCharges())
}
