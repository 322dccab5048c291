package planner

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/parser"
)

// rangeRows and prefixRows are the explicit workloads behind the
// structured Grams (the independent dense references).
func rangeRows(n int) *mat.Dense {
	var rows [][]float64
	for a := 0; a < n; a++ {
		for b := a; b < n; b++ {
			r := make([]float64, n)
			for i := a; i <= b; i++ {
				r[i] = 1
			}
			rows = append(rows, r)
		}
	}
	return denseRowsOf(rows, n)
}

func prefixRows(n int) *mat.Dense {
	var rows [][]float64
	for b := 0; b < n; b++ {
		r := make([]float64, n)
		for i := 0; i <= b; i++ {
			r[i] = 1
		}
		rows = append(rows, r)
	}
	return denseRowsOf(rows, n)
}

func denseRowsOf(rows [][]float64, n int) *mat.Dense {
	m := mat.NewDense(len(rows), n, nil)
	for i, r := range rows {
		m.SetRow(i, r)
	}
	return m
}

func gramOf(w *mat.Dense) *mat.SymDense {
	var g mat.SymDense
	g.SymOuterK(1, w.T())
	return &g
}

// testLowRank is a compiled-column-like Gram: a few 0/1 range factors with
// PSD weights, and optionally a group-by diagonal.
func testLowRank(n int, withDiag bool) *LowRankGram {
	r := splitmix64(uint64(n) * 31)
	var f [][]float64
	for k := 0; k < 5; k++ {
		v := make([]float64, n)
		a := int(r.next() % uint64(n))
		b := a + int(r.next()%uint64(n-a))
		for i := a; i <= b; i++ {
			v[i] = 1
		}
		f = append(f, v)
	}
	f = append(f, nil) // the ones vector
	// K = LLᵀ for a random L: PSD.
	l := make([][]float64, len(f))
	for i := range l {
		l[i] = make([]float64, len(f))
		for j := range l[i] {
			l[i][j] = r.float() - 0.3
		}
	}
	k := make([][]float64, len(f))
	for i := range k {
		k[i] = make([]float64, len(f))
		for j := range k[i] {
			for c := range l {
				k[i][j] += l[i][c] * l[j][c]
			}
		}
	}
	var d []float64
	if withDiag {
		d = make([]float64, n)
		for i := range d {
			d[i] = float64(i%3) * 0.5
		}
	}
	return NewLowRankGram(n, f, k, d)
}

func relErr(a, b float64) float64 { return math.Abs(a-b) / math.Max(math.Abs(b), 1e-300) }

// The structured Grams agree with their dense definitions: products,
// diagonals, tridiagonal inverses and closed-form spectra.
func TestGramStructures(t *testing.T) {
	cases := []struct {
		name  string
		g     Gram
		dense *mat.SymDense
	}{
		{"allrange/1", AllRangeGram{Size: 1}, gramOf(rangeRows(1))},
		{"allrange/9", AllRangeGram{Size: 9}, gramOf(rangeRows(9))},
		{"allrange/30", AllRangeGram{Size: 30}, gramOf(rangeRows(30))},
		{"prefix/2", PrefixGram{Size: 2}, gramOf(prefixRows(2))},
		{"prefix/17", PrefixGram{Size: 17}, gramOf(prefixRows(17))},
		{"lowrank/20", testLowRank(20, true), nil},
		{"scaled", scaledGram{c: 2.5, g: PrefixGram{Size: 7}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.g.N()
			ref := tc.dense
			switch g := tc.g.(type) {
			case *LowRankGram:
				ref = mat.NewSymDense(n, nil)
				for i := 0; i < n; i++ {
					for j := i; j < n; j++ {
						v := 0.0
						for a := range g.F {
							for b := range g.F {
								v += g.F[a][i] * g.K[a][b] * g.F[b][j]
							}
						}
						if i == j {
							v += g.D[i]
						}
						ref.SetSym(i, j, v)
					}
				}
			case scaledGram:
				ref = mat.NewSymDense(n, nil)
				ref.ScaleSym(g.c, gramOf(prefixRows(n)))
			}
			got := DenseOf(tc.g)
			if !mat.EqualApprox(got, ref, 1e-9) {
				t.Fatalf("MulVec disagrees with the dense Gram")
			}
			for i, v := range tc.g.Diag() {
				if relErr(v, ref.At(i, i)) > 1e-12 {
					t.Fatalf("diag %d: %v vs %v", i, v, ref.At(i, i))
				}
			}
			if ti, ok := tc.g.(tridiagInverse); ok {
				d, e := ti.InverseTridiag()
				tm := mat.NewDense(n, n, nil)
				for i := 0; i < n; i++ {
					tm.Set(i, i, d[i])
					if i+1 < n {
						tm.Set(i, i+1, e[i])
						tm.Set(i+1, i, e[i])
					}
				}
				var prod mat.Dense
				prod.Mul(tm, ref)
				id := mat.NewDiagDense(n, ones(n))
				if !mat.EqualApprox(&prod, id, 1e-9) {
					t.Fatalf("InverseTridiag is not G⁻¹")
				}
			}
			if n > 1 {
				b, err := SVDBound(tc.g)
				if err != nil {
					t.Fatal(err)
				}
				var es mat.EigenSym
				es.Factorize(ref, false)
				s := 0.0
				for _, v := range es.Values(nil) {
					s += math.Sqrt(math.Max(v, 0))
				}
				if want := s * s / float64(n); relErr(b, want) > 1e-9 {
					t.Fatalf("SVD bound %v, dense %v", b, want)
				}
			}
		})
	}
}

