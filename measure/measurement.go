package measure

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// Column is one axis of a measurement: a table column as the batch that
// measured it saw it.
type Column struct {
	Name string `json:"name"`
	// Def is a digest of the column's definition (domain, policies,
	// dropped cell): a measurement answers a batch over this column only
	// when the batch's column has the same Def.
	Def  string `json:"def"`
	Size int    `json:"size"`
	// Whole reports whether the column's cells count every row of the
	// table (it drops nothing, or keeps the dropped rows in a cell of
	// their own): only then does summing a measurement over it give the
	// counts over its other columns.
	Whole bool `json:"whole"`
	// Base is a digest of the column's definition without a dropped cell:
	// the same for a column and its copy that counts the rows it drops in
	// a trailing cell (DroppedCell), so that one's measurements can join
	// the other's (empty in measurements stored before it was kept).
	Base string `json:"base,omitempty"`
	// DroppedCell reports whether the last cell counts the rows the
	// column's policies drop (a batch's copy of a column that some of its
	// queries do not read).
	DroppedCell bool `json:"dropped_cell,omitempty"`
}

// Measurement is one stored release: Answers = (⊗_j Factors[j])·x + Z,
// x the table's histogram over Columns (row-major, last column fastest),
// Z independent noise of variance Variance per answer.
type Measurement struct {
	ID        int64  `json:"id"` // assigned by Store.Put
	Table     string `json:"table"`
	Def       string `json:"def"`     // digest of the table's definition
	Version   string `json:"version"` // the source's data version
	LedgerSeq int64  `json:"ledger_seq"`
	// Strategy names the plan that measured it, for people.
	Strategy string   `json:"strategy"`
	Columns  []Column `json:"columns"`
	// Factors[j] is Rows[j] × Columns[j].Size, row-major; nil is the
	// identity (Rows[j] = Size). With Classes[j] set it is in class form
	// (classform.go): Rows[j] × the column's classes.
	Factors [][]float64 `json:"factors"`
	// Classes is nil, or has per column nil or the cells' classes of a
	// factor in class form (not stored by earlier versions).
	Classes []ClassMap `json:"classes,omitempty"`
	Rows    []int      `json:"rows"`
	// Answers are row-major over Rows, in the units of Factors (an
	// integer strategy scaled to integers by k is stored divided by k,
	// its variance by k²).
	Answers  []float64 `json:"answers"`
	Noise    string    `json:"noise"` // "laplace" or "gaussian"
	Scale    string    `json:"scale"` // the sampler's parameter as drawn, num/den (Laplace t, Gaussian σ²)
	Variance float64   `json:"variance"`
	Time     time.Time `json:"time"`
}

// Cells is the number of answers the factors give.
func (m *Measurement) Cells() int {
	n := 1
	for _, r := range m.Rows {
		n *= r
	}
	return n
}

// Check reports whether m is well formed with every factor over cells:
// what a consumer that reads factors as Rows[j] × Columns[j].Size needs.
// A factor in class form is an error (Dense expands it).
func (m *Measurement) Check() error {
	if err := m.Valid(); err != nil {
		return err
	}
	for j := range m.Classes {
		if m.InClassForm(j) {
			return fmt.Errorf("measure: column %s: factor in class form", m.Columns[j].Name)
		}
	}
	return nil
}

