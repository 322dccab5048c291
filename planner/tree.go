package planner

import (
	"errors"
	"fmt"
	"math"

	"github.com/dpproxy/dpproxy/catalog"
)

// Tree is the b-ary hierarchical strategy over n cells of one column kept
// as a tree, never as a matrix: one count per node, a node's range split
// into b near-equal children (the split of Hierarchical), leaves the
// cells. It measures a long column's CDF (DP_QUANTILE over a year of
// hourly bins) in O(n) time and memory, where the dense strategies and
// their Gram matrices are O(n²) and more.
//
// Reconstruction is generalised least squares over the tree in two passes
// (Consistent): Hay, Rastogi, Miklau and Suciu, "Boosting the accuracy of
// differentially private histograms through consistency" (VLDB 2010),
// generalised from complete trees to any tree with independent,
// equal-variance node noise by carrying each subtree estimate's variance.
type Tree struct {
	// N is the number of leaves (cells), B the branching.
	N, B int
	// Depth is the most nodes any leaf lies in (root to leaf).
	Depth int
	// Weights[d] is the weight of the nodes at depth d (0: the root): a
	// node's row of the strategy is Weights[d] on its range. nil means 1
	// at every depth. A weight may be 0 (the level is not measured) except
	// at the leaves' depths.
	Weights []float64
	// nodes in preorder (a parent before its children).
	nodes []treeNode
	// v[i] is Var(z_i)/σ² of node i's bottom-up estimate; f[i] the
	// variance of its final estimate, per unit noise variance of a row.
	v, f []float64
}

type treeNode struct {
	lo, hi   int
	depth    int32
	children []int32
}

// weight is the weight of node id's row.
func (t *Tree) weight(id int) float64 {
	if t.Weights == nil {
		return 1
	}
	return t.Weights[t.nodes[id].depth]
}

// MaxTreeCells bounds the cells of a Tree strategy: its nodes and their
// variances take about 100 bytes per cell (100 MB at this bound).
const MaxTreeCells = 1 << 20

// NewTree builds the b-ary tree over n cells (2 ≤ b, 1 ≤ n ≤ MaxTreeCells).
func NewTree(n, b int) (*Tree, error) {
	if n < 1 || n > MaxTreeCells || b < 2 {
		return nil, fmt.Errorf("planner: tree over %d cells with branching %d (want 1 ≤ n ≤ %d, b ≥ 2)", n, b, MaxTreeCells)
	}
	t := &Tree{N: n, B: b}
	var build func(lo, hi, depth int) int
	build = func(lo, hi, depth int) int {
		id := len(t.nodes)
		t.nodes = append(t.nodes, treeNode{lo: lo, hi: hi, depth: int32(depth - 1)})
		t.Depth = max(t.Depth, depth)
		size := hi - lo
		if size <= 1 {
			return id
		}
		ch := make([]int32, 0, min(b, size))
		for k := 0; k < b; k++ {
			clo, chi := lo+size*k/b, lo+size*(k+1)/b
			if chi > clo {
				ch = append(ch, int32(build(clo, chi, depth+1)))
			}
		}
		t.nodes[id].children = ch
		return id
	}
	build(0, n, 1) // recursion depth is log_b n
	t.variances()
	return t, nil
}

// Weighted is t's shape with weights per depth (len Depth, positive at
// every depth where a leaf lies).
func (t *Tree) Weighted(weights []float64) (*Tree, error) {
	if len(weights) != t.Depth {
		return nil, fmt.Errorf("planner: %d weights for a tree of depth %d", len(weights), t.Depth)
	}
	for id, nd := range t.nodes {
		if w := weights[nd.depth]; w < 0 || math.IsNaN(w) || math.IsInf(w, 0) || nd.children == nil && w == 0 {
			return nil, fmt.Errorf("planner: tree weight %g at depth %d (node %d)", w, nd.depth, id)
		}
	}
	out := &Tree{N: t.N, B: t.B, Depth: t.Depth, Weights: append([]float64(nil), weights...), nodes: t.nodes}
	out.variances()
	return out, nil
}