// The structured hierarchical error form (recursive Sherman–Morrison)
// equals the dense (AᵀA)⁻¹.
func TestHierarchicalErrorFormMatchesDense(t *testing.T) {
	for _, n := range []int{1, 2, 7, 16, 37, 64} {
		for _, b := range []int{2, 3, 4, 16} {
			cs, err := Hierarchical(n, b)
			if err != nil {
				t.Fatal(err)
			}
			o := hierOpt(n, b)
			if o.l1 != cs.L1 || relErr(o.l2, cs.L2) > 1e-12 {
				t.Fatalf("H%d n=%d: norms %v/%v vs %v/%v", b, n, o.l1, o.l2, cs.L1, cs.L2)
			}
			e := make([]float64, n)
			col := make([]float64, n)
			for i := 0; i < n; i++ {
				e[i] = 1
				o.mul(col, e)
				e[i] = 0
				for j := 0; j < n; j++ {
					if math.Abs(col[j]-cs.Gram.At(j, i)) > 1e-10 {
						t.Fatalf("H%d n=%d: (%d,%d) %v vs %v", b, n, j, i, col[j], cs.Gram.At(j, i))
					}
				}
				if math.Abs(o.diag[i]-cs.Gram.At(i, i)) > 1e-10 {
					t.Fatalf("H%d n=%d: diag %d", b, n, i)
				}
			}
		}
	}
}

// Rounding a random real strategy to the grid: entries stay within one
// grid step, and the sensitivity of the integer matrix — checked by brute
// force on neighbouring histograms — is at most K = Δ(A)/γ.
func TestGridRoundingSensitivity(t *testing.T) {
	r := splitmix64(42)
	for _, tc := range []struct {
		name  string
		l2    bool
		scale float64
	}{{"laplace", false, gridLaplace}, {"gauss", true, gridGauss}, {"coarse-l1", false, 7}, {"coarse-l2", true, 5}} {
		t.Run(tc.name, func(t *testing.T) {
			m, n := 9, 6
			a := mat.NewDense(m, n, nil)
			for j := 0; j < n; j++ {
				norm := 0.0
				for i := 0; i < m; i++ {
					v := r.float() - 0.4
					if r.next()%3 == 0 {
						v = 0
					}
					a.Set(i, j, v)
					if tc.l2 {
						norm += v * v
					} else {
						norm += math.Abs(v)
					}
				}
				if tc.l2 {
					norm = math.Sqrt(norm)
				}
				for i := 0; i < m; i++ {
					a.Set(i, j, a.At(i, j)/norm)
				}
			}
			b := mat.NewDense(m, n, nil)
			col := make([]float64, m)
			for j := 0; j < n; j++ {
				mat.Col(col, j, a)
				b.SetCol(j, roundColumn(col, tc.scale, tc.l2, -1))
			}
			for i := 0; i < m; i++ {
				for j := 0; j < n; j++ {
					v := b.At(i, j)
					if v != math.Round(v) || math.Abs(v-tc.scale*a.At(i, j)) > 1+1e-9 {
						t.Fatalf("entry (%d,%d) = %v for real %v", i, j, v, tc.scale*a.At(i, j))
					}
				}
			}
			// Brute force: every neighbour x' = x + e_c of random histograms.
			x := make([]float64, n)
			for trial := 0; trial < 20; trial++ {
				for i := range x {
					x[i] = float64(r.next() % 50)
				}
				for c := 0; c < n; c++ {
					y0 := mat.NewVecDense(m, nil)
					y0.MulVec(b, mat.NewVecDense(n, x))
					x[c]++
					y1 := mat.NewVecDense(m, nil)
					y1.MulVec(b, mat.NewVecDense(n, x))
					x[c]--
					d := 0.0
					for i := 0; i < m; i++ {
						diff := y1.AtVec(i) - y0.AtVec(i)
						if tc.l2 {
							d += diff * diff
						} else {
							d += math.Abs(diff)
						}
					}
					if tc.l2 {
						d = math.Sqrt(d)
					}
					if d > tc.scale+1e-9 {
						t.Fatalf("neighbours differ by %v > K = %v", d, tc.scale)
					}
				}
			}
		})
	}
}

