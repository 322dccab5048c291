package engine

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/budget"
)

// Wrapped statements through the engine: a derived table or CTE that
// selects rows answers as the query written without it (same columns,
// types, groups and order; asked after it, the same values, derived from
// its stored measurement at no charge), an
// aggregate one is measured once and post-processed for free, and a UNION
// ALL of aggregate queries is one batch with one charge.
func TestWrappedStatements(t *testing.T) {
	f := newFixture(t)
	s := session("analyst", map[string]any{VarEpsilon: 5.0})
	merged := []struct{ wrapped, plain string }{
		{"SELECT sex AS sex, COUNT(*) AS count FROM (SELECT * FROM adult) AS virtual_table GROUP BY sex ORDER BY count DESC LIMIT 10000",
			"SELECT sex AS sex, COUNT(*) AS count FROM adult GROUP BY sex ORDER BY count DESC LIMIT 10000"},
		{"SELECT source.sex AS sex, count(*) AS count FROM (SELECT adult.sex AS sex, adult.age AS age FROM adult) AS source GROUP BY source.sex ORDER BY source.sex ASC",
			"SELECT adult.sex AS sex, count(*) AS count FROM adult GROUP BY adult.sex ORDER BY adult.sex ASC"},
		{"SELECT SUM(1) AS cnt FROM (SELECT * FROM adult) Custom_SQL_Query", "SELECT SUM(1) AS cnt FROM adult"},
		{"WITH w AS (SELECT * FROM adult WHERE age > 30) SELECT sex, COUNT(*) FROM w GROUP BY sex", "SELECT sex, COUNT(*) FROM adult WHERE age > 30 GROUP BY sex"},
		{"SELECT decade, COUNT(*), AVG(h) FROM (SELECT FLOOR(age/10)*10 AS decade, hours_per_week AS h FROM adult) t GROUP BY decade ORDER BY decade",
			"SELECT FLOOR(age/10)*10 AS decade, COUNT(*), AVG(hours_per_week) AS `AVG(h)` FROM adult GROUP BY decade ORDER BY decade"},
	}
	for _, tc := range merged {
		p := f.answer(t, s, tc.plain)
		before := charges(t, f)
		w := f.answer(t, s, tc.wrapped)
		sameAnswer(t, tc.wrapped, w, p, 0)
		if charges(t, f) != before {
			t.Fatalf("%s: charged, though the plain query's measurement answers it", tc.wrapped)
		}
	}

	// DP results as inputs: one charge for the inner batch, none for the
	// outer query.
	before := charges(t, f)
	inner := f.answer(t, s, "SELECT sex, COUNT(*) AS n FROM adult WHERE age > 40 GROUP BY sex")
	afterInner := charges(t, f)
	outer := f.answer(t, s, "SELECT AVG(n), SUM(n) AS total, COUNT(*) AS n_groups FROM (SELECT sex, COUNT(*) AS n FROM adult WHERE age > 40 GROUP BY sex) t")
	if got := charges(t, f); afterInner > before+1 || got != afterInner {
		t.Fatalf("charges %d → %d → %d: the outer query must be free and the inner batch stored", before, afterInner, got)
	}
	if names := columnNames(outer); names != "AVG(n),total,n_groups" {
		t.Fatalf("columns %s", names)
	}
	n0, n1 := asFloat(inner.Rows[0][1]), asFloat(inner.Rows[1][1])
	if math.Abs(asFloat(outer.Rows[0][0])-(n0+n1)/2) > 1e-9 || math.Abs(asFloat(outer.Rows[0][1])-(n0+n1)) > 1e-9 || asFloat(outer.Rows[0][2]) != 2 {
		t.Fatalf("outer %v over inner %v", outer.Rows, inner.Rows)
	}
	// A filter on a noisy value and a join of two aggregate subqueries.
	r := f.answer(t, s, "SELECT a.sex, a.n, b.m FROM (SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex) a JOIN (SELECT sex, AVG(age) AS m FROM adult GROUP BY sex) b ON a.sex = b.sex WHERE a.n > 0 ORDER BY a.sex")
	if len(r.Rows) != 2 || columnNames(r) != "sex,n,m" || r.Columns[0].Type != TypeString {
		t.Fatalf("join of subqueries: %v %v", r.Columns, r.Rows)
	}

	// Superset's series limit: the groups of the top-1 sex only, ordered
	// as asked.
	r = f.answer(t, s, "SELECT FLOOR(age / 10) * 10 AS decade, sex AS sex, COUNT(*) AS count FROM (SELECT * FROM adult) AS virtual_table "+
		"JOIN (SELECT sex AS sex__, COUNT(*) AS mme_inner__ FROM (SELECT * FROM adult) AS virtual_table GROUP BY sex ORDER BY mme_inner__ DESC LIMIT 1) AS series_limit ON sex = sex__ "+
		"GROUP BY sex, FLOOR(age / 10) * 10 ORDER BY count DESC LIMIT 10000")
	all := f.answer(t, s, "SELECT FLOOR(age / 10) * 10 AS decade, sex AS sex, COUNT(*) AS count FROM adult GROUP BY sex, FLOOR(age / 10) * 10")
	if columnNames(r) != "decade,sex,count" || len(r.Rows) == 0 || len(r.Rows) >= len(all.Rows) {
		t.Fatalf("series limit: %v %d rows of %d", r.Columns, len(r.Rows), len(all.Rows))
	}
	for i, row := range r.Rows {
		if row[1] != r.Rows[0][1] || (i > 0 && asFloat(row[2]) > asFloat(r.Rows[i-1][2])) {
			t.Fatalf("series limit: rows %v", r.Rows)
		}
	}

	// UNION ALL over one table: one batch, one charge.
	before = charges(t, f)
	r = f.answer(t, s, "SELECT 'young' AS band, COUNT(*) AS n FROM adult WHERE age < 30 UNION ALL SELECT 'old', COUNT(*) FROM adult WHERE age >= 30")
	if got := charges(t, f); got != before+1 {
		t.Fatalf("UNION ALL: %d charges, want 1", got-before)
	}
	if len(r.Rows) != 2 || r.Rows[0][0] != "young" || r.Rows[1][0] != "old" || columnNames(r) != "band,n" {
		t.Fatalf("UNION ALL: %v %v", r.Columns, r.Rows)
	}

	// EXPLAIN shows the inner batch and says the rest is post-processing;
	// it charges nothing.
	before = charges(t, f)
	r = f.answer(t, s, "EXPLAIN SELECT MAX(n) FROM (SELECT education, COUNT(*) AS n FROM adult GROUP BY education) t")
	got := fmt.Sprint(r.Rows)
	if !strings.Contains(got, "post-processing") || !strings.Contains(got, "epsilon charged if run") || charges(t, f) != before {
		t.Fatalf("EXPLAIN: %s", got)
	}
}