// variances fills v and f, the bottom-up and final variances per unit
// node variance; they depend only on the tree's shape.
func (t *Tree) variances() {
	t.v = make([]float64, len(t.nodes))
	t.f = make([]float64, len(t.nodes))
	for id := len(t.nodes) - 1; id >= 0; id-- {
		nd := &t.nodes[id]
		w := t.weight(id)
		if nd.children == nil {
			t.v[id] = 1 / (w * w)
			continue
		}
		s := 0.0
		for _, c := range nd.children {
			s += t.v[c]
		}
		t.v[id] = s
		if w > 0 { // own row of variance 1/w², combined with the children's sum
			t.v[id] = s / (s*w*w + 1)
		}
	}
	t.f[0] = t.v[0]
	for id := range t.nodes {
		nd := &t.nodes[id]
		if nd.children == nil {
			continue
		}
		s := 0.0
		for _, c := range nd.children {
			s += t.v[c]
		}
		for _, c := range nd.children {
			k := t.v[c] / s
			t.f[c] = t.v[c] + k*k*(t.f[id]-s)
		}
	}
}

// Nodes is the number of measured counts.
func (t *Tree) Nodes() int { return len(t.nodes) }

// Sensitivity is the strategy's largest column norm: the most, over
// cells, of the weights of the nodes on the cell's path (L1, Laplace) or
// the square root of their squares' sum (L2, Gaussian) — Depth and
// √Depth unweighted. A cell lies in exactly one node per depth of its
// path and in no other.
func (t *Tree) Sensitivity(fam catalog.NoiseFamily) float64 {
	if t.Weights == nil {
		if fam == catalog.Gaussian {
			return math.Sqrt(float64(t.Depth))
		}
		return float64(t.Depth)
	}
	most := 0.0
	for id := range t.nodes {
		if t.nodes[id].children != nil {
			continue
		}
		s := 0.0
		for d := 0; d <= int(t.nodes[id].depth); d++ {
			w := t.Weights[d]
			if fam == catalog.Gaussian {
				w *= w
			}
			s += w
		}
		most = math.Max(most, s)
	}
	if fam == catalog.Gaussian {
		return math.Sqrt(most)
	}
	return most
}

// Measure sets dst (len Nodes) to the exact node counts in preorder
// (unweighted: A·x for the unweighted tree).
func (t *Tree) Measure(dst, x []float64) {
	for id := len(t.nodes) - 1; id >= 0; id-- {
		nd := &t.nodes[id]
		if nd.children == nil {
			dst[id] = x[nd.lo]
			continue
		}
		s := 0.0
		for _, c := range nd.children {
			s += dst[c]
		}
		dst[id] = s
	}
}

// Consistent returns the generalised least-squares estimate of the cells
// from noisy node counts y (preorder; y_v = count_v + noise/w_v with w_v
// the node's weight and the noise independent, of equal variance):
// (AᵀA)⁻¹Aᵀ(w∘y) for the weighted strategy A, in O(nodes), never forming
// AᵀA. Nodes of weight 0 are not measured (their y is ignored).
//
// Bottom-up, z_v is the least-squares estimate of node v's count from the
// counts in its subtree, with variance v_v (a leaf: y_v, 1/w_v²): the
// inverse-variance mean of y_v (variance u = 1/w_v²) and Σ_c z_c, whose
// variance is S = Σ_c v_c, so z_v = (S·y_v + u·Σ_c z_c)/(S + u) and
// v_v = S·u/(S + u) (unweighted: (S·y_v + Σ_c z_c)/(S + 1)). Top-down, the
// root's estimate is z_root, and a child's is corrected by its share of
// its parent's discrepancy, x̂_c = z_c + (v_c/S)(x̂_p − Σ_c' z_c') — the
// smoothing step of a Gaussian tree model, which for a complete tree with
// equal variances is Hay et al.'s weighted averaging and mean consistency.
// With no noise every z is exact and every discrepancy zero, so noiseless
// reconstruction is exact.
func (t *Tree) Consistent(y []float64) []float64 {
	z := make([]float64, len(t.nodes))
	for id := len(t.nodes) - 1; id >= 0; id-- {
		nd := &t.nodes[id]
		if nd.children == nil {
			z[id] = y[id]
			continue
		}
		s, sum := 0.0, 0.0
		for _, c := range nd.children {
			s += t.v[c]
			sum += z[c]
		}
		z[id] = sum
		if w := t.weight(id); w > 0 {
			u := 1 / (w * w)
			z[id] = (s*y[id] + u*sum) / (s + u)
		}
	}
	out := make([]float64, t.N)
	for id := range t.nodes { // z becomes x̂, a parent before its children
		nd := &t.nodes[id]
		if nd.children == nil {
			out[nd.lo] = z[id]
			continue
		}
		s, sum := 0.0, 0.0
		for _, c := range nd.children {
			s += t.v[c]
			sum += z[c]
		}
		d := z[id] - sum
		for _, c := range nd.children {
			z[c] += t.v[c] / s * d
		}
	}
	return out
}