// denseError is Δ²·trace(G(AᵀA)⁻¹) computed from scratch.
func denseError(g *mat.SymDense, a *mat.Dense, gauss bool) float64 {
	var ata mat.SymDense
	ata.SymOuterK(1, a.T())
	var ch mat.Cholesky
	if !ch.Factorize(&ata) {
		return math.Inf(1)
	}
	var inv mat.SymDense
	_ = ch.InverseTo(&inv)
	n := g.SymmetricDim()
	tr := 0.0
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			tr += g.At(i, j) * inv.At(i, j)
		}
	}
	l1, l2 := columnNorms(a)
	if gauss {
		return l2 * l2 * tr
	}
	return l1 * l1 * tr
}

// Optimised strategies, both families, on structured and compiled Grams:
// integer entries within the grid's sensitivity, exact reconstruction
// without noise, Gram and reported error equal to the dense computation,
// and (Gaussian) a certified duality gap ≤ 1e-3.
func TestOptimisedStrategies(t *testing.T) {
	grams := []Gram{
		AllRangeGram{Size: 32}, PrefixGram{Size: 24}, AllRangeGram{Size: 100},
		testLowRank(40, true), testLowRank(30, false),
	}
	for _, g := range grams {
		for _, fam := range []catalog.NoiseFamily{catalog.Laplace, catalog.Gaussian} {
			t.Run(fmt.Sprintf("%s/%s", fam, g.Key()), func(t *testing.T) {
				n := g.N()
				pl := New()
				o, info, err := pl.optimised(context.Background(), g, fam, columnWork(n))
				if err != nil || o == nil {
					t.Fatalf("optimiser: %v", err)
				}
				cs, err := o.strategy()
				if err != nil {
					t.Fatal(err)
				}
				gauss := fam == catalog.Gaussian
				m, _ := cs.A.Dims()
				for i := 0; i < m; i++ {
					for j := 0; j < n; j++ {
						if v := cs.A.At(i, j); v != math.Round(v) {
							t.Fatalf("non-integer entry %v", v)
						}
					}
				}
				l1, l2 := columnNorms(cs.A)
				if l1 != cs.L1 || l2 != cs.L2 {
					t.Fatalf("norms %v/%v, recorded %v/%v", l1, l2, cs.L1, cs.L2)
				}
				if !gauss && l1 > gridLaplace || gauss && l2 > gridGauss+1e-9 {
					t.Fatalf("sensitivity above the grid: L1 %v L2 %v", l1, l2)
				}
				// Exact reconstruction without noise.
				x := make([]float64, n)
				for i := range x {
					x[i] = float64((i*7919)%101 + 3)
				}
				y := mat.NewVecDense(m, nil)
				y.MulVec(cs.A, mat.NewVecDense(n, x))
				xh := mat.NewVecDense(n, nil)
				xh.MulVec(cs.Pinv, y)
				for i := range x {
					if math.Abs(xh.AtVec(i)-x[i]) > 1e-6 {
						t.Fatalf("cell %d: reconstructed %v, want %v", i, xh.AtVec(i), x[i])
					}
				}
				// Gram is (AᵀA)⁻¹, and the reported error matches dense.
				var ata, prod mat.Dense
				ata.Mul(cs.A.T(), cs.A)
				prod.Mul(&ata, cs.Gram)
				if !mat.EqualApprox(&prod, mat.NewDiagDense(n, ones(n)), 1e-7) {
					t.Fatalf("Gram is not (AᵀA)⁻¹")
				}
				want := denseError(DenseOf(g), cs.A, gauss)
				s := o.sens(gauss)
				if got := s * s * traceWith(g, o); relErr(got, want) > 1e-9 {
					t.Fatalf("reported %v, dense %v", got, want)
				}
				if gauss {
					if info.cert == nil || info.cert.Gap > 1e-3 || info.cert.Gap < -1e-9 {
						t.Fatalf("certificate %+v", info.cert)
					}
					if relErr(info.cert.Primal, want) > 1e-9 {
						t.Fatalf("certificate primal %v, dense %v", info.cert.Primal, want)
					}
					// The dual bound is below every strategy's error.
					for _, b := range []int{2, 4} {
						h, _ := Hierarchical(n, b)
						if e := denseError(DenseOf(g), h.A, true); e < info.cert.Dual*(1-1e-9) {
							t.Fatalf("H%d error %v below the dual bound %v", b, e, info.cert.Dual)
						}
					}
				}
			})
		}
	}
}

