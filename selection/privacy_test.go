package selection

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/dpproxy/dpproxy/noise"
)

// seeded is a reproducible noise.Rand for statistical tests (the samplers
// are the production code; only the bit source differs).
func seeded(seed byte) *noise.Rand {
	var s [32]byte
	s[0], s[31] = seed, 0xa5
	return noise.NewRandFrom(rand.NewChaCha8(s))
}

// expBelow is a lower bound of e^x independent of the code under test:
// math.Exp is within one ulp, and 4·2⁻⁵³ below it is below e^x.
func expBelow(x float64) *big.Rat {
	return new(big.Rat).SetFloat64(math.Exp(x) * (1 - 4*0x1p-53))
}

func dyadic(p uint64) *big.Rat {
	return new(big.Rat).SetFrac(new(big.Int).SetUint64(p), new(big.Int).Lsh(big.NewInt(1), gridBits))
}

var geoCases = []struct {
	eps, delta float64
	groups     int
}{
	{1, 1e-6, 1}, {0.1, 1e-5, 1}, {1, 1e-6, 2}, {0.5, 1e-9, 3}, {5, 0.01, 1}, {0.01, 1e-6, 3}, {2, 0.3, 2},
}

// The truncated geometric mechanism's per-key probabilities meet both
// (ε/Δ₀, δ/Δ₀) constraints exactly, in rational arithmetic, with e^(ε/Δ₀)
// replaced by an independent lower bound (which only makes the check
// stricter): p(n) ≤ e^ε'·p(n−1) + δ', 1 − p(n−1) ≤ e^ε'·(1 − p(n)) + δ',
// and p is non-decreasing from p(0) = 0 (which gives the reverse pair).
func TestGeometricConstraintsExact(t *testing.T) {
	for _, c := range geoCases {
		m, err := TruncatedGeometric(c.eps, c.delta, c.groups)
		if err != nil {
			t.Fatal(err)
		}
		e := expBelow(c.eps / float64(c.groups))
		d := new(big.Rat).SetFloat64(c.delta)
		d.Quo(d, new(big.Rat).SetInt64(int64(c.groups)))
		one := big.NewRat(1, 1)
		p := m.geo.p
		if p[0] != 0 {
			t.Fatalf("%+v: p(0) = %d", c, p[0])
		}
		for n := 1; n < len(p); n++ {
			if p[n] < p[n-1] {
				t.Fatalf("%+v: p(%d) < p(%d)", c, n, n-1)
			}
			pn, pm := dyadic(p[n]), dyadic(p[n-1])
			// p(n) ≤ e·p(n−1) + d
			rhs := new(big.Rat).Mul(e, pm)
			rhs.Add(rhs, d)
			if pn.Cmp(rhs) > 0 {
				t.Fatalf("%+v: p(%d) = %s > e^ε'·p(%d) + δ'", c, n, pn.FloatString(20), n-1)
			}
			// 1 − p(n−1) ≤ e·(1 − p(n)) + d
			lhs := new(big.Rat).Sub(one, pm)
			rhs.Sub(one, pn).Mul(rhs, e).Add(rhs, d)
			if lhs.Cmp(rhs) > 0 {
				t.Fatalf("%+v: 1 − p(%d) > e^ε'·(1 − p(%d)) + δ'", c, n-1, n)
			}
		}
		// p(1) is δ' rounded down to the grid: no looser, and not wastefully tighter.
		if got, want := m.ReleaseProbability(1), c.delta/float64(c.groups); got > want || got < want*(1-1e-9) {
			t.Errorf("%+v: p(1) = %g, want δ/Δ₀ = %g", c, got, want)
		}
	}
}

// hockeyStick is Σ_o max(0, P(o) − e·Q(o)) over the 2^k subsets o of k
// keys released independently with probabilities p (dataset D) and q
// (neighbour D'): the smallest δ for which the release of these keys is
// (ln e, δ)-indistinguishable from D to D'.
func hockeyStick(p, q []*big.Rat, e *big.Rat) *big.Rat {
	sum := new(big.Rat)
	one := big.NewRat(1, 1)
	for o := 0; o < 1<<len(p); o++ {
		P, Q := big.NewRat(1, 1), big.NewRat(1, 1)
		for i := range p {
			if o&(1<<i) != 0 {
				P.Mul(P, p[i])
				Q.Mul(Q, q[i])
			} else {
				P.Mul(P, new(big.Rat).Sub(one, p[i]))
				Q.Mul(Q, new(big.Rat).Sub(one, q[i]))
			}
		}
		Q.Mul(Q, e)
		if P.Cmp(Q) > 0 {
			sum.Add(sum, P.Sub(P, Q))
		}
	}
	return sum
}

