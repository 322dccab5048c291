package measure

import (
	"encoding/json"
	"fmt"
	"math"
)

// Class form. A long column's factor is mostly constant on runs of cells:
// a year of DATE(ts) over five years of hourly bins is 365 rows that are
// each 24 ones among 43,824 cells, 128 MB dense. Stored in class form the
// column's cells fall in classes on which every row of the factor is
// constant (a day's 24 hours), cells where every row is 0 in none, and
// the factor is kept over the classes: 365 × 365 entries, 1 MB.
//
// With Classes[j] set, Factors[j] is Rows[j] × K row-major (K =
// len(Factors[j]) / Rows[j]) and the factor over cells is
//
//	F[r][i] = Factors[j][r·K + Classes[j][i]]   (0 when Classes[j][i] = -1)
//
// It is the same matrix, so the same release: only its representation
// differs. Consumers that read factors over cells call Check, which
// rejects class form (they see such a measurement as one that does not
// join); FactorCells expands one column, Dense the whole measurement.

// ClassMap is each cell's class on one column, -1 for a cell in none (the
// factor is 0 there). It is stored as runs: [class, length, class,
// length, ...].
type ClassMap []int32

// InClasses returns the class form of a factor given by its rows (each
// over n cells): the classes of cells whose columns are equal and not all
// zero, numbered in order of their first cell, and the factor over them
// (len(rows) × k). ok is false when a hash collision made two different
// columns look alike (left to the dense form: it never happens in
// practice, and is never wrong).
func InClasses(rows [][]float64, n int) (of ClassMap, factor []float64, ok bool) {
	// A polynomial hash of each cell's column of mixed values, Horner's
	// rule unrolled: hash_i = Σ_r mix(row_r[i])·P^(R−r), the zeros (and
	// −0) adding nothing, so each row costs a scan for its non-zeros and
	// work per non-zero only (a day of five years of hours is 24 of
	// 43,824 cells).
	const prime = 0x100000001b3
	pow := make([]uint64, len(rows))
	p := uint64(prime)
	for r := len(rows) - 1; r >= 0; r-- {
		pow[r] = p
		p *= prime
	}
	hash := make([]uint64, n)
	nonzero := make([]bool, n)
	nz := make([][]int32, len(rows)) // each row's non-zero cells
	for r, row := range rows {
		for i, x := range row[:n] {
			if x != 0 {
				hash[i] += mix64(math.Float64bits(x)) * pow[r]
				nonzero[i] = true
				nz[r] = append(nz[r], int32(i))
			}
		}
	}
	of = make(ClassMap, n)
	byHash := map[uint64]int32{}
	var reps []int // a cell of each class
	var size []int // each class's cells
	for i := range of {
		if !nonzero[i] {
			of[i] = -1
			continue
		}
		c, seen := byHash[hash[i]]
		if !seen {
			c = int32(len(reps))
			reps = append(reps, i)
			size = append(size, 0)
			byHash[hash[i]] = c
		}
		of[i] = c
		size[c]++
	}
	// Check, row by row, that every cell equals its class's first cell:
	// the row's non-zero cells must be whole classes, equal within each
	// (a class none of them touches is all zeros, its first cell too).
	k := len(reps)
	count := make([]int, k)
	var touched []int32
	factor = make([]float64, len(rows)*k)
	for r, row := range rows {
		touched = touched[:0]
		for _, i := range nz[r] {
			c := of[i]
			if count[c] == 0 {
				touched = append(touched, c)
			}
			if row[i] != row[reps[c]] {
				return nil, nil, false
			}
			count[c]++
		}
		for _, c := range touched {
			if count[c] != size[c] {
				return nil, nil, false
			}
			count[c] = 0
		}
		for c, i := range reps {
			factor[r*k+c] = row[i]
		}
	}
	return of, factor, true
}

// mix64 is splitmix64's finaliser: every bit of x moves every bit of the
// result (a float's bits differ mostly in the high ones, which a plain
// multiplication would shift out).
func mix64(x uint64) uint64 {
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// ClassCount is the number of classes of column j in class form.
func (m *Measurement) ClassCount(j int) int {
	if m.Rows[j] == 0 {
		return 0
	}
	return len(m.Factors[j]) / m.Rows[j]
}

// InClassForm reports whether column j's factor is in class form.
func (m *Measurement) InClassForm(j int) bool {
	return j < len(m.Classes) && m.Classes[j] != nil
}

// FactorCells is column j's factor over its cells, Rows[j] × Columns[j].Size
// (nil for the identity): Factors[j] itself, or its class form expanded.
func (m *Measurement) FactorCells(j int) []float64 {
	f := m.Factors[j]
	if !m.InClassForm(j) {
		return f
	}
	of, k, n := m.Classes[j], m.ClassCount(j), m.Columns[j].Size
	out := make([]float64, m.Rows[j]*n)
	for r := 0; r < m.Rows[j]; r++ {
		for i, c := range of {
			if c >= 0 {
				out[r*n+i] = f[r*k+int(c)]
			}
		}
	}
	return out
}

// Dense is m with every factor over cells (m itself when none is in class
// form).
func (m *Measurement) Dense() *Measurement {
	if m.Classes == nil {
		return m
	}
	out := *m
	out.Factors = make([][]float64, len(m.Factors))
	for j := range m.Factors {
		out.Factors[j] = m.FactorCells(j)
	}
	out.Classes = nil
	return &out
}

// checkClasses reports whether column j's class form is well formed.
func (m *Measurement) checkClasses(j int) error {
	of, f, c := m.Classes[j], m.Factors[j], m.Columns[j]
	if f == nil || len(of) != c.Size || len(f)%m.Rows[j] != 0 {
		return fmt.Errorf("measure: column %s: class form of %d cells, factor of %d entries over %d rows", c.Name, len(of), len(f), m.Rows[j])
	}
	k := m.ClassCount(j)
	for _, cl := range of {
		if cl < -1 || int(cl) >= k {
			return fmt.Errorf("measure: column %s: class %d of %d", c.Name, cl, k)
		}
	}
	return nil
}

func (c ClassMap) MarshalJSON() ([]byte, error) {
	if c == nil {
		return []byte("null"), nil
	}
	runs := []int64{}
	for i := 0; i < len(c); {
		n := 1
		for i+n < len(c) && c[i+n] == c[i] {
			n++
		}
		runs = append(runs, int64(c[i]), int64(n))
		i += n
	}
	return json.Marshal(runs)
}

func (c *ClassMap) UnmarshalJSON(b []byte) error {
	var runs []int64
	if err := json.Unmarshal(b, &runs); err != nil {
		return err
	}
	if runs == nil {
		*c = nil
		return nil
	}
	if len(runs)%2 != 0 {
		return fmt.Errorf("measure: class map of %d numbers", len(runs))
	}
	total := int64(0)
	for k := 0; k < len(runs); k += 2 {
		if runs[k] < -1 || runs[k] > math.MaxInt32 || runs[k+1] <= 0 {
			return fmt.Errorf("measure: class map run of class %d, length %d", runs[k], runs[k+1])
		}
		if total += runs[k+1]; total > maxFactorEntries {
			return fmt.Errorf("measure: class map of more than %d cells", maxFactorEntries)
		}
	}
	out := make(ClassMap, 0, total)
	for k := 0; k < len(runs); k += 2 {
		for range runs[k+1] {
			out = append(out, int32(runs[k]))
		}
	}
	*c = out
	return nil
}
