package planner

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"

	"github.com/dpproxy/dpproxy/catalog"
)

// Marginal workloads and strategies.
//
// Over attributes of sizes n_1..n_d, let P0 = J/n (projection on the
// constants) and P1 = I − P0 per attribute, and E_T = ⊗_{i∈T}P1 ⊗_{i∉T}P0
// for T ⊆ [d]: 2^d orthogonal projections of rank r_T = Π_{i∈T}(n_i − 1)
// summing to I. The marginal on S, M_S = ⊗_{i∈S}I ⊗_{i∉S}1ᵀ, has
// M_SᵀM_S = Π_{i∉S}n_i · Σ_{T⊆S} E_T. So a workload of marginals (weight 1
// each) has Gram Σ_T μ_T E_T with μ_T = Σ_{S⊇T} Π_{i∉S}n_i, a strategy of
// marginals with weights v_S has AᵀA = Σ_T λ_T E_T with
// λ_T = Σ_{S⊇T} v_S² Π_{i∉S}n_i, and the error per unit noise variance is
//
//	trace(WᵀW(AᵀA)⁺) = Σ_T r_T μ_T / λ_T,
//
// computed in O(4^d) with no matrix over the N = Π n_i cells. The
// singular values of W are √μ_T (multiplicity r_T), so the SVD bound is
// (Σ_T r_T √μ_T)²/N.

// MarginalWorkload is a set of marginals (each a bitmask of attributes)
// over attributes of the given sizes.
type MarginalWorkload struct {
	Sizes []int
	Sets  []uint
}

// AllMarginals is every k-way marginal over the attributes.
func AllMarginals(sizes []int, k int) MarginalWorkload {
	w := MarginalWorkload{Sizes: sizes}
	d := len(sizes)
	for s := uint(0); s < 1<<d; s++ {
		if bits.OnesCount(s) == k {
			w.Sets = append(w.Sets, s)
		}
	}
	return w
}

type marginalAlgebra struct {
	d     int
	sizes []int
	n     float64   // cells
	r     []float64 // r_T
	c     []float64 // Π_{i∉S} n_i
	mu    []float64 // μ_T
	// coef[T] is the workload's error coefficient on E_T: the error per
	// unit noise variance is Σ_T coef_T/λ_T. For a union of marginals
	// coef_T = r_T·μ_T; for any other workload it is Σ_w w·E_T·wᵀ over
	// the workload's rows (see space.marginalCoefficients).
	coef []float64
}

func newMarginalAlgebra(w MarginalWorkload) *marginalAlgebra {
	d := len(w.Sizes)
	a := &marginalAlgebra{d: d, sizes: w.Sizes, n: 1}
	for _, s := range w.Sizes {
		a.n *= float64(s)
	}
	m := 1 << d
	a.r, a.c, a.mu = make([]float64, m), make([]float64, m), make([]float64, m)
	for t := 0; t < m; t++ {
		a.r[t], a.c[t] = 1, 1
		for i := 0; i < d; i++ {
			if t&(1<<i) != 0 {
				a.r[t] *= float64(w.Sizes[i] - 1)
			} else {
				a.c[t] *= float64(w.Sizes[i])
			}
		}
	}
	for _, s := range w.Sets {
		for t := int(s); ; t = (t - 1) & int(s) { // subsets of s
			a.mu[t] += a.c[s]
			if t == 0 {
				break
			}
		}
	}
	a.coef = make([]float64, m)
	for t := range a.coef {
		a.coef[t] = a.r[t] * a.mu[t]
	}
	return a
}

// newMarginalAlgebraCoef is the algebra over attributes of the given sizes
// for a workload known only by its coefficients coef_T.
func newMarginalAlgebraCoef(sizes []int, coef []float64) *marginalAlgebra {
	a := newMarginalAlgebra(MarginalWorkload{Sizes: sizes})
	a.coef = coef
	return a
}

// lambda returns λ_T for marginal weights v (indexed by subset).
func (a *marginalAlgebra) lambda(v []float64) []float64 {
	m := 1 << a.d
	lam := make([]float64, m)
	for s := 0; s < m; s++ {
		if v[s] == 0 {
			continue
		}
		w := v[s] * v[s] * a.c[s]
		for t := s; ; t = (t - 1) & s {
			lam[t] += w
			if t == 0 {
				break
			}
		}
	}
	return lam
}

