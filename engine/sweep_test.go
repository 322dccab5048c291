package engine

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/sources"
)

// No valid statement yields 3902: the grammar is swept over edge values —
// empty and reversed ranges, values outside the domain, non-integers on
// integer columns, NULL tests under every NULL policy — in every aggregate,
// GROUP BY, top-k and EXPLAIN, through the whole engine. Refusals (1235,
// 3900) are fine; an internal error or a panic is a bug.
func TestSweepNoInternalErrors(t *testing.T) {
	ctx := context.Background()
	policies := []struct{ null, ood string }{
		{"drop", "drop"}, {"cell", "clamp"}, {"other", "other"},
	}
	rng := rand.New(rand.NewPCG(3, 5))
	total := 0
	refusals := map[string]int{}
	for _, pol := range policies {
		dir := t.TempDir()
		db, err := sql.Open("sqlite", filepath.Join(dir, "s.sqlite"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`CREATE TABLE t (age INTEGER, w INTEGER, sex TEXT, x REAL);
			INSERT INTO t VALUES (20, 3, 'F', 1.5), (NULL, 7, 'M', NULL), (95, NULL, 'Q', 99), (40, 12, NULL, -3), (33, 5, 'f', 20)`); err != nil {
			t.Fatal(err)
		}
		db.Close()
		catNull, ood := pol.null, pol.ood
		catOOD := ood
		if catOOD == "clamp" {
			catOOD = "drop"
		}
		yaml := fmt.Sprintf(`
database: demo
sources: {main: {driver: sqlite, path: s.sqlite}}
tables:
  t:
    budget: {total: 1000000000, per_user: 1000000000, default_per_query: 1}
    columns:
      age: {type: integer, min: 17, max: 90, null: %[1]s, out_of_domain: %[2]s}
      w: {type: integer, min: 0, max: 19, width: 5, null: %[1]s, out_of_domain: %[2]s}
      sex: {type: categorical, values: [F, M], null: %[1]s, out_of_domain: %[3]s}
      x: {type: numeric, edges: [-10, 0, 10, 100], null: %[1]s, out_of_domain: %[2]s}
users:
  analyst: {password: analyst, role: analyst}
`, catNull, ood, catOOD)
		if catNull == "other" && ood != "other" {
			t.Fatal("bad policy pair")
		}
		cat, err := catalog.Parse("sweep.yaml", []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		l, err := budget.Open(ctx, filepath.Join(dir, "ledger.sqlite"))
		if err != nil {
			t.Fatal(err)
		}
		h, err := sources.Open(ctx, cat, sources.Options{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		eng := New(Config{Catalog: cat, Ledger: l, Histograms: h, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		s := session("analyst", nil)
		for _, stmt := range sweepStatements(rng) {
			total++
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("null %s, out_of_domain %s: %s: panic %v", pol.null, pol.ood, stmt, r)
					}
				}()
				_, err := eng.Answer(ctx, s, []string{stmt})
				if err == nil {
					return
				}
				pe, ok := err.(*parser.Error)
				if ok && testing.Verbose() {
					msg := pe.Message
					if len(msg) > 60 {
						msg = msg[:60]
					}
					refusals[fmt.Sprintf("%d %s", pe.Code, msg)]++
				}
				if !ok || pe.Code == parser.CodeDPInternal {
					t.Fatalf("null %s, out_of_domain %s: %s: %v", pol.null, pol.ood, stmt, err)
				}
			}()
		}
		h.Close()
		l.Close()
	}
	t.Logf("%d statements", total)
	for r, n := range refusals {
		t.Logf("%5d × %s", n, r)
	}
}

// sweepStatements crosses predicate templates with edge values, and puts
// each predicate in one shape of statement (and every shape gets the edge
// predicates).
func sweepStatements(rng *rand.Rand) []string {
	numeric := []string{"16", "17", "90", "91", "200", "-5", "30.5", "'30'", "0", "1e30", "-0.5", "'abc'"}
	cats := []string{"'F'", "'f'", "'M'", "'X'", "''", "'other'"}
	var preds []string
	for _, c := range []string{"age", "w", "x"} {
		for i, v := range numeric {
			v2 := numeric[(i+5)%len(numeric)]
			preds = append(preds,
				c+" = "+v, c+" <> "+v, c+" < "+v, c+" >= "+v,
				c+" BETWEEN "+v+" AND "+v2, c+" BETWEEN "+v2+" AND "+v, c+" NOT BETWEEN "+v+" AND "+v2,
				c+" IN ("+v+", "+v2+")", c+" NOT IN ("+v+", "+v2+")", "NOT ("+c+" > "+v+")",
				"FLOOR("+c+" / 10) = "+v, c+" + 1 > "+v, c+" DIV 5 = "+v,
			)
		}
		preds = append(preds, c+" IS NULL", c+" IS NOT NULL", c+" = NULL", c+" <=> NULL", "NOT ("+c+" IS NULL)", c)
	}
	for _, v := range cats {
		preds = append(preds, "sex = "+v, "sex <> "+v, "sex IN ("+v+", 'M')", "sex NOT IN ("+v+")", "sex LIKE "+v, "sex < "+v)
	}
	preds = append(preds, "sex IS NULL", "sex IS NOT NULL", "sex LIKE '%'", "sex REGEXP '^[fm]$'", "age > w", "age IS NULL AND sex IS NULL",
		"age BETWEEN 40 AND 30 OR sex = 'X'", "1 = 0 OR age = 200", "NULL", "NOT NULL", "age = 30.5 AND w = 3")
	aggs := []string{"COUNT(*)", "COUNT(age)", "SUM(age)", "AVG(age)", "VARIANCE(age)", "STDDEV_SAMP(w)", "SUM(x)", "AVG(x)",
		"SUM(CASE WHEN sex = 'M' THEN 1 ELSE 0 END)", "COUNT(CASE WHEN age > 200 THEN 1 END)", "SUM(1)", "DP_STDERR(SUM(age))",
		"DP_CI_LOW(AVG(w))", "COUNT(NULL)", "SUM(NULL)", "POWER(AVG(age), 2)", "COUNT(*) / 0"}
	groups := []string{"sex", "age", "w", "x", "FLOOR(age / 10) * 10", "w DIV 5", "CASE WHEN age < 30 THEN 'y' ELSE 'o' END"}
	shapes := []func(p string) string{
		func(p string) string { return "SELECT " + aggs[rng.IntN(len(aggs))] + " FROM t WHERE " + p },
		func(p string) string {
			g := groups[rng.IntN(len(groups))]
			return "SELECT " + g + " AS g, " + aggs[rng.IntN(len(aggs))] + " FROM t WHERE " + p + " GROUP BY g"
		},
		func(p string) string {
			g := groups[rng.IntN(len(groups))]
			return "SELECT " + g + " AS g FROM t WHERE " + p + " GROUP BY g ORDER BY COUNT(*) DESC LIMIT 1"
		},
		func(p string) string {
			g := groups[rng.IntN(len(groups))]
			return "SELECT " + g + " AS g, COUNT(*) AS n FROM t WHERE " + p + " GROUP BY g ORDER BY n DESC LIMIT 2"
		},
		func(p string) string { return "EXPLAIN SELECT " + aggs[rng.IntN(len(aggs))] + " FROM t WHERE " + p },
		func(p string) string {
			g := groups[rng.IntN(len(groups))]
			return "SELECT " + g + " AS g, COUNT(*) FROM t GROUP BY g HAVING " + strings.ReplaceAll(p, "age", "g")
		},
	}
	var out []string
	for _, p := range preds {
		out = append(out, shapes[rng.IntN(len(shapes))](p))
	}
	// Every shape and aggregate over the emptiest predicates.
	for _, p := range []string{"age BETWEEN 40 AND 30", "age IS NULL", "sex = 'X'"} {
		for _, a := range aggs {
			out = append(out, "SELECT "+a+" FROM t WHERE "+p, "EXPLAIN SELECT "+a+" FROM t WHERE "+p)
		}
		for _, g := range groups {
			out = append(out, "SELECT "+g+" AS g, COUNT(*), AVG(age) FROM t WHERE "+p+" GROUP BY g",
				"SELECT "+g+" AS g FROM t WHERE "+p+" GROUP BY g ORDER BY COUNT(*) DESC LIMIT 1",
				"EXPLAIN SELECT "+g+" AS g, COUNT(*) AS n FROM t WHERE "+p+" GROUP BY g ORDER BY n DESC LIMIT 1",
				"SELECT "+g+" AS g FROM t GROUP BY g")
		}
	}
	return out
}