// Valid reports whether m is well formed, its factors over cells or in
// class form.
func (m *Measurement) Valid() error {
	if len(m.Factors) != len(m.Columns) || len(m.Rows) != len(m.Columns) || (m.Classes != nil && len(m.Classes) != len(m.Columns)) {
		return fmt.Errorf("measure: %d columns, %d factors, %d row counts, %d class maps", len(m.Columns), len(m.Factors), len(m.Rows), len(m.Classes))
	}
	for j, f := range m.Factors {
		if m.Columns[j].Size <= 0 || m.Rows[j] <= 0 {
			return fmt.Errorf("measure: column %s: %d rows over %d cells", m.Columns[j].Name, m.Rows[j], m.Columns[j].Size)
		}
		if m.InClassForm(j) {
			if err := m.checkClasses(j); err != nil {
				return err
			}
			continue
		}
		if f == nil && m.Rows[j] != m.Columns[j].Size {
			return fmt.Errorf("measure: column %s: identity with %d rows over %d cells", m.Columns[j].Name, m.Rows[j], m.Columns[j].Size)
		}
		if f != nil && len(f) != m.Rows[j]*m.Columns[j].Size {
			return fmt.Errorf("measure: column %s: factor of %d entries, want %d×%d", m.Columns[j].Name, len(f), m.Rows[j], m.Columns[j].Size)
		}
	}
	if m.Answers != nil && len(m.Answers) != m.Cells() {
		return fmt.Errorf("measure: %d answers, want %d", len(m.Answers), m.Cells())
	}
	if !(m.Variance > 0) || math.IsInf(m.Variance, 0) {
		return fmt.Errorf("measure: noise variance %g", m.Variance)
	}
	return nil
}

// MarshalJSON stores each factor densely, or as its non-zero entries when
// fewer than a third are non-zero: a long column's factor rows (a day of
// a year of hours is 24 ones among 8,760 cells) would otherwise be mostly
// zeros.
func (m *Measurement) MarshalJSON() ([]byte, error) {
	type plain Measurement
	fs := make([]factorJSON, len(m.Factors))
	for j, f := range m.Factors {
		fs[j] = factorJSON(f)
	}
	return json.Marshal(struct {
		*plain
		Factors []factorJSON `json:"factors"`
	}{(*plain)(m), fs})
}

// UnmarshalJSON reads what MarshalJSON writes (and plain dense factors).
func (m *Measurement) UnmarshalJSON(b []byte) error {
	type plain Measurement
	var v struct {
		*plain
		Factors []factorJSON `json:"factors"`
	}
	v.plain = (*plain)(m)
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	m.Factors = make([][]float64, len(v.Factors))
	for j, f := range v.Factors {
		m.Factors[j] = f
	}
	return nil
}

// factorJSON is a factor as stored: null (the identity), an array of its
// entries, or {"len": n, "nz": [i, v, i, v, ...]}.
type factorJSON []float64

type sparseFactor struct {
	Len int       `json:"len"`
	NZ  []float64 `json:"nz"`
}

func (f factorJSON) MarshalJSON() ([]byte, error) {
	if f == nil {
		return []byte("null"), nil
	}
	nz := 0
	for _, x := range f {
		if x != 0 {
			nz++
		}
	}
	if 3*nz >= len(f) {
		return json.Marshal([]float64(f))
	}
	s := sparseFactor{Len: len(f), NZ: make([]float64, 0, 2*nz)}
	for i, x := range f {
		if x != 0 {
			s.NZ = append(s.NZ, float64(i), x)
		}
	}
	return json.Marshal(s)
}

func (f *factorJSON) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*f = nil
		return nil
	case len(b) > 0 && b[0] == '[':
		return json.Unmarshal(b, (*[]float64)(f))
	}
	var s sparseFactor
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	if s.Len < 0 || s.Len > maxFactorEntries || len(s.NZ)%2 != 0 {
		return fmt.Errorf("measure: sparse factor of %d entries with %d numbers", s.Len, len(s.NZ))
	}
	out := make([]float64, s.Len)
	for k := 0; k < len(s.NZ); k += 2 {
		i := s.NZ[k]
		if i != math.Trunc(i) || i < 0 || int(i) >= s.Len {
			return fmt.Errorf("measure: sparse factor index %g out of %d", i, s.Len)
		}
		out[int(i)] = s.NZ[k+1]
	}
	*f = out
	return nil
}

// maxFactorEntries bounds a stored sparse factor's length (2²⁵ entries,
// 256 MiB dense), so that a damaged record cannot ask for more.
const maxFactorEntries = 1 << 25