// unit is Σ_T coef_T/λ_T (+Inf when some needed λ_T is 0).
func (a *marginalAlgebra) unit(lam []float64) float64 {
	e := 0.0
	for t, c := range a.coef {
		if c == 0 {
			continue
		}
		if lam[t] <= 0 {
			return math.Inf(1)
		}
		e += c / lam[t]
	}
	return e
}

func (a *marginalAlgebra) svdBound() float64 {
	s := 0.0
	for t, mu := range a.mu {
		if mu > 0 {
			s += a.r[t] * math.Sqrt(mu)
		}
	}
	return s * s / a.n
}

// optimiseWeights minimises Δ(v)²·Σ_T coef_T/λ_T(v) over v ≥ 0, where a
// weighted union of marginals has largest column norm Δ = Σ_S v_S (L1,
// Laplace: OPT_M's objective) or √Σ_S v_S² (L2, Gaussian), from several
// starts, and returns the best v normalised to Δ = 1.
func (a *marginalAlgebra) optimiseWeights(sets []uint, l2 bool, deadline time.Time) []float64 {
	m := 1 << a.d
	f := func(v, grad []float64) float64 {
		sum := weightNorm(v, l2) // Δ (L1) or Δ² (L2)
		lam := a.lambda(v)
		e := a.unit(lam)
		if math.IsInf(e, 1) || sum == 0 {
			for i := range grad {
				grad[i] = 0
			}
			return math.Inf(1)
		}
		// ∂e/∂v_S = −2 v_S c_S Σ_{T⊆S} coef_T/λ_T².
		for s := 0; s < m; s++ {
			acc := 0.0
			for t := s; ; t = (t - 1) & s {
				if a.coef[t] > 0 {
					acc += a.coef[t] / (lam[t] * lam[t])
				}
				if t == 0 {
					break
				}
			}
			de := -2 * v[s] * a.c[s] * acc
			if l2 {
				grad[s] = 2*v[s]*e + sum*de
			} else {
				grad[s] = 2*sum*e + sum*sum*de
			}
		}
		if l2 {
			return sum * e
		}
		return sum * sum * e
	}
	var best []float64
	bestF := math.Inf(1)
	starts := [][]float64{make([]float64, m), make([]float64, m), make([]float64, m)}
	for _, s := range sets {
		starts[0][s] = 1
		starts[1][s] = 1
	}
	for s := 0; s < m; s++ {
		starts[1][s] += 0.05
		starts[2][s] = 1 / (1 + float64(bits.OnesCount(uint(s))))
	}
	for _, v := range starts {
		if time.Now().After(deadline) && best != nil {
			break
		}
		fv, _ := projLBFGS(f, v, projOpts{maxIter: 2000, relTol: 1e-10, patience: 30, deadline: deadline})
		if fv < bestF {
			bestF, best = fv, slices.Clone(v)
		}
	}
	norm := weightNorm(best, l2)
	if l2 {
		norm = math.Sqrt(norm)
	}
	for i := range best {
		best[i] /= norm
	}
	return best
}

// weightNorm is Σ v (L1) or Σ v² (L2) over non-negative weights: a
// weighted union of marginals' Δ₁, or its Δ₂².
func weightNorm(v []float64, l2 bool) float64 {
	s := 0.0
	for _, x := range v {
		if l2 {
			s += x * x
		} else {
			s += x
		}
	}
	return s
}

// roundWeights turns real weights (Σ = 1) into integers with Σ ≤ K.
func roundWeights(v []float64, k float64) []float64 {
	keep := -1
	return roundColumn(v, k, false, keep)
}

