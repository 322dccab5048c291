package parser

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// protectedAdult accepts table "adult", unqualified or in schema "demo".
func protectedAdult(schema, table string) bool {
	return table == "adult" && (schema == "" || strings.EqualFold(schema, "demo"))
}

func lim(n int64) *int64 { return &n }

func lit(s string) Literal      { return Literal{Text: s} }
func qlit(s string) Literal     { return Literal{Text: s, Quoted: true} }
func count(a string) SelectItem { return SelectItem{Agg: AggCount, Alias: a} }
func col(c, a string) SelectItem {
	return SelectItem{Agg: AggNone, Column: c, Alias: a}
}

func agg(q *Query) []Statement { return []Statement{{Kind: KindAggregate, Query: q}} }

func pass() []Statement { return []Statement{{Kind: KindPassthrough}} }

type parseCase struct {
	name string
	sql  string
	want []Statement // Text is checked separately when texts is set; else it must equal the trimmed sql
	text []string
}

func runParseCases(t *testing.T, cases []parseCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.sql, protectedAdult)
			if err != nil {
				t.Fatalf("Parse(%q): unexpected error %v", tc.sql, err)
			}
			texts := tc.text
			if texts == nil {
				texts = []string{strings.TrimSpace(tc.sql)}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("Parse(%q): %d statements, want %d:\n%s", tc.sql, len(got), len(tc.want), dump(got))
			}
			for i := range got {
				if got[i].Text != texts[i] {
					t.Errorf("statement %d: Text = %q, want %q", i, got[i].Text, texts[i])
				}
				g, w := got[i], tc.want[i]
				g.Text, w.Text = "", ""
				if !reflect.DeepEqual(g, w) {
					t.Errorf("Parse(%q) statement %d:\n got %s\nwant %s", tc.sql, i, dump([]Statement{g}), dump([]Statement{w}))
				}
			}
		})
	}
}

func dump(sts []Statement) string {
	var b strings.Builder
	for _, s := range sts {
		fmt.Fprintf(&b, "{Kind:%d Text:%q", s.Kind, s.Text)
		if q := s.Query; q != nil {
			fmt.Fprintf(&b, " Query:%+v", *q)
			if q.Limit != nil {
				fmt.Fprintf(&b, " Limit=%d", *q.Limit)
			}
		}
		b.WriteString("}\n")
	}
	return b.String()
}

func TestParseBITools(t *testing.T) {
	runParseCases(t, []parseCase{
		{
			name: "superset group by with count alias ordered by alias",
			sql:  "SELECT adult.sex, count(*) AS count FROM adult GROUP BY adult.sex ORDER BY count DESC LIMIT 10000",
			want: agg(&Query{
				Table:   "adult",
				Select:  []SelectItem{col("sex", "sex"), count("count")},
				GroupBy: []string{"sex"},
				OrderBy: []OrderItem{{SelectIndex: 1, Desc: true}},
				Limit:   lim(10000),
			}),
		},
		{
			name: "metabase count with backquoted alias",
			sql:  "SELECT COUNT(*) AS `count` FROM `adult`",
			want: agg(&Query{Table: "adult", Select: []SelectItem{count("count")}}),
		},
		{
			name: "top-k by an unselected count",
			sql:  "SELECT age FROM adult GROUP BY age ORDER BY COUNT(*) DESC LIMIT 3",
			want: agg(&Query{
				Table:   "adult",
				Select:  []SelectItem{col("age", "age")},
				GroupBy: []string{"age"},
				OrderBy: []OrderItem{{SelectIndex: -1, Agg: AggCount, Desc: true}},
				Limit:   lim(3),
			}),
		},
		{
			name: "avg per group, alias as written",
			sql:  "SELECT education, AVG(hours_per_week) FROM adult GROUP BY education",
			want: agg(&Query{
				Table: "adult",
				Select: []SelectItem{
					col("education", "education"),
					{Agg: AggAvg, Column: "hours_per_week", Alias: "AVG(hours_per_week)"},
				},
				GroupBy: []string{"education"},
			}),
		},
		{
			name: "between with quoted numbers",
			sql:  "SELECT COUNT(*) FROM adult WHERE age BETWEEN '30' AND '40'",
			want: agg(&Query{
				Table:  "adult",
				Select: []SelectItem{count("COUNT(*)")},
				Where:  Between{Column: "age", Lo: qlit("30"), Hi: qlit("40")},
			}),
		},
		{
			name: "metabase leading comment, backquoted qualified names",
			sql:  "-- Metabase:: userID: 1 queryType: MBQL queryHash: 3f2a\nSELECT `adult`.`sex` AS `sex`, count(*) AS `count` FROM `adult` WHERE `adult`.`age` > 30 GROUP BY `adult`.`sex` ORDER BY `adult`.`sex` ASC",
			text: []string{"SELECT `adult`.`sex` AS `sex`, count(*) AS `count` FROM `adult` WHERE `adult`.`age` > 30 GROUP BY `adult`.`sex` ORDER BY `adult`.`sex` ASC"},
			want: agg(&Query{
				Table:   "adult",
				Select:  []SelectItem{col("sex", "sex"), count("count")},
				Where:   Compare{Column: "age", Op: OpGt, Value: lit("30")},
				GroupBy: []string{"sex"},
				OrderBy: []OrderItem{{SelectIndex: 0}},
			}),
		},
		{
			name: "metabase schema-qualified names",
			sql:  "SELECT `demo`.`adult`.`sex` AS `sex`, count(*) AS `count` FROM `demo`.`adult` GROUP BY `demo`.`adult`.`sex`",
			want: agg(&Query{
				Schema:  "demo",
				Table:   "adult",
				Select:  []SelectItem{col("sex", "sex"), count("count")},
				GroupBy: []string{"sex"},
			}),
		},
		{
			name: "multi-statement batch",
			sql:  "SELECT COUNT(*) FROM adult WHERE sex='Male'; SELECT COUNT(*) FROM adult WHERE age > 50",
			text: []string{"SELECT COUNT(*) FROM adult WHERE sex='Male'", "SELECT COUNT(*) FROM adult WHERE age > 50"},
			want: []Statement{
				{Kind: KindAggregate, Query: &Query{Table: "adult", Select: []SelectItem{count("COUNT(*)")}, Where: Compare{Column: "sex", Op: OpEq, Value: qlit("Male")}}},
				{Kind: KindAggregate, Query: &Query{Table: "adult", Select: []SelectItem{count("COUNT(*)")}, Where: Compare{Column: "age", Op: OpGt, Value: lit("50")}}},
			},
		},
		{
			name: "explain",
			sql:  "EXPLAIN SELECT sex, COUNT(*) FROM adult WHERE age >= 18 GROUP BY sex",
			want: []Statement{{Kind: KindExplain, Query: &Query{
				Table:   "adult",
				Select:  []SelectItem{col("sex", "sex"), count("COUNT(*)")},
				Where:   Compare{Column: "age", Op: OpGe, Value: lit("18")},
				GroupBy: []string{"sex"},
			}}},
		},
		{
			name: "explain format=json keeps written names",
			sql:  "EXPLAIN FORMAT=JSON SELECT COUNT( * ) FROM adult",
			want: []Statement{{Kind: KindExplain, Query: &Query{Table: "adult", Select: []SelectItem{count("COUNT( * )")}}}},
		},
		{
			name: "describe select",
			sql:  "DESCRIBE SELECT COUNT(*) FROM adult",
			want: []Statement{{Kind: KindExplain, Query: &Query{Table: "adult", Select: []SelectItem{count("COUNT(*)")}}}},
		},
		{
			name: "select star limit 0",
			sql:  "SELECT * FROM adult LIMIT 0",
			want: []Statement{{Kind: KindEmpty, Query: &Query{Table: "adult", Select: []SelectItem{{Column: "*", Alias: "*"}}, Limit: lim(0)}}},
		},
		{
			name: "metabase probe",
			sql:  "SELECT TRUE AS `_` FROM `adult` WHERE 1 <> 1 LIMIT 0",
			want: []Statement{{Kind: KindEmpty, Query: &Query{Table: "adult", Select: []SelectItem{{Alias: "_"}}, Where: Const{Value: false}, Limit: lim(0)}}},
		},
		{
			name: "metabase field values sync",
			sql:  "SELECT `adult`.`sex` AS `sex` FROM `adult` GROUP BY `adult`.`sex` ORDER BY `adult`.`sex` ASC LIMIT 1000",
			want: []Statement{{Kind: KindDomainList, Query: &Query{
				Table:   "adult",
				Select:  []SelectItem{col("sex", "sex")},
				GroupBy: []string{"sex"},
				OrderBy: []OrderItem{{SelectIndex: 0}},
				Limit:   lim(1000),
			}}},
		},
		{name: "mysql cli version comment", sql: "select @@version_comment limit 1", want: pass()},
		{name: "show full tables", sql: "SHOW FULL TABLES FROM `demo`", want: pass()},
		{name: "session option", sql: "SET @dp_epsilon = 0.2", want: pass()},
		{name: "information_schema count", sql: "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema='demo'", want: pass()},
	})
}