// PrefixVarianceBound is an upper bound on the variance of every prefix
// count x̂_0 + … + x̂_k, per unit node variance: the most nodes any prefix
// is a disjoint union of. The least-squares estimate's variance is at most
// that of any other unbiased linear estimate, such as the sum of those
// nodes' raw counts.
func (t *Tree) PrefixVarianceBound() float64 {
	most := 0
	var walk func(id, used int)
	walk = func(id, used int) {
		nd := &t.nodes[id]
		if nd.children == nil {
			most = max(most, used+1) // the prefix ending at this leaf
			return
		}
		for i, c := range nd.children {
			// A prefix ending inside child i takes children 0..i−1 whole.
			walk(int(c), used+i)
		}
	}
	walk(0, 0)
	return float64(most)
}

// TreePlan is a Tree strategy with its noise: every node's count gets
// independent noise of scale NoiseNum/NoiseDen (discrete Laplace scale or
// discrete Gaussian σ²), calibrated to the tree's sensitivity times the
// privacy unit's bound.
type TreePlan struct {
	Tree    *Tree
	Options Options
	// Sensitivity is the tree's at row level (Tree.Sensitivity); the noise
	// is calibrated for Options.Unit.L1() times it (Options.Calibration).
	Sensitivity        float64
	NoiseNum, NoiseDen uint64
	// NodeVariance is the variance of one node's noise.
	NodeVariance float64
}

// treeBranchings are the branchings PlanTree considers.
var treeBranchings = [...]int{2, 4, 8, 16, 32}

// PlanTree plans the CDF (all prefix counts) of one column of n cells with
// a Tree: the branching among treeBranchings whose bound on the largest
// prefix variance, PrefixVarianceBound × the node variance at its
// sensitivity, is least (the first on ties). Deterministic in n and opt,
// and O(n) per branching.
func PlanTree(n int, opt Options) (*TreePlan, error) {
	if err := opt.validate(); err != nil {
		return nil, err
	}
	cal := opt.Calibration()
	var best *TreePlan
	bestVar := math.Inf(1)
	for _, b := range treeBranchings {
		if b > max(n, 2) {
			break
		}
		t, err := NewTree(n, b)
		if err != nil {
			return nil, err
		}
		sens := t.Sensitivity(opt.Noise)
		num, den, v := calibrate(cal, sens)
		if math.IsInf(v, 1) {
			continue
		}
		if pv := v * t.PrefixVarianceBound(); pv < bestVar {
			bestVar = pv
			best = &TreePlan{Tree: t, Options: opt, Sensitivity: sens, NoiseNum: num, NoiseDen: den, NodeVariance: v}
		}
	}
	if best == nil {
		return nil, ErrScale
	}
	return best, nil
}

// ErrTreeNoise is returned by CheckTree when a tree plan's noise is below
// what its sensitivity needs.
var ErrTreeNoise = errors.New("planner: tree plan's noise is below its calibration")

// CheckTree re-derives p's calibration from its tree and options before
// any draw: the sensitivity is recomputed from the tree, and the noise
// parameter must be at least what calibrate gives for it.
func CheckTree(p *TreePlan) error {
	sens := p.Tree.Sensitivity(p.Options.Noise)
	num, den, _ := calibrate(p.Options.Calibration(), sens)
	if den == 0 || sens != p.Sensitivity || p.NoiseDen == 0 ||
		float64(p.NoiseNum)/float64(p.NoiseDen) < float64(num)/float64(den) {
		return fmt.Errorf("%w: sensitivity %g, noise %d/%d", ErrTreeNoise, sens, p.NoiseNum, p.NoiseDen)
	}
	return nil
}
