package planner

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"gonum.org/v1/gonum/mat"
)

// dayFactors are per-day indicators over days·24 hourly cells of a
// column of n cells (the rest outside every factor), like DATE(ts) under
// a WHERE.
func dayFactors(n, days int) []compile.Linear {
	var out []compile.Linear
	for d := 0; d < days; d++ {
		f := make(compile.Factor, n)
		for h := 0; h < 24; h++ {
			f[d*24+h] = 1
		}
		out = append(out, compile.Linear{{Coef: 1, Factors: []compile.Factor{f}}})
	}
	return out
}

func longColumnWorkload(n int, aggs []compile.Linear, groupCols []int) *compile.Workload {
	col := &catalog.Column{Name: "ts", Kind: catalog.IntegerRange, Min: 0, Max: int64(n - 1), Width: 1}
	return &compile.Workload{Table: &catalog.Table{Name: "t"}, Columns: []*catalog.Column{col},
		Queries: []*compile.Query{{Aggregates: aggs, GroupCols: groupCols}}}
}

// A long column is reduced to one class per run of cells the factors
// treat alike, cells outside every factor in none; every factor is
// constant on each class; a column grouped cell by cell, or short, is
// kept whole.
func TestReduceLong(t *testing.T) {
	n := 5000
	w := longColumnWorkload(n, dayFactors(n, 30), nil)
	rw, red := reduceLong(w)
	if red == nil {
		t.Fatal("a long column of 30 day indicators was not reduced")
	}
	if got := rw.Sizes()[0]; got != 30 {
		t.Fatalf("%d classes, want 30", got)
	}
	if rw.Columns[0].Name != "ts[30 classes]" {
		t.Fatalf("reduced column named %q", rw.Columns[0].Name)
	}
	for i, c := range red.classOf[0] {
		want := -1
		if i < 30*24 {
			want = i / 24
		}
		if c != want {
			t.Fatalf("cell %d in class %d, want %d", i, c, want)
		}
	}
	for a, agg := range w.Queries[0].Aggregates {
		f, fr := agg[0].Factors[0], rw.Queries[0].Aggregates[a][0].Factors[0]
		for i, c := range red.classOf[0] {
			if c >= 0 && f[i] != fr[c] {
				t.Fatalf("aggregate %d: cell %d reads %v, its class %v", a, i, f[i], fr[c])
			}
			if c < 0 && f[i] != 0 {
				t.Fatalf("aggregate %d: cell %d in no class reads %v", a, i, f[i])
			}
		}
	}
	if !slices.Equal(w.Sizes(), []int{n}) || w.Queries[0].Aggregates[0][0].Factors[0] == nil {
		t.Fatal("reduceLong changed the batch's workload")
	}

	if _, red := reduceLong(longColumnWorkload(n, dayFactors(n, 30), []int{0})); red != nil {
		t.Fatal("a column grouped cell by cell was reduced")
	}
	if _, red := reduceLong(longColumnWorkload(reduceAbove, dayFactors(reduceAbove, 30), nil)); red != nil {
		t.Fatal("a short column was reduced")
	}
	// An all-ones factor (COUNT(*) beside the days) puts every cell in a
	// class: the cells outside the days are one more.
	aggs := append(dayFactors(n, 30), compile.Linear{{Coef: 1, Factors: []compile.Factor{nil}}})
	if rw, red := reduceLong(longColumnWorkload(n, aggs, nil)); red == nil || rw.Sizes()[0] != 31 {
		t.Fatalf("with COUNT(*): reduced %v", red != nil)
	}
}

// A batch over a long column plans with the same sensitivity and error
// over its classes as over its cells for the workload itself, and the
// plan comes back over the batch's workload.
func TestReducedPlanIsTheBatchs(t *testing.T) {
	n := 5000
	w := longColumnWorkload(n, dayFactors(n, 30), nil)
	p, err := Choose(t.Context(), w, Options{Noise: catalog.Laplace, Epsilon: 1})
	if err != nil {
		t.Fatal(err)
	}
	if p.Workload != w {
		t.Fatal("the plan is not over the batch's workload")
	}
	if p.Kind != Direct || p.Sensitivity != 1 {
		t.Fatalf("plan %s (sensitivity %v), want the workload at sensitivity 1", p.Name, p.Sensitivity)
	}
	for a := range w.Queries[0].Aggregates {
		if v := p.Variance(0, a, nil); v != p.NoiseVariance {
			t.Fatalf("aggregate %d: variance %v, one noise draw's %v", a, v, p.NoiseVariance)
		}
	}
}

// nestedWindows are ten nested prefixes of a long column: over its ten
// classes a Kronecker product beats the workload's sensitivity 10.
func nestedWindows(n int) []compile.Linear {
	var out []compile.Linear
	for k := 1; k <= 10; k++ {
		f := make(compile.Factor, n)
		for i := 0; i < 300*k; i++ {
			f[i] = 1
		}
		out = append(out, compile.Linear{{Coef: 1, Factors: []compile.Factor{f}}})
	}
	return out
}

