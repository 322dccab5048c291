package planner

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dpproxy/dpproxy/measure"
	"gonum.org/v1/gonum/mat"
)

// knownFixture is a 3 × 4 domain (columns a, b) with three measurements:
// m1 over (a, b) (identity ⊗ a hierarchical factor), m2 over a alone, m3
// one range over b (rank-deficient).
type knownFixture struct {
	cols  []measure.Column
	truth []float64 // over a × b
	ms    []*measure.Measurement
}

func newKnownFixture() *knownFixture {
	a := measure.Column{Name: "a", Def: "da", Size: 3, Whole: true}
	b := measure.Column{Name: "b", Def: "db", Size: 4, Whole: true}
	truth := []float64{5, 0, 7, 2, 1, 9, 4, 4, 3, 3, 0, 8}
	h := []float64{ // total, halves, cells of b
		1, 1, 1, 1,
		1, 1, 0, 0,
		0, 0, 1, 1,
		1, 0, 0, 0,
		0, 1, 0, 0,
		0, 0, 1, 0,
		0, 0, 0, 1,
	}
	f := &knownFixture{cols: []measure.Column{a, b}, truth: truth}
	f.ms = []*measure.Measurement{
		{ID: 1, Columns: []measure.Column{a, b}, Factors: [][]float64{nil, h}, Rows: []int{3, 7}, Variance: 2},
		{ID: 2, Columns: []measure.Column{a}, Factors: [][]float64{nil}, Rows: []int{3}, Variance: 3},
		{ID: 3, Columns: []measure.Column{b}, Factors: [][]float64{{1, 1, 0, 0}}, Rows: []int{1}, Variance: 1.5},
	}
	return f
}

// dense is the measurement's full matrix over its own columns.
func denseOf(m *measure.Measurement) *mat.Dense {
	out := mat.NewDense(1, 1, []float64{1})
	for j, c := range m.Columns {
		f := m.Factors[j]
		if f == nil {
			f = make([]float64, c.Size*c.Size)
			for i := 0; i < c.Size; i++ {
				f[i*c.Size+i] = 1
			}
		}
		var k mat.Dense
		k.Kronecker(out, mat.NewDense(m.Rows[j], c.Size, f))
		out = &k
	}
	return out
}

// lift is the matrix of m over the fixture's domain a × b (its rows
// summed over the columns it lacks).
func (f *knownFixture) lift(m *measure.Measurement) *mat.Dense {
	d := denseOf(m)
	r, _ := d.Dims()
	out := mat.NewDense(r, 12, nil)
	for s := 0; s < 12; s++ {
		ai, bi := s/4, s%4
		var col int
		switch len(m.Columns) {
		case 2:
			col = s
		case 1:
			if m.Columns[0].Name == "a" {
				col = ai
			} else {
				col = bi
			}
		}
		for i := 0; i < r; i++ {
			out.Set(i, s, d.At(i, col))
		}
	}
	return out
}

// noisy fills every measurement's answers from the truth plus noise
// (r nil: none).
func (f *knownFixture) noisy(r *rand.Rand) {
	x := mat.NewVecDense(12, f.truth)
	for _, m := range f.ms {
		var y mat.VecDense
		y.MulVec(f.lift(m), x)
		m.Answers = append([]float64(nil), y.RawVector().Data...)
		if r != nil {
			for i := range m.Answers {
				m.Answers[i] += r.NormFloat64() * math.Sqrt(m.Variance)
			}
		}
	}
}

func TestGLSZeroNoiseIsExact(t *testing.T) {
	f := newKnownFixture()
	f.noisy(nil)
	marg := []float64{14, 18, 14}
	for _, tc := range []struct {
		cols  []measure.Column
		truth []float64
	}{{f.cols, f.truth}, {f.cols[:1], marg}, {nil, []float64{46}}} {
		g, ok := NewGLS(tc.cols)
		if !ok {
			t.Fatal("NewGLS refused")
		}
		for _, m := range f.ms {
			g.Add(m, 1)
		}
		est, ok := g.Solve()
		if !ok {
			t.Fatalf("%d columns: not solvable", len(tc.cols))
		}
		for c, want := range tc.truth {
			if math.Abs(est.X[c]-want) > 1e-9 {
				t.Fatalf("%d columns: cell %d = %g, want %g", len(tc.cols), c, est.X[c], want)
			}
		}
	}
}

