package engine

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/sources"
)

func TestIsotonic(t *testing.T) {
	for _, tc := range []struct{ in, want []float64 }{
		{[]float64{1, 2, 3}, []float64{1, 2, 3}},
		{[]float64{3, 1, 2}, []float64{2, 2, 2}},
		{[]float64{1, 5, 3, 4, 10}, []float64{1, 4, 4, 4, 10}},
		{[]float64{-3, -1, 2}, []float64{0, 0, 2}},
	} {
		got := isotonic(tc.in)
		for i := range got {
			if math.Abs(got[i]-tc.want[i]) > 1e-12 {
				t.Fatalf("isotonic(%v) = %v, want %v", tc.in, got, tc.want)
			}
		}
	}
}

// TestIsotonicContracts: for a non-decreasing truth, the fit is
// non-decreasing and its largest error is at most the input's (the
// property the documented error bound rests on). Seeded.
func TestIsotonicContracts(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 2000; trial++ {
		n := 1 + r.IntN(30)
		truth := make([]float64, n)
		y := make([]float64, n)
		acc := 0.0
		for i := range truth {
			acc += float64(r.IntN(5))
			truth[i] = acc
			y[i] = acc + r.NormFloat64()*3
		}
		fit := isotonic(y)
		before, after := 0.0, 0.0
		for i := range fit {
			if i > 0 && fit[i] < fit[i-1] {
				t.Fatalf("not monotone: %v", fit)
			}
			before = math.Max(before, math.Abs(y[i]-truth[i]))
			after = math.Max(after, math.Abs(fit[i]-truth[i]))
		}
		if after > before+1e-9 {
			t.Fatalf("error grew from %g to %g", before, after)
		}
	}
}

// trueQuantile is the smallest value v of col with count(col ≤ v) ≥ q·N
// over the rows where.
func trueQuantile(t *testing.T, path, col, where string, q float64) float64 {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT " + col + ", COUNT(*) FROM adult WHERE " + col + " IS NOT NULL AND " + where + " GROUP BY " + col + " ORDER BY " + col)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var vals, counts []float64
	total := 0.0
	for rows.Next() {
		var v, c float64
		if err := rows.Scan(&v, &c); err != nil {
			t.Fatal(err)
		}
		vals, counts = append(vals, v), append(counts, c)
		total += c
	}
	acc := 0.0
	for i, c := range counts {
		acc += c
		if acc >= q*total {
			return vals[i]
		}
	}
	return math.NaN()
}

