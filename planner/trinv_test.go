package planner

import (
	"testing"

	"gonum.org/v1/gonum/mat"
)

func TestInvUpper(t *testing.T) {
	r := splitmix64(9)
	for _, n := range []int{1, 5, 191, 192, 193, 500} {
		b := mat.NewDense(n, n, nil)
		for i := 0; i < n; i++ {
			b.Set(i, i, 1+r.float())
			for j := i + 1; j < n; j++ {
				b.Set(i, j, (r.float()-0.5)/float64(n))
			}
		}
		c := mat.DenseCopyOf(b)
		raw := c.RawMatrix()
		if !invUpper(raw.Data, n, raw.Stride) {
			t.Fatal("singular")
		}
		var p mat.Dense
		p.Mul(b, c)
		if !mat.EqualApprox(&p, mat.NewDiagDense(n, ones(n)), 1e-10) {
			t.Fatalf("n=%d: B·B⁻¹ ≠ I", n)
		}
		for i := 0; i < n; i++ {
			for j := 0; j < i; j++ {
				if c.At(i, j) != 0 {
					t.Fatalf("n=%d: lower entry (%d,%d) = %v", n, i, j, c.At(i, j))
				}
			}
		}
	}
}
