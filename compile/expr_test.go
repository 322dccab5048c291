package compile

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/parser"
)

// exprTable has every kind of column and policy the evaluator meets: an
// integer column with a NULL cell, a categorical one with an other cell
// and an accented value, integer bins of width 10, real bins with NULL and
// other cells, and a categorical one with a NULL cell.
func exprTable() *catalog.Table {
	return &catalog.Table{Name: "t", Columns: []*catalog.Column{
		{Name: "age", Kind: catalog.IntegerRange, Min: 17, Max: 30, Width: 1, Null: catalog.PolicyCell, OutOfDomain: catalog.PolicyClamp},
		{Name: "sex", Kind: catalog.Categorical, Values: []string{"Female", "Male", "Élan"}, Null: catalog.PolicyDrop, OutOfDomain: catalog.PolicyOther},
		{Name: "hours", Kind: catalog.IntegerRange, Min: 0, Max: 49, Width: 10, Null: catalog.PolicyDrop, OutOfDomain: catalog.PolicyClamp},
		{Name: "pay", Kind: catalog.Binned, Edges: []float64{0, 10, 20, 50}, Null: catalog.PolicyCell, OutOfDomain: catalog.PolicyOther},
		{Name: "edu", Kind: catalog.Categorical, Values: []string{"Bachelors", "HS-grad", "Masters", "Some-college", "Doctorate"}, Null: catalog.PolicyCell, OutOfDomain: catalog.PolicyDrop},
	}}
}

// unknown is the brute force's value for the other cell.
type unknown struct{}

// cellRow is what one cell tuple stands for, written independently of the
// evaluator: a value (nil for NULL, unknown{} for the other cell) per
// column; hours is its bin's lower edge and hoursMid its midpoint.
type cellRow struct {
	age, sex, pay, edu any
	hours, hoursMid    float64
}

func rowOf(w *Workload, cell []int) cellRow {
	r := cellRow{hours: math.NaN()}
	for j, c := range w.Columns {
		ce := c.Cells()[cell[j]]
		var v any
		switch ce.Kind {
		case catalog.CellValue:
			v = ce.Value
		case catalog.CellBin:
			v = ce.Lo
		case catalog.CellOther:
			v = unknown{}
		}
		switch c.Name {
		case "age":
			r.age = v
		case "sex":
			r.sex = v
		case "hours":
			r.hours, r.hoursMid = ce.Lo, (ce.Lo+ce.Hi-1)/2
		case "pay":
			r.pay = v
		case "edu":
			r.edu = v
		}
	}
	return r
}

// Brute-force SQL helpers: 1 true, 0 false, -1 unknown.
func b3(b bool) int {
	if b {
		return 1
	}
	return 0
}

func not3(x int) int {
	if x < 0 {
		return x
	}
	return 1 - x
}

func and3(xs ...int) int {
	r := 1
	for _, x := range xs {
		if x == 0 {
			return 0
		}
		if x < 0 {
			r = -1
		}
	}
	return r
}

func or3(xs ...int) int {
	r := 0
	for _, x := range xs {
		if x == 1 {
			return 1
		}
		if x < 0 {
			r = -1
		}
	}
	return r
}

// num compares a value with a number: unknown for NULL and the other cell.
func num(v any, f func(float64) bool) int {
	switch v := v.(type) {
	case float64:
		return b3(f(v))
	}
	return -1
}

// foldText is case- and accent-insensitive text, written independently.
func foldText(s string) string {
	r := strings.NewReplacer("É", "e", "é", "e")
	return strings.ToLower(r.Replace(s))
}

// str tests a categorical value: unknown for NULL and the other cell
// (values outside the declared ones, whatever the literal). The last
// argument is kept for the cases' readability.
func str(v any, f func(string) bool, _ bool) int {
	if v, ok := v.(string); ok {
		return b3(f(v))
	}
	return -1
}

type exprCase struct {
	pred string            // WHERE condition, or
	agg  string            // aggregate (SUM(...), COUNT(...)), or
	key  string            // GROUP BY expression
	want func(cellRow) any // predicate: int; aggregate: weight float64; key: label (nil NULL)
	msg  string            // a refusal containing this
}

