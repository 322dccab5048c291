package planner

import (
	"math"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
)

// integerScale finds the smallest k ≤ 64 such that k·v is integer.
func integerScale(v []float64) (float64, bool) {
	for k := 1.0; k <= 64; k++ {
		ok := true
		for _, x := range v {
			if y := k * x; math.Abs(y-math.Round(y)) > 1e-9 {
				ok = false
				break
			}
		}
		if ok {
			return k, true
		}
	}
	return 0, false
}

// maxDenseCells bounds exact enumeration of the product domain when
// computing the direct strategy's sensitivity; beyond it a safe upper bound
// is used.
const maxDenseCells = 1 << 22

// direct chooses, for measuring the workload rows themselves, each
// aggregate's integer scale k_a, and returns the exact sensitivity of the
// scaled rows. Within one query the groups partition the cells, so a
// cell's column norm sums over aggregates and queries only:
// Δ₁ = max_cell Σ_a k_a|v_a(cell)|, Δ₂² = max_cell Σ_a k_a²v_a(cell)².
//
// k_a is a multiple of the least g_a making k_a·v_a integer (so the
// measurement is exact). Scaling changes how the noise is shared: answer a
// has variance ∝ Δ(k)²/k_a², so an aggregate with small values (a COUNT
// beside a SUM of hours) gets a larger k_a. With c_a its weighted number of
// answers and m_a = max|v_a|, Δ ≈ Σ k_a m_a (L1) is minimised at
// k_a ∝ (c_a/m_a)^{1/3}, and Δ² ≈ Σ k_a² m_a² (L2) at k_a ∝ c_a^{1/4}/m_a^{1/2};
// those targets are rounded to multiples of g_a, the exact sensitivity is
// computed for them, and they are kept only if they beat k = g.
func (s *space) direct(fam catalog.NoiseFamily) (scale [][]float64, sens float64, ok bool) {
	w := s.w
	gauss := fam == catalog.Gaussian
	base, maxAbs, ok := s.directBase()
	if !ok {
		return nil, 0, false
	}
	sens = s.directSensitivity(base, gauss)
	if sens == 0 {
		return base, 1, true // every row is identically zero; any positive calibration is safe
	}
	// Target scales, relative to the smallest, at a resolution of 1/16.
	target := make([][]float64, len(base))
	lo := math.Inf(1)
	for q, qu := range w.Queries {
		target[q] = make([]float64, len(base[q]))
		for a := range base[q] {
			c := float64(qu.LiveRows(w, a)) * s.wt(q, a)
			m := maxAbs[q][a]
			if m == 0 {
				continue
			}
			t := math.Cbrt(c / m)
			if gauss {
				t = math.Sqrt(math.Sqrt(c) / m)
			}
			target[q][a] = t
			lo = math.Min(lo, t/base[q][a])
		}
	}
	mult := make([][]float64, len(base))
	common := 0.0
	for q := range base {
		mult[q] = make([]float64, len(base[q]))
		for a, g := range base[q] {
			j := 1.0
			if target[q][a] > 0 && !math.IsInf(lo, 0) {
				j = math.Max(1, math.Round(16*target[q][a]/(lo*g)))
			}
			mult[q][a] = j
			common = gcd(common, j)
		}
	}
	// A common factor of the multipliers changes no error: divide it out.
	tuned := make([][]float64, len(base))
	changed := false
	for q := range base {
		tuned[q] = make([]float64, len(base[q]))
		for a, g := range base[q] {
			j := mult[q][a] / common
			tuned[q][a] = g * j
			changed = changed || j != 1
		}
	}
	if !changed || !integerScales(tuned) {
		return base, sens, true
	}
	tunedSens := s.directSensitivity(tuned, gauss)
	_, wb := s.directError(base)
	_, wt := s.directError(tuned)
	if tunedSens*tunedSens*wt < sens*sens*wb {
		return tuned, tunedSens, true
	}
	return base, sens, true
}

// integerScales reports whether every scale is an integer small enough
// that scaled counts stay exact in float64.
func integerScales(k [][]float64) bool {
	for _, r := range k {
		for _, x := range r {
			if x != math.Trunc(x) || x > 1<<20 {
				return false
			}
		}
	}
	return true
}

// directError is the direct strategy's error per unit noise variance,
// Σ_{q,a} groups_q/k_{q,a}², unweighted and weighted by answerWeights.
func (s *space) directError(scale [][]float64) (unit, weighted float64) {
	for q, qu := range s.w.Queries {
		for a := range qu.Aggregates {
			e := float64(qu.LiveRows(s.w, a)) / (scale[q][a] * scale[q][a])
			unit += e
			weighted += s.wt(q, a) * e
		}
	}
	return unit, weighted
}