// The Gaussian optimum's certified duality gap on the structured workloads.
func TestGaussianDualityGap(t *testing.T) {
	for _, g := range []Gram{AllRangeGram{Size: 256}, PrefixGram{Size: 256}, AllRangeGram{Size: 3}} {
		t.Run(g.Key(), func(t *testing.T) {
			r, err := optimizeGauss(context.Background(), g, columnWork(g.N())) // what ChooseKronecker gives it
			if err != nil {
				t.Fatal(err)
			}
			if r.cert.Gap > 1e-3 || r.cert.Gap < 0 {
				t.Fatalf("gap %v", r.cert.Gap)
			}
			b, _ := SVDBound(g)
			if r.cert.Dual < b*(1-1e-9) {
				t.Fatalf("dual %v below the SVD bound %v", r.cert.Dual, b)
			}
		})
	}
}

// The p-Identity gradient matches finite differences.
func TestPIdentityGradient(t *testing.T) {
	for _, g := range []Gram{AllRangeGram{Size: 12}, PrefixGram{Size: 9}, testLowRank(10, true)} {
		n, p := g.N(), 3
		for _, sparse := range []bool{false, true} {
			var lo, hi []int
			if sparse {
				lo, hi = []int{0, 2, 5}, []int{4, 8, n}
			}
			o := newPIdentity(g, p, lo, hi)
			th := o.pack(randomInit(n, p, 7))
			gr := make([]float64, o.nnz)
			o.eval(th, gr)
			for idx := 0; idx < o.nnz; idx++ {
				h := 1e-6
				th[idx] += h
				f1 := o.eval(th, nil)
				th[idx] -= 2 * h
				f2 := o.eval(th, nil)
				th[idx] += h
				num := (f1 - f2) / (2 * h)
				if math.Abs(num-gr[idx]) > 1e-5*math.Max(1, math.Abs(num)) {
					t.Fatalf("%s sparse=%v entry %d: numeric %v, analytic %v", g.Key(), sparse, idx, num, gr[idx])
				}
			}
			// The objective is the dense error of [I; Θ]D.
			a := mat.NewDense(n+p, n, nil)
			dense := o.dense(th)
			for i := 0; i < n; i++ {
				s := 1.0
				for k := 0; k < p; k++ {
					s += dense.At(k, i)
				}
				a.Set(i, i, 1/s)
				for k := 0; k < p; k++ {
					a.Set(n+k, i, dense.At(k, i)/s)
				}
			}
			if f, want := o.eval(th, nil), denseError(DenseOf(g), a, false); relErr(f, want) > 1e-9 {
				t.Fatalf("%s: objective %v, dense %v", g.Key(), f, want)
			}
		}
	}
}

