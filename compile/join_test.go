package compile

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/parser"
)

// joinPublic are the public tables of the join tests, over exprTable's
// columns: dims is keyed by edu (a key in another case, one matching no
// declared value, a NULL key); fields by dims' field (a snowflake); sexes
// by sex; decades by age; dup and dupci have keys that are not unique
// (exactly, and under the collation), while dupfar repeats only a key that
// matches no cell.
func joinPublic() map[string]*parser.PublicTable {
	s := func(v string) parser.Value { return parser.Value{Lit: parser.Literal{Text: v, Quoted: true}} }
	n := func(v string) parser.Value { return parser.Value{Lit: parser.Literal{Text: v}} }
	null := parser.Value{Null: true}
	return map[string]*parser.PublicTable{
		"dims": {Name: "dims", Columns: []string{"edu", "field", "years"}, Text: []bool{true, true, false}, Rows: [][]parser.Value{
			{s("Bachelors"), s("arts"), n("16")},
			{s("MASTERS"), s("science"), n("18")},
			{s("doctorate"), s("science"), n("21")},
			{s("Nursery"), s("none"), n("2")},
			{null, s("unknown"), n("0")},
		}},
		"fields": {Name: "fields", Columns: []string{"name", "faculty"}, Text: []bool{true, true}, Rows: [][]parser.Value{
			{s("arts"), s("Humanities")}, {s("science"), s("STEM")},
		}},
		"sexes": {Name: "sexes", Columns: []string{"s", "label"}, Text: []bool{true, true}, Rows: [][]parser.Value{
			{s("male"), s("M")}, {s("Female"), s("F")},
		}},
		"decades": {Name: "decades", Columns: []string{"age", "decade"}, Text: []bool{false, true}, Rows: [][]parser.Value{
			{n("18"), s("teens")}, {n("19"), s("teens")}, {n("20"), s("twenties")}, {n("21"), s("twenties")},
		}},
		"hrs":    {Name: "hrs", Columns: []string{"h"}, Text: []bool{false}, Rows: [][]parser.Value{{n("5")}}},
		"dup":    {Name: "dup", Columns: []string{"edu", "x"}, Text: []bool{true, true}, Rows: [][]parser.Value{{s("Bachelors"), s("a")}, {s("Bachelors"), s("b")}}},
		"dupci":  {Name: "dupci", Columns: []string{"edu", "x"}, Text: []bool{true, true}, Rows: [][]parser.Value{{s("Masters"), s("a")}, {s("masters"), s("b")}}},
		"dupfar": {Name: "dupfar", Columns: []string{"edu", "x"}, Text: []bool{true, true}, Rows: [][]parser.Value{{s("Masters"), s("a")}, {s("Nursery"), s("b")}, {s("Nursery"), s("c")}}},
	}
}

func joinEnv() parser.Env {
	pub := joinPublic()
	tb := exprTable()
	return parser.Env{
		Protected: func(_, table string) bool { return table == "t" || table == "u" },
		Columns:   func(table, column string) bool { return tb.Column(column) != nil },
		Private:   func(table, column string) bool { return column == "user_id" },
		Public:    func(_, table string) *parser.PublicTable { return pub[table] },
	}
}

// Brute force of the public tables, written independently of the
// evaluator: the dims row an edu value joins (case-insensitively), etc.
func dimsOf(edu any) (field string, years float64, ok bool) {
	e, isStr := edu.(string)
	if !isStr {
		return "", 0, false
	}
	switch strings.ToLower(e) {
	case "bachelors":
		return "arts", 16, true
	case "masters":
		return "science", 18, true
	case "doctorate":
		return "science", 21, true
	}
	return "", 0, false
}

func sexOf(sex any) (string, bool) {
	switch sex {
	case "Male":
		return "M", true
	case "Female":
		return "F", true
	}
	return "", false
}

func decadeOf(age any) (string, bool) {
	a, ok := age.(float64)
	switch {
	case ok && (a == 18 || a == 19):
		return "teens", true
	case ok && (a == 20 || a == 21):
		return "twenties", true
	}
	return "", false
}

