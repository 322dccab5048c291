package parser

import (
	"reflect"
	"strings"
	"testing"
)

// A query wrapped in derived tables or CTEs that select rows is the query
// written without them: same kind, same IR, same output names.
func TestDerivedTablesMerge(t *testing.T) {
	cases := []struct{ wrapped, plain string }{
		// Superset virtual dataset.
		{"SELECT sex AS sex, COUNT(*) AS count FROM (SELECT * FROM adult) AS virtual_table GROUP BY sex ORDER BY count DESC LIMIT 10000",
			"SELECT sex AS sex, COUNT(*) AS count FROM adult GROUP BY sex ORDER BY count DESC LIMIT 10000"},
		// Metabase nested question.
		{"SELECT source.sex AS sex, count(*) AS count FROM (SELECT adult.sex AS sex, adult.age AS age FROM adult) AS source GROUP BY source.sex ORDER BY source.sex ASC",
			"SELECT adult.sex AS sex, count(*) AS count FROM adult GROUP BY adult.sex ORDER BY adult.sex ASC"},
		// Tableau Custom SQL.
		{"SELECT SUM(1) AS cnt FROM (SELECT * FROM adult) Custom_SQL_Query", "SELECT SUM(1) AS cnt FROM adult"},
		{"SELECT * FROM (SELECT * FROM adult) Custom_SQL_Query LIMIT 0", "SELECT * FROM adult LIMIT 0"},
		// Looker / hand-written CTE with WHERE inside and outside.
		{"WITH w AS (SELECT * FROM adult WHERE age > 30) SELECT sex, COUNT(*) FROM w WHERE race = 'White' GROUP BY sex",
			"SELECT sex, COUNT(*) FROM adult WHERE (age > 30) AND (race = 'White') GROUP BY sex"},
		// Computed columns used as keys and in aggregates, two levels deep.
		{"SELECT decade, COUNT(*) AS n, SUM(h) FROM (SELECT FLOOR(age/10)*10 AS decade, hours_per_week AS h FROM (SELECT * FROM adult WHERE sex = 'Male') a) b GROUP BY decade",
			"SELECT FLOOR(age/10)*10 AS decade, COUNT(*) AS n, SUM(hours_per_week) AS `SUM(h)` FROM adult WHERE sex = 'Male' GROUP BY FLOOR(age/10)*10"},
		{"SELECT band, COUNT(*) FROM (SELECT CASE WHEN age < 30 THEN 'young' ELSE 'old' END AS band FROM adult) t GROUP BY band ORDER BY band",
			"SELECT CASE WHEN age < 30 THEN 'young' ELSE 'old' END AS band, COUNT(*) FROM adult GROUP BY CASE WHEN age < 30 THEN 'young' ELSE 'old' END ORDER BY band"},
		// A column list on the derived table; a CTE read through another.
		{"SELECT s, COUNT(*) FROM (SELECT sex FROM adult) AS t(s) GROUP BY s", "SELECT sex AS s, COUNT(*) FROM adult GROUP BY sex"},
		{"WITH a AS (SELECT * FROM adult), b AS (SELECT sex AS gender FROM a WHERE age < 50) SELECT gender, COUNT(*) FROM b GROUP BY gender",
			"SELECT sex AS gender, COUNT(*) FROM adult WHERE age < 50 GROUP BY sex"},
		// Power BI's folded form, parenthesised.
		{"SELECT `t0`.`sex`, COUNT(*) AS `a0` FROM ((SELECT `$Table`.`sex`, `$Table`.`age` FROM adult AS `$Table`)) AS `t0` GROUP BY `t0`.`sex`",
			"SELECT `$Table`.`sex` AS sex, COUNT(*) AS `a0` FROM adult AS `$Table` GROUP BY `$Table`.`sex`"},
	}
	for _, tc := range cases {
		got, err := ParseWithColumns(tc.wrapped, protectedAdult, adultColumns)
		if err != nil {
			t.Errorf("%s: %v", tc.wrapped, err)
			continue
		}
		want, err := ParseWithColumns(tc.plain, protectedAdult, adultColumns)
		if err != nil {
			t.Fatalf("%s: %v", tc.plain, err)
		}
		g, w := got[0], want[0]
		g.Text, w.Text = "", ""
		normaliseWhere(g.Query)
		normaliseWhere(w.Query)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s:\n got %s\nwant %s", tc.wrapped, dump([]Statement{g}), dump([]Statement{w}))
		}
	}
}

// normaliseWhere flattens nested Ands, which the merge writes as
// (inner) AND (outer).
func normaliseWhere(q *Query) {
	if q == nil {
		return
	}
	var flat func(p Pred) []Pred
	flat = func(p Pred) []Pred {
		if a, ok := p.(And); ok {
			var out []Pred
			for _, t := range a.Terms {
				out = append(out, flat(t)...)
			}
			return out
		}
		return []Pred{p}
	}
	if a, ok := q.Where.(And); ok {
		q.Where = And{Terms: flat(a)}
	}
}

