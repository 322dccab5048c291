package engine

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/dpproxy/dpproxy/answers"
	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/demo"
	"github.com/dpproxy/dpproxy/exec"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/sources"
)

type fixture struct {
	eng    *Engine
	ledger *budget.Ledger
	data   string
	cfg    Config // what eng was built from
}

const testCatalog = `
database: demo
sources: {main: {driver: sqlite, path: demo.sqlite}}
tables:
  adult:
    noise: laplace
    budget: {total: 100000, per_user: 100000, default_per_query: 0.1, max_per_query: 5}
    columns:
      age: {type: integer, min: 17, max: 90}
      education: {type: categorical, values: [Preschool, 1st-4th, 5th-6th, 7th-8th, 9th, 10th, 11th, 12th, HS-grad, Some-college, Assoc-voc, Assoc-acdm, Bachelors, Masters, Prof-school, Doctorate]}
      occupation: {type: categorical, values: [Tech-support, Craft-repair, Other-service, Sales, Exec-managerial, Prof-specialty, Handlers-cleaners, Machine-op-inspct, Adm-clerical, Farming-fishing, Transport-moving, Priv-house-serv, Protective-serv, Armed-Forces]}
      sex: {type: categorical, values: [Female, Male]}
      hours_per_week: {type: integer, min: 1, max: 99}
users:
  analyst: {password: analyst, role: analyst}
  capped: {password: capped, role: analyst, default_epsilon: 0.2, max_epsilon: 0.3}
  auditor: {password: auditor, role: auditor}
`

// fixtureDemo generates the fixtures' demo data (5000 adult rows, 20,000
// events) once per test binary, in fixtureDir; each fixture works on its
// own copy.
var (
	fixtureDir  string
	fixtureDemo = sync.OnceValues(func() (string, error) {
		dir, err := os.MkdirTemp("", "engine-demo-")
		if err != nil {
			return "", err
		}
		fixtureDir = dir
		path := filepath.Join(dir, "demo.sqlite")
		return path, demo.Generate(context.Background(), path, 5000)
	})
)

func TestMain(m *testing.M) {
	code := m.Run()
	if fixtureDir != "" {
		os.RemoveAll(fixtureDir)
	}
	os.Exit(code)
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureCatalog(t, testCatalog)
}