func TestParsePassthrough(t *testing.T) {
	runParseCases(t, []parseCase{
		{name: "version", sql: "SELECT VERSION()", want: pass()},
		{name: "database", sql: "SELECT DATABASE(), USER()", want: pass()},
		{name: "rollback", sql: "ROLLBACK", want: pass()},
		{name: "use", sql: "USE demo", want: pass()},
		{name: "kill", sql: "KILL QUERY 42", want: pass()},
		{name: "set names", sql: "SET NAMES utf8mb4", want: pass()},
		{name: "set session", sql: "SET SESSION sql_mode = 'ANSI'", want: pass()},
		{name: "show variables", sql: "SHOW VARIABLES LIKE 'lower_case%'", want: pass()},
		{name: "show columns of protected table", sql: "SHOW FULL COLUMNS FROM `adult` FROM `demo`", want: pass()},
		{name: "describe protected table", sql: "DESCRIBE adult", want: pass()},
		{name: "show create table", sql: "SHOW CREATE TABLE demo.adult", want: pass()},
		{name: "show index", sql: "SHOW INDEX FROM adult", want: pass()},
		{name: "explain of a table", sql: "EXPLAIN adult", want: pass()},
		{name: "explain passthrough select", sql: "EXPLAIN SELECT 1", want: pass()},
		{name: "other table", sql: "SELECT * FROM other", want: pass()},
		{name: "other schema", sql: "SELECT COUNT(*) FROM other.adult", want: pass()},
		{name: "write to other table", sql: "UPDATE other SET a = 1", want: pass()},
		{name: "columns catalog mentions table name in a string", sql: "SELECT column_name FROM information_schema.columns WHERE table_name = 'adult'", want: pass()},
		{name: "unparseable admin statement", sql: "SHOW ENGINE INNODB STATUS", want: pass()},
		{name: "unparseable with no protected name", sql: "FROBNICATE THE WIDGETS", want: pass()},
		{name: "select literal", sql: "SELECT 1", want: pass()},
		{name: "commit", sql: "COMMIT", want: pass()},
		{name: "start transaction", sql: "START TRANSACTION READ ONLY", want: pass()},
		{name: "lock tables", sql: "LOCK TABLES adult READ", want: pass()},
	})
}

func TestParseAggregates(t *testing.T) {
	runParseCases(t, []parseCase{
		{
			name: "count forms",
			sql:  "select count(*), COUNT(1), COUNT( * ), count(age) AS n_age, SUM(Age), avg(`age`) FROM adult",
			want: agg(&Query{Table: "adult", Select: []SelectItem{
				count("count(*)"), count("COUNT(1)"), count("COUNT( * )"),
				{Agg: AggCountCol, Column: "age", Alias: "n_age"},
				{Agg: AggSum, Column: "age", Alias: "SUM(Age)"},
				{Agg: AggAvg, Column: "age", Alias: "avg(`age`)"},
			}}),
		},
		{
			name: "error bars, case-insensitive, aliased without AS",
			sql:  "SELECT sex, COUNT(*) n, dp_stderr(count(*)) se, DP_CI_LOW(AVG(age)) AS lo, Dp_Ci_High(avg(age)) FROM adult GROUP BY sex",
			want: agg(&Query{Table: "adult", Select: []SelectItem{
				col("sex", "sex"),
				count("n"),
				{Agg: AggCount, Bar: BarStderr, Alias: "se"},
				{Agg: AggAvg, Column: "age", Bar: BarCILow, Alias: "lo"},
				{Agg: AggAvg, Column: "age", Bar: BarCIHigh, Alias: "Dp_Ci_High(avg(age))"},
			}, GroupBy: []string{"sex"}}),
		},
		{
			name: "table alias and upper-case names",
			sql:  "SELECT a.SEX, COUNT(*) FROM Adult a WHERE a.Age < 30 GROUP BY a.Sex",
			want: agg(&Query{Table: "adult", Select: []SelectItem{col("sex", "SEX"), count("COUNT(*)")},
				Where: Compare{Column: "age", Op: OpLt, Value: lit("30")}, GroupBy: []string{"sex"}}),
		},
		{
			name: "schema.table.column",
			sql:  "SELECT `demo`.`adult`.`sex`, COUNT(*) FROM demo.adult GROUP BY 1",
			want: agg(&Query{Schema: "demo", Table: "adult", Select: []SelectItem{col("sex", "sex"), count("COUNT(*)")}, GroupBy: []string{"sex"}}),
		},
		{
			name: "group by position and alias, order by position",
			sql:  "SELECT sex AS s, race, COUNT(*) AS n FROM adult GROUP BY s, 2 ORDER BY 3 DESC, s",
			want: agg(&Query{Table: "adult",
				Select:  []SelectItem{col("sex", "s"), col("race", "race"), count("n")},
				GroupBy: []string{"sex", "race"},
				OrderBy: []OrderItem{{SelectIndex: 2, Desc: true}, {SelectIndex: 0}},
			}),
		},
		{
			name: "order by count alias named count",
			sql:  "SELECT sex, count(*) AS count FROM adult GROUP BY sex ORDER BY count DESC",
			want: agg(&Query{Table: "adult", Select: []SelectItem{col("sex", "sex"), count("count")}, GroupBy: []string{"sex"},
				OrderBy: []OrderItem{{SelectIndex: 1, Desc: true}}}),
		},
		{
			name: "order by selected aggregate expression",
			sql:  "SELECT sex, COUNT(*) FROM adult GROUP BY sex ORDER BY COUNT(*) DESC LIMIT 1",
			want: agg(&Query{Table: "adult", Select: []SelectItem{col("sex", "sex"), count("COUNT(*)")}, GroupBy: []string{"sex"},
				OrderBy: []OrderItem{{SelectIndex: 1, Desc: true}}, Limit: lim(1)}),
		},
		{
			name: "order by unselected sum, and by an unselected column",
			sql:  "SELECT sex, COUNT(*) FROM adult GROUP BY sex, race ORDER BY SUM(age), race DESC",
			want: agg(&Query{Table: "adult", Select: []SelectItem{col("sex", "sex"), count("COUNT(*)")}, GroupBy: []string{"sex", "race"},
				OrderBy: []OrderItem{{SelectIndex: -1, Agg: AggSum, Column: "age"}, {SelectIndex: -1, Column: "race", Desc: true}}}),
		},
		{
			name: "order by backquoted default name",
			sql:  "SELECT sex, COUNT(*) FROM adult GROUP BY sex ORDER BY `COUNT(*)` DESC",
			want: agg(&Query{Table: "adult", Select: []SelectItem{col("sex", "sex"), count("COUNT(*)")}, GroupBy: []string{"sex"},
				OrderBy: []OrderItem{{SelectIndex: 1, Desc: true}}}),
		},
		{
			name: "having on alias and on written aggregates",
			sql:  "SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex HAVING n > 100 AND (SUM(age) <= '5000' OR NOT 10 < COUNT(*))",
			want: agg(&Query{Table: "adult", Select: []SelectItem{col("sex", "sex"), count("n")}, GroupBy: []string{"sex"},
				Having: And{Terms: []Pred{
					AggCompare{Item: count("n"), Op: OpGt, Value: 100},
					Or{Terms: []Pred{
						AggCompare{Item: SelectItem{Agg: AggSum, Column: "age", Alias: "SUM(age)"}, Op: OpLe, Value: 5000},
						Not{Term: AggCompare{Item: count("n"), Op: OpGt, Value: 10}},
					}},
				}}}),
		},
		{
			name: "having between",
			sql:  "SELECT sex FROM adult GROUP BY sex HAVING COUNT(*) BETWEEN 10 AND 20",
			want: agg(&Query{Table: "adult", Select: []SelectItem{col("sex", "sex")}, GroupBy: []string{"sex"},
				Having: And{Terms: []Pred{
					AggCompare{Item: SelectItem{Agg: AggCount, Alias: "COUNT(*)"}, Op: OpGe, Value: 10},
					AggCompare{Item: SelectItem{Agg: AggCount, Alias: "COUNT(*)"}, Op: OpLe, Value: 20},
				}}}),
		},
		{
			name: "limit with zero offset",
			sql:  "SELECT sex, COUNT(*) FROM adult GROUP BY sex LIMIT 0, 5",
			want: agg(&Query{Table: "adult", Select: []SelectItem{col("sex", "sex"), count("COUNT(*)")}, GroupBy: []string{"sex"}, Limit: lim(5)}),
		},
		{
			name: "limit offset 0",
			sql:  "SELECT COUNT(*) FROM adult LIMIT 5 OFFSET 0",
			want: agg(&Query{Table: "adult", Select: []SelectItem{count("COUNT(*)")}, Limit: lim(5)}),
		},
		{
			name: "group by a column that is not selected",
			sql:  "SELECT COUNT(*) FROM adult GROUP BY sex",
			want: agg(&Query{Table: "adult", Select: []SelectItem{count("COUNT(*)")}, GroupBy: []string{"sex"}}),
		},
		{
			name: "parenthesised top-level select",
			sql:  "(SELECT COUNT(*) FROM adult)",
			want: agg(&Query{Table: "adult", Select: []SelectItem{count("COUNT(*)")}}),
		},
		{
			name: "comments around and inside, trailing semicolon",
			sql:  "/* dashboard 7 */ SELECT COUNT(*) /* n */ FROM adult # end\n;\n-- bye\n",
			text: []string{"SELECT COUNT(*) /* n */ FROM adult"},
			want: agg(&Query{Table: "adult", Select: []SelectItem{count("COUNT(*)")}}),
		},
	})
}

