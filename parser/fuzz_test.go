package parser

import (
	"errors"
	"fmt"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzParse: Parse and ParseWithColumns never panic, and every error they
// return is an *Error with one of the parser's codes, its SQLSTATE and a
// message. Seeds: testdata/fuzz/FuzzParse (BI tools' statements, the
// README's examples, refusals) and the cases below.
//
//	go test -run '^$' -fuzz '^FuzzParse$' -fuzztime 5m ./parser
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 40",
		"SELECT sex, COUNT(*) AS n, DP_STDERR(COUNT(*)) AS se FROM adult GROUP BY sex ORDER BY n DESC LIMIT 3",
		"EXPLAIN SELECT AVG(age) FROM demo.adult WHERE NOT (age > 30 OR sex IN ('Male')) AND age IS NOT NULL",
		"SELECT COUNT(*) FROM adult; SELECT SUM(age) FROM adult WHERE sex <> 'x' /* c */ -- d\n",
		"SELECT * FROM adult",
		"SELECT `t`.`sex` FROM `demo`.`adult` `t` GROUP BY 1 HAVING COUNT(*) > 2 ORDER BY 1 LIMIT 0",
		"SELECT 1",
		"(SELECT COUNT(*) FROM adult)",
		"SELECT d.region, COUNT(*) FROM adult a JOIN dims d ON a.sex = d.code LEFT JOIN dims2 x USING (code) WHERE d.region LIKE 'E%' GROUP BY 1",
		"SELECT COUNT(*) FROM dims d RIGHT JOIN adult ON sex = code, dims WHERE user_id = 1",
	} {
		f.Add(s)
	}
	known := map[int]bool{CodeParseError: true, CodeNoSuchTable: true, CodeBadField: true, CodeNotSupported: true, CodeDPRefused: true,
		CodeNonUniqField: true, CodeNonUniqTable: true}
	dims := &PublicTable{Name: "dims", Columns: []string{"code", "region", "sex"}, Text: []bool{true, true, true},
		Rows: [][]Value{{Value{Lit: Literal{Text: "Male", Quoted: true}}, Value{Lit: Literal{Text: "Europe", Quoted: true}}, Value{Null: true}}}}
	env := Env{Protected: protectedAdult, Columns: adultColumns,
		Private: func(_, c string) bool { return c == "user_id" },
		Public: func(_, t string) *PublicTable {
			if t == "dims" || t == "dims2" {
				return dims
			}
			return nil
		}}
	f.Fuzz(func(t *testing.T, sql string) {
		// A parse that does not end is a finding too.
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				panic(fmt.Sprintf("parsing %q takes more than 10s", sql))
			}
		}()
		for name, parse := range map[string]func() ([]Statement, error){
			"Parse":            func() ([]Statement, error) { return Parse(sql, protectedAdult) },
			"ParseWithColumns": func() ([]Statement, error) { return ParseWithColumns(sql, protectedAdult, adultColumns) },
			"Parse, no tables": func() ([]Statement, error) { return Parse(sql, nil) },
			"ParseEnv":         func() ([]Statement, error) { return ParseEnv(sql, env) },
		} {
			sts, err := parse()
			if err == nil {
				for _, st := range sts {
					if st.Kind != KindPassthrough && st.Query == nil {
						t.Fatalf("%s(%q): %v statement without a query", name, sql, st.Kind)
					}
				}
				continue
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("%s(%q): error %T %v, want *parser.Error", name, sql, err, err)
			}
			if !known[pe.Code] || pe.SQLState != sqlStateFor(pe.Code) || pe.Message == "" {
				t.Fatalf("%s(%q): error %d (%s) %q", name, sql, pe.Code, pe.SQLState, pe.Message)
			}
			if utf8.ValidString(sql) && !utf8.ValidString(pe.Message) {
				t.Fatalf("%s(%q): message is not UTF-8: %q", name, sql, pe.Message)
			}
		}
	})
}
