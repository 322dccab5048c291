package engine

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/measure"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/sources"
)

// The demo file's adult and events tables with text columns declared
// open: occupation and education have no public list here, events' page
// neither, under a privacy unit with and without max_groups.
const openYAML = `database: demo
sources:
  main: {driver: sqlite, path: demo.sqlite}
tables:
  adult:
    budget: {total: 100, per_user: 50, default_per_query: 1, delta: 2e-6, delta_per_query: 1e-6}
    columns:
      age: {type: integer, min: 17, max: 90}
      occupation: {type: text}
      education: {type: text}
      workclass: {type: text}
      sex: {type: categorical, values: [Female, Male]}
  events:
    budget: {total: 100, per_user: 50, default_per_query: 1}
    privacy_unit: {column: user_id, max_rows: 10}
    columns:
      page: {type: text}
      device: {type: categorical, values: [desktop, mobile, tablet]}
  events2:
    source_table: events
    budget: {total: 100, per_user: 50, default_per_query: 1}
    privacy_unit: {column: user_id, max_rows: 10, max_groups: 2}
    columns:
      page: {type: text}
users:
  analyst: {password: analyst, role: analyst}
`

var adultOccupations = "Tech-support Craft-repair Other-service Sales Exec-managerial Prof-specialty Handlers-cleaners Machine-op-inspct Adm-clerical Farming-fishing Transport-moving Priv-house-serv Protective-serv Armed-Forces"

// GROUP BY an open column: its keys are selected once (charged with its δ
// before release, in its own ledger entry), only true keys come back, the
// aggregates are measured at the rest of the ε, and a later batch over the
// same column reuses the keys without a new selection.
func TestOpenGroupBy(t *testing.T) {
	f := newFixtureCatalog(t, openYAML)
	s := session("analyst", map[string]any{"dp_epsilon": 2.0})
	r := f.answer(t, s, "SELECT occupation, COUNT(*) AS n FROM adult GROUP BY occupation")
	if len(r.Rows) < 10 {
		t.Fatalf("%d groups released; adult's occupations have thousands of rows each", len(r.Rows))
	}
	for _, row := range r.Rows {
		if k, _ := row[0].(string); k == "" || !strings.Contains(adultOccupations, k) {
			t.Errorf("released key %v is not an occupation", k)
		}
	}
	es := f.entries(t)
	if len(es) != 2 || es[0].Mechanism != "truncated_geometric" || es[0].Cost.Delta != 1e-6 || es[0].Cost.Epsilon != 1 ||
		es[1].Cost.Epsilon != 1 || es[1].Cost.Delta != 0 {
		t.Fatalf("ledger %+v, want a selection at ε=1, δ=1e-6, then a measurement at ε=1", es)
	}
	r2 := f.answer(t, s, "SELECT occupation, AVG(age) FROM adult GROUP BY occupation")
	if len(r2.Rows) != len(r.Rows) {
		t.Errorf("second batch has %d groups, the released keys are %d", len(r2.Rows), len(r.Rows))
	}
	es = f.entries(t)
	if len(es) != 3 || es[2].Cost.Delta != 0 || es[2].Cost.Epsilon != 2 {
		t.Fatalf("second batch: ledger %+v, want one measurement at ε=2 and no selection", es[2:])
	}
	// Comparisons with literals need no selection: {matches, does not}.
	r3 := f.answer(t, s, "SELECT COUNT(*) FROM adult WHERE education = 'Bachelors' OR education IN ('Masters', 'Doctorate')")
	if len(r3.Rows) != 1 {
		t.Fatalf("%+v", r3)
	}
	if es := f.entries(t); len(es) != 4 || es[3].Cost.Delta != 0 {
		t.Fatalf("a literal comparison spent δ: %+v", es[3:])
	}
	// The δ budget (2e-6) allows one more selection, then refuses the
	// next with 3901, while declared-domain queries still answer.
	f.answer(t, s, "SELECT education, COUNT(*) FROM adult GROUP BY education")
	_, err := f.eng.Answer(context.Background(), s, []string{"SELECT workclass, COUNT(*) FROM adult GROUP BY workclass"})
	refusal(t, err, parser.CodeBudgetExceeded, "δ")
	f.answer(t, s, "SELECT sex, COUNT(*) FROM adult GROUP BY sex")
}