func TestParseWhere(t *testing.T) {
	q := func(where Pred) []Statement {
		return agg(&Query{Table: "adult", Select: []SelectItem{count("COUNT(*)")}, Where: where})
	}
	const pre = "SELECT COUNT(*) FROM adult WHERE "
	cases := []struct {
		where string
		want  Pred
	}{
		{"age = 30", Compare{Column: "age", Op: OpEq, Value: lit("30")}},
		{"age <> 30", Compare{Column: "age", Op: OpNe, Value: lit("30")}},
		{"age != '30'", Compare{Column: "age", Op: OpNe, Value: qlit("30")}},
		{"age < 30", Compare{Column: "age", Op: OpLt, Value: lit("30")}},
		{"age <= 30", Compare{Column: "age", Op: OpLe, Value: lit("30")}},
		{"age > 30", Compare{Column: "age", Op: OpGt, Value: lit("30")}},
		{"age >= 30.5", Compare{Column: "age", Op: OpGe, Value: lit("30.5")}},
		{"30 < age", Compare{Column: "age", Op: OpGt, Value: lit("30")}},
		{"30 >= age", Compare{Column: "age", Op: OpLe, Value: lit("30")}},
		{"'Male' = sex", Compare{Column: "sex", Op: OpEq, Value: qlit("Male")}},
		{"age > -5", Compare{Column: "age", Op: OpGt, Value: lit("-5")}},
		{"age > - 5", Compare{Column: "age", Op: OpGt, Value: lit("-5")}},
		{"age > +5", Compare{Column: "age", Op: OpGt, Value: lit("5")}},
		{"age > -(-5)", Compare{Column: "age", Op: OpGt, Value: lit("5")}},
		{"sex = \"Male\"", Compare{Column: "sex", Op: OpEq, Value: qlit("Male")}},
		{"sex = 'O''Brien'", Compare{Column: "sex", Op: OpEq, Value: qlit("O'Brien")}},
		{"sex = _utf8mb4'Male'", Compare{Column: "sex", Op: OpEq, Value: qlit("Male")}},
		{"flag = TRUE", Compare{Column: "flag", Op: OpEq, Value: lit("1")}},
		{"(age) = (30)", Compare{Column: "age", Op: OpEq, Value: lit("30")}},
		{"age BETWEEN 30 AND 40", Between{Column: "age", Lo: lit("30"), Hi: lit("40")}},
		{"age NOT BETWEEN 30 AND '40'", Between{Column: "age", Lo: lit("30"), Hi: qlit("40"), Negated: true}},
		{"sex IN ('Male')", In{Column: "sex", Values: []Literal{qlit("Male")}}},
		{"age IN (1, '2', -3)", In{Column: "age", Values: []Literal{lit("1"), qlit("2"), lit("-3")}}},
		{"sex NOT IN ('Male', 'Female')", In{Column: "sex", Values: []Literal{qlit("Male"), qlit("Female")}, Negated: true}},
		{"sex IS NULL", IsNull{Column: "sex"}},
		{"sex IS NOT NULL", IsNull{Column: "sex", Negated: true}},
		{"age > 30 AND sex = 'Male'", And{Terms: []Pred{
			Compare{Column: "age", Op: OpGt, Value: lit("30")}, Compare{Column: "sex", Op: OpEq, Value: qlit("Male")}}}},
		{"age < 20 OR age > 60 OR sex IS NULL", Or{Terms: []Pred{
			Compare{Column: "age", Op: OpLt, Value: lit("20")}, Compare{Column: "age", Op: OpGt, Value: lit("60")}, IsNull{Column: "sex"}}}},
		{"(age < 20 OR age > 60) AND NOT (sex = 'Male')", And{Terms: []Pred{
			Or{Terms: []Pred{Compare{Column: "age", Op: OpLt, Value: lit("20")}, Compare{Column: "age", Op: OpGt, Value: lit("60")}}},
			Not{Term: Compare{Column: "sex", Op: OpEq, Value: qlit("Male")}}}}},
		{"NOT NOT age = 1", Compare{Column: "age", Op: OpEq, Value: lit("1")}},
		{"a = 1 AND (b = 2 AND c = 3)", And{Terms: []Pred{
			Compare{Column: "a", Op: OpEq, Value: lit("1")}, Compare{Column: "b", Op: OpEq, Value: lit("2")}, Compare{Column: "c", Op: OpEq, Value: lit("3")}}}},
		{"1 = 1", Const{Value: true}},
		{"TRUE", Const{Value: true}},
		{"1", Const{Value: true}},
		{"'a' = 'A'", Const{Value: true}},
		{"2 IN (1, 2)", Const{Value: true}},
		{"5 BETWEEN 1 AND 10", Const{Value: true}},
		{"NULL IS NULL", Const{Value: true}},
		{"1 = 1 AND sex = 'Male'", Compare{Column: "sex", Op: OpEq, Value: qlit("Male")}},
		{"1 = 0 OR sex = 'Male'", Compare{Column: "sex", Op: OpEq, Value: qlit("Male")}},
		{"sex = 'Male' OR 1 = 1", Const{Value: true}},
		{"NOT 1 = 0", Const{Value: true}},
	}
	var pcs []parseCase
	for _, c := range cases {
		pcs = append(pcs, parseCase{name: c.where, sql: pre + c.where, want: q(c.want)})
	}
	runParseCases(t, pcs)
}

