package noise

import "math"

// DiscreteLaplaceVariance returns the exact variance of the discrete
// Laplace distribution with scale t (P(z) ∝ exp(−|z|/t)):
// 2q/(1−q)² with q = exp(−1/t), evaluated with expm1 for accuracy.
// It returns 0 for t = 0, +Inf for t = +Inf and NaN for t < 0 or NaN.
// For planning only; it makes no sampling decision.
func DiscreteLaplaceVariance(t float64) float64 {
	switch {
	case math.IsNaN(t) || t < 0:
		return math.NaN()
	case t == 0:
		return 0
	case math.IsInf(t, 1):
		return math.Inf(1)
	}
	q := math.Exp(-1 / t)
	oneMinusQ := -math.Expm1(-1 / t)
	return 2 * q / (oneMinusQ * oneMinusQ)
}

// DiscreteGaussianVariance returns the exact variance of the discrete
// Gaussian distribution with parameter σ² = sigma2
// (P(z) ∝ exp(−z²/(2σ²))), which is slightly below σ².
// It returns 0 for σ² = 0, +Inf for +Inf and NaN for negative or NaN.
// For planning only; it makes no sampling decision.
//
// For σ² < 1 it sums Σz²e^{−z²/2σ²} / Σe^{−z²/2σ²} directly; otherwise
// it uses the Poisson-summation form
// σ²·Σₖ(1−4π²σ²k²)e^{−2π²σ²k²} / Σₖe^{−2π²σ²k²}, whose terms vanish so
// fast that a few suffice. Both converge to double precision.
func DiscreteGaussianVariance(sigma2 float64) float64 {
	switch {
	case math.IsNaN(sigma2) || sigma2 < 0:
		return math.NaN()
	case sigma2 == 0:
		return 0
	case math.IsInf(sigma2, 1):
		return math.Inf(1)
	}
	if sigma2 < 1 {
		return gaussVarDirect(sigma2)
	}
	return gaussVarDual(sigma2)
}

// gaussVarDirect sums over the integers. Terms decay like e^{−z²/2σ²};
// the loop stops once they are negligible (σ² is small here, so only a
// handful of terms are needed, but it is correct for any σ²).
func gaussVarDirect(sigma2 float64) float64 {
	num, den := 0.0, 1.0
	for z := 1.0; ; z++ {
		w := math.Exp(-z * z / (2 * sigma2))
		if w == 0 || (z*z > sigma2 && z*z*w <= 1e-18*num) {
			break
		}
		num += 2 * z * z * w
		den += 2 * w
	}
	return num / den
}

// gaussVarDual uses the Poisson-summation (Fourier-dual) series.
func gaussVarDual(sigma2 float64) float64 {
	c := 2 * math.Pi * math.Pi * sigma2 // 2π²σ²
	num, den := 1.0, 1.0
	for k := 1.0; ; k++ {
		e := math.Exp(-c * k * k)
		if e == 0 || 2*c*k*k*e <= 1e-18 {
			break
		}
		num += 2 * (1 - 2*c*k*k) * e
		den += 2 * e
	}
	return sigma2 * num / den
}
