package planner

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/dpproxy/dpproxy/measure"
	"gonum.org/v1/gonum/mat"
)

// randomBlockCase is a small domain (two or three columns of 2 to 6
// cells) with a truth and 1 to 5 measurements: each over a random subset
// of the columns (the others whole, summed over), each factor the
// identity or a few rows reading one to three cells, so that the blocks
// are of every shape, from single cells to the whole domain.
func randomBlockCase(r *rand.Rand, noise bool) ([]measure.Column, []float64, []*measure.Measurement) {
	cols := make([]measure.Column, 2+r.IntN(2))
	n := 1
	for k := range cols {
		cols[k] = measure.Column{Name: fmt.Sprint("c", k), Def: fmt.Sprint("d", k), Size: 2 + r.IntN(5), Whole: true}
		n *= cols[k].Size
	}
	truth := make([]float64, n)
	for i := range truth {
		truth[i] = float64(r.IntN(20))
	}
	var ms []*measure.Measurement
	for id := int64(1); id <= int64(1+r.IntN(5)); id++ {
		m := &measure.Measurement{ID: id, Variance: 0.5 + 3*r.Float64()}
		for _, c := range cols {
			if r.IntN(3) == 0 {
				continue // summed over
			}
			m.Columns = append(m.Columns, c)
			if r.IntN(3) == 0 {
				m.Factors, m.Rows = append(m.Factors, nil), append(m.Rows, c.Size)
				continue
			}
			rows := 1 + r.IntN(c.Size)
			f := make([]float64, rows*c.Size)
			for i := 0; i < rows; i++ {
				for range 1 + r.IntN(3) {
					f[i*c.Size+r.IntN(c.Size)] = float64(1 + r.IntN(2))
				}
			}
			m.Factors, m.Rows = append(m.Factors, f), append(m.Rows, rows)
		}
		// The answers: the measurement's matrix times the truth summed
		// over the columns it lacks.
		cells := 1
		for _, c := range m.Columns {
			cells *= c.Size
		}
		marg := make([]float64, cells)
		coords := make([]int, len(cols))
		for s := 0; s < n; s++ {
			rest := s
			for k := len(cols) - 1; k >= 0; k-- {
				coords[k] = rest % cols[k].Size
				rest /= cols[k].Size
			}
			idx := 0
			for k, c := range cols {
				for _, mc := range m.Columns {
					if mc.Name == c.Name {
						idx = idx*c.Size + coords[k]
					}
				}
			}
			marg[idx] += truth[s]
		}
		var y mat.VecDense
		y.MulVec(denseOf(m), mat.NewVecDense(cells, marg))
		m.Answers = append([]float64(nil), y.RawVector().Data...)
		if noise {
			for i := range m.Answers {
				m.Answers[i] += r.NormFloat64() * math.Sqrt(m.Variance)
			}
		}
		ms = append(ms, m)
	}
	return cols, truth, ms
}