func TestParseEmpty(t *testing.T) {
	runParseCases(t, []parseCase{
		{
			name: "where 1 <> 1",
			sql:  "SELECT sex, COUNT(*) AS n FROM adult WHERE 1 <> 1 GROUP BY sex",
			want: []Statement{{Kind: KindEmpty, Query: &Query{Table: "adult", Select: []SelectItem{col("sex", "sex"), count("n")},
				Where: Const{Value: false}, GroupBy: []string{"sex"}}}},
		},
		{
			name: "where 1=0",
			sql:  "SELECT COUNT(*) FROM adult WHERE 1=0",
			want: []Statement{{Kind: KindEmpty, Query: &Query{Table: "adult", Select: []SelectItem{count("COUNT(*)")}, Where: Const{Value: false}}}},
		},
		{
			name: "where false and more",
			sql:  "SELECT sex FROM adult WHERE FALSE AND sex = 'x'",
			want: []Statement{{Kind: KindEmpty, Query: &Query{Table: "adult", Select: []SelectItem{col("sex", "sex")}, Where: Const{Value: false}}}},
		},
		{
			name: "star and expressions with limit 0",
			sql:  "SELECT adult.*, 'abc', 1 + 1, MAX(age) AS m FROM adult LIMIT 0",
			want: []Statement{{Kind: KindEmpty, Query: &Query{Table: "adult", Select: []SelectItem{
				{Column: "*", Alias: "*"}, {Alias: "abc"}, {Alias: "1 + 1"}, {Alias: "m"},
			}, Limit: lim(0)}}},
		},
		{
			name: "unsupported where tolerated under limit 0",
			sql:  "SELECT COUNT(*) FROM adult WHERE name REGEXP 'a' XOR age & 1 LIMIT 0",
			want: []Statement{{Kind: KindEmpty, Query: &Query{Table: "adult", Select: []SelectItem{count("COUNT(*)")}, Limit: lim(0)}}},
		},
	})
}

func TestParseDomainList(t *testing.T) {
	runParseCases(t, []parseCase{
		{
			name: "distinct",
			sql:  "SELECT DISTINCT sex FROM adult",
			want: []Statement{{Kind: KindDomainList, Query: &Query{Table: "adult", Select: []SelectItem{col("sex", "sex")}, GroupBy: []string{"sex"}}}},
		},
		{
			name: "two columns, desc, constant where",
			sql:  "SELECT sex, race FROM adult WHERE 1 = 1 GROUP BY race, sex ORDER BY sex DESC LIMIT 10",
			want: []Statement{{Kind: KindDomainList, Query: &Query{Table: "adult",
				Select:  []SelectItem{col("sex", "sex"), col("race", "race")},
				GroupBy: []string{"race", "sex"},
				OrderBy: []OrderItem{{SelectIndex: 0, Desc: true}},
				Limit:   lim(10)}}},
		},
		{
			name: "aliased table",
			sql:  "SELECT `t`.`sex` AS `sex` FROM `demo`.`adult` `t` GROUP BY `t`.`sex` ORDER BY `t`.`sex` ASC LIMIT 1000",
			want: []Statement{{Kind: KindDomainList, Query: &Query{Schema: "demo", Table: "adult",
				Select: []SelectItem{col("sex", "sex")}, GroupBy: []string{"sex"}, OrderBy: []OrderItem{{SelectIndex: 0}}, Limit: lim(1000)}}},
		},
	})
}

func TestParseMultiStatement(t *testing.T) {
	runParseCases(t, []parseCase{
		{
			name: "quotes and comments hold semicolons",
			sql:  "SELECT COUNT(*) FROM adult WHERE sex = 'a;b' -- c;d\n; /* e;f */ SET @dp_epsilon = 1;;  # g;h",
			text: []string{"SELECT COUNT(*) FROM adult WHERE sex = 'a;b'", "SET @dp_epsilon = 1"},
			want: []Statement{
				{Kind: KindAggregate, Query: &Query{Table: "adult", Select: []SelectItem{count("COUNT(*)")}, Where: Compare{Column: "sex", Op: OpEq, Value: qlit("a;b")}}},
				{Kind: KindPassthrough},
			},
		},
		{
			name: "backquoted and escaped",
			sql:  "SELECT COUNT(*) AS `a;b` FROM adult WHERE sex = 'it\\'s;'; SHOW TABLES",
			text: []string{"SELECT COUNT(*) AS `a;b` FROM adult WHERE sex = 'it\\'s;'", "SHOW TABLES"},
			want: []Statement{
				{Kind: KindAggregate, Query: &Query{Table: "adult", Select: []SelectItem{count("a;b")}, Where: Compare{Column: "sex", Op: OpEq, Value: qlit("it's;")}}},
				{Kind: KindPassthrough},
			},
		},
		{name: "only comments", sql: "-- nothing\n/* at all */ ; # here", want: []Statement{}, text: []string{}},
	})
}

