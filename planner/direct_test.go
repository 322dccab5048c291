package planner

import (
	"context"
	"math"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/parser"
)

func avgWorkload(t *testing.T) *compile.Workload {
	t.Helper()
	// AVG(c) per b: c takes values 0..5, so its midpoint is 2.5.
	st := &parser.Statement{Kind: parser.KindAggregate, Query: &parser.Query{Table: "t", GroupBy: []string{"b"},
		Select: []parser.SelectItem{{Column: "b"}, {Agg: parser.AggAvg, Column: "c"}}}}
	w, err := compile.Compile(smallTable(), []*parser.Statement{st})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// The direct strategy's scaled rows are integer and its sensitivity is
// their exact largest column norm, whatever scales it chose.
func TestDirectScalesAreExact(t *testing.T) {
	for _, w := range []*compile.Workload{smallWorkload(t), avgWorkload(t)} {
		for _, fam := range []catalog.NoiseFamily{catalog.Laplace, catalog.Gaussian} {
			s := newSpace(w)
			scale, sens, ok := s.direct(fam)
			if !ok {
				t.Fatal("no direct strategy")
			}
			acc := make([]float64, w.Cells())
			for q, qu := range w.Queries {
				for a, agg := range qu.Aggregates {
					for i, v := range Dense(agg, w.Sizes()) {
						x := scale[q][a] * v
						if math.Abs(x-math.Round(x)) > 1e-9 {
							t.Fatalf("%s: scaled row value %v is not integer", fam, x)
						}
						if fam == catalog.Gaussian {
							acc[i] += x * x
						} else {
							acc[i] += math.Abs(x)
						}
					}
				}
			}
			want := 0.0
			for _, v := range acc {
				want = math.Max(want, v)
			}
			if fam == catalog.Gaussian {
				want = math.Sqrt(want)
			}
			if math.Abs(sens-want) > 1e-12*want {
				t.Fatalf("%s: sensitivity %v, dense %v", fam, sens, want)
			}
		}
	}
}

// An AVG's denominator is weighted by its midpoint² (under the fair and
// the total objective alike), so the plan spends more of the noise budget
// on the COUNT than equal scales would, and the AVG's delta-method
// variance (Var S + m²·Var C) drops several-fold.
func TestAvgWeightsTheDenominator(t *testing.T) {
	w := avgWorkload(t)
	var num, den int
	for _, it := range w.Queries[0].Items {
		if it.Kind == compile.ItemRatio {
			num, den = it.Agg, it.Den
		}
	}
	m := 2.5
	for _, opt := range []Options{{Noise: catalog.Laplace, Epsilon: 1}, {Noise: catalog.Gaussian, Rho: 0.5},
		{Noise: catalog.Laplace, Epsilon: 1, Objective: ObjectiveTotal}, {Noise: catalog.Gaussian, Rho: 0.5, Objective: ObjectiveTotal}} {
		p, err := Choose(context.Background(), w, opt)
		if err != nil {
			t.Fatal(err)
		}
		avgVar := func(p *Plan) float64 {
			return p.Variance(0, num, []int{0}) + m*m*p.Variance(0, den, []int{0})
		}
		// Equal scales: every aggregate measured with k = its least integer scale.
		s := newSpace(w)
		base, _, _ := s.directBase()
		sens := s.directSensitivity(base, opt.Noise == catalog.Gaussian)
		_, _, v := calibrate(opt, sens)
		equal := v/(base[0][num]*base[0][num]) + m*m*v/(base[0][den]*base[0][den])
		if got := avgVar(p); got > equal/3 {
			t.Fatalf("%s: plan %s gives the AVG's numerator-denominator variance %.4g, equal scales %.4g", opt.Noise, p.Name, got, equal)
		}
		if obj, tot := p.Objective(), p.TotalSquaredError(); opt.Objective == ObjectiveTotal && !(obj > tot) {
			t.Fatalf("%s: objective %v should exceed the unweighted total %v", opt.Noise, obj, tot)
		}
	}
}