// Every candidate ChooseKronecker reports agrees with an independent dense
// computation Δ²·‖W(⊗A_j)⁺‖²_F to 1e-9.
func TestChooseKroneckerMatchesDense(t *testing.T) {
	ws := []*mat.Dense{rangeRows(7), prefixRows(6)}
	grams := []Gram{AllRangeGram{Size: 7}, PrefixGram{Size: 6}}
	var w mat.Dense
	w.Kronecker(ws[0], ws[1])
	g := gramOf(&w)
	for _, fam := range []catalog.NoiseFamily{catalog.Laplace, catalog.Gaussian} {
		pl := New()
		plan, err := pl.ChooseKronecker(context.Background(), grams, Options{Noise: fam, Epsilon: 1, Rho: 0.5})
		if err != nil {
			t.Fatal(err)
		}
		if len(plan.Candidates) < 5 {
			t.Fatalf("only %d candidates", len(plan.Candidates))
		}
		// Rebuild each candidate's factors from its name.
		for _, c := range plan.Candidates {
			names := []string{c.Name, c.Name}
			if len(c.Name) > 5 && c.Name[:5] == "kron(" {
				names = []string{kronPart(c.Name, 0), kronPart(c.Name, 1)}
			}
			var a *mat.Dense
			for j, name := range names {
				cs := strategyByName(t, pl, grams[j], fam, name)
				if a == nil {
					a = mat.DenseCopyOf(cs.A)
					continue
				}
				var k mat.Dense
				k.Kronecker(a, cs.A)
				a = &k
			}
			want := denseError(g, a, fam == catalog.Gaussian)
			if relErr(c.Unit, want) > 1e-9 {
				t.Errorf("%s %s: reported %v, dense %v", fam, c.Name, c.Unit, want)
			}
		}
	}
}

func kronPart(name string, j int) string {
	if matchesFactor(name, j, "") {
		return ""
	}
	inner := name[len("kron(") : len(name)-1]
	parts := splitKron(inner)
	return parts[j]
}

