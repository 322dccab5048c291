package planner

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"gonum.org/v1/gonum/mat"
)

// colOpt is a candidate strategy for one column, as the planner evaluates
// it: its sensitivities and the action of its error form (AᵀA)⁻¹. The dense
// matrices a measurement needs (A, A⁺) are built only for the chosen plan,
// so candidates on long columns cost O(n·depth) per product instead of
// O(n³) to construct.
type colOpt struct {
	name   string
	n      int
	l1, l2 float64
	// mul sets dst = (AᵀA)⁻¹·v.
	mul func(dst, v []float64)
	// diag is the diagonal of (AᵀA)⁻¹.
	diag []float64
	// build materialises the strategy (nil when cs is set).
	build func() (*ColumnStrategy, error)
	// classOf, when set, is the cell partition of a compressed strategy
	// (compress.go): its error forms hold for class-constant vectors only.
	classOf []int
	// long, when set, is a long column's structured strategy
	// (tree_plan.go): it has no mul, diag or matrices, and its error is
	// computed by its own exact form.
	long *LongStrategy

	once  sync.Once
	cs    *ColumnStrategy
	err   error
	ready atomic.Bool // strategy has run (or cs was given)
}

func (o *colOpt) strategy() (*ColumnStrategy, error) {
	o.once.Do(func() {
		if o.cs == nil {
			o.cs, o.err = o.build()
		}
		o.ready.Store(true)
	})
	return o.cs, o.err
}

// built reports whether the strategy's matrices exist already.
func (o *colOpt) built() bool { return o.ready.Load() }

// sens is the option's sensitivity for the noise family.
func (o *colOpt) sens(gauss bool) float64 {
	if gauss {
		return o.l2
	}
	return o.l1
}

// optFromStrategy wraps a materialised strategy (dense error form).
func optFromStrategy(cs *ColumnStrategy) *colOpt {
	_, n := cs.A.Dims()
	o := &colOpt{name: cs.Name, n: n, l1: cs.L1, l2: cs.L2, cs: cs}
	o.once.Do(func() {})
	o.ready.Store(true)
	o.diag = make([]float64, n)
	if gram := cs.Gram; gram != nil {
		o.mul = func(dst, v []float64) {
			mat.NewVecDense(n, dst).MulVec(gram, mat.NewVecDense(n, v))
		}
		for i := range o.diag {
			o.diag[i] = gram.At(i, i)
		}
		return o
	}
	c := cs.gramFactor
	o.mul = func(dst, v []float64) {
		var t mat.VecDense
		t.MulVec(c.T(), mat.NewVecDense(n, v))
		mat.NewVecDense(n, dst).MulVec(c, &t)
	}
	raw := c.RawMatrix()
	for i := range o.diag {
		row := raw.Data[i*raw.Stride : i*raw.Stride+n]
		o.diag[i] = dot(row, row)
	}
	return o
}

// identityOpt is the identity: (AᵀA)⁻¹ = I.
func identityOpt(n int) *colOpt {
	o := &colOpt{name: "identity", n: n, l1: 1, l2: 1,
		mul:   func(dst, v []float64) { copy(dst, v) },
		diag:  ones(n),
		build: func() (*ColumnStrategy, error) { return Identity(n) },
	}
	return o
}

