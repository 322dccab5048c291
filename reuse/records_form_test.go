package reuse

import (
	"slices"
	"testing"

	"github.com/dpproxy/dpproxy/measure"
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