// Aggregate derived tables, CTEs and UNIONs are parts; the outer query is
// post-processing SQL over their tables.
func TestDerivedPostProcessing(t *testing.T) {
	cases := []struct {
		sql   string
		parts []string // the parts' select aliases, joined by commas
		outer string   // a substring of the SQL
	}{
		{"SELECT AVG(n) FROM (SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex) t", []string{"sex,n"}, "from dp_result_1 as t"},
		{"WITH c AS (SELECT race, COUNT(*) AS n FROM adult GROUP BY race) SELECT MAX(n), COUNT(*) FROM c WHERE n > 10", []string{"race,n"}, "from dp_result_1 as c where n > 10"},
		{"SELECT a.sex, a.n, b.m FROM (SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex) a JOIN (SELECT sex, AVG(age) AS m FROM adult GROUP BY sex) b ON a.sex = b.sex",
			[]string{"sex,n", "sex,m"}, "dp_result_1 as a join dp_result_2 as b on a.sex = b.sex"},
		{"SELECT COUNT(*) AS n FROM adult UNION ALL SELECT COUNT(*) FROM adult WHERE age > 30", []string{"n", "COUNT(*)"}, "select * from dp_result_1 union all select * from dp_result_2"},
		{"SELECT * FROM (SELECT sex, COUNT(*) FROM adult GROUP BY sex) t(s, n) ORDER BY n DESC", []string{"s,n"}, "order by n desc"},
	}
	for _, tc := range cases {
		sts, err := ParseWithColumns(tc.sql, protectedAdult, adultColumns)
		if err != nil {
			t.Errorf("%s: %v", tc.sql, err)
			continue
		}
		st := sts[0]
		if st.Kind != KindPostProcess || st.Post == nil {
			t.Errorf("%s: kind %d", tc.sql, st.Kind)
			continue
		}
		if len(st.Post.Parts) != len(tc.parts) {
			t.Errorf("%s: %d parts", tc.sql, len(st.Post.Parts))
			continue
		}
		for i, p := range st.Post.Parts {
			var names []string
			for _, it := range p.Query.Select {
				names = append(names, it.Alias)
			}
			if strings.Join(names, ",") != tc.parts[i] || p.Kind != KindAggregate {
				t.Errorf("%s: part %d kind %d selects %v", tc.sql, i, p.Kind, names)
			}
		}
		if !strings.Contains(strings.ToLower(st.Post.SQL), strings.ToLower(tc.outer)) {
			t.Errorf("%s: SQL %q lacks %q", tc.sql, st.Post.SQL, tc.outer)
		}
	}
}

func TestDerivedRefusals(t *testing.T) {
	cases := []struct {
		sql  string
		code int
		msg  string
	}{
		{"SELECT COUNT(*) FROM (SELECT * FROM adult LIMIT 10) t", CodeDPRefused, "LIMIT inside"},
		{"SELECT COUNT(*) FROM (SELECT * FROM adult) t WHERE t.nosuch = 1", CodeBadField, "Unknown column"},
		{"SELECT COUNT(*) FROM (SELECT age FROM adult) t WHERE t.sex = 'Male'", CodeBadField, "Unknown column 't.sex'"},
		{"SELECT COUNT(*) FROM (SELECT DISTINCT age, sex FROM adult) t", CodeDPRefused, "a DISTINCT (or a GROUP BY without an aggregate) inside"},
		{"SELECT COUNT(*) AS n FROM adult UNION SELECT sex FROM adult GROUP BY sex", CodeDPRefused, "a DISTINCT (or a GROUP BY without an aggregate) inside"},
		{"WITH RECURSIVE r AS (SELECT 1) SELECT COUNT(*) FROM adult", CodeNotSupported, "recursive"},
		{"SELECT age FROM (SELECT * FROM adult) t", CodeDPRefused, "aggregate queries only"},
		{"SELECT COUNT(*) FROM adult a JOIN (SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex ORDER BY n DESC LIMIT 1) s ON a.sex = s.sex", CodeDPRefused, "aggregate subquery"},
		{"SELECT SLEEP(n) FROM (SELECT COUNT(*) AS n FROM adult) t", CodeNotSupported, "SLEEP"},
		{"SELECT n FROM (SELECT COUNT(*) AS n FROM adult) t JOIN other o ON o.x = t.n", CodeNotSupported, "table 'other'"},
		{"SELECT COUNT(*) FROM adult WHERE age > (SELECT AVG(x) FROM other)", CodeDPRefused, "subqueries"},
	}
	for _, tc := range cases {
		_, err := ParseWithColumns(tc.sql, protectedAdult, adultColumns)
		e, ok := err.(*Error)
		if !ok || e.Code != tc.code || !strings.Contains(e.Message, tc.msg) {
			t.Errorf("%s: %v, want %d containing %q", tc.sql, err, tc.code, tc.msg)
		}
	}
}

