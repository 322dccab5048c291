package reuse

import (
	"math/rand/v2"
	"testing"

	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/planner"
)

// nonZero is planner.Dense's non-zero entries bit for bit, for random
// linear queries: one term or several, sparse or dense factors, factors
// nil (every coordinate), and terms that cancel.
func TestNonZeroMatchesDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 500; trial++ {
		d := 1 + rng.IntN(3)
		sizes := make([]int, d)
		n := 1
		for j := range sizes {
			sizes[j] = 1 + rng.IntN(12)
			n *= sizes[j]
		}
		var l compile.Linear
		for range 1 + rng.IntN(4) {
			tm := compile.Term{Coef: rng.NormFloat64(), Factors: make([]compile.Factor, d)}
			for j := range tm.Factors {
				if rng.IntN(4) == 0 {
					continue // nil: all ones
				}
				f := make(compile.Factor, sizes[j])
				density := rng.Float64()
				for i := range f {
					if rng.Float64() < density {
						f[i] = float64(rng.IntN(5) - 2)
					}
				}
				tm.Factors[j] = f
			}
			l = append(l, tm)
			if rng.IntN(5) == 0 { // a term that cancels it
				neg := tm
				neg.Coef = -tm.Coef
				l = append(l, neg)
			}
		}
		cells, xs := nonZero(l, sizes, n)
		var wantCells []int
		var wantXs []float64
		for c, x := range planner.Dense(l, sizes) {
			if x != 0 {
				wantCells, wantXs = append(wantCells, c), append(wantXs, x)
			}
		}
		var gotCells []int
		var gotXs []float64
		for i, c := range cells {
			if xs[i] != 0 {
				gotCells, gotXs = append(gotCells, c), append(gotXs, xs[i])
			}
		}
		if len(gotCells) != len(wantCells) {
			t.Fatalf("trial %d: %d non-zero cells, Dense has %d", trial, len(gotCells), len(wantCells))
		}
		for i := range gotCells {
			if gotCells[i] != wantCells[i] || gotXs[i] != wantXs[i] {
				t.Fatalf("trial %d: entry %d is (%d, %v), Dense's (%d, %v)", trial, i, gotCells[i], gotXs[i], wantCells[i], wantXs[i])
			}
		}
	}
}