func TestParseRefusals(t *testing.T) {
	cases := []struct {
		sql  string
		code int
		msg  string // substring of the message
	}{
		// Row access.
		{"SELECT * FROM adult", CodeDPRefused, "dpproxy answers aggregate queries only: SELECT COUNT(*) ... [GROUP BY ...]; raw rows are never returned"},
		{"SELECT * FROM demo.adult WHERE age > 3", CodeDPRefused, "raw rows are never returned"},
		{"TABLE adult", CodeDPRefused, "raw rows are never returned"},
		{"(SELECT * FROM adult)", CodeDPRefused, "raw rows are never returned"},
		{"SELECT * FROM adult WHERE sex LIKE 'M%' LIMIT 5, 5", CodeDPRefused, "raw rows are never returned"},
		{"SELECT sex, age FROM adult", CodeDPRefused, "raw rows are never returned"},
		{"SELECT 1 FROM adult", CodeDPRefused, "raw rows are never returned"},
		{"SELECT sex, COUNT(*) FROM adult", CodeDPRefused, "column 'sex' must appear in GROUP BY"},
		{"SELECT sex, race, COUNT(*) FROM adult GROUP BY sex", CodeDPRefused, "column 'race' must appear in GROUP BY"},
		{"SELECT sex, race FROM adult GROUP BY sex", CodeDPRefused, "column 'race' must appear in GROUP BY"},
		{"SELECT COUNT(*) FROM adult INTO @n", CodeDPRefused, "INTO"},
		{"SELECT COUNT(*) FROM adult PARTITION (p1)", CodeNotSupported, "PARTITION"},
		// Extremes and other aggregates.
		{"SELECT MIN(age) FROM adult", CodeDPRefused, "MIN is refused"},
		{"SELECT sex, max(age) FROM adult GROUP BY sex", CodeDPRefused, "MAX is refused"},
		{"SELECT GROUP_CONCAT(sex) FROM adult", CodeDPRefused, "GROUP_CONCAT"},
		{"SELECT ANY_VALUE(sex) FROM adult", CodeDPRefused, "ANY_VALUE"},
		{"SELECT COUNT(DISTINCT sex + 1) FROM adult", CodeNotSupported, "COUNT(DISTINCT ...) is not supported"},
		{"SELECT COUNT(DISTINCT sex, age) FROM adult", CodeNotSupported, "COUNT(DISTINCT ...) is not supported"},
		{"SELECT SUM(DISTINCT age) FROM adult", CodeNotSupported, "SUM(DISTINCT ...)"},
		{"SELECT DP_STDERR(COUNT(*)) * 2 FROM adult", CodeNotSupported, "error bars of expressions"},
		{"SELECT SUM(SUM(age)) FROM adult", CodeNotSupported, "aggregates cannot be nested"},
		{"SELECT COUNT(*) FROM adult WHERE RAND() > 0.5", CodeNotSupported, "RAND() is not a deterministic function"},
		{"SELECT NOW(), COUNT(*) FROM adult", CodeNotSupported, "not a deterministic function"},
		{"SELECT CURTIME(), COUNT(*) FROM adult", CodeNotSupported, "TIME values are not supported"},
		{"SELECT FROM_UNIXTIME(1738368000) AS x, COUNT(*) FROM adult", CodeNotSupported, "only aggregates, GROUP BY keys and numeric functions"},
		{"SELECT COUNT(*) FROM adult WHERE age > TIMEDIFF(age, 1)", CodeNotSupported, "this date function is not supported"},
		{"SELECT COUNT(*) FROM adult WHERE DATE_ADD(age, 1) > 1", CodeNotSupported, "the second argument is an INTERVAL"},
		{"SELECT COUNT(*) FROM adult WHERE age + INTERVAL 1 MICROSECOND > 1", CodeNotSupported, "use SECOND, MINUTE"},
		{"SELECT COUNT(*) FROM adult WHERE NOW(7) > 1", CodeNotSupported, "fractional digits"},
		{"SELECT COUNT(*) FROM adult WHERE RAND() > 0.5", CodeNotSupported, "NOW() and CURRENT_TIMESTAMP are fine"},
		{"SELECT COUNT(*) FROM adult WHERE sex COLLATE utf8mb4_bin = 'Male'", CodeNotSupported, "COLLATE is not supported"},
		{"SELECT COUNT(*) FROM adult WHERE age & 1 = 1", CodeNotSupported, "bit operator"},
		{"SELECT COUNT(*) FROM adult WHERE NOSUCHFN(age) = 1", CodeNotSupported, "the function NOSUCHFN is not supported"},
		{"SELECT COUNT(*) FROM adult WHERE LEFT(sex) = 'M'", CodeNotSupported, "Incorrect parameter count"},
		{"SELECT COUNT(*) FROM adult WHERE age > @x", CodeNotSupported, "variables (@x)"},
		{"SELECT COUNT(*) + age FROM adult GROUP BY age", CodeNotSupported, "a column inside an expression over aggregates"},
		{"SELECT age + 1, COUNT(*) FROM adult GROUP BY sex", CodeDPRefused, "is not a GROUP BY key"},
		{"SELECT FLOOR(age / 10), COUNT(*) FROM adult GROUP BY age DIV 10", CodeDPRefused, "is not a GROUP BY key"},
		{"SELECT sex, COUNT(*) FROM adult GROUP BY sex HAVING age > 3", CodeDPRefused, "HAVING reads column 'age', which is not a GROUP BY key"},
		{"SELECT sex, COUNT(*) FROM adult GROUP BY sex ORDER BY age + 1", CodeDPRefused, "column 'age' is not grouped"},
		{"SELECT COUNT(*) FROM adult GROUP BY 'x'", CodeNotSupported, "groups by a constant"},
		{"SELECT COUNT(*) FROM adult GROUP BY COUNT(*)", CodeNotSupported, "not aggregates"},
		{"SELECT COUNT(*) FROM adult WHERE (age, sex) IN ((1, 'a'))", CodeNotSupported, "row constructor"},
		{"SELECT DP_STDERR(age) FROM adult", CodeNotSupported, "DP_STDERR takes one aggregate"},
		{"SELECT DP_STDERR(DP_STDERR(COUNT(*))) FROM adult", CodeNotSupported, "DP_STDERR takes one aggregate"},
		{"SELECT DP_CI_LOW(MAX(age)) FROM adult", CodeDPRefused, "MAX is refused"},
		{"SELECT COUNT(*) OVER () FROM adult", CodeNotSupported, "window functions"},
		// Tables, joins, subqueries, set operations.
		{"SELECT COUNT(*) FROM adult a JOIN other o ON a.id = o.id", CodeDPRefused, "table 'other' is not a public table"},
		{"SELECT COUNT(*) FROM adult, other", CodeDPRefused, "a list of tables (FROM a, b) is written as a JOIN"},
		{"SELECT COUNT(*) FROM other JOIN adult USING (id)", CodeDPRefused, "table 'other' is not a public table"},
		{"SELECT COUNT(*) FROM adult WHERE age > (SELECT AVG(x) FROM other)", CodeDPRefused, "subqueries"},
		{"SELECT COUNT(*) FROM adult WHERE EXISTS (SELECT 1 FROM other)", CodeDPRefused, "subqueries"},
		{"SELECT COUNT(*) FROM other WHERE id IN (SELECT id FROM adult)", CodeDPRefused, "subqueries"},
		{"SELECT (SELECT COUNT(*) FROM adult)", CodeDPRefused, "subqueries"},
		{"SELECT COUNT(*) FROM other UNION ALL SELECT COUNT(*) FROM adult", CodeNotSupported, "table 'other' cannot be read"},
		{"SET @n = (SELECT COUNT(*) FROM adult)", CodeDPRefused, "subqueries"},
		// Writes and DDL.
		{"INSERT INTO adult (age) VALUES (1)", CodeDPRefused, "read-only"},
		{"REPLACE INTO demo.adult VALUES (1)", CodeDPRefused, "read-only"},
		{"UPDATE adult SET age = 1", CodeDPRefused, "read-only"},
		{"DELETE FROM adult WHERE age > 3", CodeDPRefused, "read-only"},
		{"DROP TABLE adult", CodeDPRefused, "read-only"},
		{"TRUNCATE TABLE adult", CodeDPRefused, "read-only"},
		{"ALTER TABLE adult ADD COLUMN x INT", CodeDPRefused, "read-only"},
		{"CREATE TABLE t2 AS SELECT * FROM adult", CodeDPRefused, "read-only"},
		{"INSERT INTO other SELECT * FROM adult", CodeDPRefused, "read-only"},
		{"CREATE VIEW v AS SELECT sex FROM adult", CodeDPRefused, "read-only"},
		{"RENAME TABLE adult TO x", CodeDPRefused, "read-only"},
		// WHERE forms.
		{"SELECT COUNT(*) FROM adult WHERE age = ?", CodeNotSupported, "placeholders"},
		{"SELECT COUNT(*) FROM adult WHERE age = 0x1F", CodeNotSupported, "hexadecimal"},
		// Domain lists.
		{"SELECT sex FROM adult WHERE age > 30 GROUP BY sex", CodeDPRefused, "takes no WHERE"},
		{"SELECT DISTINCT sex FROM adult WHERE age > 30", CodeDPRefused, "takes no WHERE"},
		{"SELECT sex FROM adult GROUP BY sex, race", CodeNotSupported, "a domain list selects its GROUP BY columns"},
		{"SELECT sex FROM adult GROUP BY sex ORDER BY race", CodeNotSupported, "a domain list is ordered by its selected columns"},
		// GROUP BY / ORDER BY / HAVING / LIMIT.
		{"SELECT COUNT(*) AS n FROM adult GROUP BY n", CodeNotSupported, "Can't group on 'n'"},
		{"SELECT sex, COUNT(*) FROM adult GROUP BY 2", CodeNotSupported, "Can't group on 'COUNT(*)'"},
		{"SELECT sex, COUNT(*) FROM adult GROUP BY sex ORDER BY DP_STDERR(COUNT(*))", CodeNotSupported, "to order by an error bar, select it"},
		{"SELECT sex, COUNT(*) FROM adult GROUP BY sex HAVING COUNT(*) > AVG(age)", CodeNotSupported, "HAVING compares an aggregate with a number"},
		{"SELECT sex, COUNT(*) FROM adult GROUP BY sex HAVING MAX(age) > 3", CodeDPRefused, "MAX is refused"},
		{"SELECT sex, COUNT(*) FROM adult GROUP BY sex LIMIT 10, 10", CodeNotSupported, "LIMIT with an offset is not supported"},
		{"SELECT sex, COUNT(*) FROM adult GROUP BY sex LIMIT 10 OFFSET 5", CodeNotSupported, "write LIMIT 10"},
		// EXPLAIN.
		{"EXPLAIN SELECT * FROM adult", CodeDPRefused, "raw rows are never returned"},
		{"EXPLAIN SELECT sex FROM adult GROUP BY sex", CodeNotSupported, "EXPLAIN shows the DP plan of aggregate queries"},
		{"EXPLAIN ANALYZE SELECT COUNT(*) FROM adult", CodeNotSupported, "EXPLAIN ANALYZE"},
		{"EXPLAIN DELETE FROM adult", CodeDPRefused, "read-only"},
		// Names.
		{"SELECT other.sex, COUNT(*) FROM adult GROUP BY 1", CodeBadField, "Unknown column 'other.sex' in 'field list'"},
		{"SELECT COUNT(*) FROM adult a WHERE b.age > 3", CodeBadField, "Unknown column 'b.age' in 'where clause'"},
		{"SELECT COUNT(*) FROM adult WHERE x.adult.age > 3", CodeBadField, "Unknown column 'x.adult.age' in 'where clause'"},
		{"SELECT sex, COUNT(*) FROM adult GROUP BY 3", CodeBadField, "Unknown column '3' in 'group statement'"},
		{"SELECT sex, COUNT(*) FROM adult GROUP BY sex ORDER BY 0", CodeBadField, "Unknown column '0' in 'order clause'"},
		// Prepared statements.
		{"PREPARE s FROM 'SELECT COUNT(*) FROM adult'", CodeNotSupported, "prepared statements"},
		// A refusal anywhere fails the whole request.
		{"SELECT COUNT(*) FROM adult; SELECT * FROM adult", CodeDPRefused, "raw rows are never returned"},
	}
	for _, c := range cases {
		t.Run(c.sql, func(t *testing.T) {
			sts, err := Parse(c.sql, protectedAdult)
			if err == nil {
				t.Fatalf("Parse(%q) = %s, want error %d", c.sql, dump(sts), c.code)
			}
			e, ok := err.(*Error)
			if !ok {
				t.Fatalf("Parse(%q): error %T %v, want *Error", c.sql, err, err)
			}
			if e.Code != c.code || e.SQLState != sqlStateFor(c.code) {
				t.Errorf("Parse(%q): code %d/%s, want %d/%s (%s)", c.sql, e.Code, e.SQLState, c.code, sqlStateFor(c.code), e.Message)
			}
			if !strings.Contains(e.Message, c.msg) {
				t.Errorf("Parse(%q): message %q does not contain %q", c.sql, e.Message, c.msg)
			}
		})
	}
}