// Brute force over neighbours: a unit holding Δ₀ keys with n₁ … n_Δ₀ units
// each (so n_i − 1 without it; a count of 1 is a key only that unit
// holds). Over every subset of released keys, in both directions, the
// exact release distributions are (ε, δ)-indistinguishable, with e^ε
// again replaced by a lower bound. Keys the unit does not hold have the
// same distribution on both sides and are left out.
func TestGeometricNeighboursExact(t *testing.T) {
	for _, c := range geoCases {
		m, err := TruncatedGeometric(c.eps, c.delta, c.groups)
		if err != nil {
			t.Fatal(err)
		}
		e := expBelow(c.eps)
		delta := new(big.Rat).SetFloat64(c.delta)
		// Counts around the transition region, and beyond certainty.
		var counts []int64
		for n := int64(1); n <= int64(len(m.geo.p))+1; n = n*3/2 + 1 {
			counts = append(counts, n)
		}
		counts = append(counts, int64(len(m.geo.p))-1, int64(len(m.geo.p)))
		idx := make([]int, c.groups)
		for {
			p := make([]*big.Rat, c.groups)
			q := make([]*big.Rat, c.groups)
			for i, j := range idx {
				p[i] = dyadic(m.geo.at(counts[j]))
				if counts[j]-1 > 0 {
					q[i] = dyadic(m.geo.at(counts[j] - 1))
				} else {
					q[i] = new(big.Rat)
				}
			}
			if h := hockeyStick(p, q, e); h.Cmp(delta) > 0 {
				t.Fatalf("%+v: D→D' at counts %v: δ needed %s", c, idx, h.FloatString(12))
			}
			if h := hockeyStick(q, p, e); h.Cmp(delta) > 0 {
				t.Fatalf("%+v: D'→D at counts %v: δ needed %s", c, idx, h.FloatString(12))
			}
			k := 0
			for k < len(idx) && idx[k] == len(counts)-1 {
				idx[k] = 0
				k++
			}
			if k == len(idx) {
				break
			}
			idx[k]++
		}
	}
}

// The Laplace threshold's exact release probabilities (discrete Laplace
// tail in closed form) meet the same brute-force bound: ε from the noise
// on shared keys, δ from the keys only one neighbour holds. In floating
// point, with a relative slack of 1e-9 on δ for the rounding of the sums.
func TestLaplaceThresholdNeighbours(t *testing.T) {
	for _, c := range []struct {
		eps, delta float64
		groups     int
	}{{1, 1e-6, 4}, {0.5, 1e-3, 5}, {2, 0.05, 6}, {1, 1e-8, 10}} {
		m, err := LaplaceThreshold(c.eps, c.delta, c.groups)
		if err != nil {
			t.Fatal(err)
		}
		// Per key, a unique key: at most δ/Δ₀.
		if p1 := m.ReleaseProbability(1); p1 > c.delta/float64(c.groups) {
			t.Errorf("%+v: a unique key is released with probability %g > δ/Δ₀", c, p1)
		}
		k := min(c.groups, 6) // 2^k outcomes
		e := math.Exp(c.eps)
		tau := m.Threshold()
		for _, base := range []int64{1, 2, tau - 3, tau - 1, tau, tau + 1, tau + 5, 2 * tau} {
			for unique := 0; unique <= k; unique++ {
				p := make([]float64, k)
				q := make([]float64, k)
				for i := range p {
					n := max(base+int64(i%3), 2)
					if i < unique {
						n = 1
					}
					p[i], q[i] = m.ReleaseProbability(n), m.ReleaseProbability(n-1)
				}
				for _, dir := range [][2][]float64{{p, q}, {q, p}} {
					if h := hockeyFloat(dir[0], dir[1], e); h > c.delta*(1+1e-9) {
						t.Fatalf("%+v base %d unique %d: δ needed %g", c, base, unique, h)
					}
				}
			}
		}
	}
}

func hockeyFloat(p, q []float64, e float64) float64 {
	sum := 0.0
	for o := 0; o < 1<<len(p); o++ {
		P, Q := 1.0, 1.0
		for i := range p {
			if o&(1<<i) != 0 {
				P *= p[i]
				Q *= q[i]
			} else {
				P *= 1 - p[i]
				Q *= 1 - q[i]
			}
		}
		sum += max(0, P-e*Q)
	}
	return sum
}

