package planner

import (
	"context"
	"errors"
	"math"
	"runtime"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// dualMatrix is X̃ = X(u)/max_i X(u)_ii for the prefix Gram over len(u)
// cells, X(u) = U^{-1/2}(U^{1/2}GU^{1/2})^{1/2}U^{-1/2} built densely by
// an eigendecomposition: independent of the quadrature.
func dualMatrix(t *testing.T, u []float64) *mat.SymDense {
	t.Helper()
	n := len(u)
	g := DenseOf(PrefixGram{Size: n})
	m := mat.NewSymDense(n, nil)
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			m.SetSym(i, j, math.Sqrt(u[i]*u[j])*g.At(i, j))
		}
	}
	var es mat.EigenSym
	if !es.Factorize(m, true) {
		t.Fatal("eigendecomposition failed")
	}
	vals := es.Values(nil)
	var q mat.Dense
	es.VectorsTo(&q)
	x := mat.NewSymDense(n, nil)
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			s := 0.0
			for k, l := range vals {
				s += q.At(i, k) * math.Sqrt(l) * q.At(j, k)
			}
			x.SetSym(i, j, s/math.Sqrt(u[i]*u[j]))
		}
	}
	mx := 0.0
	for i := range u {
		mx = math.Max(mx, x.At(i, i))
	}
	x.ScaleSym(1/mx, x)
	return x
}

// TestDualPrefixAgainstDense: the dual's long prefix option, climbed from
// a small base so that every stage runs (16 → 128 → 300 cells), reports
// the exact error trace(G·X̃⁻¹) and L2 sensitivity max diag X̃ = 1 of the
// strategy its weights define (built densely), and is no worse than the
// square root.
func TestDualPrefixAgainstDense(t *testing.T) {
	for _, c := range []struct{ n, base int }{{48, 1024}, {300, 16}, {129, 16}} {
		o, e, err := dualPrefixOption(context.Background(), c.n, c.base)
		if err != nil {
			t.Fatal(err)
		}
		if o.l2 != 1 || !math.IsInf(o.l1, 1) || len(o.long.Dual) != c.n {
			t.Fatalf("n %d: l1 %v, l2 %v, %d weights", c.n, o.l1, o.l2, len(o.long.Dual))
		}
		x := dualMatrix(t, o.long.Dual)
		sens := 0.0
		for i := 0; i < c.n; i++ {
			sens = math.Max(sens, x.At(i, i))
		}
		if math.Abs(sens-1) > 1e-12 {
			t.Fatalf("n %d: max diag %v", c.n, sens)
		}
		var inv, gi mat.Dense
		if err := inv.Inverse(x); err != nil {
			t.Fatal(err)
		}
		gi.Mul(DenseOf(PrefixGram{Size: c.n}), &inv)
		if want := mat.Trace(&gi); math.Abs(e-want) > 1e-7*want {
			t.Fatalf("n %d (base %d): error %v, dense %v", c.n, c.base, e, want)
		}
		_, sq := sqrtPrefixOption(c.n)
		so, _ := sqrtPrefixOption(c.n)
		svd, err := SVDBound(PrefixGram{Size: c.n})
		if err != nil {
			t.Fatal(err)
		}
		if e > so.l2*so.l2*sq || e < svd*(1-1e-9) {
			t.Fatalf("n %d: error %v, square root %v, SVD bound %v", c.n, e, so.l2*so.l2*sq, svd)
		}
		t.Logf("n %d (base %d): %.5f × the SVD bound", c.n, c.base, e/svd)
	}
}

// TestDualPrefixIsDeterministic: the climb gives the same weights to the
// bit on an idle machine and on one whose cores are all busy, with one
// core or all: it stops by step counts and sums its shares in order.
func TestDualPrefixIsDeterministic(t *testing.T) {
	run := func() ([]float64, float64) {
		o, e, err := dualPrefixOption(context.Background(), 5000, 64)
		if err != nil {
			t.Fatal(err)
		}
		return o.long.Dual, e
	}
	u0, e0 := run()
	prev := runtime.GOMAXPROCS(1)
	u1, e1 := run()
	runtime.GOMAXPROCS(prev)
	stop := burnCPU(2 * runtime.NumCPU())
	u2, e2 := run()
	stop()
	if e0 != e1 || e0 != e2 || !slices.Equal(u0, u1) || !slices.Equal(u0, u2) {
		t.Fatalf("errors %v, %v (one core), %v (loaded)", e0, e1, e2)
	}
}

// TestDualPrefixCancelled: a cancelled context stops the climb with an
// error that wraps the context's.
func TestDualPrefixCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := dualPrefixOption(ctx, 5000, 64); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}

// TestStretch: resampling keeps a constant, the ends and linear profiles.
func TestStretch(t *testing.T) {
	if got := stretch([]float64{2, 2, 2}, 7); slices.ContainsFunc(got, func(v float64) bool { return v != 2 }) {
		t.Fatalf("constant stretched to %v", got)
	}
	got := stretch([]float64{0, 1, 2, 3}, 8) // cell centres: (i+½)/2 − ½
	want := []float64{0, 0.25, 0.75, 1.25, 1.75, 2.25, 2.75, 3}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-15 {
			t.Fatalf("stretch = %v, want %v", got, want)
		}
	}
}