func TestParseSyntaxErrors(t *testing.T) {
	const prefix = "You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near "
	cases := []struct{ sql, near string }{
		{"SELEC COUNT(*) FROM adult", "'SELEC COUNT(*) FROM adult' at line 1"},
		{"SELECT COUNT(*) FROM adult WHERE", "'' at line 1"},
		{"SELECT COUNT(*) FROM adult GROUP sex", "'sex' at line 1"},
		{"SELECT COUNT(*) FROM adult WHERE age > 3 GROUP BY sex HAVING", "'' at line 1"},
		{"SELECT COUNT(*)\nFROM adult\nWHERE age = 3 sex = 'a'", "'sex = 'a'' at line 3"},
		{"SELECT COUNT(*)\nFROM adult\nWHERE age > > 3", "'> 3' at line 3"},
		{"SELECT COUNT(*),, FROM adult", "', FROM adult' at line 1"},
		{"SELECT COUNT(*) FROM adult LIMIT -1", "'-1' at line 1"},
		{"-- Metabase\nSELECT COUNT(*) FROM adult WHERE sex = 'Male", "''Male' at line 1"},
		{"SELECT COUNT(*) FROM adult WHERE age IN () AND sex = 'a very long string that goes on and on and on for more than eighty characters'",
			"') AND sex = 'a very long string that goes on and on and on for more than eighty ' at line 1"},
		{"HANDLER adult READ FIRST", "'HANDLER adult READ FIRST' at line 1"},
	}
	for _, c := range cases {
		t.Run(c.sql, func(t *testing.T) {
			_, err := Parse(c.sql, protectedAdult)
			e, ok := err.(*Error)
			if !ok {
				t.Fatalf("Parse(%q): %v, want a syntax error", c.sql, err)
			}
			if e.Code != CodeParseError || e.SQLState != "42000" {
				t.Errorf("code %d/%s, want 1064/42000", e.Code, e.SQLState)
			}
			if e.Message != prefix+c.near {
				t.Errorf("message\n %q\nwant\n %q", e.Message, prefix+c.near)
			}
		})
	}
}

func TestParseProtectedCalls(t *testing.T) {
	type call struct{ schema, table string }
	var calls []call
	prot := func(schema, table string) bool {
		calls = append(calls, call{schema, table})
		return protectedAdult(schema, table)
	}
	sts, err := Parse("SELECT COUNT(*) FROM `Demo`.`ADULT`", prot)
	if err != nil || len(sts) != 1 || sts[0].Kind != KindAggregate {
		t.Fatalf("Parse: %v %s", err, dump(sts))
	}
	if q := sts[0].Query; q.Schema != "Demo" || q.Table != "adult" {
		t.Errorf("Schema, Table = %q, %q; want as-written schema and lower-case table", q.Schema, q.Table)
	}
	for _, c := range calls {
		if c != (call{"Demo", "adult"}) {
			t.Errorf("protected called with %+v, want {Demo adult}", c)
		}
	}
	// A nil Protected makes everything pass through.
	sts, err = Parse("SELECT * FROM adult", nil)
	if err != nil || len(sts) != 1 || sts[0].Kind != KindPassthrough {
		t.Errorf("nil Protected: %v %s", err, dump(sts))
	}
}

// TestParseNeverPanics feeds truncations of every statement above.
func TestParseNeverPanics(t *testing.T) {
	inputs := []string{
		"SELECT adult.sex, count(*) AS count FROM adult WHERE age BETWEEN '30' AND '40' AND sex IN ('a', 'b') GROUP BY adult.sex HAVING count > 3 ORDER BY count DESC LIMIT 10000",
		"EXPLAIN FORMAT=JSON SELECT `t`.`sex` AS `sex` FROM `demo`.`adult` `t` GROUP BY `t`.`sex` ORDER BY `t`.`sex` ASC LIMIT 1000",
		"/* x */ SELECT TRUE AS `_` FROM `adult` WHERE 1 <> 1 LIMIT 0; -- y\n SELECT 'it''s', \"q\\\"\" FROM adult # z",
	}
	for _, in := range inputs {
		for i := 0; i <= len(in); i++ {
			_, _ = Parse(in[:i], protectedAdult)
		}
	}
}

func TestParseArithmeticOverAggregates(t *testing.T) {
	sts, err := Parse("SELECT SUM(hours_per_week) / COUNT(*) AS mean, (COUNT(*) + 1) * 2 FROM adult", protectedAdult)
	if err != nil {
		t.Fatal(err)
	}
	q := sts[0].Query
	if sts[0].Kind != KindAggregate || len(q.Select) != 2 {
		t.Fatalf("%+v", sts[0])
	}
	e := q.Select[0].Expr
	if e == nil || e.Op != '/' || e.Left.Leaf.Agg != AggSum || e.Left.Leaf.Column != "hours_per_week" || e.Right.Leaf.Agg != AggCount || q.Select[0].Alias != "mean" {
		t.Fatalf("%+v", q.Select[0])
	}
	e = q.Select[1].Expr
	if e.Op != '*' || e.Left.Op != '+' || e.Left.Right.Number != 1 || e.Right.Number != 2 || q.Select[1].Alias != "(COUNT(*) + 1) * 2" {
		t.Fatalf("%+v %+v", q.Select[1], e)
	}
}

// adultColumns is the column set of "adult" for ParseWithColumns.
func adultColumns(table, column string) bool {
	switch column {
	case "age", "sex", "race", "education", "hours_per_week", "income":
		return table == "adult"
	}
	return false
}