// newFixtureCatalog is newFixture with another catalog over the same demo
// data (source main: demo.sqlite).
func newFixtureCatalog(t testing.TB, yaml string) *fixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	src, err := fixtureDemo()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(src)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "demo.sqlite"), data, 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	l, err := budget.Open(ctx, filepath.Join(dir, "ledger.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	h, err := sources.Open(ctx, cat, sources.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	cfg := Config{Catalog: cat, Ledger: l, Histograms: h, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	return &fixture{eng: New(cfg), ledger: l, data: filepath.Join(dir, "demo.sqlite"), cfg: cfg}
}

func session(user string, vars map[string]any) *Session {
	return &Session{ConnID: 1, User: user, UserVar: func(n string) (any, bool) { v, ok := vars[n]; return v, ok }}
}

func (f *fixture) entries(t *testing.T) []budget.Entry {
	t.Helper()
	es, err := f.ledger.Entries(context.Background(), budget.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func (f *fixture) answer(t *testing.T, s *Session, sql string) *Result {
	t.Helper()
	rs, err := f.eng.Answer(context.Background(), s, []string{sql})
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return rs[0]
}

func refusal(t *testing.T, err error, code int, contains string) {
	t.Helper()
	pe, ok := err.(*parser.Error)
	if !ok || pe.Code != code || !strings.Contains(pe.Message, contains) {
		t.Fatalf("got %v, want %d containing %q", err, code, contains)
	}
}

func TestExplainChargesNothing(t *testing.T) {
	f := newFixture(t)
	s := session("analyst", nil)
	for _, q := range []string{
		"EXPLAIN SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 40",
		"EXPLAIN SELECT occupation, COUNT(*) AS n FROM adult WHERE age > 50 GROUP BY occupation ORDER BY n DESC LIMIT 3",
		"EXPLAIN SELECT education, AVG(hours_per_week) FROM adult GROUP BY education",
	} {
		r := f.answer(t, s, q)
		if len(r.Rows) < 5 || r.Columns[0].Name != "property" {
			t.Fatalf("%s: %+v", q, r)
		}
	}
	if n := len(f.entries(t)); n != 0 {
		t.Fatalf("EXPLAIN charged %d entries", n)
	}
}

// Consecutive EXPLAINs explain the batch they would form: one plan over
// every statement (here a union of marginals), the same explanation for
// each, and nothing charged. Running the batch then uses that plan.
func TestExplainBatch(t *testing.T) {
	f := newFixture(t)
	s := session("analyst", nil)
	batch := []string{
		"SELECT sex, COUNT(*) FROM adult GROUP BY sex",
		"SELECT education, COUNT(*) FROM adult GROUP BY education",
		"SELECT occupation, sex, COUNT(*) FROM adult GROUP BY occupation, sex",
	}
	var explains []string
	for _, q := range batch {
		explains = append(explains, "EXPLAIN "+q)
	}
	rs, err := f.eng.Answer(context.Background(), s, explains)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != len(batch) {
		t.Fatalf("%d results for %d EXPLAINs", len(rs), len(batch))
	}
	prop := func(r *Result, k string) string {
		for _, row := range r.Rows {
			if row[0] == k {
				return row[1].(string)
			}
		}
		return ""
	}
	strategy := prop(rs[0], "strategy")
	if !strings.HasPrefix(prop(rs[0], "batch"), "3 statements") || !strings.Contains(strategy, "marginals") {
		t.Fatalf("batch explanation: %+v", rs[0].Rows)
	}
	if prop(rs[2], "strategy") != strategy {
		t.Fatalf("statements of one batch explained differently")
	}
	if n := len(f.entries(t)); n != 0 {
		t.Fatalf("EXPLAIN charged %d entries", n)
	}
	if _, err := f.eng.Answer(context.Background(), s, batch); err != nil {
		t.Fatal(err)
	}
	es := f.entries(t)
	if len(es) != 1 || !strings.Contains(es[0].Strategy, strategy) {
		t.Fatalf("ledger after the batch: %+v, want one entry with strategy %s", es, strategy)
	}
}

// @dp_max_stderr spends the least ε that meets the target; the answers'
// empirical standard error is within 10% of it.
func TestAccuracyTarget(t *testing.T) {
	f := newFixture(t)
	s := session("analyst", map[string]any{VarMaxStderr: 25.0})
	const query = "SELECT COUNT(*), DP_STDERR(COUNT(*)) FROM adult WHERE sex = 'Female'"
	r := f.answer(t, s, query)
	if se := r.Rows[0][1].(float64); se > 25 || se < 25*0.999 {
		t.Fatalf("reported stderr %v, want just below 25", se)
	}
	es := f.entries(t)
	if len(es) != 1 || math.Abs(es[0].Cost.Epsilon-math.Sqrt2/25) > 1e-3 {
		t.Fatalf("%d entries, first ε %v (≈ √2/25 expected)", len(es), es[0].Cost.Epsilon)
	}
	// The same plan measured many times: the Laplace draws' RMS estimates
	// the stderr to ±sqrt(5/(4n)) ≈ 1.8% at n = 4000, so 10% is > 5σ.
	tab := f.eng.cat.Table("adult")
	sts, err := parser.Parse(query, f.eng.protected)
	if err != nil {
		t.Fatal(err)
	}
	w, err := compile.Compile(tab, []*parser.Statement{&sts[0]})
	if err != nil {
		t.Fatal(err)
	}
	opt, _, p, err := f.eng.options(context.Background(), s, tab, w)
	if err != nil {
		t.Fatal(err)
	}
	x, err := f.eng.hist.Histogram(context.Background(), tab, w.Columns)
	if err != nil {
		t.Fatal(err)
	}
	truth := float64(sqlCount(t, f.data, "SELECT COUNT(*) FROM adult WHERE sex = 'Female'"))
	const runs = 4000
	rnd := noise.NewRand()
	var sq float64
	for i := 0; i < runs; i++ {
		ans, err := exec.Measure(p, x, rnd)
		if err != nil {
			t.Fatal(err)
		}
		d := ans.Values[0][0][0] - truth
		sq += d * d
	}
	emp := math.Sqrt(sq / runs)
	t.Logf("target stderr 25: ε = %.6g, empirical stderr over %d runs %.3f", opt.Epsilon, runs, emp)
	if math.Abs(emp-25) > 2.5 {
		t.Fatalf("empirical stderr %.2f, target 25", emp)
	}
}

func sqlCount(t *testing.T, path, q string, args ...any) int64 {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int64
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Noise aside, SUM and AVG per group equal SQL's SUM and AVG on the binned
// data (width-1 integer bins: the midpoint is the value itself).
func TestSumAvgNoiselessEqualSQL(t *testing.T) {
	f := newFixture(t)
	tab := f.eng.cat.Table("adult")
	sts, err := parser.Parse("SELECT education, SUM(hours_per_week), AVG(hours_per_week) FROM adult WHERE age >= 30 GROUP BY education", f.eng.protected)
	if err != nil {
		t.Fatal(err)
	}
	w, err := compile.Compile(tab, []*parser.Statement{&sts[0]})
	if err != nil {
		t.Fatal(err)
	}
	x, err := f.eng.hist.Histogram(context.Background(), tab, w.Columns)
	if err != nil {
		t.Fatal(err)
	}
	q := w.Queries[0]
	sum := exec.Contract(q.Aggregates[q.Items[1].Agg], x, w.Sizes(), q.GroupCols)
	cnt := exec.Contract(q.Aggregates[q.Items[2].Den], x, w.Sizes(), q.GroupCols)
	db, err := sql.Open("sqlite", "file:"+f.data+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for g, edu := range tab.Column("education").Values {
		var s sql.NullFloat64
		var a sql.NullFloat64
		if err := db.QueryRow("SELECT SUM(hours_per_week), AVG(hours_per_week) FROM adult WHERE age >= 30 AND education = ?", edu).Scan(&s, &a); err != nil {
			t.Fatal(err)
		}
		if sum[g] != s.Float64 {
			t.Fatalf("%s: SUM %v, SQL %v", edu, sum[g], s.Float64)
		}
		if cnt[g] > 0 && math.Abs(sum[g]/cnt[g]-a.Float64) > 1e-9 {
			t.Fatalf("%s: AVG %v, SQL %v", edu, sum[g]/cnt[g], a.Float64)
		}
	}
}

func TestTopK(t *testing.T) {
	f := newFixture(t)
	s := session("analyst", map[string]any{VarEpsilon: 1.0})
	r := f.answer(t, s, "SELECT occupation, COUNT(*) AS n FROM adult WHERE age > 50 GROUP BY occupation ORDER BY n DESC LIMIT 3")
	if len(r.Rows) != 3 || r.Columns[1].Name != "n" {
		t.Fatalf("%+v", r)
	}
	seen := map[any]bool{}
	for i, row := range r.Rows {
		seen[row[0]] = true
		if i > 0 && row[1].(int64) > r.Rows[i-1][1].(int64) {
			t.Fatalf("rows not ordered by the noisy count: %v", r.Rows)
		}
	}
	if len(seen) != 3 {
		t.Fatalf("groups not distinct: %v", r.Rows)
	}
	es := f.entries(t)
	if len(es) != 1 || es[0].Mechanism != "exponential+laplace" || math.Abs(es[0].Cost.Epsilon-1) > 1e-12 {
		t.Fatalf("ledger %+v", es)
	}
	// Selection only: the whole ε goes to the exponential mechanism.
	r = f.answer(t, s, "SELECT occupation FROM adult GROUP BY occupation ORDER BY COUNT(*) ASC LIMIT 2")
	if len(r.Rows) != 2 || len(r.Columns) != 1 {
		t.Fatalf("%+v", r)
	}
	if es := f.entries(t); es[1].Mechanism != "exponential" {
		t.Fatalf("mechanism %q", es[1].Mechanism)
	}
	// A LIMIT at least the number of groups is an ordinary GROUP BY.
	r = f.answer(t, s, "SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex ORDER BY n DESC LIMIT 10")
	if len(r.Rows) != 2 || f.entries(t)[2].Mechanism != "laplace" {
		t.Fatalf("%+v", r)
	}
	// So is a selection whose k × groups exceeds maxSelectionTrials
	// (age × hours_per_week: 7326 groups): every count is measured, then
	// sorted and cut, in the time of a GROUP BY.
	r = f.answer(t, s, "SELECT age, hours_per_week FROM adult GROUP BY age, hours_per_week ORDER BY COUNT(*) DESC LIMIT 500")
	if len(r.Rows) != 500 || len(r.Columns) != 2 || f.entries(t)[3].Mechanism != "laplace" {
		t.Fatalf("%d rows, %d columns, mechanism %q", len(r.Rows), len(r.Columns), f.entries(t)[3].Mechanism)
	}
}

// With a large ε the exponential mechanism picks the true top 3.
func TestTopKFindsTheLargestGroups(t *testing.T) {
	f := newFixture(t)
	s := session("analyst", map[string]any{VarEpsilon: 5.0})
	r := f.answer(t, s, "SELECT education FROM adult GROUP BY education ORDER BY COUNT(*) DESC LIMIT 3")
	got := map[string]bool{}
	for _, row := range r.Rows {
		got[row[0].(string)] = true
	}
	for _, want := range []string{"HS-grad", "Some-college", "Bachelors"} {
		if !got[want] {
			t.Fatalf("top 3 %v lacks %s", r.Rows, want)
		}
	}
}

func TestHavingAndAverages(t *testing.T) {
	f := newFixture(t)
	s := session("analyst", map[string]any{VarEpsilon: 2.0})
	r := f.answer(t, s, "SELECT education, COUNT(*) AS n FROM adult GROUP BY education HAVING COUNT(*) > 400 ORDER BY n DESC")
	for _, row := range r.Rows {
		if row[1].(int64) <= 400 {
			t.Fatalf("HAVING kept %v", row)
		}
	}
	if len(r.Rows) == 0 || len(r.Rows) == 16 {
		t.Fatalf("HAVING kept %d of 16 groups", len(r.Rows))
	}
	r = f.answer(t, s, "SELECT education, AVG(hours_per_week) AS h, DP_CI_LOW(AVG(hours_per_week)), DP_CI_HIGH(AVG(hours_per_week)) FROM adult GROUP BY education")
	for _, row := range r.Rows {
		h, lo, hi := row[1].(float64), row[2].(float64), row[3].(float64)
		if h < 1 || h > 99 || lo > h || hi < h || lo < 1 || hi > 99 {
			t.Fatalf("AVG outside the domain or its interval: %v", row)
		}
	}
}

func TestSessionOptionsAndRefusals(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	// Per-user default ε from the catalog.
	f.answer(t, session("capped", nil), "SELECT COUNT(*) FROM adult")
	if es := f.entries(t); es[0].Cost.Epsilon != 0.2 {
		t.Fatalf("user default ε: %v", es[0].Cost.Epsilon)
	}
	cases := []struct {
		user, sql string
		vars      map[string]any
		code      int
		msg       string
	}{
		{"capped", "SELECT COUNT(*) FROM adult", map[string]any{VarEpsilon: 0.5}, parser.CodeDPRefused, "per-query maximum ε = 0.3"},
		{"analyst", "SELECT COUNT(*) FROM adult", map[string]any{VarEpsilon: "lots"}, parser.CodeDPRefused, "@dp_epsilon must be a number in [1e-06, 100], got lots"},
		{"analyst", "SELECT AVG(sex) FROM adult", nil, parser.CodeDPRefused, "sex is categorical"},
		{"analyst", "SELECT sex, COUNT(*) FROM adult GROUP BY sex ORDER BY age", nil, parser.CodeDPRefused, "ORDER BY"},
		{"auditor", "SELECT COUNT(*) FROM adult", nil, parser.CodeDPRefused, "only analysts run DP queries"},
	}
	for _, c := range cases {
		_, err := f.eng.Answer(ctx, session(c.user, c.vars), []string{c.sql})
		refusal(t, err, c.code, c.msg)
	}
	if n := len(f.entries(t)); n != 1 {
		t.Fatalf("refusals charged: %d entries", n)
	}
}

// Arithmetic over aggregates is post-processing of the noisy values.
func TestArithmeticOverAggregates(t *testing.T) {
	f := newFixture(t)
	s := session("analyst", map[string]any{VarEpsilon: 1.0})
	r := f.answer(t, s, "SELECT sex, COUNT(*) AS n, COUNT(*) * 2 AS twice, SUM(hours_per_week) / COUNT(*) AS mean, -COUNT(*) + 1 FROM adult GROUP BY sex")
	if len(r.Rows) != 2 || r.Columns[2].Name != "twice" || r.Columns[4].Name != "-COUNT(*) + 1" {
		t.Fatalf("%+v", r)
	}
	for _, row := range r.Rows {
		// COUNT(*) * 2 is a BIGINT in MySQL; a division is not.
		n, twice, mean, neg := row[1].(int64), row[2].(int64), row[3].(float64), row[4].(int64)
		if twice != 2*n || neg != 1-n || mean < 20 || mean > 60 {
			t.Fatalf("row %v", row)
		}
	}
	if n := len(f.entries(t)); n != 1 {
		t.Fatalf("%d entries, want 1", n)
	}
}

// An identical batch, however written, re-releases the stored answer for
// free; other options are another query.
func TestRepeatedQueriesReuseStoredAnswers(t *testing.T) {
	f := newFixture(t)
	s := session("analyst", nil)
	a := f.answer(t, s, "SELECT sex, COUNT(*) AS n FROM adult WHERE age > 30 AND sex IN ('Female', 'Male') GROUP BY sex")
	b := f.answer(t, s, "/* refresh */ select `sex`, count(*) as cnt from `adult` where AGE > '30' and sex in ('female','male') group by 1")
	if fmt.Sprint(a.Rows) != fmt.Sprint(b.Rows) || b.Columns[1].Name != "cnt" {
		t.Fatalf("reuse: %v / %v (%v)", a.Rows, b.Rows, b.Columns)
	}
	// AND and OR of the same terms are different queries.
	f.answer(t, s, "SELECT sex, COUNT(*) AS n FROM adult WHERE age > 30 OR sex IN ('Female', 'Male') GROUP BY sex")
	es := f.entries(t)
	if len(es) != 3 || es[0].Kind != budget.KindCharge || es[1].Kind != budget.KindReuse || !es[1].Cost.IsZero() || es[2].Kind != budget.KindCharge {
		t.Fatalf("ledger %+v", es)
	}
	// Another ε is another query.
	f.answer(t, session("analyst", map[string]any{VarEpsilon: 0.3}), "SELECT sex, COUNT(*) AS n FROM adult WHERE age > 30 AND sex IN ('Female', 'Male') GROUP BY sex")
	if es := f.entries(t); es[3].Kind != budget.KindCharge {
		t.Fatalf("ledger %+v", es[3])
	}
}

// ORDER BY a categorical column sorts by value, as MySQL does (Metabase's
// field-values query), in domain lists and grouped answers alike.
func TestOrderByLabelSortsByValue(t *testing.T) {
	f := newFixture(t)
	s := session("analyst", nil)
	r := f.answer(t, s, "SELECT `adult`.`education` AS `education` FROM `adult` GROUP BY `adult`.`education` ORDER BY `adult`.`education` ASC LIMIT 1000")
	want := []string{"10th", "11th", "12th", "1st-4th", "5th-6th", "7th-8th", "9th", "Assoc-acdm", "Assoc-voc", "Bachelors", "Doctorate", "HS-grad", "Masters", "Preschool", "Prof-school", "Some-college"}
	if len(r.Rows) != len(want) {
		t.Fatalf("%d rows", len(r.Rows))
	}
	for i, w := range want {
		if r.Rows[i][0] != w {
			t.Fatalf("row %d: %v, want %s (all: %v)", i, r.Rows[i][0], w, r.Rows)
		}
	}
	r = f.answer(t, s, "SELECT sex, COUNT(*) FROM adult GROUP BY sex ORDER BY sex DESC")
	if r.Rows[0][0] != "Male" || r.Rows[1][0] != "Female" {
		t.Fatalf("%v", r.Rows)
	}
	// Without ORDER BY, the declared order.
	r = f.answer(t, s, "SELECT education FROM adult GROUP BY education")
	if r.Rows[0][0] != "Preschool" {
		t.Fatalf("%v", r.Rows[0])
	}
}

// The engine resolves names against the catalog before anything else: an
// unknown column is MySQL's 1054 in the clause that names it, whatever
// refusal the rest of the query would get, and charges nothing; a raw read
// of a declared column stays a 3900 refusal.
func TestUnknownColumns(t *testing.T) {
	f := newFixture(t)
	s := session("analyst", nil)
	cases := []struct {
		sql  string
		code int
		msg  string
	}{
		{"SELECT nosuchcol FROM adult", parser.CodeBadField, "Unknown column 'nosuchcol' in 'field list'"},
		{"SELECT adult.nosuchcol FROM demo.adult", parser.CodeBadField, "Unknown column 'adult.nosuchcol' in 'field list'"},
		{"SELECT * FROM adult WHERE nosuchcol = 1", parser.CodeBadField, "Unknown column 'nosuchcol' in 'where clause'"},
		{"SELECT COUNT(*) FROM adult WHERE nosuchcol LIKE 'a%'", parser.CodeBadField, "Unknown column 'nosuchcol' in 'where clause'"},
		{"SELECT age FROM adult GROUP BY nosuchcol", parser.CodeBadField, "Unknown column 'nosuchcol' in 'group statement'"},
		{"SELECT sex, COUNT(*) FROM adult GROUP BY sex HAVING nosuchcol > 1", parser.CodeBadField, "Unknown column 'nosuchcol' in 'having clause'"},
		{"SELECT sex FROM adult GROUP BY sex ORDER BY nosuchcol", parser.CodeBadField, "Unknown column 'nosuchcol' in 'order clause'"},
		{"EXPLAIN SELECT nosuchcol FROM adult", parser.CodeBadField, "Unknown column 'nosuchcol' in 'field list'"},
		{"SELECT age FROM adult", parser.CodeDPRefused, "raw rows are never returned"},
		{"SELECT * FROM adult", parser.CodeDPRefused, "SELECT * is refused"},
	}
	for _, c := range cases {
		t.Run(c.sql, func(t *testing.T) {
			_, err := f.eng.Answer(context.Background(), s, []string{c.sql})
			refusal(t, err, c.code, c.msg)
		})
	}
	// The whole request fails on the unknown column, before the batch.
	_, err := f.eng.Answer(context.Background(), s, []string{"SELECT COUNT(*) FROM adult", "SELECT nosuchcol FROM adult"})
	refusal(t, err, parser.CodeBadField, "Unknown column 'nosuchcol' in 'field list'")
	if n := len(f.entries(t)); n != 0 {
		t.Fatalf("refused statements charged %d entries", n)
	}
}

// With a persistent answer store, a repeat is free after a restart too (a
// new Engine over the same files): the identical answer, a zero-cost reuse
// entry. Top-k answers persist as well. A table whose definition changed
// does not get the old answer.
func TestStoredAnswersSurviveRestart(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	path := filepath.Join(t.TempDir(), "answers.sqlite")
	store, err := answers.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := f.cfg
	cfg.Answers = store
	first := New(cfg)
	s := session("analyst", nil)
	batch := []string{
		"SELECT education, COUNT(*), AVG(hours_per_week), DP_CI_LOW(COUNT(*)) FROM adult GROUP BY education",
		"SELECT COUNT(*) FROM adult WHERE age IS NULL",
	}
	topk := []string{"SELECT occupation, COUNT(*) AS n FROM adult GROUP BY occupation ORDER BY n DESC LIMIT 3"}
	want, err := first.Answer(ctx, s, batch)
	if err != nil {
		t.Fatal(err)
	}
	wantTop, err := first.Answer(ctx, s, topk)
	if err != nil {
		t.Fatal(err)
	}
	store.Close()

	store, err = answers.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	cfg.Answers = store
	second := New(cfg) // a restarted proxy: empty memory
	before := len(f.entries(t))
	got, err := second.Answer(ctx, s, batch)
	if err != nil {
		t.Fatal(err)
	}
	gotTop, err := second.Answer(ctx, s, topk)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotTop, wantTop) {
		t.Fatalf("after a restart:\n%+v\n%+v\nwant\n%+v\n%+v", got, gotTop, want, wantTop)
	}
	es := f.entries(t)[before:]
	if len(es) != 2 || es[0].Kind != budget.KindReuse || es[1].Kind != budget.KindReuse || !es[0].Cost.IsZero() {
		t.Fatalf("ledger after the repeats: %+v", es)
	}

	// Another definition of the table: the stored answer does not apply.
	cat, err := catalog.Parse("test.yaml", []byte(strings.Replace(testCatalog, "hours_per_week: {type: integer, min: 1, max: 99}",
		"hours_per_week: {type: integer, min: 1, max: 99, width: 10}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Catalog = cat
	if _, err := New(cfg).Answer(ctx, s, batch); err != nil {
		t.Fatal(err)
	}
	if es := f.entries(t); es[len(es)-1].Kind != budget.KindCharge {
		t.Fatalf("a changed table definition reused a stored answer: %+v", es[len(es)-1])
	}
}

// sql_select_limit caps the rows of a SELECT without a LIMIT of its own,
// after HAVING and ORDER BY; an explicit LIMIT wins, EXPLAIN is not capped.
// It is post-processing: the charge is the same as without it, and the
// stored answer keeps every row for the next repeat.
func TestSelectLimit(t *testing.T) {
	f := newFixture(t)
	limited := func(n uint64) *Session {
		s := session("analyst", nil)
		s.SelectLimit = func() (uint64, bool) { return n, true }
		return s
	}
	cases := []struct {
		sql   string
		limit uint64
		rows  int
		first any // first value of the first row, when not nil
	}{
		{"SELECT education, COUNT(*) FROM adult GROUP BY education", 3, 3, "Preschool"},
		{"SELECT education, COUNT(*) FROM adult GROUP BY education ORDER BY education DESC", 3, 3, "Some-college"},
		{"SELECT education, COUNT(*) AS n FROM adult GROUP BY education HAVING n >= 0", 2, 2, nil},
		{"SELECT education, COUNT(*) FROM adult GROUP BY education LIMIT 5", 3, 5, nil},
		{"SELECT education, COUNT(*) FROM adult GROUP BY education LIMIT 2", 3, 2, nil},
		{"SELECT education, COUNT(*) FROM adult GROUP BY education", 100, 16, nil},
		{"SELECT sex, COUNT(*) FROM adult GROUP BY sex", 0, 0, nil},
		{"SELECT education FROM adult GROUP BY education", 3, 3, "Preschool"},
		{"SELECT DISTINCT education FROM adult ORDER BY education", 4, 4, "10th"},
		{"SELECT education FROM adult GROUP BY education LIMIT 1000", 4, 16, nil},
		{"SELECT COUNT(*) FROM adult WHERE 1 <> 1", 0, 0, nil},
		{"SELECT COUNT(*) FROM adult WHERE 1 <> 1", 1, 1, int64(0)},
		{"SELECT COUNT(*) FROM adult", 1, 1, nil},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/limit=%d", c.sql, c.limit), func(t *testing.T) {
			r := f.answer(t, limited(c.limit), c.sql)
			if len(r.Rows) != c.rows {
				t.Fatalf("%d rows, want %d: %v", len(r.Rows), c.rows, r.Rows)
			}
			if c.first != nil && r.Rows[0][0] != c.first {
				t.Fatalf("first row %v, want %v first", r.Rows[0], c.first)
			}
		})
	}

	// EXPLAIN's rows are not capped.
	if r := f.answer(t, limited(2), "EXPLAIN SELECT education, COUNT(*) FROM adult GROUP BY education"); len(r.Rows) <= 2 {
		t.Fatalf("EXPLAIN capped to %d rows", len(r.Rows))
	}

	// The cap costs nothing and does not change the charge; the repeat
	// without it is the stored answer, every row, the capped ones first.
	const q = "SELECT occupation, COUNT(*) AS n FROM adult GROUP BY occupation ORDER BY n DESC"
	before := f.entries(t)
	capped := f.answer(t, limited(3), q)
	after := f.entries(t)
	if len(after) != len(before)+1 || after[len(after)-1].Cost.Epsilon != 0.1 {
		t.Fatalf("capped query: ledger %+v, want one more entry charging the default ε 0.1", after[len(before):])
	}
	full := f.answer(t, session("analyst", nil), q)
	if len(capped.Rows) != 3 || len(full.Rows) != 14 {
		t.Fatalf("capped %d rows, repeat %d rows; want 3 and 14", len(capped.Rows), len(full.Rows))
	}
	for i := range capped.Rows {
		if fmt.Sprint(capped.Rows[i]) != fmt.Sprint(full.Rows[i]) {
			t.Fatalf("row %d: capped %v, stored %v", i, capped.Rows[i], full.Rows[i])
		}
	}
	if es := f.entries(t); es[len(es)-1].Kind != budget.KindReuse || es[len(es)-1].Cost.Epsilon != 0 {
		t.Fatalf("repeat: %+v, want a free reuse", es[len(es)-1])
	}

	// No limit (the default): every row.
	s := session("analyst", nil)
	s.SelectLimit = func() (uint64, bool) { return 0, false }
	if r := f.answer(t, s, "SELECT education FROM adult GROUP BY education"); len(r.Rows) != 16 {
		t.Fatalf("default sql_select_limit: %d rows, want 16", len(r.Rows))
	}
}

// A batch over more cells than the table's max_cells is refused with 3900,
// naming the cells and the limit, before any histogram, plan or charge —
// EXPLAIN too — and the engine answers the next query.
func TestMaxCellsRefusedBeforeWork(t *testing.T) {
	f := newFixture(t)
	f.cfg.Catalog.Table("adult").MaxCells = 1_000_000
	s := session("analyst", nil)
	wide := "SELECT age, education, occupation, sex, hours_per_week, COUNT(*) FROM adult GROUP BY age, education, occupation, sex, hours_per_week"
	for _, q := range []string{wide, "EXPLAIN " + wide} {
		_, err := f.eng.Answer(context.Background(), s, []string{q})
		refusal(t, err, parser.CodeDPRefused, "3282048 cells (age 74 × education 16 × occupation 14 × sex 2 × hours_per_week 99), more than the cell limit of table adult (max_cells 1000000)")
	}
	if n := len(f.entries(t)); n != 0 {
		t.Fatalf("a refused batch charged %d entries", n)
	}
	if r := f.answer(t, s, "SELECT COUNT(*) FROM adult"); len(r.Rows) != 1 {
		t.Fatalf("after a refusal: %+v", r)
	}
}

// Listing a domain (free, public) over more than max_cells combinations is
// refused too, instead of building them.
func TestMaxCellsDomainList(t *testing.T) {
	f := newFixture(t)
	f.cfg.Catalog.Table("adult").MaxCells = 1000
	_, err := f.eng.Answer(context.Background(), session("analyst", nil), []string{"SELECT age, education FROM adult GROUP BY age, education"})
	refusal(t, err, parser.CodeDPRefused, "1184 cells")
}

// Large results are kept by column: every group in domain order, and with
// HAVING, ORDER BY and LIMIT applied to them as to small ones.
func TestLargeResultsByColumn(t *testing.T) {
	f := newFixture(t)
	s := session("analyst", map[string]any{"dp_epsilon": 1.0})
	r := f.answer(t, s, "SELECT age, hours_per_week, COUNT(*) AS n FROM adult GROUP BY age, hours_per_week")
	if r.table == nil || r.Len() != 74*99 {
		t.Fatalf("%d rows, by column %v", r.Len(), r.table != nil)
	}
	rows := r.AllRows()
	for i, row := range rows {
		if row[0] != int64(17+i/99) || row[1] != int64(1+i%99) {
			t.Fatalf("row %d: %v", i, row)
		}
	}
	r = f.answer(t, s, "SELECT hours_per_week, age, COUNT(*) AS n FROM adult GROUP BY age, hours_per_week HAVING n > 0 ORDER BY n DESC, age LIMIT 5000")
	rows = r.AllRows()
	if len(rows) > 5000 || len(rows) == 0 {
		t.Fatalf("%d rows", len(rows))
	}
	for i, row := range rows {
		if row[2].(int64) <= 0 || i > 0 && row[2].(int64) > rows[i-1][2].(int64) {
			t.Fatalf("row %d: %v after %v", i, row, rows[max(i-1, 0)])
		}
	}
	// Stored and re-read, the answer is the same.
	b, err := encodeResults([]*Result{r})
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeResults(b)
	if err != nil || !reflect.DeepEqual(back[0].AllRows(), rows) {
		t.Fatalf("round trip: %v", err)
	}
}
