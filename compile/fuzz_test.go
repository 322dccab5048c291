package compile

import (
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/parser"
)

// FuzzCompile parses and compiles arbitrary statements over exprTable:
// whatever the text, compiling never panics, and every failure is a
// *parser.Error (a refusal with a MySQL code), never an internal error.
// Run longer with: go test ./compile -run XXX -fuzz FuzzCompile -fuzztime 5m
func FuzzCompile(f *testing.F) {
	for _, seed := range []string{
		"SELECT COUNT(*) FROM t WHERE age + 1 > 20 AND sex LIKE 'M%'",
		"SELECT FLOOR(age / 10) * 10 AS d, COUNT(*), AVG(hours) FROM t GROUP BY d HAVING d > 10 ORDER BY 2 DESC",
		"SELECT SUM(CASE WHEN sex = 'Male' THEN 1 ELSE 0 END), VARIANCE(age) FROM t WHERE pay IS NULL OR pay >= 20",
		"SELECT CONCAT(sex, '/', edu) AS k, COUNT(*) FROM t WHERE edu REGEXP '^[bm]' GROUP BY k",
		"SELECT COUNT(CASE WHEN age > 25 THEN 1 END), SUM(hours / 10) FROM t WHERE age BETWEEN 30 AND 20",
		"SELECT LEFT(edu, 1) AS e, COUNT(*) FROM t GROUP BY e ORDER BY COUNT(*) DESC LIMIT 1",
		"SELECT COUNT(*) FROM t WHERE NULLIF(age, 20) IS NULL XOR COALESCE(pay, 0) < 10",
		"SELECT age DIV 5 AS d FROM t GROUP BY d",
		"SELECT sex, COUNT(DISTINCT uid) FROM t WHERE age > 20 GROUP BY sex",
		"SELECT COUNT(DISTINCT uid) FROM t WHERE uid > 3",
		"SELECT f.faculty, SUM(d.years) FROM t JOIN dims d ON t.edu = d.edu LEFT JOIN fields f ON d.field = f.name WHERE d.field LIKE 's%' GROUP BY 1",
		"SELECT COUNT(*) FROM t LEFT JOIN dupci x ON t.edu = x.edu JOIN decades a USING (age)",
		"SELECT sex, DP_MEDIAN(age), DP_QUANTILE(hours, 0.9) AS p FROM t WHERE age > 20 GROUP BY sex HAVING p > 10 ORDER BY p",
	} {
		f.Add(seed)
	}
	env := joinEnv() // t (u is a second protected table) and the public tables of the join tests
	f.Fuzz(func(t *testing.T, sql string) {
		if len(sql) > 2000 {
			return
		}
		sts, err := parser.ParseEnv(sql, env)
		if err != nil {
			return
		}
		var qs []*parser.Statement
		for i := range sts {
			if sts[i].Kind == parser.KindAggregate || sts[i].Kind == parser.KindDomainList {
				qs = append(qs, &sts[i])
			}
		}
		if len(qs) == 0 {
			return
		}
		// The same table with and without a privacy unit (uid): the unit
		// column is refused with 3900 everywhere but COUNT(DISTINCT uid).
		withUnit := exprTable()
		withUnit.Unit = &catalog.PrivacyUnit{Column: "uid", MaxRows: 3}
		for _, tab := range []*catalog.Table{exprTable(), withUnit} {
			w, err := Compile(tab, qs)
			if err != nil {
				if e, ok := err.(*parser.Error); !ok || e.Code == parser.CodeDPInternal {
					t.Fatalf("%q: %v (%T)", sql, err, err)
				}
				continue
			}
			if w.CountsUnits() && tab.Unit == nil {
				t.Fatalf("%q: counts units on a table without one", sql)
			}
		}
	})
}
