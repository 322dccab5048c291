package reuse

import (
	"slices"
	"testing"

	"github.com/dpproxy/dpproxy/measure"
	"github.com/dpproxy/dpproxy/planner"
	"gonum.org/v1/gonum/mat"
)

// The one-row records of a year of DATE(ts) over five years of hours
// stack into one record whose factor on ts is in class form (a day's 24
// hours a class, 365 × 365 entries), the same matrix as the rows stacked
// over cells; records over a short column stack over cells as before.
func TestStackRowsKeepsLongColumnsInClassForm(t *testing.T) {
	for _, tc := range []struct {
		n, days   int
		classForm bool
	}{{43_824, 365, true}, {24 * 40, 40, false}} {
		col := measure.Column{Name: "ts", Def: "d", Size: tc.n, Whole: true}
		var recs []*measure.Measurement
		want := make([]float64, 0, tc.n*tc.days)
		for d := 0; d < tc.days; d++ {
			f := make([]float64, tc.n)
			for h := 0; h < 24; h++ {
				f[tc.n-24*tc.days+24*d+h] = 1
			}
			want = append(want, f...)
			recs = append(recs, &measure.Measurement{Columns: []measure.Column{col}, Factors: [][]float64{f}, Rows: []int{1},
				Answers: []float64{float64(d)}, Noise: "laplace", Scale: "1/1", Variance: 2})
		}
		out := stackRows(recs)
		if len(out) != 1 || out[0].Rows[0] != tc.days || out[0].Valid() != nil {
			t.Fatalf("%d cells: %d records", tc.n, len(out))
		}
		m := out[0]
		if m.InClassForm(0) != tc.classForm {
			t.Fatalf("%d cells: class form %v", tc.n, m.InClassForm(0))
		}
		if tc.classForm && len(m.Factors[0]) != tc.days*tc.days {
			t.Fatalf("class form of %d entries", len(m.Factors[0]))
		}
		if !slices.Equal(m.FactorCells(0), want) || len(m.Answers) != tc.days || m.Answers[tc.days-1] != float64(tc.days-1) {
			t.Fatalf("%d cells: not the stacked rows", tc.n)
		}
		if recs[0].Rows[0] != 1 || len(recs[0].Answers) != 1 {
			t.Fatal("the first record was written")
		}
	}
}

// liveRows keeps the rows of the live cells of each grouped column, in
// row-major order over the grouped columns.
func TestLiveRows(t *testing.T) {
	sizes := []int{3, 2}
	v := []float64{0, 1, 2, 3, 4, 5} // (c0, c1) → 2·c0 + c1
	for _, tc := range []struct {
		live [][]int
		want []float64
	}{
		{[][]int{nil, nil}, v},
		{[][]int{{0, 2}, nil}, []float64{0, 1, 4, 5}},
		{[][]int{nil, {1}}, []float64{1, 3, 5}},
		{[][]int{{1}, {0}}, []float64{2}},
	} {
		if got := liveRows(v, []int{0, 1}, tc.live, sizes); !slices.Equal(got, tc.want) {
			t.Errorf("live %v: %v, want %v", tc.live, got, tc.want)
		}
	}
}

// A Kronecker plan's factor in class form is recorded exactly as its rows
// over the cells would be (setFactor): the same classes, numbered by first
// cell, merged where two plan classes have equal columns, none where a
// plan class's column is zero; and over the cells when the column is short.
func TestSetClassFactorMatchesSetFactor(t *testing.T) {
	for _, n := range []int{3000, 600} {
		// Plan classes 0–5 in runs, cells in none at both ends; classes 1 and
		// 4 have equal columns, class 3 a zero column, and the classes are
		// numbered out of cell order.
		classes := make([]int, n)
		for i := range classes {
			switch {
			case i < 10 || i >= n-7:
				classes[i] = -1
			default:
				classes[i] = []int{2, 0, 1, 4, 3, 5}[(i/37)%6]
			}
		}
		a := mat.NewDense(3, 6, []float64{
			1, 2, 0, 0, 2, 5,
			0, 1, 1, 0, 1, 0,
			3, 0, 0, 0, 0, -1,
		})
		f := &planner.ColumnStrategy{Name: "over classes", A: a, Pinv: mat.NewDense(6, 3, nil), L1: 4, L2: 1, Grid: 1, Classes: classes}
		col := measure.Column{Name: "h", Def: "d", Size: n}
		got := &measure.Measurement{Columns: []measure.Column{col}, Factors: make([][]float64, 1), Rows: []int{3}}
		setClassFactor(got, 0, f)
		cells, _ := f.CellMatrices()
		raw := cells.RawMatrix()
		rows := make([][]float64, 3)
		for i := range rows {
			rows[i] = raw.Data[i*raw.Stride : i*raw.Stride+n]
		}
		want := &measure.Measurement{Columns: []measure.Column{col}, Factors: make([][]float64, 1), Rows: []int{3}}
		setFactor(want, 0, rows)
		if !slices.Equal(got.Factors[0], want.Factors[0]) || (got.Classes == nil) != (want.Classes == nil) {
			t.Fatalf("n %d: factor %v, want %v", n, got.Factors[0], want.Factors[0])
		}
		if want.Classes != nil && !slices.Equal(got.Classes[0], want.Classes[0]) {
			t.Fatalf("n %d: classes differ", n)
		}
		if n > classFormAbove && want.Classes == nil {
			t.Fatalf("n %d: want class form", n)
		}
	}
}
