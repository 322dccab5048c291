package planner

import (
	"math"
	"testing"

	"github.com/dpproxy/dpproxy/measure"
)

// A pencil's variances are Solve's on the same system at every weight:
// stored hours (and some stored days) over a year; new days, new days and
// hours, or new weekly sums that merge the stored blocks; answers over an
// hour, a day, and a week that spans blocks.
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
	newHourly := &measure.Measurement{Columns: []measure.Column{col}, Factors: [][]float64{nil}, Rows: []int{8760}, Variance: 0.01}
	weeks := make([]float64, 52*8760) // weekly sums: blocks of 168 hours
	for k := 0; k < 52; k++ {
		for h := 0; h < 168; h++ {
			weeks[k*8760+k*168+h] = 1
		}
	}
	newWeekly := &measure.Measurement{Columns: []measure.Column{col}, Factors: [][]float64{weeks}, Rows: []int{52}, Variance: 4}
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
			for _, news := range [][]*measure.Measurement{{newDaily}, {newDaily, newHourly}, {newWeekly}} {
				p, joined, ok := g.Pencil(news)
				if !ok || len(joined) != len(news) {
					t.Fatalf("no pencil (joined %v)", joined)
				}
				for _, f := range []float64{1e-3, 0.25, 1} {
					cb := g.Clone()
					for _, m := range news {
						cb.Add(m, f)
					}
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
							t.Errorf("%d new, f=%g %s: pencil %g (%v), solve %g (%v)", len(news), f, name, v2, ok2, v1, ok1)
						}
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

// BenchmarkBlockedYearPencil is the least-ε search's dozen steps over a
// year of hours as a pencil: BenchmarkBlockedYearSolve's stored and new
// systems, the pencil built once and every day's answer read at twelve
// weights (compare with twelve of BenchmarkBlockedYearSolve's steps).
//
//	go test ./planner/ -run '^$' -bench 'BlockedYear(Pencil|Solve)'
func BenchmarkBlockedYearPencil(b *testing.B) {
	stored, daily := yearOfHours(b)
	cells, ones := make([]int, 24), make([]float64, 24)
	for i := 0; i < b.N; i++ {
		p, _, ok := stored.Pencil([]*measure.Measurement{daily})
		if !ok {
			b.Fatal("no pencil")
		}
		for step := 0; step < 12; step++ {
			est := p.At(1 / float64(step+2))
			for d := 0; d < 365; d++ {
				for h := range cells {
					cells[h], ones[h] = d*24+h, 1
				}
				if _, _, ok := est.Answer(cells, ones); !ok {
					b.Fatal("a day not identified")
				}
			}
		}
	}
}
