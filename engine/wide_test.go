package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/demo"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/sources"
)

// wideDashboard groups a 20-column table by 1 to 3 of its columns: the
// batch's product domain (≈ 10¹⁹ cells) could never be counted, its
// marginals can.
var wideDashboard = []string{
	"SELECT sex, COUNT(*) AS n, DP_STDERR(COUNT(*)) AS se FROM wide GROUP BY sex",
	"SELECT education, COUNT(*) AS n, DP_STDERR(COUNT(*)) AS se FROM wide GROUP BY education",
	"SELECT region, COUNT(*) AS n, DP_STDERR(COUNT(*)) AS se FROM wide GROUP BY region",
	"SELECT race, sex, COUNT(*) AS n, DP_STDERR(COUNT(*)) AS se FROM wide GROUP BY race, sex",
	"SELECT housing, income, COUNT(*) AS n, DP_STDERR(COUNT(*)) AS se FROM wide GROUP BY housing, income",
	"SELECT health, children, vehicles, COUNT(*) AS n, DP_STDERR(COUNT(*)) AS se FROM wide GROUP BY health, children, vehicles",
	"SELECT internet, language, sex, COUNT(*) AS n, DP_STDERR(COUNT(*)) AS se FROM wide GROUP BY internet, language, sex",
}

func wideFixture(t *testing.T, rows int) (*Engine, string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	data := filepath.Join(dir, "wide.sqlite")
	if err := demo.GenerateWide(ctx, data, rows); err != nil {
		t.Fatal(err)
	}
	yaml := `
database: demo
sources: {main: {driver: sqlite, path: wide.sqlite}}
tables:
  wide:
    noise: laplace
    budget: {total: 1000, per_user: 1000, default_per_query: 1, max_per_query: 10}
    columns:
` + demo.WideColumns + `
users:
  analyst: {password: analyst, role: analyst}
`
	cat, err := catalog.Parse("wide.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	l, err := budget.Open(ctx, filepath.Join(dir, "ledger.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	h, err := sources.Open(ctx, cat, sources.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return New(Config{Catalog: cat, Ledger: l, Histograms: h, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}), data
}

// A dashboard of 1- to 3-column GROUP BYs over a 20-column table is
// answered in marginal space: EXPLAIN lists one histogram per column set,
// one charge covers the batch, and the answers' squared errors against the
// exact GROUP BYs add up to about the plan's expected total (the sum of
// several hundred independent terms, whose standard deviation is ≈ 15% of
// the mean: a tolerance of 2.5× is over 10 standard deviations).
func TestWideDashboardInMarginalSpace(t *testing.T) {
	eng, data := wideFixture(t, 3000)
	s := session("analyst", nil)
	ctx := context.Background()
	var explains []string
	for _, q := range wideDashboard {
		explains = append(explains, "EXPLAIN "+q)
	}
	ex, err := eng.Answer(ctx, s, explains)
	if err != nil {
		t.Fatal(err)
	}
	props := map[string]string{}
	for _, row := range ex[0].Rows {
		props[row[0].(string)] = row[1].(string)
	}
	if !strings.HasPrefix(props["histograms"], "one per column set") {
		t.Fatalf("EXPLAIN does not count per column set: %v", ex[0].Rows)
	}
	rs, err := eng.Answer(ctx, s, wideDashboard)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+data+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var sq, expected float64
	answers := 0
	for i, q := range wideDashboard {
		r := rs[i]
		groups := len(r.Columns) - 2
		cols := strings.Split(strings.TrimSpace(q[len("SELECT "):strings.Index(q, ", COUNT")]), ", ")
		exact := map[string]int64{}
		rows, err := db.Query(fmt.Sprintf("SELECT %s, COUNT(*) FROM wide GROUP BY %s", strings.Join(cols, ", "), strings.Join(cols, ", ")))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			dst := make([]any, len(cols)+1)
			vals := make([]any, len(cols))
			for j := range vals {
				dst[j] = &vals[j]
			}
			var n int64
			dst[len(cols)] = &n
			if err := rows.Scan(dst...); err != nil {
				t.Fatal(err)
			}
			exact[fmt.Sprint(vals...)] += n
		}
		rows.Close()
		for _, row := range r.Rows {
			key := fmt.Sprint(row[:groups]...)
			d := float64(row[groups].(int64) - exact[key])
			se := row[groups+1].(float64)
			sq += d * d
			expected += se * se
			answers++
		}
	}
	if sq > 2.5*expected {
		t.Fatalf("%d answers: squared error %.4g, plan expects %.4g", answers, sq, expected)
	}
	t.Logf("%d answers, squared error %.4g, expected %.4g (strategy %s)", answers, sq, expected, props["strategy"])
	es, err := eng.ledger.Entries(ctx, budget.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	charges := 0
	for _, e := range es {
		if e.Kind == budget.KindCharge {
			charges++
		}
	}
	if charges != 1 {
		t.Fatalf("%d charges for one batch", charges)
	}
}

// A batch whose own column sets exceed the cell limit is refused with 3900
// before anything is counted or charged, and the proxy keeps answering.
func TestWideBatchBeyondTheCellLimitIsRefused(t *testing.T) {
	eng, _ := wideFixture(t, 100)
	s := session("analyst", nil)
	ctx := context.Background()
	_, err := eng.Answer(ctx, s, []string{"SELECT age, hours_per_week, education, occupation, years_employed, region, COUNT(*) FROM wide GROUP BY age, hours_per_week, education, occupation, years_employed, region"})
	var perr *parser.Error
	if !errors.As(err, &perr) || perr.Code != parser.CodeDPRefused || !strings.Contains(perr.Message, "limit") {
		t.Fatalf("got %v, want a 3900 refusal naming the limit", err)
	}
	if es, _ := eng.ledger.Entries(ctx, budget.Filter{}); len(es) != 0 {
		for _, e := range es {
			if e.Kind == budget.KindCharge {
				t.Fatalf("refused batch was charged: %+v", e)
			}
		}
	}
	if _, err := eng.Answer(ctx, s, []string{"SELECT sex, COUNT(*) FROM wide GROUP BY sex"}); err != nil {
		t.Fatal(err)
	}
}