// TestJoinsMatchBruteForce compiles joins with public tables and checks
// every cell of the domain against a brute-force evaluation of the join:
// the weight of each aggregate, and the group of each cell (or none, when
// an inner join or the WHERE excludes it).
func TestJoinsMatchBruteForce(t *testing.T) {
	type joinCase struct {
		sql string
		// weight: the aggregate's weight on a cell; group: the cell's group
		// label, "-" for none.
		weight func(cellRow) float64
		group  func(cellRow) string
	}
	one := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	cases := []joinCase{
		{sql: "SELECT COUNT(*) FROM t JOIN dims d ON t.edu = d.edu", weight: func(r cellRow) float64 {
			_, _, ok := dimsOf(r.edu)
			return one(ok)
		}},
		{sql: "SELECT COUNT(*) FROM dims d INNER JOIN t ON d.edu = t.edu", weight: func(r cellRow) float64 {
			_, _, ok := dimsOf(r.edu)
			return one(ok)
		}},
		{sql: "SELECT COUNT(*) FROM t LEFT JOIN dims d ON t.edu = d.edu", weight: func(r cellRow) float64 { return 1 }},
		{sql: "SELECT COUNT(*) FROM dims d RIGHT JOIN t ON t.edu = d.edu", weight: func(r cellRow) float64 { return 1 }},
		{sql: "SELECT COUNT(d.field) FROM t LEFT JOIN dims d USING (edu)", weight: func(r cellRow) float64 {
			_, _, ok := dimsOf(r.edu)
			return one(ok)
		}},
		{sql: "SELECT SUM(d.years) FROM t LEFT JOIN dims AS d ON t.edu = d.edu", weight: func(r cellRow) float64 {
			_, y, _ := dimsOf(r.edu)
			return y
		}},
		{sql: "SELECT SUM(CASE WHEN d.years > 17 THEN 1 ELSE 0 END) FROM t JOIN dims d ON t.edu = d.edu", weight: func(r cellRow) float64 {
			_, y, ok := dimsOf(r.edu)
			return one(ok && y > 17)
		}},
		{sql: "SELECT COUNT(*) FROM t JOIN dims d ON t.edu = d.edu WHERE d.field = 'science' AND age < 25", weight: func(r cellRow) float64 {
			f, _, _ := dimsOf(r.edu)
			return one(f == "science" && num(r.age, func(a float64) bool { return a < 25 }) == 1)
		}},
		{sql: "SELECT COUNT(*) FROM t LEFT JOIN dims d ON t.edu = d.edu WHERE d.field IS NULL", weight: func(r cellRow) float64 {
			_, _, ok := dimsOf(r.edu)
			return one(!ok)
		}},
		{sql: "SELECT COUNT(*) FROM t JOIN dims d ON t.edu = d.edu WHERE field LIKE 'S%'", weight: func(r cellRow) float64 {
			f, _, _ := dimsOf(r.edu)
			return one(f == "science")
		}},
		{sql: "SELECT d.field, COUNT(*) FROM t JOIN dims d ON t.edu = d.edu GROUP BY d.field", group: func(r cellRow) string {
			if f, _, ok := dimsOf(r.edu); ok {
				return f
			}
			return "-"
		}},
		{sql: "SELECT field, COUNT(*) FROM t LEFT JOIN dims d ON t.edu = d.edu GROUP BY 1", group: func(r cellRow) string {
			if f, _, ok := dimsOf(r.edu); ok {
				return f
			}
			return "<nil>"
		}},
		{sql: "SELECT f.faculty, COUNT(*) FROM t JOIN dims d ON t.edu = d.edu JOIN fields f ON d.field = f.name GROUP BY f.faculty", group: func(r cellRow) string {
			switch f, _, _ := dimsOf(r.edu); f {
			case "arts":
				return "Humanities"
			case "science":
				return "STEM"
			}
			return "-"
		}},
		{sql: "SELECT s.label, d.field, COUNT(*) FROM t JOIN dims d ON t.edu = d.edu LEFT JOIN sexes s ON t.sex = s.s GROUP BY s.label, d.field", group: func(r cellRow) string {
			f, _, ok := dimsOf(r.edu)
			if !ok {
				return "-"
			}
			if _, other := r.sex.(unknown); other {
				return "other/" + f
			}
			l, ok := sexOf(r.sex)
			if !ok {
				return "<nil>/" + f
			}
			return l + "/" + f
		}},
		{sql: "SELECT d.decade, COUNT(*) FROM t JOIN decades d ON t.age = d.age GROUP BY d.decade", group: func(r cellRow) string {
			if d, ok := decadeOf(r.age); ok {
				return d
			}
			return "-"
		}},
		{sql: "SELECT UPPER(d.decade) AS k, COUNT(*) FROM t LEFT JOIN decades d ON t.age = d.age GROUP BY k", group: func(r cellRow) string {
			if d, ok := decadeOf(r.age); ok {
				return strings.ToUpper(d)
			}
			return "<nil>"
		}},
		{sql: "SELECT COUNT(*) FROM t JOIN dupfar x ON t.edu = x.edu", weight: func(r cellRow) float64 { return one(r.edu == "Masters") }},
		{sql: "SELECT d.field AS f, COUNT(*) FROM t JOIN dims d ON t.edu = d.edu GROUP BY f HAVING f <> 'arts' ORDER BY f", group: func(r cellRow) string {
			if f, _, ok := dimsOf(r.edu); ok && f != "arts" {
				return f
			}
			return "-"
		}},
		{sql: "SELECT COUNT(*) FROM t JOIN dims d ON t.edu = d.edu JOIN decades a ON t.age = a.age WHERE a.decade = 'teens' OR d.years = 21", weight: func(r cellRow) float64 {
			_, y, ok1 := dimsOf(r.edu)
			dec, ok2 := decadeOf(r.age)
			return one(ok1 && ok2 && (dec == "teens" || y == 21))
		}},
	}
	env := joinEnv()
	for _, tc := range cases {
		t.Run(tc.sql, func(t *testing.T) {
			sts, err := parser.ParseEnv(tc.sql, env)
			if err != nil {
				t.Fatal(err)
			}
			w, err := Compile(exprTable(), []*parser.Statement{&sts[0]})
			if err != nil {
				t.Fatal(err)
			}
			q := w.Queries[0]
			sizes := w.Sizes()
			cell := make([]int, len(sizes))
			for i := 0; i < w.Cells(); i++ {
				r := rowOf(w, cell)
				if tc.weight != nil {
					if got, want := q.Aggregates[0].Eval(cell), tc.weight(r); math.Abs(got-want) > 1e-9 {
						t.Fatalf("cell %v (%+v): weight %v, brute force %v", cell, r, got, want)
					}
				} else {
					got := "-"
					for k := 0; k < q.RowCount(w); k++ {
						row := q.RowAt(k)
						if q.Aggregates[q.Agg(0, int(row.Expr))].Eval(cell) != 0 {
							if got != "-" {
								t.Fatalf("cell %v in two groups", cell)
							}
							var parts []string
							for j := 0; j < len(q.Items)-1; j++ {
								parts = append(parts, fmt.Sprint(q.Label(w, q.Items[j], k)))
							}
							got = strings.Join(parts, "/")
						}
					}
					if want := tc.group(r); got != want {
						t.Fatalf("cell %v (%+v): group %q, brute force %q", cell, r, got, want)
					}
				}
				for j := len(sizes) - 1; j >= 0; j-- {
					cell[j]++
					if cell[j] < sizes[j] {
						break
					}
					cell[j] = 0
				}
			}
		})
	}
}