func TestGLSCovarianceMatchesDense(t *testing.T) {
	f := newKnownFixture()
	f.noisy(nil)
	g, _ := NewGLS(f.cols)
	for _, m := range f.ms {
		if !g.Add(m, 1) {
			t.Fatalf("measurement %d did not join", m.ID)
		}
	}
	est, ok := g.Solve()
	if !ok {
		t.Fatal("not solvable")
	}
	// Dense: J = Σ AᵀA/σ², covariance J⁻¹.
	j := mat.NewDense(12, 12, nil)
	for _, m := range f.ms {
		a := f.lift(m)
		var ata mat.Dense
		ata.Mul(a.T(), a)
		ata.Scale(1/m.Variance, &ata)
		j.Add(j, &ata)
	}
	var inv mat.Dense
	if err := inv.Inverse(j); err != nil {
		t.Fatal(err)
	}
	for r := 0; r < 12; r++ {
		for c := 0; c < 12; c++ {
			if d := math.Abs(inv.At(r, c) - est.CovAt(r, c)); d > 1e-9 {
				t.Fatalf("cov[%d,%d] = %g, dense %g", r, c, est.CovAt(r, c), inv.At(r, c))
			}
		}
	}
	// The range over b alone is identified by m3 only through J: a
	// rank-deficient system identifies it and not a single cell.
	g3, _ := NewGLS(f.cols[1:])
	g3.Add(f.ms[2], 1)
	e3, ok := g3.Solve()
	if !ok {
		t.Fatal("rank-deficient system not solved")
	}
	if v, variance, ok := e3.Answer([]int{0, 1}, []float64{1, 1}); !ok || math.Abs(variance-1.5) > 1e-9 || math.Abs(v-f.ms[2].Answers[0]) > 1e-9 {
		t.Fatalf("range: %g ± %g, %v", v, variance, ok)
	}
	if _, _, ok := e3.Answer([]int{0}, []float64{1}); ok {
		t.Fatal("a single cell of b is not identified by one range")
	}
}

// TestGLSEmpiricalVariance draws the noise 20,000 times (seeded) and
// compares the empirical variance of the estimated marginal over a (m1
// summed over b, with m2; m3 cannot join) with the formula. The relative
// standard error of a sample variance of n normals is √(2/n) ≈ 1%, so a
// 5% tolerance fails with probability below 10⁻⁶ per cell.
func TestGLSEmpiricalVariance(t *testing.T) {
	f := newKnownFixture()
	r := rand.New(rand.NewPCG(1, 2))
	const runs = 20000
	var sum, sq [3]float64
	var want [3]float64
	for run := 0; run < runs; run++ {
		f.noisy(r)
		g, _ := NewGLS(f.cols[:1])
		for _, m := range f.ms {
			g.Add(m, 1)
		}
		if run == 0 && len(g.Used) != 2 {
			t.Fatalf("used %v, want m1 and m2", g.Used)
		}
		est, _ := g.Solve()
		for c := 0; c < 3; c++ {
			d := est.X[c] - []float64{14, 18, 14}[c]
			sum[c] += d
			sq[c] += d * d
			want[c] = est.CovAt(c, c)
		}
	}
	for c := 0; c < 3; c++ {
		mean := sum[c] / runs
		v := sq[c]/runs - mean*mean
		if math.Abs(v/want[c]-1) > 0.05 {
			t.Fatalf("cell %d: empirical variance %g, formula %g", c, v, want[c])
		}
		if math.Abs(mean) > 5*math.Sqrt(want[c]/runs) {
			t.Fatalf("cell %d: biased, mean error %g", c, mean)
		}
	}
}

