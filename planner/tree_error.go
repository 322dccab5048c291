package planner

// PrefixError is trace(G·(AᵀA)⁻¹) for the prefix workload's Gram G
// (PrefixGram): the total variance of the least-squares estimates of the
// n prefix counts x̂_0 + … + x̂_k, per unit noise variance of a row. It
// runs in O(n·Depth) time and O(nodes) memory, where applying (AᵀA)⁻¹ to
// each prefix would take O(n²).
//
// The smoothed errors of Consistent form a tree of innovations: a child's
// error is e_c = r_c + K_c·e_p, K_c = v_c/S_p (S_p = Σ over p's children of
// v), where r_c is uncorrelated with e_p and with every innovation
// outside p's family, and within a family Cov(r_c, r_d) = δ_cd·v_c −
// v_c·v_d/S_p (the Rauch–Tung–Striebel smoother on a tree; Var e_c = f_c
// follows). A prefix ending at leaf k is the sum of the leaf and, at each
// node p_j of its path, p_j's children left of the path (A_j = the sum of
// their v). Unrolling e along the path, its error is
//
//	E_k = μ_1·e_root + Σ_j (Σ_{c left of the path at p_j} r_c + μ_{j+1}·r_{p_{j+1}}),
//
// with μ_L = 1 at the leaf and μ_j = A_j/S_j + K_{p_{j+1}}·μ_{j+1}, so
//
//	Var E_k = μ_1²·f_root + Σ_j (A_j + μ_{j+1}²·v_{p_{j+1}} − (A_j + μ_{j+1}·v_{p_{j+1}})²/S_j).
//
// TestTreeErrorAgainstDense checks it against the dense form.
func (t *Tree) PrefixError() float64 {
	path := make([]treeLevel, 0, t.Depth)
	total := 0.0
	var walk func(id int)
	walk = func(id int) {
		nd := &t.nodes[id]
		if nd.children == nil {
			total += t.pathVariance(path)
			return
		}
		s := 0.0
		for _, c := range nd.children {
			s += t.v[c]
		}
		path = append(path, treeLevel{s: s})
		a := 0.0
		for _, c := range nd.children {
			path[len(path)-1].a, path[len(path)-1].next = a, int(c)
			walk(int(c))
			a += t.v[c]
		}
		path = path[:len(path)-1]
	}
	walk(0) // recursion depth is the tree's depth
	return total
}

// treeLevel is one internal node p_j of a leaf's path.
type treeLevel struct {
	s, a float64 // S_j and A_j
	next int     // p_{j+1}
}

// pathVariance is Var E_k for the prefix ending at the leaf below path
// (see PrefixError), path holding the internal nodes from the root down.
func (t *Tree) pathVariance(path []treeLevel) float64 {
	mu := 1.0 // μ_{j+1}, from the leaf up
	sum := 0.0
	for j := len(path) - 1; j >= 0; j-- {
		l := path[j]
		vn := t.v[l.next]
		x := l.a + mu*vn
		sum += l.a + mu*mu*vn - x*x/l.s
		mu = l.a/l.s + vn/l.s*mu
	}
	return sum + mu*mu*t.f[0]
}
