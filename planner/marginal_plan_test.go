package planner

import (
	"context"
	"math"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/parser"
)

func groupIndex(w *compile.Workload, qu *compile.Query, g int) []int {
	group := make([]int, len(qu.GroupCols))
	for i := len(group) - 1; i >= 0; i-- {
		size := w.Columns[qu.GroupCols[i]].Size()
		group[i] = g % size
		g /= size
	}
	return group
}

// Every marginal-space candidate's total error and every answer's variance
// equal the dense generalised least-squares computation (‖W A⁺‖² with each
// block divided by its noise's standard deviation) to 1e-9, and the
// workload lies in the blocks' row space.
func TestMarginalPlanMatchesDense(t *testing.T) {
	w := smallWorkload(t) // supports {a,b}, {b,c}, {a,c}
	rows := denseRows(w)
	W := mat.NewDense(len(rows), len(rows[0]), nil)
	for i, r := range rows {
		W.SetRow(i, r)
	}
	for _, opt := range []Options{{Noise: catalog.Laplace, Epsilon: 0.5}, {Noise: catalog.Gaussian, Rho: 0.2}} {
		for _, obj := range []Objective{ObjectiveFair, ObjectiveTotal} {
			opt.Objective = obj
			s := newSpace(w)
			s.weight = s.answerWeights(opt)
			ms, cands, err := s.marginalCandidates(context.Background(), opt, DefaultMaxCells)
			if err != nil {
				t.Fatal(err)
			}
			if len(cands) < 2 {
				t.Fatalf("%s: %d marginal candidates", opt.Noise, len(cands))
			}
			for _, c := range cands {
				A := whitened(w.Sizes(), c.blocks)
				var wp mat.Dense
				wp.Mul(W, pinv(A))
				fro := mat.Norm(&wp, 2)
				if relErr(c.total, fro*fro) > 1e-9 {
					t.Errorf("%s %s: error %v, dense %v", opt.Noise, c.name, c.total, fro*fro)
				}
				var back mat.Dense
				back.Mul(&wp, A)
				if !mat.EqualApprox(&back, W, 1e-8) {
					t.Errorf("%s %s: workload not in the row space", opt.Noise, c.name)
				}
				p := &Plan{Workload: w, Kind: Marginal, mforms: s.marginalPlanForms(ms, c)}
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
								t.Errorf("%s %s: answer (%d,%d,%d) variance %v, dense %v", opt.Noise, c.name, q, a, g, got, dense)
							}
							row++
						}
					}
				}
			}
		}
	}
}

// A dashboard batch of one-way GROUP BYs over different columns is best
// measured in marginal space, one table per column: every Kronecker
// product must measure the whole product domain.
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
		p, err := Choose(context.Background(), w, opt)
		if err != nil {
			t.Fatal(err)
		}
		if p.Kind != Marginal || len(p.Tables) != 3 {
			t.Fatalf("%s: chose %s (kind %v, tables %v), want marginal or residual blocks on a, b, c; candidates %+v", opt.Noise, p.Name, p.Kind, p.Tables, p.Candidates)
		}
		for _, c := range p.Candidates {
			if strings.Contains(c.Name, "⊗") && c.TotalSquaredError < p.TotalSquaredError() {
				t.Fatalf("%s: Kronecker %s beats the chosen %s", opt.Noise, c.Name, p.Name)
			}
		}
	}
}
