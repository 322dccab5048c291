package compile

import (
	"math"
	"slices"
)

// Factor is a vector over one column's domain cells; nil stands for the
// all-ones vector (the column is not constrained).
type Factor []float64

// Term is Coef × (Factors[0] ⊗ Factors[1] ⊗ ...), one factor per batch column.
type Term struct {
	Coef    float64
	Factors []Factor
}

// Linear is a linear query over the product domain: the sum of its terms.
// A predicate's truth table is a Linear with 0/1 values.
type Linear []Term

// maxTerms bounds the structured size of one predicate. Inclusion–exclusion
// across columns can grow terms exponentially in the number of OR/NOT
// alternations; past this bound a query is refused rather than planned slowly.
const maxTerms = 256

func ones(d int) Linear { return Linear{{Coef: 1, Factors: make([]Factor, d)}} }

func single(d, col int, v []float64) Linear {
	t := Term{Coef: 1, Factors: make([]Factor, d)}
	t.Factors[col] = canonical(v)
	return Linear{t}
}

// canonical returns nil for an all-ones vector, so equal queries compare
// equal however they were built.
func canonical(f Factor) Factor {
	for _, v := range f {
		if v != 1 {
			return f
		}
	}
	return nil
}

// mulFactor is the element-wise product; nil is the identity. A product
// equal to one of its operands (a WHERE window's indicator times a group's
// inside it) is that operand, shared, not a copy: over five years of
// hourly bins each DATE(ts) group's factor is 43,824 values, and factors
// are never modified once built. zero reports whether the product is all
// zeros, found in the same passes (an indicator's first non-zero is
// anywhere in its cells, and Mul asks it of every product).
func mulFactor(a, b Factor) (f Factor, zero bool) {
	if a == nil {
		return b, isZero(b)
	}
	if b == nil {
		return a, isZero(a)
	}
	if ok, z := productIs(a, b, b); ok {
		return b, z
	}
	if ok, z := productIs(b, a, a); ok {
		return a, z
	}
	out := make(Factor, len(a))
	zero = true
	for i := range a {
		out[i] = a[i] * b[i]
		zero = zero && out[i] == 0
	}
	return out, zero
}

// productIs reports whether a∘b = p, bit for bit, and if so whether p is
// all zeros.
func productIs(a, b, p Factor) (ok, zero bool) {
	zero = true
	for i := range a {
		x := a[i] * b[i]
		if math.Float64bits(x) != math.Float64bits(p[i]) {
			return false, false
		}
		zero = zero && x == 0
	}
	return true, zero
}

func isZero(f Factor) bool {
	if f == nil {
		return false
	}
	for _, v := range f {
		if v != 0 {
			return false
		}
	}
	return true
}

func factorEqual(a, b Factor) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return slices.Equal(a, b)
}

// Mul is the element-wise product of two linear queries (AND of predicates).
func Mul(a, b Linear) Linear {
	var out Linear
	for _, ta := range a {
		for _, tb := range b {
			t := Term{Coef: ta.Coef * tb.Coef, Factors: make([]Factor, len(ta.Factors))}
			zero := false
			for j := range ta.Factors {
				f, z := mulFactor(ta.Factors[j], tb.Factors[j])
				t.Factors[j] = canonical(f)
				if z {
					zero = true
					break
				}
			}
			if !zero && t.Coef != 0 {
				out = append(out, t)
			}
		}
	}
	return simplify(out)
}

// AddScaled returns a + s·b.
func AddScaled(a Linear, s float64, b Linear) Linear {
	out := slices.Clone(a)
	for _, t := range b {
		out = append(out, Term{Coef: s * t.Coef, Factors: t.Factors})
	}
	return simplify(out)
}

// simplify merges terms that differ in at most one factor:
// c1·(X ⊗ u) + c2·(X ⊗ v) = 1·(X ⊗ (c1·u + c2·v)). This keeps
// predicates local to one column (ORs of values, ranges) at one term.
func simplify(ts Linear) Linear {
	ts = slices.Clone(ts)
	for changed := true; changed; {
		changed = false
	outer:
		for i := 0; i < len(ts); i++ {
			for k := i + 1; k < len(ts); k++ {
				diff := -1
				for j := range ts[i].Factors {
					if !factorEqual(ts[i].Factors[j], ts[k].Factors[j]) {
						if diff >= 0 {
							diff = -2
							break
						}
						diff = j
					}
				}
				if diff == -2 {
					continue
				}
				merged := ts[i]
				if diff == -1 {
					merged.Coef += ts[k].Coef
				} else {
					merged.Factors = slices.Clone(merged.Factors)
					merged.Factors[diff] = canonicalCombine(ts[i].Coef, ts[i].Factors[diff], ts[k].Coef, ts[k].Factors[diff], len(firstNonNil(ts[i].Factors[diff], ts[k].Factors[diff])))
					merged.Coef = 1
				}
				ts = slices.Delete(ts, k, k+1)
				ts[i] = merged
				changed = true
				break outer
			}
		}
	}
	return slices.DeleteFunc(ts, func(t Term) bool {
		if t.Coef == 0 {
			return true
		}
		for _, f := range t.Factors {
			if isZero(f) {
				return true
			}
		}
		return false
	})
}

func firstNonNil(a, b Factor) Factor {
	if a != nil {
		return a
	}
	return b
}

func canonicalCombine(ca float64, a Factor, cb float64, b Factor, n int) Factor {
	return canonical(combine(ca, a, cb, b, n))
}

func combine(ca float64, a Factor, cb float64, b Factor, n int) Factor {
	out := make(Factor, n)
	for i := range out {
		va, vb := 1.0, 1.0
		if a != nil {
			va = a[i]
		}
		if b != nil {
			vb = b[i]
		}
		out[i] = ca*va + cb*vb
	}
	return out
}

// Eval evaluates the linear query at one cell of the product domain
// (cell[j] indexes column j's domain). It is the brute-force reference used
// by tests and by exact sensitivity computation on small domains.
func (l Linear) Eval(cell []int) float64 {
	s := 0.0
	for _, t := range l {
		p := t.Coef
		for j, f := range t.Factors {
			if f != nil {
				p *= f[cell[j]]
			}
		}
		s += p
	}
	return s
}