// Uses of an open column other than grouping and literal comparisons are
// refused with 3900 before anything is spent; open GROUP BY on a unit
// table bounds each unit by max_groups, else by its max_rows rows.
func TestOpenRefusals(t *testing.T) {
	f := newFixtureCatalog(t, openYAML)
	s := session("analyst", nil)
	for _, c := range []struct{ sql, want string }{
		{"SELECT COUNT(*) FROM adult WHERE occupation < 'M'", "no public list of values"},
		{"SELECT COUNT(*) FROM adult WHERE LENGTH(occupation) > 5", "no public list of values"},
		{"SELECT COUNT(DISTINCT occupation) FROM adult", ""},
	} {
		_, err := f.eng.Answer(context.Background(), s, []string{c.sql})
		pe, ok := err.(*parser.Error)
		if !ok || pe.Code != parser.CodeDPRefused || !strings.Contains(pe.Message, c.want) {
			t.Errorf("%s: %v, want 3900 containing %q", c.sql, err, c.want)
		}
	}
	if es := f.entries(t); len(es) != 0 {
		t.Fatalf("refusals charged: %+v", es)
	}
	// With max_groups, the selection runs on distinct units.
	r := f.answer(t, s, "SELECT page, COUNT(*) FROM events2 GROUP BY page")
	if len(r.Rows) == 0 {
		t.Fatal("no page released")
	}
	if es := f.entries(t); len(es) != 2 || es[0].Unit == nil || es[0].Unit.MaxGroups != 2 {
		t.Fatalf("ledger %+v", es)
	}
	// Without it, each unit keeps its max_rows (10) rows, so it holds at
	// most 10 keys: a Laplace threshold at Δ₀ = 10.
	r = f.answer(t, session("analyst", map[string]any{"dp_epsilon": 4.0}), "SELECT page, COUNT(*) FROM events GROUP BY page")
	if len(r.Rows) == 0 {
		t.Fatal("no page released from events")
	}
	if es := f.entries(t); len(es) != 4 || es[2].Mechanism != "laplace_threshold" || !strings.Contains(es[2].Strategy, "max_groups=10") {
		t.Fatalf("ledger %+v", es[2:])
	}
}

// EXPLAIN of an open GROUP BY shows the selection and spends nothing.
func TestOpenExplain(t *testing.T) {
	f := newFixtureCatalog(t, openYAML)
	s := session("analyst", map[string]any{"dp_epsilon": 2.0})
	r := f.answer(t, s, "EXPLAIN SELECT occupation, COUNT(*) FROM adult GROUP BY occupation")
	got := map[string]string{}
	for _, row := range r.Rows {
		got[row[0].(string)] = row[1].(string)
	}
	if got["mechanism"] != "truncated_geometric" || got["units for 50% release"] != "14" || got["units for 99% release"] != "18" ||
		got["selection epsilon"] != "1" || got["selection delta"] != "1e-06" {
		t.Errorf("EXPLAIN rows %v", got)
	}
	if es := f.entries(t); len(es) != 0 {
		t.Fatalf("EXPLAIN charged: %+v", es)
	}
}