// TestJoinRefusals: what a join to public tables may not do, each refused
// with a message that says what to write instead.
func TestJoinRefusals(t *testing.T) {
	env := joinEnv()
	for _, tc := range []struct {
		sql  string
		code int
		msg  string
	}{
		{"SELECT COUNT(*) FROM t JOIN dup x ON t.edu = x.edu", parser.CodeDPRefused, "the join key x.edu is not unique: rows 1 and 2 of the public table dup both match edu = 'Bachelors'"},
		{"SELECT COUNT(*) FROM t LEFT JOIN dupci x ON t.edu = x.edu", parser.CodeDPRefused, "rows 1 and 2 of the public table dupci both match edu = 'masters'"},
		{"SELECT COUNT(*) FROM t JOIN hrs h ON t.hours = h.h", parser.CodeDPRefused, "the join ON hours = h.h is not decidable on the declared domain: a bin of hours holds several values"},
		{"SELECT COUNT(*) FROM t JOIN u ON t.edu = u.edu", parser.CodeDPRefused, "declares no privacy unit: protected tables are joined only on their privacy unit"},
		{"SELECT COUNT(*) FROM t, dims d WHERE t.edu = d.edu", parser.CodeDPRefused, "a list of tables (FROM a, b) is written as a JOIN"},
		{"SELECT COUNT(*) FROM t JOIN dims d ON t.edu <> d.edu", parser.CodeDPRefused, "ON takes one equality"},
		{"SELECT COUNT(*) FROM t JOIN dims d ON t.edu = d.edu AND d.years > 3", parser.CodeDPRefused, "put other conditions in WHERE"},
		{"SELECT COUNT(*) FROM t JOIN dims d ON UPPER(t.edu) = d.edu", parser.CodeDPRefused, "ON takes one equality"},
		{"SELECT COUNT(*) FROM t JOIN dims d ON t.user_id = d.edu", parser.CodeDPRefused, "column 'user_id' of 't' is private"},
		{"SELECT COUNT(*) FROM t JOIN dims d ON d.field = d.edu", parser.CodeDPRefused, "does not join 'd' to the tables before it"},
		{"SELECT COUNT(*) FROM t CROSS JOIN dims d", parser.CodeDPRefused, "a join without a condition (CROSS JOIN)"},
		{"SELECT COUNT(*) FROM t RIGHT JOIN dims d ON t.edu = d.edu", parser.CodeDPRefused, "RIGHT JOIN dims keeps the rows of the public table"},
		{"SELECT COUNT(*) FROM dims d LEFT JOIN t ON t.edu = d.edu", parser.CodeDPRefused, "join from the protected table"},
		{"SELECT COUNT(*) FROM t NATURAL JOIN dims d", parser.CodeDPRefused, "NATURAL JOIN is not supported"},
		{"SELECT COUNT(*) FROM t JOIN nosuch n ON t.edu = n.edu", parser.CodeDPRefused, "table 'nosuch' is not a public table"},
		{"SELECT COUNT(*) FROM t JOIN dims d ON t.edu = d.nosuch", parser.CodeBadField, "Unknown column 'd.nosuch' in 'on clause'"},
		{"SELECT d.nosuch, COUNT(*) FROM t JOIN dims d ON t.edu = d.edu GROUP BY 1", parser.CodeBadField, "Unknown column 'd.nosuch' in 'field list'"},
		{"SELECT COUNT(*) FROM t JOIN dims d ON t.edu = d.edu JOIN fields d ON d.field = d.name", parser.CodeNonUniqTable, "Not unique table/alias: 'd'"},
		{"SELECT COUNT(*) FROM t JOIN dims d ON t.edu = d.edu JOIN dupfar x ON x.edu = t.edu WHERE edu = 'x'", parser.CodeNonUniqField, "Column 'edu' in where clause is ambiguous"},
		{"SELECT d.field FROM t JOIN dims d ON t.edu = d.edu GROUP BY d.field", parser.CodeNotSupported, "SELECT DISTINCT d.region FROM countries d"},
		{"SELECT d.field, COUNT(*) FROM t JOIN dims d ON t.edu = d.edu", parser.CodeDPRefused, "must appear in GROUP BY"},
		{"SELECT * FROM t JOIN dims d ON t.edu = d.edu", parser.CodeDPRefused, "SELECT * is refused"},
		{"SELECT d.* FROM t JOIN dims d ON t.edu = d.edu", parser.CodeDPRefused, "SELECT * is refused"},
		{"SELECT user_id, COUNT(*) FROM t GROUP BY user_id", parser.CodeDPRefused, "column 'user_id' of 't' is private"},
		{"SELECT COUNT(*) FROM t WHERE t.user_id > 3", parser.CodeDPRefused, "column 'user_id' of 't' is private"},
	} {
		t.Run(tc.sql, func(t *testing.T) {
			sts, err := parser.ParseEnv(tc.sql, env)
			if err == nil {
				_, err = Compile(exprTable(), []*parser.Statement{&sts[0]})
			}
			if e, ok := err.(*parser.Error); !ok || e.Code != tc.code || !strings.Contains(e.Message, tc.msg) {
				t.Fatalf("got %v, want %d containing %q", err, tc.code, tc.msg)
			}
		})
	}
}

