package noise

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// Statistical tests use a seeded ChaCha8 stream through NewRandFrom so
// they are reproducible and never flaky; the samplers themselves are the
// same code that runs over crypto/rand in production.
func seeded(seed byte) *Rand {
	var s [32]byte
	s[0] = seed
	s[31] = 0x5a
	return NewRandFrom(rand.NewChaCha8(s))
}

// minP is the p-value threshold for goodness-of-fit tests.
const minP = 1e-4

// pmf is a probability mass function on [-L, L], stored at index z+L.
type pmf struct {
	L int64
	p []float64
}

func (f pmf) at(z int64) float64 {
	if z < -f.L || z > f.L {
		return 0
	}
	return f.p[z+f.L]
}

// newPMF normalises weight w over [-L, L]; L must cover all mass that
// matters at double precision.
func newPMF(L int64, w func(z int64) float64) pmf {
	f := pmf{L: L, p: make([]float64, 2*L+1)}
	total := 0.0
	for z := -L; z <= L; z++ {
		f.p[z+L] = w(z)
		total += f.p[z+L]
	}
	for i := range f.p {
		f.p[i] /= total
	}
	return f
}

func laplacePMF(t float64) pmf {
	return newPMF(int64(math.Ceil(750*t))+2, func(z int64) float64 {
		return math.Exp(-math.Abs(float64(z)) / t)
	})
}

func gaussianPMF(sigma2 float64) pmf {
	return newPMF(int64(math.Ceil(40*math.Sqrt(sigma2)))+2, func(z int64) float64 {
		return math.Exp(-float64(z) * float64(z) / (2 * sigma2))
	})
}

// moments returns the second and fourth central moments of a
// zero-mean symmetric pmf.
func (f pmf) moments() (m2, m4 float64) {
	for z := -f.L; z <= f.L; z++ {
		z2 := float64(z) * float64(z)
		m2 += z2 * f.at(z)
		m4 += z2 * z2 * f.at(z)
	}
	return m2, m4
}

// chiSquareSymmetric tests integer samples against a symmetric unimodal
// pmf centred at 0. Each z in [-M, M] is its own bucket and the two tails
// z < -M and z > M are merged buckets; M is the largest value with every
// bucket's expected count ≥ 5. It returns the p-value and the number of
// buckets.
func chiSquareSymmetric(t *testing.T, samples []int64, f pmf) (p float64, buckets int) {
	t.Helper()
	n := float64(len(samples))
	tail := func(m int64) float64 { // P(Z > m)
		s := 0.0
		for z := m + 1; z <= f.L; z++ {
			s += f.at(z)
		}
		return s
	}
	M := int64(0)
	for n*f.at(M+1) >= 5 && n*tail(M+1) >= 5 {
		M++
	}
	if n*tail(M) < 5 {
		t.Fatalf("tail bucket expected count %.3g < 5; use more samples", n*tail(M))
	}
	counts := make([]float64, 2*M+3) // [z<-M, -M..M, z>M]
	for _, z := range samples {
		switch {
		case z < -M:
			counts[0]++
		case z > M:
			counts[2*M+2]++
		default:
			counts[z+M+1]++
		}
	}
	tm := tail(M)
	stat := 0.0
	for i, o := range counts {
		var e float64
		switch i {
		case 0, len(counts) - 1:
			e = n * tm
		default:
			e = n * f.at(int64(i)-M-1)
		}
		stat += (o - e) * (o - e) / e
	}
	df := float64(len(counts) - 1)
	return distuv.ChiSquared{K: df}.Survival(stat), len(counts)
}

// chiSquareCategorical tests counts against probabilities probs (which
// must each have expected count ≥ 5).
func chiSquareCategorical(t *testing.T, counts []int, probs []float64) float64 {
	t.Helper()
	n := 0
	for _, c := range counts {
		n += c
	}
	stat := 0.0
	for i, c := range counts {
		e := float64(n) * probs[i]
		if e < 5 {
			t.Fatalf("bucket %d expected count %.3g < 5", i, e)
		}
		d := float64(c) - e
		stat += d * d / e
	}
	return distuv.ChiSquared{K: float64(len(counts) - 1)}.Survival(stat)
}

// checkMoments asserts that zero-mean samples have mean 0 and variance
// wantVar, each within 5 standard errors; the variance's standard error is
// sqrt((μ₄ − σ⁴)/N) from the exact fourth moment m4.
func checkMoments(t *testing.T, samples []int64, wantVar, m4 float64) {
	t.Helper()
	n := float64(len(samples))
	var s1, s2 float64
	for _, z := range samples {
		s1 += float64(z)
		s2 += float64(z) * float64(z)
	}
	mean := s1 / n
	if tol := 5 * math.Sqrt(wantVar/n); math.Abs(mean) > tol {
		t.Errorf("mean %.4g, want 0 ± %.3g", mean, tol)
	}
	v := s2 / n // E[Z²] about the known mean 0
	tol := 5 * math.Sqrt((m4-wantVar*wantVar)/n)
	if math.Abs(v-wantVar) > tol {
		t.Errorf("empirical variance %.6g, want %.6g ± %.3g (5 SE)", v, wantVar, tol)
	} else {
		t.Logf("empirical variance %.6g, exact %.6g (tolerance ±%.3g = 5 SE, %.2f%%)", v, wantVar, tol, 100*tol/wantVar)
	}
}

// samples returns n if not -short, else n/4.
func sampleCount(n int) int {
	if testing.Short() {
		return n / 4
	}
	return n
}
