package measure

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// dayRows are the indicators of each day of days over hours (24 cells a
// day) after skip cells: DATE(ts) over hourly bins.
func dayRows(n, skip, days int) [][]float64 {
	rows := make([][]float64, days)
	for d := range rows {
		rows[d] = make([]float64, n)
		for h := 0; h < 24; h++ {
			rows[d][skip+24*d+h] = 1
		}
	}
	return rows
}

// classFormOf is a one-column measurement of rows (over n cells) in
// class form.
func classFormOf(t *testing.T, rows [][]float64, n int) *Measurement {
	t.Helper()
	of, f, ok := InClasses(rows, n)
	if !ok {
		t.Fatal("InClasses: not ok")
	}
	ans := make([]float64, len(rows))
	for i := range ans {
		ans[i] = float64(i)
	}
	return &Measurement{Table: "t", Def: "d", Version: "v", LedgerSeq: 1, Strategy: "workload",
		Columns: []Column{{Name: "ts", Def: "ts1", Size: n, Whole: true}}, Factors: [][]float64{f}, Classes: []ClassMap{of},
		Rows: []int{len(rows)}, Answers: ans, Noise: "laplace", Scale: "10/1", Variance: 200}
}

// TestInClasses: the class form of random factors made of runs (some
// zero) expands to the factor; its classes are the cells with equal,
// non-zero columns, in order of first cell (so equal columns share a
// class and different ones do not), and all-zero cells are in none.
func TestInClasses(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		n, nrows := 1+r.IntN(300), 1+r.IntN(6)
		rows := make([][]float64, nrows)
		for k := range rows {
			rows[k] = make([]float64, n)
		}
		for i := 0; i < n; {
			run := 1 + r.IntN(30)
			vals := make([]float64, nrows)
			for k := range vals {
				vals[k] = float64(r.IntN(3)) - 1 // -1, 0, 1
			}
			for ; run > 0 && i < n; run, i = run-1, i+1 {
				for k := range rows {
					rows[k][i] = vals[k]
				}
			}
		}
		m := classFormOf(t, rows, n)
		if err := m.Valid(); err != nil {
			t.Fatal(err)
		}
		if m.Check() == nil {
			t.Fatal("Check accepts class form")
		}
		got := m.FactorCells(0)
		if want := slices.Concat(rows...); !slices.Equal(got, want) {
			t.Fatalf("trial %d: expands to %v, want %v", trial, got, want)
		}
		if d := m.Dense(); d.Check() != nil || !slices.Equal(d.Factors[0], got) {
			t.Fatalf("Dense: %v", d.Check())
		}
		column := func(i int) []float64 {
			c := make([]float64, nrows)
			for k := range rows {
				c[k] = rows[k][i]
			}
			return c
		}
		of, next := m.Classes[0], int32(0)
		for i := 0; i < n; i++ {
			zero := !slices.ContainsFunc(column(i), func(x float64) bool { return x != 0 })
			if zero != (of[i] == -1) {
				t.Fatalf("cell %d: class %d, column %v", i, of[i], column(i))
			}
			if of[i] == next {
				next++
			} else if of[i] > next {
				t.Fatalf("cell %d: class %d before %d", i, of[i], next)
			}
			for i2 := 0; i2 < i; i2++ {
				if (of[i] == of[i2]) != slices.Equal(column(i), column(i2)) {
					t.Fatalf("cells %d, %d: classes %d, %d, columns %v, %v", i2, i, of[i2], of[i], column(i2), column(i))
				}
			}
		}
	}
}

// TestClassFormRoundTrip: a year of days over five years of hours is
// 365 × 365 entries in class form, stored as runs, and reads back equal;
// a class map that is damaged (or does not fit the factor) is an error.
func TestClassFormRoundTrip(t *testing.T) {
	n := 43_824
	m := classFormOf(t, dayRows(n, 35_064, 365), n)
	if len(m.Factors[0]) != 365*365 {
		t.Fatalf("class form of %d entries", len(m.Factors[0]))
	}
	body, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `"classes":[[-1,35064,0,24,1,24,`) {
		t.Fatalf("encoding: %.300s", body)
	}
	var back Measurement
	if err := json.Unmarshal(body, &back); err != nil {
		t.Fatal(err)
	}
	if back.Valid() != nil || !slices.Equal(back.Classes[0], m.Classes[0]) || !slices.Equal(back.Factors[0], m.Factors[0]) {
		t.Fatalf("read back: %v", back.Valid())
	}
	for _, bad := range []string{
		`{"columns":[{"name":"ts","def":"d","size":3}],"factors":[[1,2]],"classes":[[0,1,2,2]],"rows":[1],"variance":1}`, // class 2 of 2
		`{"columns":[{"name":"ts","def":"d","size":3}],"factors":[[1,2]],"classes":[[0,1,1,1]],"rows":[1],"variance":1}`, // 2 of 3 cells
		`{"columns":[{"name":"ts","def":"d","size":3}],"factors":[null],"classes":[[0,3]],"rows":[1],"variance":1}`,      // no factor
	} {
		var b Measurement
		if err := json.Unmarshal([]byte(bad), &b); err == nil && b.Valid() == nil {
			t.Errorf("%s: valid", bad)
		}
	}
	for _, bad := range []string{`[0]`, `[0,0]`, `[-2,1]`, `[0,-1]`, `[0,40000000]`} {
		var c ClassMap
		if err := json.Unmarshal([]byte(bad), &c); err == nil {
			t.Errorf("class map %s: decoded %v", bad, c)
		}
	}
}

// A measurement in class form is stored and loaded (decoded anew, and
// from the cache Put fills) unchanged, on both backends.
func TestStoreClassForm(t *testing.T) { onBackends(t, testStoreClassForm) }

func testStoreClassForm(t *testing.T, open opener) {
	ctx := context.Background()
	n := 43_824
	s := open(t, 0)
	if _, err := s.Load(ctx, "t", "d", "v"); err != nil { // start the cache
		t.Fatal(err)
	}
	m := classFormOf(t, dayRows(n, 35_064, 365), n)
	if err := s.Put(ctx, []*Measurement{m}); err != nil || m.ID == 0 {
		t.Fatalf("Put: id %d, %v", m.ID, err)
	}
	same := func(what string, got []*Measurement, err error) {
		t.Helper()
		if err != nil || len(got) != 1 {
			t.Fatalf("%s: %d measurements, %v", what, len(got), err)
		}
		g := got[0]
		if g.ID != m.ID || !slices.Equal(g.Classes[0], m.Classes[0]) || !slices.Equal(g.Factors[0], m.Factors[0]) || !slices.Equal(g.Answers, m.Answers) {
			t.Fatalf("%s: a different measurement", what)
		}
	}
	got, err := s.Load(ctx, "t", "d", "v")
	same("cached", got, err)
	got, err = open(t, 0).Load(ctx, "t", "d", "v")
	same("decoded", got, err)
}