// Superset's series limit: the outer query without the join is a part,
// the top-n subquery another, and the join a filter in post-processing.
func TestDerivedSeriesLimit(t *testing.T) {
	sql := "SELECT DATE(age) AS __timestamp, sex AS sex, COUNT(*) AS count FROM (SELECT * FROM adult) AS virtual_table " +
		"JOIN (SELECT sex AS sex__, COUNT(*) AS mme_inner__ FROM (SELECT * FROM adult) AS virtual_table GROUP BY sex ORDER BY mme_inner__ DESC LIMIT 1) AS series_limit ON sex = sex__ " +
		"WHERE age > 20 GROUP BY sex, DATE(age) ORDER BY count DESC LIMIT 10000"
	sql = strings.ReplaceAll(sql, "DATE(age)", "FLOOR(age / 10)")
	sts, err := ParseWithColumns(sql, protectedAdult, adultColumns)
	if err != nil {
		t.Fatal(err)
	}
	p := sts[0].Post
	if sts[0].Kind != KindPostProcess || len(p.Parts) != 2 {
		t.Fatalf("%+v", sts[0])
	}
	if q := p.Parts[0].Query; q.Limit == nil || *q.Limit != 1 || len(q.OrderBy) != 1 {
		t.Errorf("part 1 is not the top-n: %s", dump(p.Parts[:1]))
	}
	if q := p.Parts[1].Query; q.Limit != nil || len(q.OrderBy) != 0 || q.Where == nil || len(q.Select) != 3 {
		t.Errorf("part 2 is not the outer query without the join: %s", dump(p.Parts[1:]))
	}
	want := "select dp_groups.__timestamp, dp_groups.sex, dp_groups.`count` from dp_result_2 as dp_groups join dp_result_1 as series_limit on dp_groups.sex = series_limit.sex__ order by dp_groups.`count` desc limit 10000"
	if p.SQL != want {
		t.Errorf("SQL\n %s\nwant\n %s", p.SQL, want)
	}
	// Tableau's top-N filter: a null-safe join to a SUM(1) subquery.
	tableau := "SELECT `adult`.`race` AS `race`, `adult`.`sex` AS `sex`, SUM(1) AS `sum_Number of Records_ok` FROM `adult` INNER JOIN (SELECT `adult`.`race` AS `race`, SUM(1) AS `$__alias__0` FROM `adult` GROUP BY 1 ORDER BY `$__alias__0` DESC LIMIT 2) `t0` ON (`adult`.`race` <=> `t0`.`race`) GROUP BY 1, 2"
	sts, err = ParseWithColumns(tableau, protectedAdult, adultColumns)
	if err != nil || sts[0].Kind != KindPostProcess || !strings.Contains(sts[0].Post.SQL, "dp_groups.race <=> t0.race") {
		t.Errorf("Tableau top-N: %v %+v", err, sts)
	}
	for _, bad := range []string{
		// Not on a group key.
		"SELECT sex, COUNT(*) FROM adult JOIN (SELECT sex AS s, COUNT(*) AS n FROM adult GROUP BY sex ORDER BY n DESC LIMIT 1) t ON age = t.n GROUP BY sex",
		// The subquery's columns read outside ON.
		"SELECT sex, t.n, COUNT(*) FROM adult JOIN (SELECT sex AS s, COUNT(*) AS n FROM adult GROUP BY sex ORDER BY n DESC LIMIT 1) t ON sex = t.s GROUP BY sex",
		// A LEFT join keeps every group.
		"SELECT sex, COUNT(*) FROM adult LEFT JOIN (SELECT sex AS s, COUNT(*) AS n FROM adult GROUP BY sex ORDER BY n DESC LIMIT 1) t ON sex = t.s GROUP BY sex",
	} {
		if _, err := ParseWithColumns(bad, protectedAdult, adultColumns); err == nil || err.(*Error).Code != CodeDPRefused {
			t.Errorf("%s: %v, want 3900", bad, err)
		}
	}
}

// MySQL's non-reserved keywords are column names (issue 22: `u.plan`).
func TestNonReservedIdentifiers(t *testing.T) {
	cols := func(table, column string) bool { return true }
	prot := func(schema, table string) bool { return table == "users" }
	for w := range nonReserved {
		for _, sql := range []string{
			"SELECT u." + w + ", COUNT(*) FROM users u GROUP BY u." + w,
			"SELECT " + w + ", COUNT(*) AS n FROM users WHERE " + w + " = 'x' GROUP BY " + w + " ORDER BY n DESC",
		} {
			sts, err := ParseWithColumns(sql, prot, cols)
			if err != nil {
				t.Errorf("%s: %v", sql, err)
				continue
			}
			if sts[0].Kind != KindAggregate || sts[0].Text != sql || sts[0].Query.GroupBy[0] != w {
				t.Errorf("%s: %s", sql, dump(sts))
			}
		}
	}
	// Still errors where MySQL has one, reported on the text as sent.
	_, err := ParseWithColumns("SELECT plan, COUNT(*) FROM users GROUP BY plan ORDER", prot, cols)
	if e, ok := err.(*Error); !ok || e.Code != CodeParseError || !strings.Contains(e.Message, "near '' at line 1") {
		t.Errorf("%v", err)
	}
	if sts, err := ParseWithColumns("SELECT STDDEV(age) FROM users", prot, cols); err != nil || sts[0].Query.Select[0].Agg != AggStdPop {
		t.Errorf("STDDEV(age): %v", err)
	}
}
