package noise

import "math/big"

// ln 2 < ln2UpNum/ln2UpDen = 0.6931471805599453094173 (ln 2 =
// 0.69314718055994530941723…): an upper bound, so that c·d ≥ L·ln2UpNum/
// ln2UpDen implies exp(−c·d) ≤ 2⁻ᴸ.
var (
	ln2UpNum = mustBig("6931471805599453094173")
	ln2UpDen = mustBig("10000000000000000000000")
)

func mustBig(s string) *big.Int {
	v, ok := new(big.Int).SetString(s, 10)
	if !ok {
		panic("noise: bad constant " + s)
	}
	return v
}

// tableBits is the width of the digit groups in which a weight's exponent
// is looked up: exp(−c·d) is a product of ⌈B/tableBits⌉ table entries.
const tableBits = 8

// emSelect decides expMech's outcome from the digit indices ns at
// precision prec (bits); ok is false when some digit cannot be decided at
// this precision, and the caller doubles it.
//
// Exactness. Numbers are fixed-point integers scaled by 2^Q and kept as
// intervals [lo, hi] that contain the true value: every product and
// quotient of lower bounds is rounded down and of upper bounds up, and
// exp(−c) is bracketed by its Taylor series with a bounded tail. A weight
// whose exponent c·d is at least L·ln 2 (L = prec + 8) is only known to
// lie in (0, 2⁻ᴸ]. The digit floor(2^N·rⱼ) is decided when the bounds
// floor(2^N·wⱼ_lo/Sⱼ_hi) and floor(2^N·wⱼ_hi/Sⱼ_lo) agree — the upper one
// capped at 2^N − 1 (rⱼ < 1 because the last weight is positive) and, when
// some weight from j on is inexact, lowered by one if 2^N·wⱼ_hi/Sⱼ_lo is an
// integer, since then rⱼ is strictly below it (so that, say, 1/(2 + a
// clamped weight) is known to be below 1/2). They disagree only if rⱼ lies
// within the interval's width of a multiple of 2⁻ᴺ. If all weights from j on are exactly 1 (every remaining utility
// equals the maximum, or ε = 0), rⱼ = 1/(m−j) is computed without error,
// so this never happens; otherwise rⱼ involves exp(−c·d) with c·d ≠ 0, and
// by the Lindemann–Weierstrass theorem rⱼ is irrational, so a finite
// precision decides the digit: doubling prec terminates with probability 1.
// With the width below 2^(N−prec+…) the retry has probability below about
// 2⁻⁶⁰ per selection.
//
// Cost. The maximal candidate is found by one scan; every weight is the
// same number of fixed-point products (one per digit group of the largest
// exponent considered, which depends on c and prec only), every digit one
// pair of divisions, all computed whatever the outcome: the sequence of
// operations depends on m, c, prec and ns, never on the utilities.
// (math/big's own time per operation varies slightly with the length of
// its operands; the count and widths of the operations do not.) It stays
// one function so that the constant sequence of operations, on which the
// selection's timing privacy rests, can be read and checked in one place.
func (r *Rand) emSelect(u []int64, c *emRateFrac, ns []int, prec int) (int, bool) {
	m := len(u)
	top := 0
	for i := 1; i < m; i++ {
		if u[i] > u[top] {
			top = i
		}
	}
	umax := u[top]
	L := prec + 8
	uniform := c.num.Sign() == 0

	// D: the least integer with c·D ≥ L·ln 2 (upper bound): weights with
	// d ≥ D are at most 2⁻ᴸ. B: bits of the largest exponent d < D.
	var D big.Int
	B := 0
	if !uniform {
		var t big.Int
		D.Mul(big.NewInt(int64(L)), ln2UpNum)
		D.Mul(&D, &c.den)
		t.Mul(ln2UpDen, &c.num)
		ceilDiv(&D, &D, &t)
		t.Sub(&D, bigOne)
		B = t.BitLen()
	}
	Q := prec + B + 24
	one := new(big.Int).Lsh(bigOne, uint(Q))
	tiny := new(big.Int).Lsh(bigOne, uint(Q-L)) // 2⁻ᴸ

	var tab [][2][]big.Int // tab[g][0|1][v] = lo|hi of exp(−c·v·2^(g·tableBits))
	if B > 0 {
		tab = r.emTableFor(c, Q, B)
	}

	// Weights in the order o: every candidate but top, then top.
	sc := &r.emWork
	sc.grow(m)
	wlo, whi, slo, shi, exact := sc.wlo[:m], sc.whi[:m], sc.slo[:m], sc.shi[:m], sc.exact[:m]
	var dd, lim big.Int
	if B > 0 {
		lim.Sub(&D, bigOne)
	}
	for j := 0; j < m-1; j++ {
		i := j
		if j >= top {
			i = j + 1
		}
		d := uint64(umax) - uint64(u[i]) // u_max − uᵢ ∈ [0, 2⁶⁴−1], exact by wrap-around
		lo, hi := &wlo[j], &whi[j]
		lo.Set(one)
		hi.Set(one)
		if B == 0 {
			// No table: weights are 1 (uniform) or, for d ≥ 1 = D, at most 2⁻ᴸ.
			if !uniform && d > 0 {
				lo.SetInt64(0)
				hi.Set(tiny)
			}
			r.emOps += 2
			continue
		}
		dd.SetUint64(d)
		clamped := dd.Cmp(&D) >= 0
		if clamped {
			dd.Set(&lim) // same work; the result is replaced below
		}
		dv := dd.Uint64() // < D ≤ 2⁶⁴ when clamped, and d itself otherwise
		for g := range tab {
			var v uint64
			if sh := g * tableBits; sh < 64 {
				v = dv >> sh & (1<<tableBits - 1)
			}
			r.mulFloor(lo, lo, &tab[g][0][v], Q)
			r.mulCeil(hi, hi, &tab[g][1][v], Q)
		}
		if clamped {
			lo.SetInt64(0)
			hi.Set(tiny)
		}
	}
	wlo[m-1].Set(one)
	whi[m-1].Set(one)

	// Suffix sums, exact on the bounds; exact[j] says whether every weight
	// from j on is exactly known (all 1: the remaining utilities equal the
	// maximum, or ε = 0).
	slo[m-1].Set(one)
	shi[m-1].Set(one)
	exact[m-1] = true
	for j := m - 2; j >= 0; j-- {
		slo[j].Add(&wlo[j], &slo[j+1])
		shi[j].Add(&whi[j], &shi[j+1])
		exact[j] = exact[j+1] && wlo[j].Cmp(&whi[j]) == 0
	}

	// Digits, all of them; the outcome is the first 1.
	chosen := m - 1
	decided := true
	var a, b, rem, capN big.Int
	for j := 0; j < m-1; j++ {
		n := uint(ns[j])
		a.Lsh(&wlo[j], n)
		a.Quo(&a, &shi[j])
		b.Lsh(&whi[j], n)
		b.QuoRem(&b, &slo[j], &rem)
		if !exact[j] && rem.Sign() == 0 {
			// rⱼ < wⱼ_hi/Sⱼ_lo strictly (an inexact weight from j on is
			// above its lower bound: a bracketed exp is irrational, a
			// clamped one positive), so the digit is below this integer.
			b.Sub(&b, bigOne)
		}
		capN.Lsh(bigOne, n)
		capN.Sub(&capN, bigOne)
		if b.Cmp(&capN) > 0 {
			b.Set(&capN)
		}
		r.emOps += 2
		if a.Cmp(&b) != 0 {
			decided = false
		}
		if a.Bit(0) == 1 && chosen == m-1 {
			chosen = j
		}
	}
	if !decided {
		return 0, false
	}
	if chosen >= top && chosen != m-1 {
		chosen++
	} else if chosen == m-1 {
		chosen = top
	}
	return chosen, true
}