// close reports whether a and b agree to 1e-9 relative (absolute near 0).
func closeTo(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

// TestBlockedMatchesDense: on 400 random small cases the blocked system
// (forced below MaxKnownCells) joins the same measurements as the dense
// one, holds the same information (Quad, bit for bit: the same sums in
// the same order), and gives every answer — single cells, random
// weights, the total — the same identifiability, estimate and variance
// to 1e-9 relative, and the same covariances; J built measurement by
// measurement is J built at once, bit for bit.
func TestBlockedMatchesDense(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 29))
	for it := 0; it < 400; it++ {
		cols, _, ms := randomBlockCase(r, true)
		dense, _ := newGLS(cols, MaxKnownCells)
		blocked, _ := newGLS(cols, 0)
		if dense.blk != nil || blocked.blk == nil {
			t.Fatal("modes not as forced")
		}
		for _, m := range ms {
			if d, b := dense.Add(m, 1), blocked.Add(m, 1); d != b {
				t.Fatalf("case %d: measurement %d joins dense %v, blocked %v", it, m.ID, d, b)
			}
		}
		if dense.Empty() {
			continue
		}
		n := dense.n
		var all []int
		var ones []float64
		for c := 0; c < n; c++ {
			all, ones = append(all, c), append(ones, 1)
		}
		type answer struct {
			cells []int
			w     []float64
		}
		var as []answer
		for c := 0; c < n; c++ {
			as = append(as, answer{[]int{c}, []float64{1}})
		}
		as = append(as, answer{all, ones})
		for range 5 {
			var a answer
			for c := 0; c < n; c++ {
				if r.IntN(2) == 0 {
					a.cells, a.w = append(a.cells, c), append(a.w, float64(r.IntN(5)-2))
				}
			}
			if len(a.cells) > 0 {
				as = append(as, a)
			}
		}
		for _, a := range as {
			if qd, qb := dense.Quad(a.cells, a.w), blocked.Quad(a.cells, a.w); !closeTo(qd, qb) {
				t.Fatalf("case %d: Quad dense %g, blocked %g", it, qd, qb)
			}
		}
		ed, okd := dense.Solve()
		eb, okb := blocked.Solve()
		if okd != okb {
			t.Fatalf("case %d: solved dense %v, blocked %v", it, okd, okb)
		}
		if !okd {
			continue
		}
		for _, a := range as {
			vd, vard, okd := ed.Answer(a.cells, a.w)
			vb, varb, okb := eb.Answer(a.cells, a.w)
			if okd != okb {
				t.Fatalf("case %d: %v·%v identified dense %v, blocked %v", it, a.w, a.cells, okd, okb)
			}
			if okd && (!closeTo(vd, vb) || !closeTo(vard, varb)) {
				t.Fatalf("case %d: %v·%v dense %g ± %g, blocked %g ± %g", it, a.w, a.cells, vd, vard, vb, varb)
			}
		}
		for i := 0; i < n; i++ {
			if _, _, ok := ed.Answer([]int{i}, []float64{1}); !ok {
				continue
			}
			for j := 0; j < n; j++ {
				if _, _, ok := ed.Answer([]int{j}, []float64{1}); ok && !closeTo(ed.CovAt(i, j), eb.CovAt(i, j)) {
					t.Fatalf("case %d: cov[%d,%d] dense %g, blocked %g", it, i, j, ed.CovAt(i, j), eb.CovAt(i, j))
				}
			}
		}
		// Built after each measurement (each build starting from the
		// last), J is the one built at once, bit for bit.
		stepwise, _ := newGLS(cols, 0)
		for _, m := range ms {
			stepwise.Add(m, 1)
			stepwise.Quad(all, ones)
		}
		if !stepwise.Equal(blocked) {
			t.Fatalf("case %d: J built step by step differs", it)
		}
		// Refit from the same structure with other answers equals a solve.
		again, _ := newGLS(cols, 0)
		for _, m := range ms {
			again.Add(m, 1)
		}
		if !again.Equal(blocked) {
			t.Fatalf("case %d: the same measurements give another J", it)
		}
		refit := again.Refit(eb)
		for c := range refit.X {
			if refit.X[c] != eb.X[c] {
				t.Fatalf("case %d: refit differs at %d", it, c)
			}
		}
	}
}

// TestBlockedNoiselessIsExact: without noise, every answer the blocked
// system identifies equals the truth (to rounding).
func TestBlockedNoiselessIsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 37))
	identified := 0
	for it := 0; it < 300; it++ {
		cols, truth, ms := randomBlockCase(r, false)
		g, _ := newGLS(cols, 0)
		for _, m := range ms {
			g.Add(m, 1)
		}
		est, ok := g.Solve()
		if !ok {
			continue
		}
		for c, want := range truth {
			if v, _, ok := est.Answer([]int{c}, []float64{1}); ok {
				identified++
				if math.Abs(v-want) > 1e-7*math.Max(1, want) {
					t.Fatalf("case %d: cell %d = %g, truth %g", it, c, v, want)
				}
			}
		}
		total := 0.0
		var all []int
		var ones []float64
		for c, x := range truth {
			total += x
			all, ones = append(all, c), append(ones, 1)
		}
		if v, _, ok := est.Answer(all, ones); ok && math.Abs(v-total) > 1e-7*math.Max(1, total) {
			t.Fatalf("case %d: total %g, truth %g", it, v, total)
		}
	}
	if identified < 100 {
		t.Fatalf("only %d cells identified: the cases are too weak", identified)
	}
}