// ChooseMarginals plans a marginal workload: the identity (every cell), the
// workload's own marginals with equal weights, and optimised weights over
// all marginals — for Laplace a local optimum of (Σv)²Σ_T r_Tμ_T/λ_T (the
// objective of HDMM's OPT_M), for Gaussian the closed-form optimum
// λ_T ∝ √μ_T, which meets the SVD bound (measured through integer
// pairwise-difference blocks, see gaussMarginal).
func (pl *Planner) ChooseMarginals(w MarginalWorkload, opt Options) (*GramPlan, error) {
	if err := opt.validate(); err != nil {
		return nil, err
	}
	if len(w.Sizes) == 0 || len(w.Sizes) > 20 {
		return nil, fmt.Errorf("planner: marginal workloads need 1..20 attributes")
	}
	start := time.Now()
	a := newMarginalAlgebra(w)
	gauss := opt.Noise == catalog.Gaussian
	plan := &GramPlan{Options: opt, SVDBound: a.svdBound()}
	add := func(name string, sens, unit float64, t0 time.Time) {
		_, _, v := calibrate(opt, sens)
		plan.Candidates = append(plan.Candidates, Candidate{Name: name, Sensitivity: sens,
			TotalSquaredError: v * unit, Unit: sens * sens * unit, Seconds: time.Since(t0).Seconds()})
	}
	m := 1 << a.d
	// Identity: λ_T = 1.
	t0 := time.Now()
	full := make([]float64, m)
	full[m-1] = 1
	add("identity", 1, a.unit(a.lambda(full)), t0)
	// The workload's marginals.
	t0 = time.Now()
	eq := make([]float64, m)
	for _, s := range w.Sets {
		eq[s] = 1
	}
	sens := float64(len(w.Sets))
	if gauss {
		sens = math.Sqrt(sens)
	}
	add("marginals", sens, a.unit(a.lambda(eq)), t0)
	t0 = time.Now()
	if gauss {
		sens, unit, _ := a.gaussMarginal()
		add("opt-marginals-gauss", sens, unit, t0)
	} else {
		v := a.optimiseWeights(w.Sets, false, pl.optimiseDeadline(64, 1))
		k := roundWeights(v, gridLaplace)
		s := 0.0
		for _, x := range k {
			s += x
		}
		add("opt-marginals", s, a.unit(a.lambda(k)), t0)
	}
	slices.SortStableFunc(plan.Candidates, func(x, y Candidate) int {
		return cmp.Compare(x.TotalSquaredError, y.TotalSquaredError)
	})
	plan.Seconds = time.Since(start).Seconds()
	return plan, nil
}

// gaussMarginal is the Gaussian-optimal marginal strategy. Per attribute
// let D_i be the matrix of all pairwise differences e_x − e_y (x < y): its
// rows are orthogonal to the constants and D_iᵀD_i = n_i·I − J = n_i·P1
// exactly, with every column of squared norm n_i − 1. Block T measures
// w_T·(⊗_{i∈T}D_i ⊗_{i∉T}1ᵀ) (integer entries 0, ±w_T), and
//
//	AᵀA = Σ_T w_T² Π_{i∈T}n_i Π_{i∉T}n_i E_T = N·Σ_T w_T² E_T,
//	error/σ² = Σ_T r_T μ_T/(N w_T²),   Δ₂² = Σ_T w_T² r_T,
//
// minimised by w_T² ∝ √μ_T with value (Σ_T r_T√μ_T)²/N: the SVD bound,
// reached up to the rounding of the integer weights w_T (≈ 10⁻⁷). Blocks
// have Π_{i∈T} n_i(n_i−1)/2 rows, so measuring is practical only for
// short attributes; planning is O(4^d) for any domain.
func (a *marginalAlgebra) gaussMarginal() (sens, unit float64, weights []float64) {
	m := 1 << a.d
	top := 0.0
	for t := 0; t < m; t++ {
		top = math.Max(top, a.mu[t])
	}
	s2, e := 0.0, 0.0
	weights = make([]float64, m)
	for t := 0; t < m; t++ {
		if a.mu[t] == 0 {
			continue
		}
		w := math.Max(1, math.Round(gridGauss*math.Sqrt(math.Sqrt(a.mu[t]/top))))
		weights[t] = w
		s2 += w * w * a.r[t]
		e += a.r[t] * a.mu[t] / (a.n * w * w)
	}
	return math.Sqrt(s2), e, weights
}