// hierOpt is the b-ary hierarchical strategy with its error form applied by
// recursive Sherman–Morrison over the tree. For a node I with children c,
// M_I = Σ_c M_c + 1·1ᵀ (a leaf has M = [1]); with D = blockdiag(M_c),
// ẑ = D⁻¹1 = concat(M_c⁻¹1) and τ = 1ᵀD⁻¹1 = Σ_c σ_c,
//
//	M_I⁻¹v = D⁻¹v − ẑ·(1ᵀD⁻¹v)/(1+τ),   M_I⁻¹1 = ẑ/(1+τ),   σ_I = τ/(1+τ),
//	diag(M_I⁻¹) = diag(D⁻¹) − ẑ∘ẑ/(1+τ).
//
// Precomputation and each product cost O(n·depth).
func hierOpt(n, b int) *colOpt {
	type node struct {
		lo, hi   int
		children []int
		tau      float64   // Σ_c σ_c
		sigma    float64   // 1ᵀM_I⁻¹1
		z        []float64 // M_I⁻¹1
	}
	var nodes []node
	depth := make([]int, n)
	diag := make([]float64, n)
	var build func(lo, hi int) int
	build = func(lo, hi int) int {
		id := len(nodes)
		nodes = append(nodes, node{lo: lo, hi: hi})
		for i := lo; i < hi; i++ {
			depth[i]++
		}
		if hi-lo <= 1 {
			nodes[id].z = []float64{1}
			nodes[id].sigma = 1
			diag[lo] = 1
			return id
		}
		size := hi - lo
		var ch []int
		for k := 0; k < b; k++ {
			clo, chi := lo+size*k/b, lo+size*(k+1)/b
			if chi > clo {
				ch = append(ch, build(clo, chi))
			}
		}
		zhat := make([]float64, 0, size)
		tau := 0.0
		for _, c := range ch {
			zhat = append(zhat, nodes[c].z...)
			tau += nodes[c].sigma
			nodes[c].z = nil // only the parent's copy is needed
		}
		z := make([]float64, size)
		for i, v := range zhat {
			z[i] = v / (1 + tau)
			diag[lo+i] -= v * v / (1 + tau)
		}
		nd := &nodes[id]
		nd.children, nd.tau, nd.sigma, nd.z = ch, tau, tau/(1+tau), z
		return id
	}
	if n > 0 {
		build(0, n)
	}
	l1 := 0.0
	for _, d := range depth {
		l1 = math.Max(l1, float64(d))
	}
	// A product is two passes over the tree, O(nodes) = O(n) instead of
	// the O(n·depth) of applying M_I⁻¹ recursively. Unrolled, the
	// recursion gives out = v − Σ_I k_I·ẑ_I with k_I = (1ᵀ of I's range
	// after its children's corrections)/(1+τ_I); since ẑ_I restricted to a
	// child c is z_c = ẑ_c/(1+τ_c) (1 at a leaf), the corrections
	// accumulate downwards as a_c = k_c + a_I/(1+τ_c). Bottom-up, the sum
	// of I's range after its own correction is S_I − k_I·τ_I (1ᵀẑ_I = τ_I).
	// Node ids are in preorder: a parent's id is below its children's.
	o := &colOpt{name: fmt.Sprintf("H%d", b), n: n, l1: l1, l2: math.Sqrt(l1), diag: diag}
	scratch := sync.Pool{New: func() any { return new([]float64) }}
	o.mul = func(dst, v []float64) {
		if n == 0 {
			return
		}
		buf := scratch.Get().(*[]float64)
		defer scratch.Put(buf)
		if cap(*buf) < 2*len(nodes) {
			*buf = make([]float64, 2*len(nodes))
		}
		after := (*buf)[:len(nodes)] // range sum after own correction
		k := (*buf)[len(nodes) : 2*len(nodes)]
		for id := len(nodes) - 1; id >= 0; id-- {
			nd := &nodes[id]
			if nd.children == nil {
				after[id] = v[nd.lo]
				continue
			}
			sum := 0.0
			for _, c := range nd.children {
				sum += after[c]
			}
			k[id] = sum / (1 + nd.tau)
			after[id] = sum - k[id]*nd.tau
		}
		if nodes[0].children == nil {
			dst[0] = v[0]
			return
		}
		acc := k // acc[id] = a_id, overwritten top-down (a parent first)
		for id := range nodes {
			nd := &nodes[id]
			if nd.children == nil {
				continue
			}
			for _, c := range nd.children {
				cn := &nodes[c]
				if cn.children == nil {
					dst[cn.lo] = v[cn.lo] - acc[id]
				} else {
					acc[c] = k[c] + acc[id]/(1+cn.tau)
				}
			}
		}
	}
	o.build = func() (*ColumnStrategy, error) { return Hierarchical(n, b) }
	return o
}