func TestGLSRefusesMismatches(t *testing.T) {
	f := newKnownFixture()
	f.noisy(nil)
	other := f.cols
	other = append([]measure.Column(nil), other...)
	other[0].Def = "changed"
	g, _ := NewGLS(other)
	if g.Add(f.ms[0], 1) {
		t.Fatal("a measurement of another definition of a joined")
	}
	part := append([]measure.Column(nil), f.cols...)
	part[1].Whole = false
	g, _ = NewGLS(part[:1])
	m := *f.ms[0]
	m.Columns = part
	if g.Add(&m, 1) {
		t.Fatal("summed over a column that drops rows")
	}
	if _, ok := NewGLS([]measure.Column{{Size: 300}, {Size: 300}}); ok {
		t.Fatal("90,000 cells accepted")
	}
}

// TestGLSMarginalisedCovarianceMatchesDense: over a's columns alone, m1
// joins summed over b. The estimate is linear in the answers, x̂ = L·y, so
// its covariance is L·D·Lᵀ with D the answers' noise variances: L is read
// off column by column (the estimate of each unit answer vector) and the
// dense product matches the structured covariance to 1e-9.
func TestGLSMarginalisedCovarianceMatchesDense(t *testing.T) {
	f := newKnownFixture()
	ms := f.ms[:2]
	var d []float64
	for _, m := range ms {
		m.Answers = make([]float64, m.Cells())
		for range m.Answers {
			d = append(d, m.Variance)
		}
	}
	solve := func() *Estimate {
		g, _ := NewGLS(f.cols[:1])
		for _, m := range ms {
			if !g.Add(m, 1) {
				t.Fatalf("measurement %d did not join", m.ID)
			}
		}
		est, ok := g.Solve()
		if !ok {
			t.Fatal("not solvable")
		}
		return est
	}
	l := mat.NewDense(3, len(d), nil)
	k := 0
	for _, m := range ms {
		for i := range m.Answers {
			m.Answers[i] = 1
			l.SetCol(k, solve().X)
			m.Answers[i] = 0
			k++
		}
	}
	var ld, cov mat.Dense
	ld.Mul(l, mat.NewDiagDense(len(d), d))
	cov.Mul(&ld, l.T())
	est := solve()
	for r := 0; r < 3; r++ {
		for c := 0; c < 3; c++ {
			if diff := math.Abs(cov.At(r, c) - est.CovAt(r, c)); diff > 1e-9 {
				t.Fatalf("cov[%d,%d] = %g, dense %g", r, c, est.CovAt(r, c), cov.At(r, c))
			}
		}
	}
}