// directBase returns each aggregate's least integerising scale and its
// largest absolute value over the cells. On large domains, where the
// product domain is not enumerated, the scale of a term is the product of
// its coefficient's and factors' scales (exact: a product of k_i·f_i
// integers) and an aggregate's the least common multiple over its terms;
// the largest value is bounded by the sum over terms of |coef|·Π max|f|.
func (s *space) directBase() (scale, maxAbs [][]float64, ok bool) {
	w := s.w
	sizes := w.Sizes()
	dense := productCells(sizes) <= maxDenseCells
	for _, q := range w.Queries {
		var qs, qm []float64
		for _, agg := range q.Aggregates {
			if dense {
				vals := Dense(agg, sizes)
				k, good := integerScale(vals)
				if !good {
					return nil, nil, false
				}
				m := 0.0
				for _, v := range vals {
					m = math.Max(m, math.Abs(v))
				}
				qs, qm = append(qs, k), append(qm, m)
				continue
			}
			k, m := 1.0, 0.0
			for _, t := range agg {
				tk, good := integerScale([]float64{t.Coef})
				if !good {
					return nil, nil, false
				}
				p := math.Abs(t.Coef)
				for _, f := range t.Factors {
					if f == nil {
						continue
					}
					fk, good := integerScale(f)
					if !good {
						return nil, nil, false
					}
					tk *= fk
					mx := 0.0
					for _, x := range f {
						mx = math.Max(mx, math.Abs(x))
					}
					p *= mx
				}
				k = k / gcd(k, tk) * tk
				m += p
			}
			if k > 1<<20 {
				return nil, nil, false
			}
			qs, qm = append(qs, k), append(qm, m)
		}
		scale, maxAbs = append(scale, qs), append(maxAbs, qm)
	}
	return scale, maxAbs, true
}

// directSensitivity is the exact largest column norm of the scaled rows
// (enumerating the product domain up to maxDenseCells cells; beyond it the
// safe bound Σ k_a·max|v_a|, or its L2 analogue).
func (s *space) directSensitivity(scale [][]float64, gauss bool) float64 {
	w := s.w
	sizes := w.Sizes()
	if productCells(sizes) > maxDenseCells {
		_, maxAbs, _ := s.directBase()
		b := 0.0
		for q := range scale {
			for a, k := range scale[q] {
				if gauss {
					b += k * k * maxAbs[q][a] * maxAbs[q][a]
				} else {
					b += k * maxAbs[q][a]
				}
			}
		}
		if gauss {
			b = math.Sqrt(b)
		}
		return b
	}
	acc := make([]float64, int(productCells(sizes)))
	for q, qu := range w.Queries {
		for a, agg := range qu.Aggregates {
			k := scale[q][a]
			for i, v := range Dense(agg, sizes) {
				if gauss {
					acc[i] += k * k * v * v
				} else {
					acc[i] += k * math.Abs(v)
				}
			}
		}
	}
	b := 0.0
	for _, v := range acc {
		b = math.Max(b, v)
	}
	if gauss {
		b = math.Sqrt(b)
	}
	return b
}

// Dense expands a structured linear query over the product domain
// (row-major, last column fastest), term by term as Kronecker products:
// O(cells) per term.
func Dense(l compile.Linear, sizes []int) []float64 {
	n := 1
	for _, s := range sizes {
		n *= s
	}
	out := make([]float64, n)
	buf := make([]float64, n)
	for _, t := range l {
		// buf = coef·(f_1 ⊗ … ⊗ f_d), built from the last column up.
		cur := buf[:1]
		cur[0] = t.Coef
		size := 1
		for j := len(sizes) - 1; j >= 0; j-- {
			f := t.Factors[j]
			nj := sizes[j]
			// new[i*size + r] = f[i]·cur[r]; write from the top so cur (at
			// the front of buf) is read before it is overwritten.
			for i := nj - 1; i >= 0; i-- {
				c := 1.0
				if f != nil {
					c = f[i]
				}
				dst := buf[i*size : (i+1)*size]
				if i == 0 {
					for r := range dst {
						dst[r] *= c
					}
					continue
				}
				for r := range dst {
					dst[r] = c * buf[r]
				}
			}
			size *= nj
			cur = buf[:size]
		}
		for i, v := range cur {
			out[i] += v
		}
	}
	return out
}

func gcd(a, b float64) float64 {
	for b != 0 {
		a, b = b, math.Mod(a, b)
	}
	return a
}
