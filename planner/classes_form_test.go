package planner

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dpproxy/dpproxy/measure"
)

// runRows are k random rows over n cells made of runs of equal values,
// some zero.
func runRows(r *rand.Rand, k, n int) [][]float64 {
	rows := make([][]float64, k)
	for i := range rows {
		rows[i] = make([]float64, n)
	}
	for c := 0; c < n; {
		vals := make([]float64, k)
		for i := range vals {
			vals[i] = float64(r.IntN(3))
		}
		for run := 1 + r.IntN(40); run > 0 && c < n; run, c = run-1, c+1 {
			for i := range rows {
				rows[i][c] = vals[i]
			}
		}
	}
	return rows
}

// Measurements with a factor in class form refine Classes and reduce to
// them exactly as the same measurements over cells do (same classes, same
// reduced factors, bit for bit), over the column itself and over its
// copy with a dropped cell; one whose long column is not among the
// system's stays in class form, which a GLS (reading factors over cells)
// refuses instead of misreading.
func TestClassesReadClassForm(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const n = 2_000
	ts := measure.Column{Name: "ts", Def: "ts", Base: "tsb", Size: n, Whole: true}
	tsDropped := measure.Column{Name: "ts", Def: "ts+", Base: "tsb", Size: n + 1, Whole: true, DroppedCell: true}
	dev := measure.Column{Name: "device", Def: "dev", Size: 2, Whole: true}
	for trial := 0; trial < 20; trial++ {
		var dense, form []*measure.Measurement
		for k := 0; k < 3; k++ {
			rows := runRows(r, 1+r.IntN(5), n)
			of, f, ok := measure.InClasses(rows, n)
			if !ok {
				t.Fatal("InClasses: not ok")
			}
			m := &measure.Measurement{ID: int64(k + 1), Columns: []measure.Column{dev, ts}, Factors: [][]float64{nil, f},
				Classes: []measure.ClassMap{nil, of}, Rows: []int{2, len(rows)}, Variance: 1}
			form, dense = append(form, m), append(dense, m.Dense())
		}
		for _, col := range []measure.Column{ts, tsDropped} {
			cols := []measure.Column{dev, col}
			byForm, byCells := NewClasses(cols), NewClasses(cols)
			for k := range form {
				byForm.AddMeasurement(form[k])
				byCells.AddMeasurement(dense[k])
			}
			if !slices.Equal(byForm.Columns(), byCells.Columns()) {
				t.Fatalf("classes %v, over cells %v", byForm.Columns(), byCells.Columns())
			}
			for i := 0; i < col.Size; i++ {
				if byForm.Class(1, i) != byCells.Class(1, i) {
					t.Fatalf("cell %d: class %d, over cells %d", i, byForm.Class(1, i), byCells.Class(1, i))
				}
			}
			for k := range form {
				a, ok1 := byForm.Reduce(form[k])
				b, ok2 := byForm.Reduce(dense[k])
				if !ok1 || !ok2 || a.Check() != nil || !slices.Equal(a.Factors[1], b.Factors[1]) || a.Columns[1] != b.Columns[1] {
					t.Fatalf("reduced: %v %v, %v", ok1, ok2, a.Check())
				}
			}
		}
		g, _ := NewGLS([]measure.Column{dev})
		other := NewClasses([]measure.Column{dev})
		other.SplitAll(0)
		m, ok := other.Reduce(form[0])
		if !ok || !m.InClassForm(1) || g.Joins(m) || g.Joins(dense[0]) {
			t.Fatalf("over another column: reduced %v, class form %v, joins %v", ok, m.InClassForm(1), g.Joins(m))
		}
	}
}