// The Gaussian threshold's δ part: a key only one neighbour holds is
// released with probability at most δ/Δ₀ (the exact discrete Gaussian
// tail, summed from its mass function).
func TestGaussianThresholdUniqueKey(t *testing.T) {
	for _, c := range []struct {
		rho, delta float64
		groups     int
	}{{0.5, 1e-6, 4}, {0.01, 1e-5, 10}, {2, 0.05, 5}} {
		m, err := GaussianThreshold(c.rho, c.delta, c.groups)
		if err != nil {
			t.Fatal(err)
		}
		if m.thr.gaussTailTab == nil {
			t.Fatalf("%+v: σ too large for the exact tail", c)
		}
		if p1 := m.ReleaseProbability(1); p1 > c.delta/float64(c.groups) {
			t.Errorf("%+v: a unique key is released with probability %g > δ/Δ₀", c, p1)
		}
	}
}

// Statistics: the sampled decisions follow the computed probabilities,
// and a unit's unique key is released at most δ/Δ₀ of the time. Seeded;
// each comparison allows 5 standard deviations (plus one draw), a false
// failure rate below 6·10⁻⁷ per comparison (two-sided normal tail; 40
// comparisons, below 3·10⁻⁵ for the test).
func TestKeepFrequencies(t *testing.T) {
	const draws = 20000
	mechs := []*Mechanism{}
	for _, mk := range []func() (*Mechanism, error){
		func() (*Mechanism, error) { return TruncatedGeometric(1, 0.05, 1) },
		func() (*Mechanism, error) { return TruncatedGeometric(0.5, 0.09, 3) },
		func() (*Mechanism, error) { return LaplaceThreshold(1, 0.1, 5) },
		func() (*Mechanism, error) { return GaussianThreshold(0.5, 0.1, 5) },
	} {
		m, err := mk()
		if err != nil {
			t.Fatal(err)
		}
		mechs = append(mechs, m)
	}
	r := seeded(1)
	for _, m := range mechs {
		u50 := m.UnitsFor(0.5)
		for _, n := range []int64{1, 2, u50 - 1, u50, u50 + 2, m.UnitsFor(0.99), 3 * u50} {
			if n < 1 {
				continue
			}
			kept := 0
			for i := 0; i < draws; i++ {
				if m.Keep(r, n) {
					kept++
				}
			}
			p := m.ReleaseProbability(n)
			tol := 5*math.Sqrt(p*(1-p)*draws) + 1
			if math.Abs(float64(kept)-p*draws) > tol {
				t.Errorf("%s: n=%d kept %d of %d, want %.1f ± %.1f", m, n, kept, draws, p*draws, tol)
			}
			if n == 1 {
				bound := m.Delta / float64(m.MaxGroups)
				if lim := bound*draws + 5*math.Sqrt(bound*(1-bound)*draws) + 1; float64(kept) > lim {
					t.Errorf("%s: a unique key kept %d of %d times, above δ/Δ₀ = %g (limit %.1f)", m, kept, draws, bound, lim)
				}
			}
		}
	}
}

// UnitsFor finds the first count at each probability, and Choose follows
// the bounds: geometric up to 3 keys, then Gaussian for zCDP, Laplace else.
func TestUnitsForAndChoose(t *testing.T) {
	for _, c := range []struct {
		eps, rho float64
		groups   int
		kind     string
	}{{1, 0, 1, KindGeometric}, {1, 0.5, 3, KindGeometric}, {1, 0, 4, KindLaplace}, {1, 0.5, 4, KindGaussian}} {
		m, err := Choose(c.eps, c.rho, 1e-6, c.groups)
		if err != nil {
			t.Fatal(err)
		}
		if m.Kind != c.kind {
			t.Errorf("%+v: chose %s", c, m.Kind)
		}
		for _, p := range []float64{0.5, 0.99} {
			n := m.UnitsFor(p)
			if n < 1 || m.ReleaseProbability(n) < p || (n > 1 && m.ReleaseProbability(n-1) >= p) {
				t.Errorf("%s: UnitsFor(%g) = %d (p there %g)", m, p, n, m.ReleaseProbability(n))
			}
		}
	}
	// Refusals, not panics.
	for _, f := range []func() (*Mechanism, error){
		func() (*Mechanism, error) { return TruncatedGeometric(0, 1e-6, 1) },
		func() (*Mechanism, error) { return TruncatedGeometric(1, 0, 1) },
		func() (*Mechanism, error) { return TruncatedGeometric(1, 1e-6, 0) },
		func() (*Mechanism, error) { return LaplaceThreshold(math.NaN(), 1e-6, 5) },
		func() (*Mechanism, error) { return GaussianThreshold(1e-30, 1e-6, 5) },
		func() (*Mechanism, error) { return GaussianThreshold(1, 1, 5) },
	} {
		if m, err := f(); err == nil {
			t.Errorf("accepted: %s", m)
		}
	}
}