func sameAnswer(t *testing.T, what string, got, want *Result, tol float64) {
	t.Helper()
	if columnNames(got) != columnNames(want) || len(got.Rows) != len(want.Rows) {
		t.Fatalf("%s: columns %s rows %d, want %s rows %d", what, columnNames(got), len(got.Rows), columnNames(want), len(want.Rows))
	}
	for k := range got.Columns {
		if got.Columns[k].Type != want.Columns[k].Type {
			t.Fatalf("%s: column %s type %d, want %d", what, got.Columns[k].Name, got.Columns[k].Type, want.Columns[k].Type)
		}
	}
	for i := range got.Rows {
		for k := range got.Rows[i] {
			g, w := got.Rows[i][k], want.Rows[i][k]
			if gs, ok := g.(string); ok {
				if gs != w {
					t.Fatalf("%s: row %d: %v, want %v", what, i, got.Rows[i], want.Rows[i])
				}
				continue
			}
			if math.Abs(asFloat(g)-asFloat(w)) > tol*math.Max(1, math.Abs(asFloat(w))) {
				t.Fatalf("%s: row %d: %v, want %v", what, i, got.Rows[i], want.Rows[i])
			}
		}
	}
}

func columnNames(r *Result) string {
	var names []string
	for _, c := range r.Columns {
		names = append(names, c.Name)
	}
	return strings.Join(names, ",")
}

func asFloat(v any) float64 {
	f, _ := toFloat(v)
	return f
}

// charges counts the ledger's charge entries (repeats and derived answers
// are entries too, at no cost).
func charges(t *testing.T, f *fixture) int {
	n := 0
	for _, e := range f.entries(t) {
		if e.Kind == budget.KindCharge {
			n++
		}
	}
	return n
}

// sql_select_limit caps a post-processed result as it caps any SELECT
// without a LIMIT of its own; the parts are never cut.
func TestPostProcessingSelectLimit(t *testing.T) {
	f := newFixture(t)
	s := session("analyst", map[string]any{VarEpsilon: 1.0})
	s.SelectLimit = func() (uint64, bool) { return 1, true }
	r := f.answer(t, s, "SELECT * FROM (SELECT education, COUNT(*) AS n FROM adult GROUP BY education) t")
	if len(r.Rows) != 1 {
		t.Fatalf("sql_select_limit 1: %d rows", len(r.Rows))
	}
	r = f.answer(t, s, "SELECT COUNT(*) AS groups_seen FROM (SELECT education, COUNT(*) AS n FROM adult GROUP BY education) t")
	if fmt.Sprint(r.Rows) != "[[16]]" {
		t.Fatalf("the part was cut: %v", r.Rows)
	}
	r = f.answer(t, s, "SELECT * FROM (SELECT education, COUNT(*) AS n FROM adult GROUP BY education) t LIMIT 3")
	if len(r.Rows) != 3 {
		t.Fatalf("LIMIT 3: %d rows", len(r.Rows))
	}
}