// TestBlockedYearOfHours: over 8,760 hourly cells an hourly identity and
// daily sums make 365 blocks of 24 (no n × n matrix: the memory is
// linear in the cells); a yearly total would link them all into one
// block of 8,760 and does not join; a day's total combines the two
// measurements with the exact variance 1/(1/(24·v_h) + 1/v_d).
func TestBlockedYearOfHours(t *testing.T) {
	col := measure.Column{Name: "ts", Def: "hours", Size: 8760, Whole: true}
	days := make([]float64, 365*8760)
	for d := 0; d < 365; d++ {
		for h := 0; h < 24; h++ {
			days[d*8760+d*24+h] = 1
		}
	}
	truth := make([]float64, 8760)
	for i := range truth {
		truth[i] = float64(i % 7)
	}
	hourly := &measure.Measurement{ID: 1, Columns: []measure.Column{col}, Factors: [][]float64{nil}, Rows: []int{8760}, Variance: 2, Answers: truth}
	daily := &measure.Measurement{ID: 2, Columns: []measure.Column{col}, Factors: [][]float64{days}, Rows: []int{365}, Variance: 3, Answers: make([]float64, 365)}
	for d := range daily.Answers {
		for h := 0; h < 24; h++ {
			daily.Answers[d] += truth[d*24+h]
		}
	}
	total := &measure.Measurement{ID: 3, Columns: []measure.Column{col}, Factors: [][]float64{nil}, Rows: []int{8760}, Variance: 1}
	total.Factors[0] = make([]float64, 8760)
	for i := range total.Factors[0] {
		total.Factors[0][i] = 1
	}
	total.Rows[0] = 1
	total.Answers = []float64{0}
	g, ok := NewGLS([]measure.Column{col})
	if !ok || g.blk == nil {
		t.Fatal("8,760 cells not a blocked system")
	}
	if !g.Add(hourly, 1) || g.Largest() != 1 {
		t.Fatalf("hourly: largest block %d", g.Largest())
	}
	if got, work := g.SizeWith([]*measure.Measurement{daily}); got != 24 || work != 365*24*24*24 {
		t.Fatalf("with the daily sums: largest block %d, want 24", got)
	}
	if !g.Add(daily, 1) || g.Largest() != 24 {
		t.Fatalf("daily: largest block %d", g.Largest())
	}
	if g.Joins(total) || g.Add(total, 1) {
		t.Fatal("a yearly total joined: one block of 8,760 cells")
	}
	if got, _ := g.SizeWith([]*measure.Measurement{total}); got != 8760 {
		t.Fatalf("with the total: largest block %d, want 8760", got)
	}
	if g.Largest() != 24 {
		t.Fatal("SizeWith added to the system")
	}
	if b := g.Bytes(); b > 8760*24*8*2 {
		t.Fatalf("%d bytes: not linear in the cells", b)
	}
	est, ok := g.Solve()
	if !ok || len(est.parts) != 365 {
		t.Fatalf("solved %v, %d blocks", ok, len(est.parts))
	}
	cells, ones := make([]int, 24), make([]float64, 24)
	for h := range cells {
		cells[h], ones[h] = 24*100+h, 1
	}
	v, variance, ok := est.Answer(cells, ones)
	want := 1 / (1/(24*2.0) + 1/3.0)
	if !ok || !closeTo(variance, want) || math.Abs(v-daily.Answers[100]) > 1e-9 {
		t.Fatalf("day 100: %g ± %g (%v), want %g ± %g", v, variance, ok, daily.Answers[100], want)
	}
}

// BenchmarkBlockedYearSolve is one step of the least-ε search over a
// year of hours: the stored system (an hourly identity, built and
// solved) cloned, daily sums added, solved, and every day's answer read.
//
//	go test ./planner/ -run '^$' -bench BlockedYearSolve
func BenchmarkBlockedYearSolve(b *testing.B) {
	stored, daily := yearOfHours(b)
	cells, ones := make([]int, 24), make([]float64, 24)
	for i := 0; i < b.N; i++ {
		g := stored.Clone()
		g.Add(daily, 0.5)
		est, ok := g.Solve()
		if !ok {
			b.Fatal("not solved")
		}
		for d := 0; d < 365; d++ {
			for h := range cells {
				cells[h], ones[h] = d*24+h, 1
			}
			if _, _, ok := est.Answer(cells, ones); !ok {
				b.Fatal("a day not identified")
			}
		}
	}
}

// A factor in class form reads by column as the same factor over cells.
func TestSparseFactorOfClassForm(t *testing.T) {
	const n = 1500 // past reuse's class-form length
	var rows [][]float64
	for d := 0; d < 50; d++ { // 50 "days" of 24 cells, weights per day, some cells in none
		f := make([]float64, n)
		for h := 0; h < 24; h++ {
			f[100+24*d+h] = float64(d%3 + 1)
		}
		rows = append(rows, f)
	}
	of, cf, ok := measure.InClasses(rows, n)
	if !ok {
		t.Fatal("no class form")
	}
	m := &measure.Measurement{Columns: []measure.Column{{Name: "ts", Def: "d", Size: n, Whole: true}}, Rows: []int{len(rows)},
		Factors: [][]float64{cf}, Classes: []measure.ClassMap{of}, Noise: "laplace", Scale: "1/1", Variance: 2}
	if err := m.Valid(); err != nil {
		t.Fatal(err)
	}
	got, want := sparseFactorOf(m, 0), sparseFactorOf(m.Dense(), 0)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("class form read by column differs from over cells")
	}
}

// yearOfHours is the year-of-hours benchmarks' stored system (an hourly
// identity, built and solved) and the new measurement (daily sums).
func yearOfHours(b *testing.B) (*GLS, *measure.Measurement) {
	col := measure.Column{Name: "ts", Def: "hours", Size: 8760, Whole: true}
	days := make([]float64, 365*8760)
	for d := 0; d < 365; d++ {
		for h := 0; h < 24; h++ {
			days[d*8760+d*24+h] = 1
		}
	}
	hourly := &measure.Measurement{ID: 1, Columns: []measure.Column{col}, Factors: [][]float64{nil}, Rows: []int{8760}, Variance: 2, Answers: make([]float64, 8760)}
	daily := &measure.Measurement{ID: 2, Columns: []measure.Column{col}, Factors: [][]float64{days}, Rows: []int{365}, Variance: 3}
	stored, _ := NewGLS([]measure.Column{col})
	stored.Add(hourly, 1)
	if _, ok := stored.Solve(); !ok {
		b.Fatal("not solved")
	}
	return stored, daily
}