// An unknown column is 1054 with MySQL's message and clause, before any
// refusal: names are resolved first, clause by clause in MySQL's order
// (select list, WHERE, GROUP BY, HAVING, ORDER BY). Names that are
// select-list items (aliases, expressions as written) are known to GROUP BY,
// HAVING and ORDER BY, never to the select list or WHERE.
func TestParseUnknownColumns(t *testing.T) {
	cases := []struct {
		sql  string
		code int    // 0: parses
		msg  string // the whole message for 1054, else a substring
	}{
		// The select list: raw reads of unknown columns are 1054, not 3900.
		{"SELECT nosuchcol FROM adult", CodeBadField, "Unknown column 'nosuchcol' in 'field list'"},
		{"SELECT NoSuchCol FROM adult", CodeBadField, "Unknown column 'NoSuchCol' in 'field list'"},
		{"SELECT adult.nosuch FROM adult", CodeBadField, "Unknown column 'adult.nosuch' in 'field list'"},
		{"SELECT a.nosuch FROM demo.adult a", CodeBadField, "Unknown column 'a.nosuch' in 'field list'"},
		{"SELECT demo.adult.nosuch FROM demo.adult", CodeBadField, "Unknown column 'demo.adult.nosuch' in 'field list'"},
		{"SELECT age, nosuch FROM adult", CodeBadField, "Unknown column 'nosuch' in 'field list'"},
		{"SELECT nosuch FROM adult LIMIT 10", CodeBadField, "Unknown column 'nosuch' in 'field list'"},
		{"SELECT nosuch FROM adult LIMIT 0", CodeBadField, "Unknown column 'nosuch' in 'field list'"},
		{"SELECT nosuch FROM adult WHERE 1 <> 1", CodeBadField, "Unknown column 'nosuch' in 'field list'"},
		{"SELECT COUNT(*), nosuch FROM adult", CodeBadField, "Unknown column 'nosuch' in 'field list'"},
		{"SELECT MIN(nosuch) FROM adult", CodeBadField, "Unknown column 'nosuch' in 'field list'"},
		{"SELECT COUNT(DISTINCT nosuch) FROM adult", CodeBadField, "Unknown column 'nosuch' in 'field list'"},
		{"SELECT nosuch + 1 FROM adult GROUP BY sex", CodeBadField, "Unknown column 'nosuch' in 'field list'"},
		{"SELECT DISTINCT nosuch FROM adult", CodeBadField, "Unknown column 'nosuch' in 'field list'"},
		{"SELECT nosuch FROM adult INTO @x", CodeBadField, "Unknown column 'nosuch' in 'field list'"},
		{"SELECT COUNT(*) AS n, n + 1 FROM adult", CodeBadField, "Unknown column 'n' in 'field list'"},
		{"EXPLAIN SELECT nosuch FROM adult", CodeBadField, "Unknown column 'nosuch' in 'field list'"},
		{"(SELECT nosuch FROM adult)", CodeBadField, "Unknown column 'nosuch' in 'field list'"},
		// WHERE, whatever the predicate's form.
		{"SELECT * FROM adult WHERE nosuch = 1", CodeBadField, "Unknown column 'nosuch' in 'where clause'"},
		{"SELECT age FROM adult WHERE nosuch = 1", CodeBadField, "Unknown column 'nosuch' in 'where clause'"},
		{"SELECT COUNT(*) FROM adult WHERE nosuch LIKE 'a%'", CodeBadField, "Unknown column 'nosuch' in 'where clause'"},
		{"SELECT COUNT(*) FROM adult WHERE LOWER(nosuch) = 'a'", CodeBadField, "Unknown column 'nosuch' in 'where clause'"},
		{"SELECT age AS a, COUNT(*) FROM adult WHERE a > 3 GROUP BY age", CodeBadField, "Unknown column 'a' in 'where clause'"},
		{"SELECT sex FROM adult WHERE nosuch = 1 GROUP BY sex", CodeBadField, "Unknown column 'nosuch' in 'where clause'"},
		// GROUP BY.
		{"SELECT age FROM adult GROUP BY nosuch", CodeBadField, "Unknown column 'nosuch' in 'group statement'"},
		{"SELECT sex, COUNT(*) FROM adult WHERE 1 <> 1 GROUP BY nosuch", CodeBadField, "Unknown column 'nosuch' in 'group statement'"},
		{"SELECT sex, COUNT(*) FROM adult GROUP BY nosuch DIV 10", CodeBadField, "Unknown column 'nosuch' in 'group statement'"},
		// HAVING.
		{"SELECT sex, COUNT(*) FROM adult GROUP BY sex HAVING nosuch > 1", CodeBadField, "Unknown column 'nosuch' in 'having clause'"},
		{"SELECT sex FROM adult GROUP BY sex HAVING nosuch > 1", CodeBadField, "Unknown column 'nosuch' in 'having clause'"},
		{"SELECT sex, COUNT(*) FROM adult GROUP BY sex HAVING MAX(nosuch) > 1", CodeBadField, "Unknown column 'nosuch' in 'having clause'"},
		// ORDER BY.
		{"SELECT sex FROM adult GROUP BY sex ORDER BY nosuch", CodeBadField, "Unknown column 'nosuch' in 'order clause'"},
		{"SELECT age FROM adult ORDER BY nosuch", CodeBadField, "Unknown column 'nosuch' in 'order clause'"},
		{"SELECT sex, COUNT(*) FROM adult GROUP BY sex ORDER BY LENGTH(nosuch)", CodeBadField, "Unknown column 'nosuch' in 'order clause'"},
		{"SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex ORDER BY adult.n", CodeBadField, "Unknown column 'adult.n' in 'order clause'"},
		// MySQL's order between clauses.
		{"SELECT nosuch1 FROM adult WHERE nosuch2 = 1 GROUP BY nosuch3 HAVING nosuch4 > 1 ORDER BY nosuch5", CodeBadField, "Unknown column 'nosuch1' in 'field list'"},
		{"SELECT * FROM adult WHERE nosuch2 = 1 GROUP BY nosuch3 HAVING nosuch4 > 1 ORDER BY nosuch5", CodeBadField, "Unknown column 'nosuch2' in 'where clause'"},
		{"SELECT age FROM adult GROUP BY nosuch3 HAVING nosuch4 > 1 ORDER BY nosuch5", CodeBadField, "Unknown column 'nosuch3' in 'group statement'"},
		{"SELECT age FROM adult GROUP BY age HAVING nosuch4 > 1 ORDER BY nosuch5", CodeBadField, "Unknown column 'nosuch4' in 'having clause'"},
		{"SELECT x.age FROM adult WHERE y.age = 1", CodeBadField, "Unknown column 'x.age' in 'field list'"},
		{"SELECT sex, COUNT(*) FROM adult WHERE nosuch = 1 GROUP BY 3", CodeBadField, "Unknown column 'nosuch' in 'where clause'"},
		{"SELECT sex, COUNT(*) FROM adult GROUP BY 3 ORDER BY nosuch", CodeBadField, "Unknown column '3' in 'group statement'"},
		// Known columns keep their refusals.
		{"SELECT age FROM adult", CodeDPRefused, rowsRefusal},
		{"SELECT * FROM adult", CodeDPRefused, "SELECT * is refused"},
		{"SELECT Adult.AGE FROM adult", CodeDPRefused, rowsRefusal},
		{"SELECT age FROM adult WHERE sex = 'Male' ORDER BY age", CodeDPRefused, rowsRefusal},
		{"SELECT MIN(age) FROM adult", CodeDPRefused, "MIN is refused"},
		{"SELECT COUNT(*), age FROM adult", CodeDPRefused, "must appear in GROUP BY"},
		{"SELECT COUNT(*) FROM adult WHERE sex LIKE 'M%'", 0, ""},
		{"SELECT sex FROM adult GROUP BY sex ORDER BY race", CodeNotSupported, "a domain list is ordered by its selected columns"},
		// Select-list items are names for GROUP BY, HAVING and ORDER BY.
		{"SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex HAVING n > 10 ORDER BY n DESC", 0, ""},
		{"SELECT sex, COUNT(*) FROM adult GROUP BY sex HAVING `COUNT(*)` > 10 ORDER BY `COUNT(*)`", 0, ""},
		{"SELECT sex AS s, COUNT(*) FROM adult GROUP BY s ORDER BY s", 0, ""},
		{"SELECT adult.sex, count(*) AS count FROM adult GROUP BY adult.sex ORDER BY count DESC LIMIT 10000", 0, ""},
		{"SELECT `t`.`sex` AS `sex` FROM `demo`.`adult` `t` GROUP BY `t`.`sex` ORDER BY `t`.`sex` ASC LIMIT 1000", 0, ""},
		{"SELECT TRUE AS `_` FROM `adult` WHERE 1 <> 1 LIMIT 0", 0, ""},
		{"SELECT COUNT(*) FROM adult WHERE Age BETWEEN 30 AND 40 AND SEX = 'Male'", 0, ""},
		{"SELECT COUNT(*) FROM adult WHERE age > @x", CodeNotSupported, "variables (@x)"},
	}
	for _, c := range cases {
		t.Run(c.sql, func(t *testing.T) {
			sts, err := ParseWithColumns(c.sql, protectedAdult, adultColumns)
			if c.code == 0 {
				if err != nil {
					t.Fatalf("ParseWithColumns(%q): %v", c.sql, err)
				}
				return
			}
			e, ok := err.(*Error)
			if !ok {
				t.Fatalf("ParseWithColumns(%q) = %s, %v; want error %d", c.sql, dump(sts), err, c.code)
			}
			if e.Code != c.code || e.SQLState != sqlStateFor(c.code) {
				t.Errorf("code %d/%s, want %d/%s (%s)", e.Code, e.SQLState, c.code, sqlStateFor(c.code), e.Message)
			}
			if c.code == CodeBadField && e.Message != c.msg || !strings.Contains(e.Message, c.msg) {
				t.Errorf("message %q, want %q", e.Message, c.msg)
			}
		})
	}
	// Without Columns only qualifiers are checked: Parse leaves existence
	// to compile/.
	if sts, err := Parse("SELECT nosuch, COUNT(*) FROM adult GROUP BY nosuch", protectedAdult); err != nil || sts[0].Kind != KindAggregate {
		t.Errorf("Parse without Columns: %v %s", err, dump(sts))
	}
	if _, err := Parse("SELECT nosuch FROM adult WHERE x.age = 1", protectedAdult); err == nil || err.(*Error).Code != CodeBadField {
		t.Errorf("Parse without Columns, bad qualifier: %v", err)
	}
}