// TestQuantileNoiselessEqualsSQL: at ε = 100 the noise is zero but for
// probability about 2e^(−100) per draw, so DP_MEDIAN and DP_QUANTILE equal
// the quantiles of the data (integer columns of width 1).
func TestQuantileNoiselessEqualsSQL(t *testing.T) {
	f := newFixtureCatalog(t, knownCatalog)
	s := session("analyst", map[string]any{"dp_epsilon": 100.0})
	r := f.answer(t, s, "SELECT DP_MEDIAN(age), DP_QUANTILE(age, 0.9), DP_QUANTILE(hours_per_week, 0.25) FROM adult")
	for i, want := range []float64{
		trueQuantile(t, f.data, "age", "1", 0.5),
		trueQuantile(t, f.data, "age", "1", 0.9),
		trueQuantile(t, f.data, "hours_per_week", "1", 0.25),
	} {
		if got := num(t, r, 0, i); got != want {
			t.Fatalf("column %d: %g, SQL %g", i, got, want)
		}
	}
	r = f.answer(t, s, "SELECT sex, DP_MEDIAN(hours_per_week) AS m FROM adult WHERE age >= 40 GROUP BY sex")
	for i, sex := range []string{"Female", "Male"} {
		if got, want := num(t, r, i, 1), trueQuantile(t, f.data, "hours_per_week", "age >= 40 AND sex = '"+sex+"'", 0.5); got != want {
			t.Fatalf("%s: %g, SQL %g", sex, got, want)
		}
	}
	// A median after the GROUP BY of its column is derived from it.
	f.answer(t, s, "SELECT age, COUNT(*) FROM adult GROUP BY age")
	s.UserVar = func(n string) (any, bool) {
		v, ok := map[string]any{"dp_epsilon": 100.0, "dp_max_stderr": 1.0}[n]
		return v, ok
	}
	r = f.answer(t, s, "SELECT DP_QUANTILE(age, 0.75) FROM adult")
	if e := lastEntry(t, f); e.Kind != budget.KindDerived {
		t.Fatalf("quantile after GROUP BY age: %+v", e)
	}
	if got, want := num(t, r, 0, 0), trueQuantile(t, f.data, "age", "1", 0.75); got != want {
		t.Fatalf("derived quantile %g, SQL %g", got, want)
	}
	if err := f.ledger.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestQuantileRefusals(t *testing.T) {
	f := newFixture(t)
	s := session("analyst", nil)
	for _, tc := range []struct {
		sql  string
		code int
		msg  string
	}{
		{"SELECT DP_QUANTILE(sex, 0.5) FROM adult", parser.CodeDPRefused, "numeric, date or datetime column"},
		{"SELECT DP_QUANTILE(age, 2) FROM adult", parser.CodeNotSupported, "number in [0, 1]"},
		{"SELECT DP_QUANTILE(age) FROM adult", parser.CodeNotSupported, "DP_MEDIAN(age)"},
		{"SELECT DP_STDERR(DP_MEDIAN(age)) FROM adult", parser.CodeNotSupported, "error bars of DP_QUANTILE"},
	} {
		_, err := f.eng.Answer(context.Background(), s, []string{tc.sql})
		refusal(t, err, tc.code, tc.msg)
	}
	if n := len(f.entries(t)); n != 0 {
		t.Fatalf("refusals charged: %d entries", n)
	}
}

// quantileTimeCatalog has a date column (daily bins over January 2025) and
// a datetime column (hourly bins over two days).
const quantileTimeCatalog = `
database: demo
sources: {main: {driver: sqlite, path: ev.sqlite}}
tables:
  ev:
    budget: {total: 1000000, per_user: 1000000, default_per_query: 1, max_per_query: 100}
    columns:
      d: {type: date, min: '2025-01-01', max: '2025-01-31'}
      ts: {type: datetime, min: '2025-01-01 00:00:00', max: '2025-01-02 23:59:59', width: 1h}
users:
  analyst: {password: analyst, role: analyst}
`

// TestQuantileOfTimes: DP_MEDIAN and DP_QUANTILE of date and datetime
// columns are the start of the bin where the CDF reaches q, shown as a
// DATE or DATETIME; at ε = 100 (noise zero but with probability about
// e^(−20) per draw) they equal the data's.
func TestQuantileOfTimes(t *testing.T) {
	dir := t.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(dir, "ev.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE ev (d DATE, ts DATETIME)"); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var days, hours []int
	for i := 0; i < 500; i++ {
		day, hour := i*i*7%31, i*13%48
		days, hours = append(days, day), append(hours, hour)
		if _, err := db.Exec("INSERT INTO ev VALUES (?, ?)", start.AddDate(0, 0, day).Format("2006-01-02"),
			start.Add(time.Duration(hour)*time.Hour+17*time.Minute).Format("2006-01-02 15:04:05")); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	// The first bin whose count of values at most it reaches q·N.
	want := func(v []int, bins int, q float64) int {
		counts := make([]int, bins)
		for _, x := range v {
			counts[x]++
		}
		sum := 0
		for k, c := range counts {
			sum += c
			if float64(sum) >= q*float64(len(v)) {
				return k
			}
		}
		return bins - 1
	}
	cat, err := catalog.Parse("ev.yaml", []byte(quantileTimeCatalog))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l, err := budget.Open(ctx, filepath.Join(dir, "ledger.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	h, err := sources.Open(ctx, cat, sources.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	eng := New(Config{Catalog: cat, Ledger: l, Histograms: h, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	rs, err := eng.Answer(ctx, session("analyst", map[string]any{"dp_epsilon": 100.0}), []string{"SELECT DP_MEDIAN(d) AS m, DP_QUANTILE(ts, 0.25) AS q FROM ev"})
	if err != nil {
		t.Fatal(err)
	}
	r := rs[0]
	if r.Columns[0].Type != TypeDate || r.Columns[1].Type != TypeDatetime {
		t.Fatalf("column types %+v", r.Columns)
	}
	wantD := start.AddDate(0, 0, want(days, 31, 0.5)).Format("2006-01-02")
	wantTS := start.Add(time.Duration(want(hours, 48, 0.25)) * time.Hour).Format("2006-01-02 15:04:05")
	if got := r.AllRows()[0]; got[0] != wantD || got[1] != wantTS {
		t.Fatalf("got %v, want [%s %s]", got, wantD, wantTS)
	}
}