// emWork is emSelect's reusable storage, so that warm selections do not
// allocate.
type emWork struct {
	wlo, whi, slo, shi []big.Int
	exact              []bool
}

func (w *emWork) grow(m int) {
	if len(w.wlo) < m {
		w.wlo, w.whi = make([]big.Int, m), make([]big.Int, m)
		w.slo, w.shi = make([]big.Int, m), make([]big.Int, m)
		w.exact = make([]bool, m)
	}
}

// emTableCache keeps the last table emTable built: consecutive selections
// with the same ε (the rounds of a top-k, repeated tests) reuse it. Whether
// it is reused depends on c and Q only.
type emTableCache struct {
	num, den big.Int
	Q, B     int
	tab      [][2][]big.Int
}

func (r *Rand) emTableFor(c *emRateFrac, Q, B int) [][2][]big.Int {
	tc := &r.emCache
	if tc.tab != nil && tc.Q == Q && tc.B == B && tc.num.Cmp(&c.num) == 0 && tc.den.Cmp(&c.den) == 0 {
		return tc.tab
	}
	tc.tab = r.emTable(c, Q, B)
	tc.num.Set(&c.num)
	tc.den.Set(&c.den)
	tc.Q, tc.B = Q, B
	return tc.tab
}

// emTable returns, for each group g of tableBits bits of a B-bit exponent,
// the intervals of exp(−c·v·2^(g·tableBits)) for every value v the group can
// take, at precision Q. Entry 0 is exactly 1. The work depends on c, Q and
// B only.
func (r *Rand) emTable(c *emRateFrac, Q, B int) [][2][]big.Int {
	groups := (B + tableBits - 1) / tableBits
	const size = 1 << tableBits
	base := make([]big.Int, 2)
	r.expNeg(&base[0], &base[1], c, Q)
	one := new(big.Int).Lsh(bigOne, uint(Q))
	tab := make([][2][]big.Int, groups)
	for g := range tab {
		if g > 0 {
			for range tableBits { // base ← base^(2^tableBits)
				r.mulFloor(&base[0], &base[0], &base[0], Q)
				r.mulCeil(&base[1], &base[1], &base[1], Q)
			}
		}
		// The last group needs only the values its bits of B can take.
		n := size
		if rest := B - g*tableBits; rest < tableBits {
			n = 1 << rest
		}
		for side := range 2 {
			t := make([]big.Int, n)
			t[0].Set(one)
			for v := 1; v < n; v++ {
				if side == 0 {
					r.mulFloor(&t[v], &t[v-1], &base[0], Q)
				} else {
					r.mulCeil(&t[v], &t[v-1], &base[1], Q)
				}
			}
			tab[g][side] = t
		}
	}
	return tab
}

