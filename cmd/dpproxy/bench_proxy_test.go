package main

import (
	"fmt"
	"testing"
)

const benchCatalog = `
database: demo
sources:
  main: {driver: sqlite, path: "{{DEMO}}"}
tables:
  adult:
    noise: laplace
    budget: {total: 1000000, per_user: 1000000, default_per_query: 0.1}
    columns:
      age: {type: integer, min: 17, max: 90}
      education: {type: categorical, values: [Preschool, 1st-4th, 5th-6th, 7th-8th, 9th, 10th, 11th, 12th, HS-grad, Some-college, Assoc-voc, Assoc-acdm, Bachelors, Masters, Prof-school, Doctorate]}
      occupation: {type: categorical, values: [Tech-support, Craft-repair, Other-service, Sales, Exec-managerial, Prof-specialty, Handlers-cleaners, Machine-op-inspct, Adm-clerical, Farming-fishing, Transport-moving, Priv-house-serv, Protective-serv, Armed-Forces]}
      hours_per_week: {type: integer, min: 1, max: 99}
users:
  analyst: {password: analyst, role: analyst}
`

// BenchmarkProxyQuery measures whole queries through a real proxy and the Go
// driver (plan, histogram, charge, measure, answer, wire), each with a
// distinct LIMIT so no answer is re-released from the store. "count" is the
// baseline: one COUNT over one column. "cube" is issue 3's large case: a
// GROUP BY over age × hours_per_week × education (117,216 groups, all
// returned) with range and IN filters, over a product domain of
// 74·99·16·14 = 1,641,024 cells. Compare the two in the same run.
func BenchmarkProxyQuery(b *testing.B) {
	_, addr := startProxy(b, benchCatalog)
	db := connect(b, addr, "analyst", "analyst", "")
	cases := []struct{ name, sql string }{
		{"count", "SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 40 LIMIT %d"},
		{"cube", "SELECT age, hours_per_week, education, COUNT(*) FROM adult WHERE age BETWEEN 25 AND 60 AND occupation IN ('Sales', 'Tech-support', 'Exec-managerial') GROUP BY age, hours_per_week, education LIMIT %d"},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				rows, err := db.Query(fmt.Sprintf(c.sql, 1000000+i))
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for rows.Next() {
					n++
				}
				rows.Close()
				if n == 0 {
					b.Fatal("no rows")
				}
			}
		})
	}
}