// withColumns parses with the adult table's columns known, as the engine
// does, so that names resolve as MySQL resolves them.
func withColumns(t *testing.T, sql string) *Query {
	t.Helper()
	cols := map[string]bool{"age": true, "sex": true, "race": true, "education": true, "hours_per_week": true, "income": true}
	sts, err := ParseWithColumns(sql, protectedAdult, func(_, c string) bool { return cols[c] })
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return sts[0].Query
}

func TestParseExpressions(t *testing.T) {
	dec := Arith{Op: "*", Left: Call{Name: "floor", Args: []Expr{Arith{Op: "/", Left: Col{Name: "age"}, Right: Value{Lit: lit("10")}}}}, Right: Value{Lit: lit("10")}}
	t.Run("binning by alias", func(t *testing.T) {
		q := withColumns(t, "SELECT FLOOR(age / 10) * 10 AS decade, COUNT(*) FROM adult GROUP BY decade ORDER BY decade")
		if !reflect.DeepEqual(q.GroupExprs, []GroupExpr{{Pos: 0, Expr: dec}}) || !reflect.DeepEqual(q.Select[0].Key, dec) || q.OrderBy[0].SelectIndex != 0 {
			t.Fatalf("%+v", q)
		}
	})
	t.Run("binning by position and written out", func(t *testing.T) {
		a := withColumns(t, "SELECT FLOOR(age / 10) * 10, COUNT(*) FROM adult GROUP BY 1")
		b := withColumns(t, "SELECT FLOOR(age / 10) * 10, COUNT(*) FROM adult GROUP BY FLOOR(age / 10) * 10")
		if !reflect.DeepEqual(a.GroupExprs, b.GroupExprs) || len(a.GroupBy) != 0 {
			t.Fatalf("%+v\n%+v", a, b)
		}
	})
	t.Run("an alias that shadows a column groups by the column", func(t *testing.T) {
		// MySQL resolves GROUP BY and HAVING names against the table first
		// (warning 1052), ORDER BY names against the select list first.
		q := withColumns(t, "SELECT education AS sex, COUNT(*) FROM adult GROUP BY sex, education ORDER BY sex")
		if !reflect.DeepEqual(q.GroupBy, []string{"sex", "education"}) || q.Select[0].Column != "education" || q.OrderBy[0].SelectIndex != 0 {
			t.Fatalf("%+v", q)
		}
	})
	t.Run("aggregates of expressions", func(t *testing.T) {
		q := withColumns(t, "SELECT SUM(1), SUM(CASE WHEN income = '>50K' THEN 1 ELSE 0 END), COUNT(CASE WHEN age > 40 THEN 1 END), AVG(age * 2) FROM adult")
		caseSum := Case{Whens: []When{{Cond: Compare{Column: "income", Op: OpEq, Value: qlit(">50K")}, Then: Value{Lit: lit("1")}}}, Else: Value{Lit: lit("0")}}
		if q.Select[0].Agg != AggSum || !reflect.DeepEqual(q.Select[0].Arg, Value{Lit: lit("1")}) ||
			!reflect.DeepEqual(q.Select[1].Arg, caseSum) || q.Select[2].Agg != AggCountCol || q.Select[3].Agg != AggAvg {
			t.Fatalf("%+v", q.Select)
		}
	})
	t.Run("variance family", func(t *testing.T) {
		q := withColumns(t, "SELECT VARIANCE(age), VAR_SAMP(age), STD(age), STDDEV(age), STDDEV_POP(age), STDDEV_SAMP(age), VAR_POP(age) FROM adult")
		want := []AggFunc{AggVarPop, AggVarSamp, AggStdPop, AggStdPop, AggStdPop, AggStdSamp, AggVarPop}
		for i, it := range q.Select {
			if it.Agg != want[i] || it.Column != "age" {
				t.Fatalf("%d: %+v", i, it)
			}
		}
	})
	t.Run("functions of aggregates and constants", func(t *testing.T) {
		q := withColumns(t, "SELECT POWER(AVG(age), 2), SQRT(VARIANCE(age)), ROUND(AVG(age), 1), 3 AS three, 'x' AS label FROM adult")
		if q.Select[0].Expr.Func != "power" || q.Select[1].Expr.Func != "sqrt" || q.Select[2].Expr.Func != "round" ||
			q.Select[3].Expr.Number != 3 || !q.Select[4].Expr.IsStr {
			t.Fatalf("%+v", q.Select)
		}
	})
	t.Run("having on keys and aggregates", func(t *testing.T) {
		q := withColumns(t, "SELECT sex, age DIV 10 AS d, COUNT(*) AS n FROM adult GROUP BY sex, d HAVING sex = 'Male' AND d >= 3 AND n > 10")
		want := And{Terms: []Pred{
			Compare{Column: "sex", Op: OpEq, Value: qlit("Male")},
			ExprCompare{Left: Arith{Op: "div", Left: Col{Name: "age"}, Right: Value{Lit: lit("10")}}, Op: OpGe, Right: Value{Lit: lit("3")}},
			AggCompare{Item: SelectItem{Agg: AggCount, Alias: "n"}, Op: OpGt, Value: 10},
		}}
		if !reflect.DeepEqual(q.Having, want) {
			t.Fatalf("having %+v", q.Having)
		}
	})
	t.Run("predicates over the domain", func(t *testing.T) {
		q := withColumns(t, "SELECT COUNT(*) FROM adult WHERE education LIKE 'B%' AND LOWER(sex) IN ('male', 'female') AND age + 1 > hours_per_week")
		and := q.Where.(And)
		if _, ok := and.Terms[0].(Like); !ok {
			t.Fatalf("%+v", and.Terms[0])
		}
		if _, ok := and.Terms[1].(ExprIn); !ok {
			t.Fatalf("%+v", and.Terms[1])
		}
		if _, ok := and.Terms[2].(ExprCompare); !ok {
			t.Fatalf("%+v", and.Terms[2])
		}
	})
	t.Run("LIKE keeps MySQL's escapes", func(t *testing.T) {
		q := withColumns(t, `SELECT COUNT(*) FROM adult WHERE education LIKE 'HS\_grad'`)
		if p := q.Where.(Like).Pattern.(Value).Lit.Text; p != `HS\_grad` {
			t.Fatalf("pattern %q", p)
		}
	})
	t.Run("domain list of an expression", func(t *testing.T) {
		sts, err := Parse("SELECT age DIV 10 AS d FROM adult GROUP BY d", protectedAdult)
		if err != nil || sts[0].Kind != KindDomainList || len(sts[0].Query.GroupExprs) != 1 {
			t.Fatalf("%s %v", dump(sts), err)
		}
	})
}
