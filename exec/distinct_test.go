package exec

import (
	"context"
	"math"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/planner"
)

// oneUnit is a UnitCounter with a single unit in the given internal cells.
type oneUnit []int

func (u oneUnit) UnitCells(_ context.Context, _ *catalog.Table, _ []*catalog.Column, fn func([]int) error) error {
	return fn(u)
}

// The COUNT(DISTINCT <unit>) sensitivity is exact: brute force over every
// set of at most min(k, g) internal cells one unit's kept rows may lie in
// finds no unit changing the answers by more than Δ₁ in L1 (or √Δ₁ in L2),
// and some unit attains it.
func TestDistinctSensitivityWorstUnit(t *testing.T) {
	tab := table()
	tab.Unit = &catalog.PrivacyUnit{Column: "u", MaxRows: 3, MaxGroups: 2}
	for _, texts := range [][]string{
		{"SELECT COUNT(DISTINCT u) FROM t"},
		{"SELECT b, COUNT(DISTINCT u) FROM t GROUP BY b", "SELECT COUNT(DISTINCT u) FROM t WHERE a > 3"},
		{"SELECT FLOOR(a / 5) AS k, COUNT(DISTINCT u) FROM t WHERE b <> 'x' GROUP BY k"},
		{"SELECT c, COUNT(DISTINCT u) FROM t GROUP BY c"},
	} {
		var sts []*parser.Statement
		for _, text := range texts {
			st, err := parser.Parse(text, func(_, table string) bool { return table == "t" })
			if err != nil {
				t.Fatalf("%s: %v", text, err)
			}
			sts = append(sts, &st[0])
		}
		w, err := compile.Compile(tab, sts)
		if err != nil {
			t.Fatalf("%q: %v", texts, err)
		}
		opt := planner.Options{Noise: catalog.Laplace, Epsilon: 1, Unit: planner.ContributionOf(tab.Unit)}
		n, err := PlanDistinct(w, opt)
		if err != nil {
			t.Fatal(err)
		}
		internal := 1
		for _, c := range w.Columns {
			internal *= c.Size() + 1
		}
		worst := 0.0
		change := func(cells []int) {
			got, err := CountDistinct(context.Background(), w, oneUnit(cells))
			if err != nil {
				t.Fatal(err)
			}
			l1 := 0.0
			for _, aggs := range got {
				for _, gs := range aggs {
					for _, x := range gs {
						if x != 0 && x != 1 {
							t.Fatalf("a unit counted %v times in one answer", x)
						}
						l1 += x
					}
				}
			}
			worst = math.Max(worst, l1)
		}
		for i := 0; i < internal; i++ {
			change([]int{i})
			for j := i + 1; j < internal; j++ {
				change([]int{i, j})
			}
		}
		if worst > n.Sensitivity || worst < n.Sensitivity {
			t.Errorf("%q: worst unit changes the answers by %v in L1, sensitivity %v", texts, worst, n.Sensitivity)
		}
	}
}
