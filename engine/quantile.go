package engine

import (
	"math"

	"github.com/dpproxy/dpproxy/compile"
)

// quantile answers DP_QUANTILE(c, q) on row r from the noisy CDF of c:
// the prefix counts F̂_k (rows with a value at most the k-th cell's),
// measured like any aggregate. Post-processing, free:
//
//  1. isotonic regression (pool-adjacent-violators, least squares): the
//     non-decreasing sequence nearest to F̂, clamped at zero;
//  2. the answer is the value of the first cell k whose count reaches
//     q·F̃_n, F̃_n the regressed total (NULL when that total is below one:
//     too few values to place a quantile).
//
// Error bound: isotonic regression does not increase the largest error of
// a sequence whose truth is non-decreasing (‖F̃ − F‖∞ ≤ ‖F̂ − F‖∞ =: E),
// so the answer's rank (the true count of rows at most its value) is
// within (1 + q)·E of q·N, N the true count of values: F(k) ≥ q·F̃_n − E
// ≥ q·N − (1 + q)·E, and F(k − 1) < q·F̃_n + E ≤ q·N + (1 + q)·E. E is
// at most z·s with probability ≥ 95%, s the largest standard error of the
// prefix counts (EXPLAIN shows them) and z = Φ⁻¹(1 − 0.025/n) for n cells
// by the union bound (normal approximation).
//
// A tree quantile (compile.Item.Tree) reads the CDF from the tree
// measurement's consistent cell counts instead (treeCDF); the rest is the
// same, and so is the bound, with s the tree's bound on the prefix counts'
// standard error (explainTree).
func quantile(q *compile.Query, it compile.Item, row compile.Row, m *measured) float64 {
	var f []float64
	if it.Tree {
		if f = treeCDF(m); f == nil {
			return math.NaN()
		}
	} else {
		f = make([]float64, len(it.Prefix))
		for k, b := range it.Prefix {
			a := aggAnswer(q, m, b, row)
			if !a.known {
				return math.NaN()
			}
			f[k] = a.v
		}
	}
	f = isotonic(f)
	n := len(f)
	if n == 0 || f[n-1] < 1 {
		return math.NaN()
	}
	target := it.Quantile * f[n-1]
	for k, x := range f {
		if x >= target {
			return it.Values[k]
		}
	}
	return it.Values[n-1]
}

// isotonic is the least-squares non-decreasing fit to y by
// pool-adjacent-violators, clamped at zero (counts). O(n).
func isotonic(y []float64) []float64 {
	type block struct {
		sum   float64
		count int
	}
	var st []block
	for _, v := range y {
		st = append(st, block{v, 1})
		for len(st) > 1 {
			a, b := st[len(st)-2], st[len(st)-1]
			if a.sum/float64(a.count) <= b.sum/float64(b.count) {
				break
			}
			st = st[:len(st)-1]
			st[len(st)-1] = block{a.sum + b.sum, a.count + b.count}
		}
	}
	out := make([]float64, 0, len(y))
	for _, bl := range st {
		mean := math.Max(bl.sum/float64(bl.count), 0)
		for range bl.count {
			out = append(out, mean)
		}
	}
	return out
}

// normalQuantile is Φ⁻¹(p) for p in (0.5, 1), by bisection on erfc.
func normalQuantile(p float64) float64 {
	lo, hi := 0.0, 40.0
	for range 100 {
		mid := (lo + hi) / 2
		if 0.5*math.Erfc(mid/math.Sqrt2) > 1-p {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}
