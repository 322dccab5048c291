package engine

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/planner"
)

// A set that is empty by construction — a fact about the declared domain,
// not the data — is answered without measuring it: COUNT 0, SUM and AVG
// NULL, groups the WHERE excludes not returned, and no ledger entry when
// the whole batch is such.
func TestEmptyByConstruction(t *testing.T) {
	f := newFixture(t)
	s := session("analyst", nil)
	for _, tc := range []struct{ sql, want string }{
		{"SELECT COUNT(*) FROM adult WHERE age = 200", "[[0]]"},
		{"SELECT COUNT(*) FROM adult WHERE age = 30.5", "[[0]]"},
		{"SELECT COUNT(*) FROM adult WHERE age BETWEEN 40 AND 30", "[[0]]"},
		{"SELECT COUNT(*) FROM adult WHERE age IS NULL", "[[0]]"}, // NULL ages are dropped by the catalog
		{"SELECT COUNT(*) FROM adult WHERE sex = 'Unknown'", "[[0]]"},
		{"SELECT COUNT(*) FROM adult WHERE age = NULL", "[[0]]"},
		{"SELECT COUNT(*), SUM(age), AVG(hours_per_week), VARIANCE(age) FROM adult WHERE age > 90", "[[0 <nil> <nil> <nil>]]"},
		{"SELECT sex, COUNT(*) FROM adult WHERE age = 200 GROUP BY sex", "[]"},
		{"SELECT FLOOR(age / 10) * 10 AS d, COUNT(*) FROM adult WHERE age BETWEEN 40 AND 30 GROUP BY d", "[]"},
		{"SELECT sex FROM adult WHERE age = 200 GROUP BY sex ORDER BY COUNT(*) DESC LIMIT 1", "[]"},
		{"SELECT SUM(CASE WHEN age > 100 THEN 1 END) FROM adult", "[[<nil>]]"},
		{"SELECT COUNT(CASE WHEN age > 100 THEN 1 END) FROM adult", "[[0]]"},
	} {
		r := f.answer(t, s, tc.sql)
		if got := fmt.Sprint(r.Rows); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.sql, got, tc.want)
		}
	}
	if n := len(f.entries(t)); n != 0 {
		t.Fatalf("%d ledger entries for answers known from the domain", n)
	}
	r := f.answer(t, s, "EXPLAIN SELECT COUNT(*) FROM adult WHERE age = 200")
	if got := fmt.Sprint(r.Rows); !strings.Contains(got, "answered exactly from the declared domain") || !strings.Contains(got, "epsilon charged if run 0") {
		t.Fatalf("EXPLAIN: %s", got)
	}
	// In a batch with a measured query, the empty one is left out of the
	// workload and answered exactly; one charge.
	rs, err := f.eng.Answer(context.Background(), s, []string{"SELECT COUNT(*) FROM adult WHERE age = 200", "SELECT COUNT(*) FROM adult WHERE age > 30"})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(rs[0].Rows) != "[[0]]" || len(rs[1].Rows) != 1 {
		t.Fatalf("%v %v", rs[0].Rows, rs[1].Rows)
	}
	if n := len(f.entries(t)); n != 1 {
		t.Fatalf("%d ledger entries, want 1", n)
	}
	// A GROUP BY expression of which the WHERE admits no group, beside a
	// measured query (the planner read its aggregates out of range).
	rs, err = f.eng.Answer(context.Background(), s, []string{"SELECT CASE WHEN age > 30 THEN 'y' ELSE 'n' END AS k, COUNT(*), SUM(hours_per_week) FROM adult WHERE age = 200 GROUP BY 1", "SELECT COUNT(*) FROM adult WHERE age > 40"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs[0].Rows) != 0 || len(rs[1].Rows) != 1 {
		t.Fatalf("%v %v", rs[0].Rows, rs[1].Rows)
	}
	if n := len(f.entries(t)); n != 2 {
		t.Fatalf("%d ledger entries, want 2", n)
	}
	// An empty query over other columns does not widen the measured domain.
	rs, err = f.eng.Answer(context.Background(), s, []string{
		"SELECT education, occupation, COUNT(*) FROM adult WHERE age = 200 GROUP BY education, occupation",
		"SELECT sex, COUNT(*) FROM adult GROUP BY sex", "SELECT SUM(hours_per_week) FROM adult WHERE age > 90"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs[0].Rows) != 0 || len(rs[1].Rows) != 2 || fmt.Sprint(rs[2].Rows) != "[[<nil>]]" {
		t.Fatalf("%v %v %v", rs[0].Rows, rs[1].Rows, rs[2].Rows)
	}
	r = f.answer(t, s, "EXPLAIN SELECT education, COUNT(*) FROM adult WHERE age = 200 GROUP BY education; EXPLAIN SELECT sex, COUNT(*) FROM adult GROUP BY sex")
	if got := fmt.Sprint(r.Rows); !strings.Contains(got, "[columns sex(2)]") {
		t.Fatalf("%s", got)
	}
}

// The groups a WHERE admits by construction are returned, and only those,
// zeros included.
func TestGroupsExcludedByConstruction(t *testing.T) {
	f := newFixture(t)
	s := session("analyst", map[string]any{VarEpsilon: 1.0})
	r := f.answer(t, s, "SELECT education, COUNT(*) FROM adult WHERE education IN ('Bachelors', 'Masters') GROUP BY education")
	if len(r.Rows) != 2 || r.Rows[0][0] != "Bachelors" || r.Rows[1][0] != "Masters" {
		t.Fatalf("%v", r.Rows)
	}
	// HAVING on the group key is a filter on public labels: a WHERE.
	r = f.answer(t, s, "SELECT sex, COUNT(*) FROM adult GROUP BY sex HAVING sex = 'Male'")
	if len(r.Rows) != 1 || r.Rows[0][0] != "Male" {
		t.Fatalf("%v", r.Rows)
	}
	r = f.answer(t, s, "SELECT age, COUNT(*) FROM adult WHERE age < 30 GROUP BY age HAVING age < 20 OR age > 27")
	if len(r.Rows) != 5 { // 17, 18, 19, 28, 29
		t.Fatalf("%v", r.Rows)
	}
}

// The SQL BI tools write: SUM(1), CASE sums and counts, binning, LIKE,
// functions of aggregates, variances, aliases as MySQL resolves them.
func TestBIToolSQL(t *testing.T) {
	f := newFixture(t)
	s := session("analyst", map[string]any{VarEpsilon: 5.0})
	exact := func(q string, args ...any) float64 { return float64(sqlCount(t, f.data, q, args...)) }
	near := func(what string, got any, want, tol float64) {
		t.Helper()
		x, ok := toFloat(got)
		if !ok || math.Abs(x-want) > tol {
			t.Fatalf("%s: %v, want %v ± %v", what, got, want, tol)
		}
	}
	// Tableau's number of records.
	r := f.answer(t, s, "SELECT sex, SUM(1) AS cnt FROM adult GROUP BY 1")
	if len(r.Rows) != 2 || r.Columns[1].Type != TypeInt64 {
		t.Fatalf("%+v", r)
	}
	near("SUM(1) Female", r.Rows[0][1], exact("SELECT COUNT(*) FROM adult WHERE sex = 'Female'"), 20)
	// Superset and Looker.
	r = f.answer(t, s, "SELECT SUM(CASE WHEN sex = 'Male' THEN 1 ELSE 0 END) AS men, COUNT(CASE WHEN age > 40 THEN 1 END) AS old FROM adult")
	near("CASE sum", r.Rows[0][0], exact("SELECT COUNT(*) FROM adult WHERE sex = 'Male'"), 20)
	near("CASE count", r.Rows[0][1], exact("SELECT COUNT(*) FROM adult WHERE age > 40"), 20)
	// Metabase and Superset binning.
	r = f.answer(t, s, "SELECT FLOOR(age / 10) * 10 AS decade, COUNT(*) FROM adult GROUP BY decade ORDER BY decade")
	if r.Rows[0][0] != int64(10) || r.Columns[0].Type != TypeInt64 || len(r.Rows) != 9 {
		t.Fatalf("%v", r.Rows)
	}
	near("decade 30", r.Rows[2][1], exact("SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 39"), 20)
	r = f.answer(t, s, "SELECT age DIV 10 AS d, COUNT(*) AS n FROM adult GROUP BY age DIV 10 ORDER BY n DESC LIMIT 2")
	if len(r.Rows) != 2 {
		t.Fatalf("%v", r.Rows)
	}
	r = f.answer(t, s, "SELECT COUNT(*) FROM adult WHERE education LIKE 'B%'")
	near("LIKE", r.Rows[0][0], exact("SELECT COUNT(*) FROM adult WHERE education LIKE 'B%'"), 20)
	// Functions of aggregates and constants; variances; a SUM of
	// non-negative values is never negative.
	r = f.answer(t, s, "SELECT AVG(age) AS m, POWER(AVG(age), 2) AS m2, VARIANCE(age) AS v, STDDEV(age) AS sd, VAR_SAMP(age), SQRT(VARIANCE(age)), 3 AS three, ROUND(AVG(age)) AS r FROM adult")
	row := r.Rows[0]
	m, _ := toFloat(row[0])
	near("POWER(AVG)", row[1], m*m, 1e-3*m*m)
	v, _ := toFloat(row[2])
	near("STDDEV", row[3], math.Sqrt(v), 0.01)
	if v < 100 || v > 300 || row[6] != int64(3) || r.Columns[7].Type != TypeInt64 {
		t.Fatalf("%v %+v", row, r.Columns)
	}
	r = f.answer(t, s, "SELECT SUM(age) FROM adult WHERE age = 17")
	if x, _ := toFloat(r.Rows[0][0]); x < 0 {
		t.Fatalf("SUM of ages %v", x)
	}
	// An alias that shadows a column: GROUP BY resolves the column first.
	r = f.answer(t, s, "SELECT education AS sex, sex AS education, COUNT(*) FROM adult GROUP BY sex, education")
	if len(r.Rows) != 32 || r.Columns[0].Name != "sex" {
		t.Fatalf("%d rows %+v", len(r.Rows), r.Columns)
	}
	// Top-k over expression groups.
	r = f.answer(t, s, "SELECT LEFT(education, 1) AS e FROM adult GROUP BY e ORDER BY COUNT(*) DESC LIMIT 1")
	if len(r.Rows) != 1 || r.Rows[0][0] != "H" {
		t.Fatalf("%v", r.Rows)
	}
	// Domain list of an expression: free.
	before := len(f.entries(t))
	r = f.answer(t, s, "SELECT CASE WHEN age < 30 THEN 'young' ELSE 'old' END AS band FROM adult GROUP BY band")
	if fmt.Sprint(r.Rows) != "[[young] [old]]" || len(f.entries(t)) != before {
		t.Fatalf("%v", r.Rows)
	}
	// Error bars of aggregates of expressions.
	r = f.answer(t, s, "SELECT SUM(CASE WHEN sex = 'Male' THEN 1 ELSE 0 END) AS n, DP_STDERR(SUM(CASE WHEN sex = 'Male' THEN 1 ELSE 0 END)) AS se, DP_CI_LOW(VARIANCE(age)) AS lo, DP_CI_HIGH(VARIANCE(age)) AS hi FROM adult")
	if se, _ := toFloat(r.Rows[0][1]); se <= 0 || se > 1000 {
		t.Fatalf("stderr %v", r.Rows[0])
	}
	if lo, _ := toFloat(r.Rows[0][2]); lo <= 0 || lo >= r.Rows[0][3].(float64) {
		t.Fatalf("variance interval %v", r.Rows[0])
	}
	// EXPLAIN shows the groups, the weights and the sensitivity of each aggregate.
	r = f.answer(t, s, "EXPLAIN SELECT FLOOR(age / 10) * 10 AS d, COUNT(*) FROM adult WHERE age < 40 GROUP BY d")
	if got := fmt.Sprint(r.Rows); !strings.Contains(got, "groups query 1 3 (GROUP BY FLOOR(age / 10) * 10:") {
		t.Fatalf("%s", got)
	}
	r = f.answer(t, s, "EXPLAIN SELECT SUM(CASE WHEN sex = 'Male' THEN hours_per_week ELSE 0 END) FROM adult")
	if got := fmt.Sprint(r.Rows); !strings.Contains(got, "weights query 1 column 1") || !strings.Contains(got, "[0, 99], sensitivity alone 99") {
		t.Fatalf("%s", got)
	}
}

// Queries that differ only in an expression are different queries to the
// answer store; spellings of one query are the same.
func TestReuseKeyCoversExpressions(t *testing.T) {
	f := newFixture(t)
	tab := f.cfg.Catalog.Table("adult")
	key := func(sql string) string {
		sts, err := parser.ParseWithColumns(sql, f.eng.protected, f.eng.hasColumn)
		if err != nil {
			t.Fatal(err)
		}
		return reuseKey(tab, []*parser.Statement{&sts[0]}, planner.Options{Noise: "laplace", Epsilon: 1})
	}
	for _, pair := range [][2]string{
		{"SELECT COUNT(CASE WHEN age > 40 THEN 1 END) FROM adult", "SELECT COUNT(CASE WHEN age > 41 THEN 1 END) FROM adult"},
		{"SELECT SUM(age * 2) FROM adult", "SELECT SUM(age * 3) FROM adult"},
		{"SELECT POWER(AVG(age), 2) FROM adult", "SELECT SQRT(AVG(age)) FROM adult"},
		{"SELECT FLOOR(age / 10) AS d, COUNT(*) FROM adult GROUP BY d", "SELECT FLOOR(age / 5) AS d, COUNT(*) FROM adult GROUP BY d"},
		{"SELECT COUNT(*) FROM adult WHERE education LIKE 'B%'", "SELECT COUNT(*) FROM adult WHERE education LIKE 'M%'"},
		{"SELECT sex, COUNT(*) FROM adult GROUP BY sex ORDER BY SUM(age)", "SELECT sex, COUNT(*) FROM adult GROUP BY sex ORDER BY SUM(hours_per_week)"},
		{"SELECT VARIANCE(age) FROM adult", "SELECT VAR_SAMP(age) FROM adult"},
		{"SELECT COUNT(*), 3 FROM adult", "SELECT COUNT(*), 4 FROM adult"},
	} {
		if key(pair[0]) == key(pair[1]) {
			t.Errorf("same reuse key for %q and %q", pair[0], pair[1])
		}
	}
	if key("SELECT FLOOR(age / 10) * 10 AS decade, COUNT(*) FROM adult GROUP BY decade") !=
		key("select floor(age/10)*10 as d, count(*) from adult group by 1") {
		t.Error("spellings of one query have different reuse keys")
	}
}

// Top-k over GROUP BY expressions is a selection by the exponential
// mechanism too, and an empty result under WHERE FALSE has no row per
// expression group.
func TestTopKAndEmptyOverExpressionGroups(t *testing.T) {
	f := newFixture(t)
	s := session("analyst", map[string]any{VarEpsilon: 2.0})
	r := f.answer(t, s, "SELECT LEFT(education, 1) AS e FROM adult GROUP BY e ORDER BY COUNT(*) DESC LIMIT 1")
	if len(r.Rows) != 1 || r.Rows[0][0] != "H" {
		t.Fatalf("%v", r.Rows)
	}
	es := f.entries(t)
	if len(es) != 1 || !strings.Contains(es[0].Mechanism, "exponential") {
		t.Fatalf("ledger %+v", es)
	}
	r = f.answer(t, s, "SELECT COUNT(*) FROM adult WHERE 1 <> 1 GROUP BY age DIV 10")
	if len(r.Rows) != 0 {
		t.Fatalf("%v", r.Rows)
	}
}

// nullsTable is the README's example table (Supported SQL, "Each aggregate
// keeps its meaning"): 1,000 rows, 250 with a NULL sex (500 Female, 250
// Male) and 100 with a NULL age (ages 17..76), sex and age under the given
// NULL policy, and a public table sexes(code, label) to join on sex.
func nullsEngine(t *testing.T, policy string) *Engine {
	t.Helper()
	dir := t.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(dir, "d.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range []string{
		`CREATE TABLE t (sex TEXT, age INTEGER)`,
		`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 999)
		 INSERT INTO t SELECT CASE WHEN i % 4 = 3 THEN NULL WHEN i % 2 = 0 THEN 'Female' ELSE 'Male' END,
		   CASE WHEN i % 10 = 0 THEN NULL ELSE 17 + (i * 7) % 60 END FROM n`,
	} {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	cat, err := catalog.Parse("t.yaml", []byte(fmt.Sprintf(`
database: demo
sources: {main: {driver: sqlite, path: d.sqlite}}
tables:
  t:
    noise: laplace
    budget: {total: 100000, per_user: 100000, default_per_query: 1, max_per_query: 1000}
    columns:
      sex: {type: categorical, values: [Female, Male], null: %s}
      age: {type: integer, min: 17, max: 90, null: %s}
public_tables:
  sexes:
    columns: {code: text, label: text}
    rows:
      - [Female, F]
      - [Male, M]
users:
  analyst: {password: analyst, role: analyst}
`, policy, policy)))
	if err != nil {
		t.Fatal(err)
	}
	e, _ := meaningEngine(t, dir, "nulls", cat)
	return e
}

// The README's examples of what COUNT(*), COUNT(c), the drop policy and
// joins mean, exactly (noise off), alone and in batches: a drop policy
// removes a row only from what reads the column, never from a COUNT(*)
// beside it.
func TestReadmeNullSemantics(t *testing.T) {
	ctx := context.Background()
	s := session("analyst", map[string]any{VarEpsilon: 1.0})
	for _, tc := range []struct {
		policy string
		batch  []string
		want   []string
	}{
		{"drop", []string{"SELECT COUNT(*), COUNT(sex), COUNT(age) FROM t"}, []string{"[[1000 750 900]]"}},
		{"drop", []string{"SELECT COUNT(*), COUNT(sex) FROM t"}, []string{"[[1000 750]]"}},
		{"drop", []string{"SELECT COUNT(*) FROM t"}, []string{"[[1000]]"}},
		{"drop", []string{"SELECT COUNT(*) FROM t", "SELECT COUNT(sex) FROM t", "SELECT COUNT(age), COUNT(*) FROM t"}, []string{"[[1000]]", "[[750]]", "[[900 1000]]"}},
		{"drop", []string{"SELECT sex, COUNT(*), COUNT(age), AVG(age) FROM t GROUP BY sex"}, []string{"[[Female 500 400 47.05] [Male 250 250 48]]"}},
		{"drop", []string{"SELECT COUNT(*) FROM t WHERE sex IS NOT NULL", "SELECT COUNT(*) FROM t WHERE sex IS NULL"}, []string{"[[750]]", "[[0]]"}},
		{"drop", []string{"SELECT COUNT(*), SUM(1), SUM(age), AVG(age) FROM t"}, []string{"[[1000 1000 42300 47]]"}},
		{"drop", []string{"SELECT COUNT(*) FROM t WHERE NOT (age > 30)"}, []string{"[[200]]"}},
		{"drop", []string{"SELECT COUNT(*), COUNT(d.label) FROM t LEFT JOIN sexes d ON t.sex = d.code", "SELECT COUNT(*) FROM t JOIN sexes d ON t.sex = d.code"}, []string{"[[1000 750]]", "[[750]]"}},
		{"drop", []string{"SELECT d.label, COUNT(*) FROM t LEFT JOIN sexes d ON t.sex = d.code GROUP BY d.label"}, []string{"[[F 500] [M 250]]"}},
		{"cell", []string{"SELECT sex, COUNT(*), COUNT(sex) FROM t GROUP BY sex", "SELECT COUNT(*) FROM t WHERE sex IS NULL"}, []string{"[[Female 500 500] [Male 250 250] [<nil> 250 0]]", "[[250]]"}},
		{"cell", []string{"SELECT d.label, COUNT(*) FROM t LEFT JOIN sexes d ON t.sex = d.code GROUP BY d.label"}, []string{"[[F 500] [M 250] [<nil> 250]]"}},
	} {
		e := nullsEngine(t, tc.policy)
		rs, err := e.Answer(ctx, s, tc.batch)
		if err != nil {
			t.Fatalf("null: %s: %q: %v", tc.policy, tc.batch, err)
		}
		for i, r := range rs {
			if got := fmt.Sprint(r.AllRows()); got != tc.want[i] {
				t.Errorf("null: %s: %s (in %q) = %s, want %s", tc.policy, tc.batch[i], tc.batch, got, tc.want[i])
			}
		}
	}
}