// BenchmarkJoinLargePublic compiles a join of a 10,000-value categorical
// column to a public table of 10,000 rows (the largest allowed): with the
// key index it costs a lookup per cell, not a comparison per cell and row.
//
//	go test ./compile -run '^$' -bench JoinLargePublic
func BenchmarkJoinLargePublic(b *testing.B) {
	const n = 10_000
	vals := make([]string, n)
	pt := &parser.PublicTable{Name: "dims", Columns: []string{"k", "g"}, Text: []bool{true, true}}
	for i := range vals {
		vals[i] = fmt.Sprintf("v%05d", i)
		pt.Rows = append(pt.Rows, []parser.Value{{Lit: parser.Literal{Text: strings.ToUpper(vals[i]), Quoted: true}}, {Lit: parser.Literal{Text: fmt.Sprint(i % 7), Quoted: true}}})
	}
	tb := &catalog.Table{Name: "t", Columns: []*catalog.Column{{Name: "c", Kind: catalog.Categorical, Values: vals, Null: catalog.PolicyDrop, OutOfDomain: catalog.PolicyDrop}}}
	env := parser.Env{Protected: func(_, t string) bool { return t == "t" }, Columns: func(_, c string) bool { return c == "c" },
		Public: func(_, t string) *parser.PublicTable { return pt }}
	sts, err := parser.ParseEnv("SELECT d.g, COUNT(*) FROM t JOIN dims d ON t.c = d.k GROUP BY d.g", env)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		w, err := Compile(tb, []*parser.Statement{&sts[0]})
		if err != nil {
			b.Fatal(err)
		}
		if got := w.Queries[0].RowCount(w); got != 7 {
			b.Fatalf("%d groups", got)
		}
	}
}