// Released keys survive a restart: a second engine over the same data
// directory (ledger, sources, measurement store opened anew, as
// cmd/dpproxy opens them) groups by the column with the keys the first
// released, and the ledger holds one selection.
func TestOpenKeysSurviveRestart(t *testing.T) {
	ctx := context.Background()
	f := newFixtureCatalog(t, openYAML)
	dir := filepath.Dir(f.data)
	s := session("analyst", map[string]any{"dp_epsilon": 2.0})
	restart := func() (*Engine, func()) {
		l, err := budget.Open(ctx, filepath.Join(dir, "ledger.sqlite"))
		if err != nil {
			t.Fatal(err)
		}
		h, err := sources.Open(ctx, f.cfg.Catalog, sources.Options{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		ms, err := measure.Open(ctx, filepath.Join(dir, "measurements.sqlite"), 0)
		if err != nil {
			t.Fatal(err)
		}
		e := New(Config{Catalog: f.cfg.Catalog, Ledger: l, Histograms: h, Logger: f.cfg.Logger, Measurements: ms})
		return e, func() { ms.Close(); h.Close(); l.Close() }
	}
	keys := func(e *Engine, sql string) []string {
		rs, err := e.Answer(ctx, s, []string{sql})
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		var out []string
		for _, r := range rs[0].Rows {
			out = append(out, r[0].(string))
		}
		slices.Sort(out)
		return out
	}
	e1, stop1 := restart()
	first := keys(e1, "SELECT occupation, COUNT(*) FROM adult GROUP BY occupation")
	stop1()
	e2, stop2 := restart()
	defer stop2()
	second := keys(e2, "SELECT occupation, AVG(age) FROM adult GROUP BY occupation")
	if !slices.Equal(first, second) || len(first) == 0 {
		t.Errorf("keys after the restart %v, before %v", second, first)
	}
	l, err := budget.Open(ctx, filepath.Join(dir, "ledger.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	es, err := l.Entries(ctx, budget.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	selections := 0
	for _, e := range es {
		if e.Cost.Delta > 0 {
			selections++
		}
	}
	if len(es) != 3 || selections != 1 {
		t.Fatalf("ledger after the restart: %d entries, %d selections; want a selection and two measurements", len(es), selections)
	}
}

// LIKE and NOT LIKE on an open column are evaluated on the data by the
// pushed-down histogram, exactly (case counts), mixed with literals in
// one batch; without noise each answer equals the count in the file, and
// nothing is spent on selection.
func TestOpenLike(t *testing.T) {
	f := newFixtureCatalog(t, openYAML)
	f.eng.withoutNoise()
	db, err := sql.Open("sqlite", f.data)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT occupation FROM adult")
	if err != nil {
		t.Fatal(err)
	}
	var occ []*string
	for rows.Next() {
		var v *string
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		occ = append(occ, v)
	}
	rows.Close()
	count := func(p func(string) bool) int64 {
		var n int64
		for _, v := range occ {
			if v != nil && p(*v) {
				n++
			}
		}
		return n
	}
	cases := []struct {
		sql  string
		want int64
	}{
		{"SELECT COUNT(*) FROM adult WHERE occupation LIKE '%-%'", count(func(s string) bool { return catalog.Like(s, "%-%", `\`) })},
		{"SELECT COUNT(*) FROM adult WHERE occupation NOT LIKE 'S%'", count(func(s string) bool { return !catalog.Like(s, "S%", `\`) })},
		{"SELECT COUNT(*) FROM adult WHERE occupation LIKE 'sales'", 0},
		{"SELECT COUNT(*) FROM adult WHERE occupation = 'Sales' OR occupation LIKE 'Tech%'", count(func(s string) bool { return s == "Sales" || catalog.Like(s, "Tech%", `\`) })},
		{"SELECT COUNT(*) FROM adult WHERE occupation LIKE '%e%' AND occupation <> 'Sales'", count(func(s string) bool { return s != "Sales" && catalog.Like(s, "%e%", `\`) })},
		{"SELECT COUNT(*) FROM adult WHERE occupation LIKE 'Adm!-%' ESCAPE '!'", count(func(s string) bool { return catalog.Like(s, "Adm-%", `\`) })},
	}
	var sqls []string
	for _, c := range cases {
		sqls = append(sqls, c.sql)
	}
	rs, err := f.eng.Answer(context.Background(), session("analyst", map[string]any{"dp_epsilon": 2.0}), sqls)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		if got := fmt.Sprint(rs[i].Rows[0][0]); got != fmt.Sprint(c.want) {
			t.Errorf("%s: %s, want %d", c.sql, got, c.want)
		}
	}
	if c := cases[0].want; c == 0 {
		t.Fatal("the fixture has no occupation with a hyphen")
	}
	for _, e := range f.entries(t) {
		if e.Cost.Delta != 0 {
			t.Errorf("LIKE spent δ: %+v", e)
		}
	}
	// More patterns than MaxPatterns on one column, REGEXP, a pattern
	// that is not a literal: refused before anything is spent.
	n := len(f.entries(t))
	var many []string
	for i := range catalog.MaxPatterns + 1 {
		many = append(many, fmt.Sprintf("SELECT COUNT(*) FROM adult WHERE occupation LIKE '%c%%'", 'A'+i))
	}
	_, err = f.eng.Answer(context.Background(), session("analyst", nil), many)
	refusal(t, err, parser.CodeDPRefused, "LIKE patterns")
	for _, q := range []string{
		"SELECT COUNT(*) FROM adult WHERE occupation REGEXP '^S'",
		"SELECT COUNT(*) FROM adult WHERE occupation LIKE education",
		"SELECT COUNT(*) FROM adult WHERE 'Sales' LIKE occupation",
	} {
		_, err := f.eng.Answer(context.Background(), session("analyst", nil), []string{q})
		refusal(t, err, parser.CodeDPRefused, "no public list of values")
	}
	if len(f.entries(t)) != n {
		t.Error("a refusal charged")
	}
}

// openJoinYAML adds a public table keyed by occupation, with a key the
// data never holds.
const openJoinYAML = `public_tables:
  occ:
    columns: {code: text, kind: text}
    rows:
      - [Sales, office]
      - [Adm-clerical, office]
      - [Craft-repair, manual]
      - [Nothing-here, none]
`

// SELECT c FROM t GROUP BY c (and SELECT DISTINCT c) on an open column
// lists its released keys: selected first, charged, when none are
// released; free afterwards, for any user, and reused by a later GROUP BY.
// An auditor cannot have keys selected. Top-k over an open column selects
// its keys, then runs the exponential mechanism over them.
func TestOpenDomainListAndTopK(t *testing.T) {
	f := newFixtureCatalog(t, strings.Replace(openYAML, "users:\n", "users:\n  auditor: {password: auditor, role: auditor}\n", 1))
	ctx := context.Background()
	s := session("analyst", map[string]any{"dp_epsilon": 2.0})
	aud := session("auditor", nil)
	_, err := f.eng.Answer(ctx, aud, []string{"SELECT occupation FROM adult GROUP BY occupation"})
	refusal(t, err, parser.CodeDPRefused, "not yet released")
	list := f.answer(t, s, "SELECT occupation FROM adult GROUP BY occupation")
	if len(list.Rows) < 10 {
		t.Fatalf("%d keys listed", len(list.Rows))
	}
	es := f.entries(t)
	if len(es) != 1 || es[0].Cost.Delta != 1e-6 || es[0].Cost.Epsilon != 1 {
		t.Fatalf("ledger %+v, want one selection at ε=1 (the selection share of 2), δ=1e-6", es)
	}
	for _, sess := range []*Session{s, aud} {
		for _, q := range []string{"SELECT DISTINCT occupation FROM adult", "SELECT occupation FROM adult GROUP BY 1"} {
			rs, err := f.eng.Answer(ctx, sess, []string{q})
			if err != nil {
				t.Fatalf("%s as %s: %v", q, sess.User, err)
			}
			if fmt.Sprint(rs[0].Rows) != fmt.Sprint(list.Rows) {
				t.Errorf("%s as %s: %v, want the released keys %v", q, sess.User, rs[0].Rows, list.Rows)
			}
		}
	}
	g := f.answer(t, s, "SELECT occupation, COUNT(*) FROM adult GROUP BY occupation")
	if len(g.Rows) != len(list.Rows) {
		t.Errorf("GROUP BY after the list: %d groups, %d keys", len(g.Rows), len(list.Rows))
	}
	if es := f.entries(t); len(es) != 2 || es[1].Cost.Delta != 0 {
		t.Fatalf("listing again and grouping selected anew: %+v", es)
	}
	// Top-k: a selection (δ), then the exponential mechanism over the
	// released keys.
	top := f.answer(t, s, "SELECT education, COUNT(*) FROM adult GROUP BY education ORDER BY COUNT(*) DESC LIMIT 3")
	if len(top.Rows) != 3 {
		t.Fatalf("top-3: %v", top.Rows)
	}
	es = f.entries(t)
	if len(es) != 4 || es[2].Cost.Delta == 0 || es[3].Cost.Delta != 0 {
		t.Fatalf("top-k ledger %+v, want a selection then the top-k", es[2:])
	}
}

// A join to a public table on an open column: the public keys are the
// column's values (a key the data lacks is a group like any other, its
// count noisy), every other value joins nothing, LEFT JOIN keeps it as
// NULL; no selection is needed, and without noise each count is the
// truth.
func TestOpenJoinPublic(t *testing.T) {
	f := newFixtureCatalog(t, openYAML+openJoinYAML)
	f.eng.withoutNoise()
	s := session("analyst", map[string]any{"dp_epsilon": 2.0})
	db, err := sql.Open("sqlite", f.data)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	truth := func(q string) string {
		rows, err := db.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out [][]any
		for rows.Next() {
			var k any
			var n int64
			if err := rows.Scan(&k, &n); err != nil {
				t.Fatal(err)
			}
			if b, ok := k.([]byte); ok {
				k = string(b)
			}
			out = append(out, []any{k, n})
		}
		return fmt.Sprint(out)
	}
	kind := "CASE occupation WHEN 'Sales' THEN 'office' WHEN 'Adm-clerical' THEN 'office' WHEN 'Craft-repair' THEN 'manual' END"
	for _, c := range []struct{ sql, truth string }{
		{"SELECT o.kind, COUNT(*) FROM adult a JOIN occ o ON a.occupation = o.code GROUP BY o.kind ORDER BY o.kind",
			"SELECT k, n FROM (SELECT " + kind + " AS k, COUNT(*) AS n FROM adult WHERE occupation IN ('Sales', 'Adm-clerical', 'Craft-repair') GROUP BY k UNION ALL SELECT 'none', 0) ORDER BY k"},
		{"SELECT o.kind, COUNT(*) FROM adult a LEFT JOIN occ o ON a.occupation = o.code GROUP BY o.kind ORDER BY o.kind",
			"SELECT k, n FROM (SELECT " + kind + " AS k, COUNT(*) AS n FROM adult WHERE occupation IS NOT NULL GROUP BY k UNION ALL SELECT 'none', 0) ORDER BY k"},
	} {
		r := f.answer(t, s, c.sql)
		if got, want := fmt.Sprint(r.Rows), truth(c.truth); got != want {
			t.Errorf("%s:\n got %s\nwant %s", c.sql, got, want)
		}
	}
	for _, e := range f.entries(t) {
		if e.Cost.Delta != 0 {
			t.Errorf("a join on an open column spent δ: %+v", e)
		}
	}
}