// TestGLSRankDeficientMatchesPseudoInverse: on a 20 × 15 domain (300
// cells, past what an eigendecomposition-only solve took) whose
// measurements identify the marginal over a and one random direction of b
// per cell of a, every identified answer's estimate and variance equal
// the dense pseudo-inverse's (wᵀJ⁺b, wᵀJ⁺w) to 1e-9 relative, and an
// answer outside J's range is called not identified.
func TestGLSRankDeficientMatchesPseudoInverse(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	a := measure.Column{Name: "a", Def: "da", Size: 20, Whole: true}
	b := measure.Column{Name: "b", Def: "db", Size: 15, Whole: true}
	row := make([]float64, 15)
	for i := range row {
		row[i] = float64(r.IntN(5))
	}
	ms := []*measure.Measurement{
		{ID: 1, Columns: []measure.Column{a}, Factors: [][]float64{nil}, Rows: []int{20}, Variance: 2},
		{ID: 2, Columns: []measure.Column{a, b}, Factors: [][]float64{nil, row}, Rows: []int{20, 1}, Variance: 3},
	}
	const n = 300
	// Dense J and b from random answers.
	jd := mat.NewDense(n, n, nil)
	bd := mat.NewVecDense(n, nil)
	g, _ := NewGLS([]measure.Column{a, b})
	for _, m := range ms {
		m.Answers = make([]float64, m.Cells())
		for i := range m.Answers {
			m.Answers[i] = r.NormFloat64() * 10
		}
		if !g.Add(m, 1) {
			t.Fatalf("measurement %d did not join", m.ID)
		}
		d := denseOf(m)
		rows, cols := d.Dims()
		lift := mat.NewDense(rows, n, nil)
		for s := 0; s < n; s++ {
			col := s
			if cols == 20 {
				col = s / 15
			}
			for i := 0; i < rows; i++ {
				lift.Set(i, s, d.At(i, col))
			}
		}
		var ata mat.Dense
		ata.Mul(lift.T(), lift)
		ata.Scale(1/m.Variance, &ata)
		jd.Add(jd, &ata)
		var aty mat.VecDense
		aty.MulVec(lift.T(), mat.NewVecDense(rows, m.Answers))
		aty.ScaleVec(1/m.Variance, &aty)
		bd.AddVec(bd, &aty)
	}
	est, ok := g.Solve()
	if !ok {
		t.Fatal("not solved")
	}
	var svd mat.SVD
	if !svd.Factorize(jd, mat.SVDFull) {
		t.Fatal("svd")
	}
	vals := svd.Values(nil)
	var u, v mat.Dense
	svd.UTo(&u)
	svd.VTo(&v)
	pinv := mat.NewDense(n, n, nil)
	for k, s := range vals {
		if s > vals[0]*1e-10 {
			var outer mat.Dense
			outer.Outer(1/s, v.ColView(k), u.ColView(k))
			pinv.Add(pinv, &outer)
		}
	}
	var xd mat.VecDense
	xd.MulVec(pinv, bd)
	cells := make([]int, n)
	for i := range cells {
		cells[i] = i
	}
	for trial := 0; trial < 20; trial++ {
		// An identified answer: w = J·z.
		z := mat.NewVecDense(n, nil)
		for i := 0; i < n; i++ {
			z.SetVec(i, r.NormFloat64())
		}
		var w mat.VecDense
		w.MulVec(jd, z)
		ws := w.RawVector().Data
		val, variance, ok := est.Answer(cells, ws)
		if !ok {
			t.Fatalf("trial %d: identified answer called not identified", trial)
		}
		var pw mat.VecDense
		pw.MulVec(pinv, &w)
		wantVal, wantVar := mat.Dot(&w, &xd), mat.Dot(&w, &pw)
		if math.Abs(val-wantVal) > 1e-9*math.Max(1, math.Abs(wantVal)) || math.Abs(variance-wantVar) > 1e-9*wantVar {
			t.Fatalf("trial %d: %g ± %g, pseudo-inverse %g ± %g", trial, val, variance, wantVal, wantVar)
		}
		// A single cell is not identified.
		if _, _, ok := est.Answer([]int{trial}, []float64{1}); ok {
			t.Fatalf("cell %d called identified", trial)
		}
	}
}

// TestGLSEmbedsColumnsWithoutTheDroppedCell: a measurement over a column
// that drops rows joins a system over its copy with a dropped cell, whose
// extra cell it did not see: its cells are identified (zero noise: equal
// to the truth), the dropped cell is not.
func TestGLSEmbedsColumnsWithoutTheDroppedCell(t *testing.T) {
	plain := measure.Column{Name: "b", Def: "plain", Size: 4, Base: "b", Whole: false}
	withCell := measure.Column{Name: "b", Def: "cell", Size: 5, Base: "b", Whole: true, DroppedCell: true}
	m := &measure.Measurement{ID: 1, Columns: []measure.Column{plain}, Factors: [][]float64{nil}, Rows: []int{4}, Variance: 2, Answers: []float64{3, 1, 4, 1}}
	g, _ := NewGLS([]measure.Column{withCell})
	if !g.Add(m, 1) {
		t.Fatal("did not join")
	}
	est, ok := g.Solve()
	if !ok {
		t.Fatal("not solved")
	}
	if v, variance, ok := est.Answer([]int{0, 2}, []float64{1, 1}); !ok || math.Abs(v-7) > 1e-9 || math.Abs(variance-4) > 1e-9 {
		t.Fatalf("cells 0 and 2: %g ± %g, %v", v, variance, ok)
	}
	if _, _, ok := est.Answer([]int{4}, []float64{1}); ok {
		t.Fatal("the dropped cell called identified")
	}
	// The other way round does not join: the measurement saw a cell the
	// system lacks.
	g2, _ := NewGLS([]measure.Column{plain})
	m2 := &measure.Measurement{ID: 2, Columns: []measure.Column{withCell}, Factors: [][]float64{nil}, Rows: []int{5}, Variance: 2}
	if g2.Add(m2, 1) {
		t.Fatal("a measurement with the dropped cell joined a system without it")
	}
}

