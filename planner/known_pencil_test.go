package planner

import (
	"math"
	"testing"

	"github.com/dpproxy/dpproxy/measure"
)

// A pencil's variances are Solve's on the same system at every weight:
// stored hours (and some stored days) over a year, new days, answers over
// an hour, a day, and a week that spans blocks.
func TestPencilMatchesSolve(t *testing.T) {
	col := measure.Column{Name: "ts", Def: "hours", Size: 8760, Whole: true}
	daysOf := func(weights func(d int) float64) []float64 {
		f := make([]float64, 365*8760)
		for d := 0; d < 365; d++ {
			for h := 0; h < 24; h++ {
				f[d*8760+d*24+h] = weights(d)
			}
		}
		return f
	}
	hourly := &measure.Measurement{ID: 1, Columns: []measure.Column{col}, Factors: [][]float64{nil}, Rows: []int{8760}, Variance: 2}
	oldDaily := &measure.Measurement{ID: 2, Columns: []measure.Column{col}, Factors: [][]float64{daysOf(func(int) float64 { return 1 })}, Rows: []int{365}, Variance: 5}
	newDaily := &measure.Measurement{Columns: []measure.Column{col}, Factors: [][]float64{daysOf(func(d int) float64 { return float64(d%3 + 1) })}, Rows: []int{365}, Variance: 3}
	answers := map[string][]int{"hour": {5}, "day": seq(48, 24), "week": seq(30, 168)}
	for _, tc := range []struct {
		name   string
		stored []*measure.Measurement
	}{
		{"hours", []*measure.Measurement{hourly}},
		{"hours and days", []*measure.Measurement{hourly, oldDaily}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := NewGLS([]measure.Column{col})
			for _, m := range tc.stored {
				if !g.Add(m, 1) {
					t.Fatal("stored measurement did not join")
				}
			}
			p, joined, ok := g.Pencil([]*measure.Measurement{newDaily})
			if !ok || len(joined) != 1 {
				t.Fatalf("no pencil (joined %v)", joined)
			}
			for _, f := range []float64{1e-3, 0.25, 1} {
				cb := g.Clone()
				cb.Add(newDaily, f)
				want, ok := cb.Solve()
				if !ok {
					t.Fatal("not solved")
				}
				got := p.At(f)
				for name, cells := range answers {
					ws := make([]float64, len(cells))
					for i := range ws {
						ws[i] = float64(i%4) + 1
					}
					_, v1, ok1 := want.Answer(cells, ws)
					_, v2, ok2 := got.Answer(cells, ws)
					if !ok1 || !ok2 || math.Abs(v1-v2) > 1e-9*v1 {
						t.Errorf("f=%g %s: pencil %g (%v), solve %g (%v)", f, name, v2, ok2, v1, ok1)
					}
				}
			}
		})
	}
	// Stored days alone do not identify the hours: no pencil (each f is
	// solved instead).
	g, _ := NewGLS([]measure.Column{col})
	g.Add(oldDaily, 1)
	if _, _, ok := g.Pencil([]*measure.Measurement{newDaily}); ok {
		t.Error("a pencil over singular stored blocks")
	}
}

func seq(from, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i
	}
	return out
}
