package compile

import (
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/parser"
)

// BenchmarkCompileDashboard compiles a typical dashboard batch over the
// demo catalog: what every request (a repeat included) pays before the
// stored-answer lookup.
func BenchmarkCompileDashboard(b *testing.B) {
	tab := catalog.Demo().Table("adult")
	protected := func(_, t string) bool { return t == "adult" }
	var sts []*parser.Statement
	for _, q := range []string{
		"SELECT sex, COUNT(*) FROM adult WHERE age BETWEEN 30 AND 40 GROUP BY sex",
		"SELECT education, AVG(hours_per_week) FROM adult WHERE sex = 'Female' GROUP BY education",
		"SELECT COUNT(*) FROM adult WHERE income = '>50K' AND race IN ('White', 'Black')",
	} {
		st, err := parser.Parse(q, protected)
		if err != nil {
			b.Fatal(err)
		}
		sts = append(sts, &st[0])
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(tab, sts); err != nil {
			b.Fatal(err)
		}
	}
}