// TestGLSOverClassesMatchesCells: measurements and answers that read a
// 48-cell column only in blocks of 6 give, solved over the 8 classes,
// the estimates and variances of the system over the cells; a measurement
// that tells cells apart inside a block does not reduce.
func TestGLSOverClassesMatchesCells(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	col := measure.Column{Name: "ts", Def: "hours", Size: 48, Whole: true}
	block := func(rows int, of func(r, cell int) float64) []float64 {
		f := make([]float64, rows*48)
		for i := 0; i < rows; i++ {
			for c := 0; c < 48; c++ {
				f[i*48+c] = of(i, c)
			}
		}
		return f
	}
	days := block(2, func(i, c int) float64 { return b2f(c/24 == i) })
	quarters := block(8, func(i, c int) float64 { return b2f(c/6 == i) })
	ms := []*measure.Measurement{
		{ID: 1, Columns: []measure.Column{col}, Factors: [][]float64{days}, Rows: []int{2}, Variance: 2},
		{ID: 2, Columns: []measure.Column{col}, Factors: [][]float64{quarters}, Rows: []int{8}, Variance: 3},
	}
	for _, m := range ms {
		m.Answers = make([]float64, m.Rows[0])
		for i := range m.Answers {
			m.Answers[i] = 100 + 10*r.NormFloat64()
		}
	}
	full, _ := NewGLS([]measure.Column{col})
	cls := NewClasses([]measure.Column{col})
	half := make([]float64, 48) // the first half-day: 12 hours
	for c := 0; c < 12; c++ {
		half[c] = 1
	}
	cls.Split(0, half)
	for _, m := range ms {
		cls.AddMeasurement(m)
	}
	if got := cls.Cells(); got != 8 {
		t.Fatalf("%g classes, want 8", got)
	}
	reduced, _ := NewGLS(cls.Columns())
	for _, m := range ms {
		full.Add(m, 1)
		rm, ok := cls.Reduce(m)
		if !ok || !reduced.Add(rm, 1) {
			t.Fatalf("measurement %d did not reduce or join", m.ID)
		}
	}
	ef, ok1 := full.Solve()
	er, ok2 := reduced.Solve()
	if !ok1 || !ok2 {
		t.Fatal("not solved")
	}
	var cells, classes []int
	var w, wc []float64
	seen := map[int]bool{}
	for c := 0; c < 12; c++ {
		cells, w = append(cells, c), append(w, 1)
		if k := cls.Class(0, c); !seen[k] {
			seen[k] = true
			classes, wc = append(classes, k), append(wc, 1)
		}
	}
	v1, var1, ok1 := ef.Answer(cells, w)
	v2, var2, ok2 := er.Answer(classes, wc)
	if !ok1 || !ok2 || math.Abs(v1-v2) > 1e-9*math.Abs(v1) || math.Abs(var1-var2) > 1e-9*var1 {
		t.Fatalf("cells %g ± %g (%v), classes %g ± %g (%v)", v1, var1, ok1, v2, var2, ok2)
	}
	// An hour alone is identified over neither.
	if _, _, ok := ef.Answer([]int{0}, []float64{1}); ok {
		t.Fatal("an hour called identified")
	}
	// A measurement of single hours is not constant on the classes.
	hourly := &measure.Measurement{ID: 3, Columns: []measure.Column{col}, Factors: [][]float64{nil}, Rows: []int{48}, Variance: 1}
	if _, ok := cls.Reduce(hourly); ok {
		t.Fatal("an hourly measurement reduced to blocks")
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
