package planner

import "fmt"

// centredPrefixGram is the Gram matrix of the prefix workload over B cells
// with each block's total known: Π·G·Π + κ·(tr G/B²)·11ᵀ, G = PrefixGram,
// Π = I − 11ᵀ/B the projection off the total. A block strategy's totals
// are measured by its Top strategy, so the strategy measuring each block
// should spend little on the total and all on the prefixes' deviations
// from it; the small κ keeps the Gram positive definite (and the block's
// strategy full rank). At 8,760 cells in blocks of 256 it takes the
// block strategy from 8.85 to 7.80 times the SVD bound (per unit
// sensitivity; TestBlockPrefixAgainstDense checks errors whatever the
// strategy). Products are O(B), as the prefix Gram's.
type centredPrefixGram struct {
	Size  int
	Kappa float64
}

func (g centredPrefixGram) N() int { return g.Size }
func (g centredPrefixGram) Key() string {
	return fmt.Sprintf("prefix-centred/%d/%g", g.Size, g.Kappa)
}

// diagTotal is κ·tr(G)/B², tr G = Σ_i (B − i) = B(B+1)/2.
func (g centredPrefixGram) diagTotal() float64 {
	n := float64(g.Size)
	return g.Kappa * (n * (n + 1) / 2) / (n * n)
}

// MulVec: Π·G·Π·v + κ'(1ᵀv)·1, Π·u = u − mean(u)·1.
func (g centredPrefixGram) MulVec(dst, v []float64) {
	n := g.Size
	u := make([]float64, n)
	sum := 0.0
	for _, x := range v {
		sum += x
	}
	for i, x := range v {
		u[i] = x - sum/float64(n)
	}
	PrefixGram{Size: n}.MulVec(dst, u)
	mean := 0.0
	for _, x := range dst {
		mean += x
	}
	mean /= float64(n)
	k := g.diagTotal() * sum
	for i := range dst {
		dst[i] += k - mean
	}
}

// Diag: G_ii − 2(G1)_i/B + 1ᵀG1/B² + κ'.
func (g centredPrefixGram) Diag() []float64 {
	n := g.Size
	ones := make([]float64, n)
	for i := range ones {
		ones[i] = 1
	}
	g1 := make([]float64, n)
	PrefixGram{Size: n}.MulVec(g1, ones)
	total := 0.0
	for _, x := range g1 {
		total += x
	}
	d := PrefixGram{Size: n}.Diag()
	for i := range d {
		d[i] += -2*g1[i]/float64(n) + total/float64(n*n) + g.diagTotal()
	}
	return d
}

// mulCost is one product's multiply-adds (see mulCost in effort.go).
func (g centredPrefixGram) mulCost() float64 { return 8 * float64(g.Size) }