// The chosen Kronecker plan over a long column's classes is expanded to
// the column's cells; alternatives never expand one (a dense matrix over
// the cells each), as they never built a long column's strategy before.
func TestReducedKroneckerPlans(t *testing.T) {
	n := 5000
	w := longColumnWorkload(n, nestedWindows(n), nil)
	opt := Options{Noise: catalog.Laplace, Epsilon: 1}
	p, err := Choose(t.Context(), w, opt)
	if err != nil {
		t.Fatal(err)
	}
	if p.Kind != Kronecker || p.Workload != w {
		t.Fatalf("plan %s of kind %v, want a Kronecker plan over the batch", p.Name, p.Kind)
	}
	f := p.Factors[0]
	m, classes := f.A.Dims()
	if len(f.Classes) != n || classes >= n || m < 10 {
		t.Fatalf("factor %d × %d over %d cells in class form, want ≥ 10 rows over fewer classes than %d cells", m, classes, len(f.Classes), n)
	}
	// Over the cells it is A·P with reconstruction Pᵀ·D⁻¹·A⁺: A⁺·A·x = x
	// for every x constant on the classes and 0 outside them.
	a, pinv := f.CellMatrices()
	if r, c := a.Dims(); r != m || c != n {
		t.Fatalf("A over the cells is %d × %d", r, c)
	}
	x := make([]float64, n)
	for i, c := range f.Classes {
		if c >= 0 {
			x[i] = float64(c%7) + 1
		}
	}
	var y, back mat.VecDense
	y.MulVec(a, mat.NewVecDense(n, x))
	back.MulVec(pinv, &y)
	for i := range x {
		if math.Abs(back.AtVec(i)-x[i]) > 1e-9 {
			t.Fatalf("cell %d: A⁺·A·x = %v, x = %v", i, back.AtVec(i), x[i])
		}
	}
	// Its digest is the digest of the same plan with the factor over the
	// cells: audit verify --replan compares digests made by either form.
	dense := *p
	dense.Factors = []*ColumnStrategy{{Name: f.Name, A: a, Pinv: pinv, L1: f.L1, L2: f.L2, Grid: f.Grid}}
	if p.StrategyDigest() != dense.StrategyDigest() {
		t.Fatal("class form changes the strategy digest")
	}
	alts, err := (&Planner{noCache: true}).Alternatives(t.Context(), w, opt, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(alts) == 0 {
		t.Fatal("no alternative")
	}
	for _, a := range alts {
		if a.Kind == Kronecker {
			t.Fatalf("alternative %s expands a strategy over classes", a.Name)
		}
		if a.Workload != w {
			t.Fatalf("alternative %s is not over the batch", a.Name)
		}
	}
}

// A column every row reads at most one cell of (a DATE(ts) group over the
// classes of hours; several terms on the same cell) gets the identity as
// its only option, and no fixed option of the column beats it in any
// Kronecker product with the other column's options, under either noise
// (the argument in readsOneCell); a row reading two cells keeps every
// option.
func TestOneCellColumnsGetTheIdentity(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	cols := []*catalog.Column{
		{Name: "a", Kind: catalog.IntegerRange, Min: 0, Max: 15, Width: 1},
		{Name: "b", Kind: catalog.IntegerRange, Min: 0, Max: 5, Width: 1},
	}
	vec := func(n int) compile.Factor {
		f := make(compile.Factor, n)
		for i := range f {
			f[i] = float64(r.IntN(3))
		}
		return f
	}
	oneCell := func() compile.Factor {
		f := make(compile.Factor, 16)
		f[r.IntN(16)] = 1 + float64(r.IntN(3))
		return f
	}
	var aggs []compile.Linear
	for k := 0; k < 12; k++ {
		a := oneCell()
		agg := compile.Linear{{Coef: 1, Factors: []compile.Factor{a, vec(6)}}}
		if k%3 == 0 { // a second term on the same cell of a
			a2 := make(compile.Factor, 16)
			for i, x := range a {
				a2[i] = 2 * x
			}
			agg = append(agg, compile.Term{Coef: -0.5, Factors: []compile.Factor{a2, vec(6)}})
		}
		aggs = append(aggs, agg)
	}
	w := &compile.Workload{Table: &catalog.Table{Name: "t"}, Columns: cols, Queries: []*compile.Query{{Aggregates: aggs}}}
	s := newSpace(w)
	if !s.cols[0].oneCell || len(s.cols[0].options) != 1 || s.cols[0].options[0].name != "identity" || s.worthOptimising(0) {
		t.Fatalf("column a: one cell %v, %d options", s.cols[0].oneCell, len(s.cols[0].options))
	}
	if s.cols[1].oneCell {
		t.Fatal("column b reads several cells per row")
	}
	for _, o := range columnOptions(16, func() [][]float64 { return s.columnWorkload(0) }) {
		s.addOption(0, o)
	}
	for _, fam := range []catalog.NoiseFamily{catalog.Laplace, catalog.Gaussian} {
		for b := range s.cols[1].options {
			sens, unit := s.kronError([]int{0, b}, fam)
			identity := sens * sens * unit
			for a := 1; a < len(s.cols[0].options); a++ {
				sens, unit := s.kronError([]int{a, b}, fam)
				if other := sens * sens * unit; other < identity*(1-1e-12) {
					t.Fatalf("%s: %s ⊗ %s errs %v, the identity %v", fam, s.cols[0].options[a].name, s.cols[1].options[b].name, other, identity)
				}
			}
		}
	}
	// One row reading two cells of a: every option again.
	two := make(compile.Factor, 16)
	two[1], two[5] = 1, 1
	w.Queries[0].Aggregates = append(w.Queries[0].Aggregates, compile.Linear{{Coef: 1, Factors: []compile.Factor{two, nil}}})
	if s := newSpace(w); s.cols[0].oneCell || len(s.cols[0].options) < 3 {
		t.Fatalf("two cells: one cell %v, %d options", s.cols[0].oneCell, len(s.cols[0].options))
	}
}