func splitKron(s string) []string {
	var out []string
	sep := " ⊗ "
	for {
		i := indexOf(s, sep)
		if i < 0 {
			return append(out, s)
		}
		out = append(out, s[:i])
		s = s[i+len(sep):]
	}
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func strategyByName(t *testing.T, pl *Planner, g Gram, fam catalog.NoiseFamily, name string) *ColumnStrategy {
	t.Helper()
	n := g.N()
	if name == "opt-laplace" || name == "opt-gauss" {
		o, _, err := pl.optimised(context.Background(), g, fam, columnWork(n)) // cached by ChooseKronecker
		if err != nil || o == nil {
			t.Fatal(err)
		}
		cs, _ := o.strategy()
		return cs
	}
	for _, o := range fixedOptions(n) {
		if o.name == name {
			cs, err := o.strategy()
			if err != nil {
				t.Fatal(err)
			}
			return cs
		}
	}
	t.Fatalf("no strategy %q", name)
	return nil
}

func stack(blocks []*mat.Dense) *mat.Dense {
	var out *mat.Dense
	for _, b := range blocks {
		if out == nil {
			out = mat.DenseCopyOf(b)
			continue
		}
		var s mat.Dense
		s.Stack(out, b)
		out = &s
	}
	return out
}

func dashTable() *catalog.Table {
	return &catalog.Table{Name: "t", Noise: catalog.Laplace, Columns: []*catalog.Column{
		{Name: "a", Kind: catalog.IntegerRange, Min: 0, Max: 39, Width: 1, Null: catalog.PolicyDrop, OutOfDomain: catalog.PolicyClamp},
		{Name: "b", Kind: catalog.IntegerRange, Min: 0, Max: 5, Width: 1, Null: catalog.PolicyDrop, OutOfDomain: catalog.PolicyClamp},
	}}
}

// dashWorkload: many range counts on one column and a GROUP BY filtered by
// it — a dashboard whose best strategy is an optimised one.
func dashWorkload(t testing.TB) *compile.Workload {
	t.Helper()
	var sts []*parser.Statement
	for i := 0; i < 16; i++ {
		lo := (i * 7) % 35
		hi := min(lo+3+(i*5)%20, 39)
		sts = append(sts, &parser.Statement{Kind: parser.KindAggregate, Query: &parser.Query{Table: "t",
			Select: []parser.SelectItem{{Agg: parser.AggCount}},
			Where:  parser.Between{Column: "a", Lo: lit(fmt.Sprint(lo)), Hi: lit(fmt.Sprint(hi))}}})
	}
	sts = append(sts, &parser.Statement{Kind: parser.KindAggregate, Query: &parser.Query{Table: "t", GroupBy: []string{"b"},
		Select: []parser.SelectItem{{Column: "b"}, {Agg: parser.AggCount}},
		Where:  parser.Compare{Column: "a", Op: parser.OpLt, Value: lit("20")}}})
	w, err := compile.Compile(dashTable(), sts)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// Choose uses optimised columns when they win, and a Planner serves
// repeated and concurrent requests from its cache with identical plans.
func TestPlannerOptimisesAndCaches(t *testing.T) {
	w := dashWorkload(t)
	for _, fam := range []catalog.NoiseFamily{catalog.Laplace, catalog.Gaussian} {
		opt := Options{Noise: fam, Epsilon: 1, Rho: 0.5}
		pl := New()
		first, err := pl.Choose(context.Background(), w, opt)
		if err != nil {
			t.Fatal(err)
		}
		if first.Kind != Kronecker || first.Grid >= 1 {
			t.Fatalf("%s: plan %s (grid %v) does not use an optimised column", fam, first.Name, first.Grid)
		}
		var wg sync.WaitGroup
		plans := make([]*Plan, 8)
		for i := range plans {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				plans[i], _ = pl.Choose(context.Background(), dashWorkload(t), opt)
			}(i)
		}
		wg.Wait()
		for _, p := range plans {
			if p == nil || p.Name != first.Name || p.TotalSquaredError() != first.TotalSquaredError() {
				t.Fatalf("%s: cached plan differs", fam)
			}
		}
		// The variances of a cached plan sum to its total.
		p := plans[0]
		sum := 0.0
		for q, qu := range p.Workload.Queries {
			group := make([]int, len(qu.GroupCols))
			for a := range qu.Aggregates {
				for g := 0; g < qu.Groups(p.Workload); g++ {
					qu.GroupCells(p.Workload, g, group)
					sum += p.Variance(q, a, group)
				}
			}
		}
		if relErr(sum, p.TotalSquaredError()) > 1e-9 {
			t.Fatalf("%s: variances sum to %v, total %v", fam, sum, p.TotalSquaredError())
		}
	}
}

// The separable error of Kronecker candidates with optimised factors
// equals the dense computation ‖W A⁺‖²_F on a small domain.
func TestKroneckerWithOptimisedFactorsMatchesDense(t *testing.T) {
	w := dashWorkload(t)
	for _, fam := range []catalog.NoiseFamily{catalog.Laplace, catalog.Gaussian} {
		s := newSpace(w)
		_, cur := s.searchKronecker(fam, func([]int) {})
		pl := New()
		for j := range s.cols {
			if !s.worthOptimising(j) {
				continue
			}
			o, _, err := pl.optimised(context.Background(), s.effectiveGram(j, cur, fam == catalog.Gaussian), fam, workOf(0.2))
			if err != nil || o == nil {
				t.Fatal(err)
			}
			cur[j] = s.addOption(j, o)
		}
		rows := denseRows(w)
		W := mat.NewDense(len(rows), len(rows[0]), nil)
		for i, r := range rows {
			W.SetRow(i, r)
		}
		var A *mat.Dense
		for j, o := range cur {
			cs, err := s.cols[j].options[o].strategy()
			if err != nil {
				t.Fatal(err)
			}
			if A == nil {
				A = mat.DenseCopyOf(cs.A)
				continue
			}
			var k mat.Dense
			k.Kronecker(A, cs.A)
			A = &k
		}
		sens, unit := s.kronError(cur, fam)
		want := denseError(gramOf(W), A, fam == catalog.Gaussian)
		if relErr(sens*sens*unit, want) > 1e-9 {
			t.Fatalf("%s %s: separable %v, dense %v", fam, s.kronName(cur), sens*sens*unit, want)
		}
	}
}