func TestExpressionsMatchBruteForce(t *testing.T) {
	cases := []exprCase{
		// Comparisons of expressions of columns.
		{pred: "age + 1 > 20", want: func(r cellRow) any { return num(r.age, func(a float64) bool { return a+1 > 20 }) }},
		{pred: "age - 17 < 5", want: func(r cellRow) any { return num(r.age, func(a float64) bool { return a-17 < 5 }) }},
		{pred: "age * 2 >= 50", want: func(r cellRow) any { return num(r.age, func(a float64) bool { return a*2 >= 50 }) }},
		{pred: "age % 2 = 0", want: func(r cellRow) any { return num(r.age, func(a float64) bool { return math.Mod(a, 2) == 0 }) }},
		{pred: "MOD(age, 3) = 1", want: func(r cellRow) any { return num(r.age, func(a float64) bool { return math.Mod(a, 3) == 1 }) }},
		{pred: "age DIV 5 = 4", want: func(r cellRow) any { return num(r.age, func(a float64) bool { return math.Trunc(a/5) == 4 }) }},
		{pred: "FLOOR(age / 10) * 10 = 20", want: func(r cellRow) any { return num(r.age, func(a float64) bool { return math.Floor(a/10)*10 == 20 }) }},
		{pred: "ROUND(age / 10) = 2", want: func(r cellRow) any { return num(r.age, func(a float64) bool { return math.Round(a/10) == 2 }) }},
		{pred: "TRUNCATE(age / 10, 0) = 1", want: func(r cellRow) any { return num(r.age, func(a float64) bool { return math.Trunc(a/10) == 1 }) }},
		{pred: "CEIL(age / 10) = 3", want: func(r cellRow) any { return num(r.age, func(a float64) bool { return math.Ceil(a/10) == 3 }) }},
		{pred: "ABS(age - 20) <= 2", want: func(r cellRow) any { return num(r.age, func(a float64) bool { return math.Abs(a-20) <= 2 }) }},
		{pred: "GREATEST(age, 25) = 25", want: func(r cellRow) any { return num(r.age, func(a float64) bool { return math.Max(a, 25) == 25 }) }},
		{pred: "age IN (18, 20 + 1)", want: func(r cellRow) any { return num(r.age, func(a float64) bool { return a == 18 || a == 21 }) }},
		{pred: "age NOT IN (18, NULL)", want: func(r cellRow) any {
			return not3(or3(num(r.age, func(a float64) bool { return a == 18 }), -1))
		}},
		{pred: "COALESCE(age, 0) > 25", want: func(r cellRow) any {
			if r.age == nil {
				return 0
			}
			return num(r.age, func(a float64) bool { return a > 25 })
		}},
		{pred: "NULLIF(age, 20) IS NULL", want: func(r cellRow) any { return b3(r.age == nil || r.age == 20.0) }},
		{pred: "age <=> NULL", want: func(r cellRow) any { return b3(r.age == nil) }},
		{pred: "age = NULL", want: func(r cellRow) any { return -1 }},
		{pred: "age IS TRUE", want: func(r cellRow) any { return b3(r.age != nil && r.age != 0.0) }},
		{pred: "NOT age", want: func(r cellRow) any { return not3(num(r.age, func(a float64) bool { return a != 0 })) }},
		{pred: "age BETWEEN 20 AND 25 XOR sex = 'Male'", want: func(r cellRow) any {
			a := num(r.age, func(a float64) bool { return a >= 20 && a <= 25 })
			s := str(r.sex, func(s string) bool { return s == "Male" }, true)
			return or3(and3(a, not3(s)), and3(not3(a), s))
		}},
		// Empty by construction.
		{pred: "age > 100", want: func(r cellRow) any { return num(r.age, func(a float64) bool { return false }) }},
		{pred: "age = 20.5", want: func(r cellRow) any { return num(r.age, func(a float64) bool { return false }) }},
		{pred: "age BETWEEN 25 AND 20", want: func(r cellRow) any { return num(r.age, func(a float64) bool { return false }) }},
		{pred: "pay BETWEEN 91 AND 0", want: func(r cellRow) any { return num(r.pay, func(float64) bool { return false }) }},
		{pred: "pay IN (5, 30) OR hours >= 0", want: func(r cellRow) any { return 1 }},
		{pred: "sex = 'Unknown'", want: func(r cellRow) any { return str(r.sex, func(string) bool { return false }, false) }},
		// Bins: decided where every value of the bin agrees.
		{pred: "hours >= 20", want: func(r cellRow) any { return b3(r.hours >= 20) }},
		{pred: "FLOOR(hours / 10) = 2", want: func(r cellRow) any { return b3(math.Floor(r.hours/10) == 2) }},
		{pred: "hours DIV 10 = 1", want: func(r cellRow) any { return b3(math.Trunc(r.hours/10) == 1) }},
		{pred: "hours + age > 10", want: func(r cellRow) any { return num(r.age, func(float64) bool { return r.hours+1 > 0 }) }},
		{pred: "pay >= 20 OR pay IS NULL", want: func(r cellRow) any {
			if r.pay == nil {
				return 1
			}
			return num(r.pay, func(p float64) bool { return p >= 20 })
		}},
		{pred: "IFNULL(pay, 5) < 10", want: func(r cellRow) any {
			if r.pay == nil {
				return 1
			}
			return num(r.pay, func(p float64) bool { return p < 10 })
		}},
		// Text: MySQL's utf8mb4_0900_ai_ci (case- and accent-insensitive).
		{pred: "edu LIKE 'B%'", want: func(r cellRow) any {
			return str(r.edu, func(s string) bool { return strings.HasPrefix(foldText(s), "b") }, false)
		}},
		{pred: "edu LIKE '%s'", want: func(r cellRow) any {
			return str(r.edu, func(s string) bool { return strings.HasSuffix(foldText(s), "s") }, false)
		}},
		{pred: "edu NOT LIKE '_a%'", want: func(r cellRow) any {
			return not3(str(r.edu, func(s string) bool { return len(s) > 1 && foldText(s)[1] == 'a' }, false))
		}},
		{pred: "edu LIKE 'hs\\_grad'", want: func(r cellRow) any { return str(r.edu, func(s string) bool { return false }, false) }},
		{pred: "edu LIKE 'hs_grad'", want: func(r cellRow) any { return str(r.edu, func(s string) bool { return s == "HS-grad" }, false) }},
		{pred: "sex LIKE 'e%'", want: func(r cellRow) any {
			return str(r.sex, func(s string) bool { return strings.HasPrefix(foldText(s), "e") }, false)
		}},
		{pred: "sex = 'elan'", want: func(r cellRow) any { return str(r.sex, func(s string) bool { return s == "Élan" }, true) }},
		{pred: "edu REGEXP '^[bm]'", want: func(r cellRow) any {
			return str(r.edu, func(s string) bool { return regexp.MustCompile(`(?i)^[bm]`).MatchString(s) }, false)
		}},
		{pred: "edu RLIKE 'college$'", want: func(r cellRow) any {
			return str(r.edu, func(s string) bool { return strings.HasSuffix(s, "college") }, false)
		}},
		{pred: "LOWER(sex) = 'male'", want: func(r cellRow) any { return str(r.sex, func(s string) bool { return s == "Male" }, false) }},
		{pred: "UPPER(edu) = 'MASTERS'", want: func(r cellRow) any { return str(r.edu, func(s string) bool { return s == "Masters" }, false) }},
		{pred: "LENGTH(edu) > 7", want: func(r cellRow) any { return str(r.edu, func(s string) bool { return len(s) > 7 }, false) }},
		{pred: "CHAR_LENGTH(sex) = 4", want: func(r cellRow) any {
			return str(r.sex, func(s string) bool { return len([]rune(s)) == 4 }, false)
		}},
		{pred: "CONCAT(sex, '-', edu) = 'Male-Masters'", want: func(r cellRow) any {
			if r.edu == nil {
				return -1
			}
			return and3(str(r.sex, func(s string) bool { return s == "Male" }, false), str(r.edu, func(s string) bool { return s == "Masters" }, false))
		}},
		{pred: "LEFT(edu, 1) = 'M'", want: func(r cellRow) any { return str(r.edu, func(s string) bool { return s[0] == 'M' }, false) }},
		{pred: "SUBSTRING(edu, 2, 3) = 'ach'", want: func(r cellRow) any { return str(r.edu, func(s string) bool { return s == "Bachelors" }, false) }},
		{pred: "REPLACE(edu, '-', '') = 'HSgrad'", want: func(r cellRow) any { return str(r.edu, func(s string) bool { return s == "HS-grad" }, false) }},
		{pred: "TRIM(CONCAT(' ', sex)) = 'Male'", want: func(r cellRow) any { return str(r.sex, func(s string) bool { return s == "Male" }, false) }},
		{pred: "sex < 'M'", want: func(r cellRow) any {
			return str(r.sex, func(s string) bool { return foldText(s) < "m" }, false)
		}},
		{pred: "edu IN (LOWER('MASTERS'), CONCAT('Doc', 'torate'))", want: func(r cellRow) any {
			return str(r.edu, func(s string) bool { return s == "Masters" || s == "Doctorate" }, true)
		}},
		{pred: "sex <> 'Male'", want: func(r cellRow) any { return not3(str(r.sex, func(s string) bool { return s == "Male" }, true)) }},
		{pred: "CASE WHEN age < 20 THEN 'a' ELSE 'b' END = 'a'", want: func(r cellRow) any {
			return b3(num(r.age, func(a float64) bool { return a < 20 }) == 1)
		}},
		{pred: "IF(sex = 'Male', 1, 0) = 1", want: func(r cellRow) any {
			return b3(str(r.sex, func(s string) bool { return s == "Male" }, true) == 1)
		}},
		{pred: "CASE sex WHEN 'Male' THEN 1 WHEN 'Female' THEN 2 END = 2", want: func(r cellRow) any {
			switch r.sex {
			case "Male":
				return 0
			case "Female":
				return 1
			}
			return -1 // no branch: NULL
		}},
		// Aggregates of expressions: weights per cell.
		{agg: "SUM(1)", want: func(r cellRow) any { return 1.0 }},
		{agg: "SUM(age * 2)", want: func(r cellRow) any {
			if a, ok := r.age.(float64); ok {
				return 2 * a
			}
			return 0.0
		}},
		{agg: "SUM(CASE WHEN sex = 'Male' THEN 1 ELSE 0 END)", want: func(r cellRow) any {
			return float64(b3(r.sex == "Male"))
		}},
		{agg: "COUNT(CASE WHEN age > 25 THEN 1 END)", want: func(r cellRow) any {
			return float64(b3(num(r.age, func(a float64) bool { return a > 25 }) == 1))
		}},
		{agg: "COUNT(NULLIF(sex, 'Male'))", want: func(r cellRow) any { return float64(b3(r.sex != "Male")) }},
		{agg: "SUM(hours)", want: func(r cellRow) any { return r.hoursMid }},
		{agg: "SUM(hours / 10)", want: func(r cellRow) any { return r.hoursMid / 10 }},
		{agg: "SUM(IF(edu LIKE 'B%', 2, -1))", want: func(r cellRow) any {
			if str(r.edu, func(s string) bool { return s[0] == 'B' }, false) == 1 {
				return 2.0
			}
			return -1.0
		}},
		{agg: "SUM(age > 25)", want: func(r cellRow) any {
			return float64(b3(num(r.age, func(a float64) bool { return a > 25 }) == 1))
		}},
		{agg: "COUNT(age > 25)", want: func(r cellRow) any { return float64(b3(r.age != nil)) }},
		{agg: "SUM(COALESCE(age, 0) - 17)", want: func(r cellRow) any {
			if a, ok := r.age.(float64); ok {
				return a - 17
			}
			return -17.0
		}},
		// Group keys: the label each cell maps to.
		{key: "FLOOR(age / 10) * 10", want: func(r cellRow) any {
			if a, ok := r.age.(float64); ok {
				return int64(math.Floor(a/10) * 10)
			}
			return nil
		}},
		{key: "age DIV 5", want: func(r cellRow) any {
			if a, ok := r.age.(float64); ok {
				return int64(a / 5)
			}
			return nil
		}},
		{key: "ROUND(age, -1)", want: func(r cellRow) any {
			if a, ok := r.age.(float64); ok {
				return int64(math.Round(a/10) * 10)
			}
			return nil
		}},
		{key: "TRUNCATE(age, -1)", want: func(r cellRow) any {
			if a, ok := r.age.(float64); ok {
				return int64(math.Trunc(a/10) * 10)
			}
			return nil
		}},
		{key: "CASE WHEN age < 20 THEN 'teen' WHEN age < 25 THEN 'young' ELSE 'adult' END", want: func(r cellRow) any {
			a, ok := r.age.(float64)
			switch {
			case ok && a < 20:
				return "teen"
			case ok && a < 25:
				return "young"
			}
			return "adult"
		}},
		{key: "IF(sex = 'Male', 'M', 'F')", want: func(r cellRow) any {
			if r.sex == "Male" {
				return "M"
			}
			return "F"
		}},
		{key: "CONCAT(sex, '/', edu)", want: func(r cellRow) any {
			s, ok1 := r.sex.(string)
			e, ok2 := r.edu.(string)
			if _, other := r.sex.(unknown); other && r.edu != nil {
				return "other"
			}
			if !ok1 || !ok2 {
				return nil
			}
			return s + "/" + e
		}},
		{key: "LEFT(edu, 1)", want: func(r cellRow) any {
			if e, ok := r.edu.(string); ok {
				return e[:1]
			}
			return nil
		}},
		{key: "hours DIV 10", want: func(r cellRow) any { return int64(r.hours / 10) }},
		{key: "CASE WHEN pay < 20 THEN 'low' ELSE 'high' END", want: func(r cellRow) any {
			if p, ok := r.pay.(float64); ok && p < 20 {
				return "low"
			}
			return "high"
		}},
		{key: "FLOOR(pay / 10)", msg: "GROUP BY FLOOR(pay / 10) splits the bin [20, 50) of pay"},
		{key: "LOWER(sex)", want: func(r cellRow) any {
			if s, ok := r.sex.(string); ok {
				return strings.ToLower(s)
			}
			return "other"
		}},
		{key: "age % 3", want: func(r cellRow) any {
			if a, ok := r.age.(float64); ok {
				return int64(math.Mod(a, 3))
			}
			return nil
		}},
		// Refusals: what the histogram cannot answer.
		{pred: "hours < 15", msg: "hours < 15 splits the bin [10, 20) of hours"},
		{pred: "hours DIV 5 = 2", msg: "splits the bin [10, 20) of hours"},
		{key: "hours DIV 5", msg: "GROUP BY hours DIV 5 splits the bin [0, 10) of hours"},
		{pred: "pay > 15", msg: "splits the bin [10, 20) of pay"},
		{agg: "SUM(pay)", msg: "pay keeps out-of-domain values in an 'other' cell"},
		{agg: "SUM(IFNULL(pay, 0) * 2)", msg: "is unknown on the 'other' cell of pay"},
		{agg: "SUM(sex)", msg: "sex is categorical"},
		{agg: "SUM(CONCAT(edu, 'x'))", msg: "the expression is text"},
		{agg: "SUM(1 / (hours - 5))", msg: "is unbounded over the domain"},
		{pred: "age = 'old'", msg: "age is numeric: 'old' is not a number"},
		{pred: "edu REGEXP '('", msg: "not a valid regular expression"},
	}
	protected := func(_, table string) bool { return table == "t" }
	for _, tc := range cases {
		var sql string
		switch {
		case tc.pred != "":
			sql = "SELECT COUNT(*) FROM t WHERE " + tc.pred
		case tc.agg != "":
			sql = "SELECT " + tc.agg + " FROM t"
		default:
			sql = "SELECT " + tc.key + " AS k, COUNT(*) FROM t GROUP BY k"
		}
		t.Run(sql, func(t *testing.T) {
			sts, err := parser.Parse(sql, protected)
			if err != nil {
				t.Fatal(err)
			}
			w, err := Compile(exprTable(), []*parser.Statement{&sts[0]})
			if tc.msg != "" {
				if e, ok := err.(*parser.Error); !ok || !strings.Contains(e.Message, tc.msg) {
					t.Fatalf("got %v, want a refusal containing %q", err, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			q := w.Queries[0]
			sizes := w.Sizes()
			cell := make([]int, len(sizes))
			for i := 0; i < w.Cells(); i++ {
				r := rowOf(w, cell)
				switch {
				case tc.pred != "":
					want := 0.0
					if tc.want(r).(int) == 1 {
						want = 1
					}
					if got := q.Aggregates[0].Eval(cell); got != want {
						t.Fatalf("cell %v (%+v): truth %v, brute force %v", cell, r, got, want)
					}
				case tc.agg != "":
					if got, want := q.Aggregates[0].Eval(cell), tc.want(r).(float64); math.Abs(got-want) > 1e-9 {
						t.Fatalf("cell %v (%+v): weight %v, brute force %v", cell, r, got, want)
					}
				default:
					want := fmt.Sprint(tc.want(r))
					found := false
					for k := 0; k < q.RowCount(w); k++ {
						row := q.RowAt(k)
						if q.Aggregates[q.Agg(0, int(row.Expr))].Eval(cell) != 0 {
							if found {
								t.Fatalf("cell %v in two groups", cell)
							}
							found = true
							if got := fmt.Sprint(q.Label(w, q.Items[0], k)); got != want {
								t.Fatalf("cell %v (%+v): group %q, brute force %q", cell, r, got, want)
							}
						}
					}
					if !found {
						t.Fatalf("cell %v (%+v) in no group, brute force %q", cell, r, want)
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
