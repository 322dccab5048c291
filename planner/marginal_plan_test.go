package planner

import (
	"math"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/parser"
)

// denseMarginals materialises a union of weighted marginals over sizes.
func denseMarginals(sizes []int, sets []uint, weights []float64) *mat.Dense {
	n := 1
	for _, s := range sizes {
		n *= s
	}
	var rows [][]float64
	for si, set := range sets {
		m := 1
		for j, s := range sizes {
			if set&(1<<j) != 0 {
				m *= s
			}
		}
		block := make([][]float64, m)
		for r := range block {
			block[r] = make([]float64, n)
		}
		cell := make([]int, len(sizes))
		for i := 0; i < n; i++ {
			rem := i
			for j := len(sizes) - 1; j >= 0; j-- {
				cell[j] = rem % sizes[j]
				rem /= sizes[j]
			}
			r := 0
			for j, s := range sizes {
				if set&(1<<j) != 0 {
					r = r*s + cell[j]
				}
			}
			block[r][i] = weights[si]
		}
		rows = append(rows, block...)
	}
	a := mat.NewDense(len(rows), n, nil)
	for i, r := range rows {
		a.SetRow(i, r)
	}
	return a
}

func groupIndex(w *compile.Workload, qu *compile.Query, g int) []int {
	group := make([]int, len(qu.GroupCols))
	for i := len(group) - 1; i >= 0; i-- {
		size := w.Columns[qu.GroupCols[i]].Size()
		group[i] = g % size
		g /= size
	}
	return group
}

// A union-of-marginals candidate's sensitivity, total error and every
// answer's variance equal the dense computation (‖W A⁺‖², column norms of
// the materialised A) to 1e-9, and the workload lies in A's row space.
func TestMarginalPlanMatchesDense(t *testing.T) {
	w := smallWorkload(t) // supports {a,b}, {b,c}, {a,c}
	rows := denseRows(w)
	W := mat.NewDense(len(rows), len(rows[0]), nil)
	for i, r := range rows {
		W.SetRow(i, r)
	}
	for _, fam := range []catalog.NoiseFamily{catalog.Laplace, catalog.Gaussian} {
		s := newSpace(w)
		cands, coef, choice := s.marginalCandidates(fam, time.Now().Add(time.Second))
		if len(cands) == 0 {
			t.Fatalf("%s: no marginal candidate", fam)
		}
		for _, c := range cands {
			A := denseMarginals(w.Sizes(), c.sets, c.weights)
			m, n := A.Dims()
			var l1, l2 float64
			for j := 0; j < n; j++ {
				var a, b float64
				for i := 0; i < m; i++ {
					a += math.Abs(A.At(i, j))
					b += A.At(i, j) * A.At(i, j)
				}
				l1, l2 = math.Max(l1, a), math.Max(l2, math.Sqrt(b))
			}
			want := l1
			if fam == catalog.Gaussian {
				want = l2
			}
			if math.Abs(c.sens-want) > 1e-12*want {
				t.Errorf("%s %s: sensitivity %v, dense %v", fam, c.name, c.sens, want)
			}
			var wp mat.Dense
			wp.Mul(W, pinv(A))
			fro := mat.Norm(&wp, 2)
			if math.Abs(c.unit-fro*fro) > 1e-9*fro*fro {
				t.Errorf("%s %s: error %v, dense %v", fam, c.name, c.unit, fro*fro)
			}
			var back mat.Dense
			back.Mul(&wp, A)
			if !mat.EqualApprox(&back, W, 1e-8) {
				t.Errorf("%s %s: workload not in the row space", fam, c.name)
			}
			p := &Plan{Workload: w, Kind: Marginal, NoiseVariance: 1, mforms: s.marginalPlanForms(c, coef, choice)}
			row := 0
			for q, qu := range w.Queries {
				for a := range qu.Aggregates {
					for g := 0; g < qu.Groups(w); g++ {
						r := wp.RawRowView(row)
						dense := 0.0
						for _, v := range r {
							dense += v * v
						}
						if got := p.Variance(q, a, groupIndex(w, qu, g)); math.Abs(got-dense) > 1e-9*math.Max(dense, 1e-9) {
							t.Errorf("%s %s: answer (%d,%d,%d) variance %v, dense %v", fam, c.name, q, a, g, got, dense)
						}
						row++
					}
				}
			}
		}
	}
}

// A dashboard batch of one-way GROUP BYs over different columns is best
// measured as a union of marginals: every Kronecker product must measure
// the whole product domain.
func TestChooseMarginalsForOneWayGroups(t *testing.T) {
	var sts []*parser.Statement
	for _, c := range []string{"a", "b", "c"} {
		sts = append(sts, &parser.Statement{Kind: parser.KindAggregate, Query: &parser.Query{Table: "t", GroupBy: []string{c},
			Select: []parser.SelectItem{{Column: c}, {Agg: parser.AggCount}}}})
	}
	w, err := compile.Compile(smallTable(), sts)
	if err != nil {
		t.Fatal(err)
	}
	for _, opt := range []Options{{Noise: catalog.Laplace, Epsilon: 1}, {Noise: catalog.Gaussian, Rho: 0.5}} {
		p, err := Choose(w, opt)
		if err != nil {
			t.Fatal(err)
		}
		if p.Kind != Marginal || !strings.Contains(p.Name, "marginals") {
			t.Fatalf("%s: chose %s (kind %v), want a union of marginals; candidates %+v", opt.Noise, p.Name, p.Kind, p.Candidates)
		}
		for _, c := range p.Candidates {
			if strings.Contains(c.Name, "⊗") && c.TotalSquaredError < p.TotalSquaredError() {
				t.Fatalf("%s: Kronecker %s beats the chosen %s", opt.Noise, c.Name, p.Name)
			}
		}
	}
}
