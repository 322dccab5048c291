package budget

import (
	"math"
)

// Cost is a privacy spend: an ε part (Laplace mechanism, exponential
// mechanism, and the ε of an (ε, δ) mechanism), a ρ-zCDP part (Gaussian
// mechanism) and a δ part (the δ of an (ε, δ) or δ-approximate zCDP
// mechanism: DP partition selection). All three compose by addition: basic
// composition of (ε, δ)-DP adds the ε's and the δ's (Dwork & Roth 2014,
// Thm 3.16), and zCDP composes additively (Bun & Steinke 2016, Lemma 1.7),
// also in its approximate form, where the δ's add too (Bun & Steinke 2016,
// §8, approximate zCDP).
//
// A spend with Delta == 0 is what the ledger recorded before δ was
// accounted: its ε part is pure ε-DP.
type Cost struct {
	Epsilon float64 `json:"epsilon"`         // ε part (pure ε-DP, or the ε of an (ε, δ) mechanism)
	Rho     float64 `json:"rho"`             // ρ-zCDP part
	Delta   float64 `json:"delta,omitempty"` // δ spent (partition selection), composed additively
}

// Add returns the composition of c and d: the parts are added separately.
func (c Cost) Add(d Cost) Cost {
	return Cost{Epsilon: c.Epsilon + d.Epsilon, Rho: c.Rho + d.Rho, Delta: c.Delta + d.Delta}
}

// IsZero reports whether c spends nothing.
func (c Cost) IsZero() bool { return c.Epsilon == 0 && c.Rho == 0 && c.Delta == 0 }

// DeltaFor is the δ of the (EpsilonFor(total, delta), DeltaFor(total,
// delta))-DP guarantee of a total spend: the δ spent (total.Delta) plus,
// when there is a ρ-zCDP part, the δ at which it was converted. This is
// the δ that a limit's MaxDelta bounds only in its first term: the
// conversion δ belongs to the limit (Limit.Delta) and is never spent, so a
// scope whose δ budget is exhausted still answers with Laplace and
// Gaussian measurements over declared domains.
func DeltaFor(total Cost, delta float64) float64 {
	if total.Rho == 0 {
		return total.Delta
	}
	return total.Delta + delta
}

// zcdpToEpsilon is the ε of the (ε, δ)-DP guarantee implied by ρ-zCDP:
//
//	ε = ρ + 2·√(ρ·ln(1/δ))
//
// Bun & Steinke, "Concentrated Differential Privacy: Simplifications,
// Extensions, and Lower Bounds", TCC 2016, Proposition 1.3 (arXiv:1605.02065).
func zcdpToEpsilon(rho, logInvDelta float64) float64 {
	return rho + 2*math.Sqrt(rho*logInvDelta)
}

// EpsilonFor converts a total spend to the ε of an (ε, δ)-DP guarantee at δ.
//
// If total.Rho == 0 the spend is pure ε-DP and the answer is total.Epsilon
// (basic composition; δ is not used and may be 0). Otherwise it is the
// smaller of two valid bounds, both (ε, δ)-DP at the same δ:
//
//	(a) ε_a = Epsilon + ρ + 2·√(ρ·ln(1/δ))
//	    The Gaussian part is (ρ + 2√(ρ ln(1/δ)), δ)-DP (Bun & Steinke 2016,
//	    Prop. 1.3); composing it with the (Epsilon, 0)-DP pure part adds the
//	    ε's and the δ's (Dwork & Roth 2014, Thm 3.16).
//	(b) ε_b = ρ' + 2·√(ρ'·ln(1/δ)),  ρ' = ρ + Epsilon²/2
//	    Pure ε-DP implies (ε²/2)-zCDP (Bun & Steinke 2016, Prop. 1.4), zCDP
//	    composes additively (Lemma 1.7), and ρ' converts by Prop. 1.3.
//
// (a) is better while the pure part is large, (b) when it is small.
//
// Both stay valid when the spend includes (ε, δ) mechanisms (Delta > 0):
// an (ε, δ)-DP mechanism is δ-approximately (ε²/2)-zCDP, approximate zCDP
// composes by adding ρ's and δ's, and δ-approximate ρ-zCDP converts to
// (ρ + 2√(ρ·ln(1/δ')), δ + δ')-DP (Bun & Steinke 2016, §8). So the ε
// returned holds at δ' = delta plus the δ spent: see DeltaFor.
// δ must be in (0, 1) when total.Rho > 0; otherwise no finite ε is
// guaranteed and EpsilonFor returns +Inf, so any limit refuses the spend.
// A negative or NaN part also yields +Inf or NaN; the ledger rejects such
// costs before they reach here.
func EpsilonFor(total Cost, delta float64) float64 {
	if total.Rho == 0 {
		return total.Epsilon
	}
	if !(delta > 0 && delta < 1) || total.Rho < 0 || math.IsNaN(total.Rho) {
		return math.Inf(1)
	}
	l := math.Log(1 / delta)
	a := total.Epsilon + zcdpToEpsilon(total.Rho, l)
	b := zcdpToEpsilon(total.Rho+total.Epsilon*total.Epsilon/2, l)
	return math.Min(a, b)
}

// RhoForEpsilon returns the largest ρ whose (ε, δ) conversion (Bun &
// Steinke 2016, Prop. 1.3) is at most eps: solving ρ + 2√(ρL) = eps with
// L = ln(1/δ) gives (√ρ + √L)² = eps + L, so
//
//	ρ = (√(L + eps) − √L)² = (eps / (√(L + eps) + √L))²
//
// The second form is the one computed: it avoids cancellation when eps is
// small against L. EpsilonFor(Cost{Rho: RhoForEpsilon(e, d)}, d) equals e up
// to rounding. It returns 0 (no Gaussian measurement is affordable) when
// eps ≤ 0 or is NaN, or when δ is not in (0, 1); +Inf for eps = +Inf.
func RhoForEpsilon(eps, delta float64) float64 {
	if !(eps > 0) || !(delta > 0 && delta < 1) {
		return 0
	}
	if math.IsInf(eps, 1) {
		return eps
	}
	l := math.Log(1 / delta)
	r := eps / (math.Sqrt(l+eps) + math.Sqrt(l))
	return r * r
}