// expNeg sets lo ≤ exp(−c)·2^Q ≤ hi, for the c of an emTable (c < L·ln 2
// for the L of the caller, so a few dozen at most). The work depends on c
// and Q only.
//
// exp(−c) = (exp(−y))^(2^s) with y = c/2^s ≤ 1/16. exp(y) is bracketed by
// its Taylor polynomial of degree K (terms rounded down for the lower
// bound, up for the upper) plus, for the upper bound, the tail
// Σ_{k>K} yᵏ/k! ≤ 2·y^(K+1)/(K+1)! ≤ t_K/8, t_K the last term's upper
// bound (since y/(K+1) ≤ 1/16 and the ratios of later terms are below
// 1/2). Then exp(−y) ∈ [1/hi, 1/lo], and squaring s times keeps the
// bounds (values in (0, 1], products rounded outward).
func (r *Rand) expNeg(lo, hi *big.Int, c *emRateFrac, Q int) {
	var t big.Int
	ceilDiv(&t, &c.num, &c.den)
	s := t.BitLen() + 4 // 2^s ≥ 16·⌈c⌉
	W := Q + s + 16
	yLo, yHi := new(big.Int), new(big.Int)
	yLo.Lsh(&c.num, uint(W-s))
	yHi.Set(yLo)
	yLo.Quo(yLo, &c.den)
	ceilDiv(yHi, yHi, &c.den)
	one := new(big.Int).Lsh(bigOne, uint(W))
	tLo, tHi := new(big.Int).Set(one), new(big.Int).Set(one)
	sLo, sHi := new(big.Int).Set(one), new(big.Int).Set(one)
	K := W/4 + 2
	var k big.Int
	for i := 1; i <= K; i++ {
		k.SetInt64(int64(i))
		r.mulFloor(tLo, tLo, yLo, W)
		tLo.Quo(tLo, &k)
		r.mulCeil(tHi, tHi, yHi, W)
		ceilDiv(tHi, tHi, &k)
		sLo.Add(sLo, tLo)
		sHi.Add(sHi, tHi)
	}
	t.Rsh(tHi, 3)
	sHi.Add(sHi, &t)
	sHi.Add(sHi, bigOne)
	// exp(−y): [2^(2W)/sHi, 2^(2W)/sLo]
	t.Lsh(bigOne, uint(2*W))
	lo.Quo(&t, sHi)
	ceilDiv(hi, &t, sLo)
	for range s {
		r.mulFloor(lo, lo, lo, W)
		r.mulCeil(hi, hi, hi, W)
	}
	lo.Rsh(lo, uint(W-Q))
	t.Lsh(bigOne, uint(W-Q))
	ceilDiv(hi, hi, &t)
}

// mulFloor sets z = ⌊x·y/2^Q⌋ (x, y ≥ 0).
func (r *Rand) mulFloor(z, x, y *big.Int, Q int) {
	z.Mul(x, y)
	z.Rsh(z, uint(Q))
	r.emOps++
}

// mulCeil sets z = ⌈x·y/2^Q⌉ (x, y ≥ 0).
func (r *Rand) mulCeil(z, x, y *big.Int, Q int) {
	z.Mul(x, y)
	z.Add(z, r.lowMask(Q))
	z.Rsh(z, uint(Q))
	r.emOps++
}

// lowMask returns 2^Q − 1 (cached; do not modify).
func (r *Rand) lowMask(Q int) *big.Int {
	if r.maskQ != Q {
		r.mask.Lsh(bigOne, uint(Q))
		r.mask.Sub(&r.mask, bigOne)
		r.maskQ = Q
	}
	return &r.mask
}

// ceilDiv sets z = ⌈x/y⌉ for x ≥ 0, y > 0.
func ceilDiv(z, x, y *big.Int) {
	var m big.Int
	z.QuoRem(x, y, &m)
	if m.Sign() != 0 {
		z.Add(z, bigOne)
	}
}
