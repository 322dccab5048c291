package exec

import (
	"math"
	"testing"
)

// The int64 path of a Kronecker measurement adds the integer draw itself:
// a draw beyond 2⁵³ passed through float64 would lose its low bits.
func TestKroneckerNoiseKeepsIntegerDraws(t *testing.T) {
	draws := []int64{1<<53 + 1, -(1<<60 + 3), 7, math.MaxInt64}
	next := 0
	add := kroneckerNoise(func() int64 {
		d := draws[next%len(draws)]
		next++
		return d
	})
	vi := []int64{0, 1 << 40, -5, 1}
	add(nil, vi)
	want := []int64{1<<53 + 1, 1<<40 - (1<<60 + 3), 2, math.MaxInt64}
	for i := range vi {
		if vi[i] != want[i] {
			t.Errorf("entry %d: %d, want %d", i, vi[i], want[i])
		}
	}
}
