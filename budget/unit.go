package budget

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// UnitBound is what a charge on a table with a privacy unit records beside
// its cost: the unit and its declared contribution bounds, and the
// row-level parameters the noise was calibrated at, so that audit verify
// checks the charge's ε (ρ) against them: a unit changes the truncated
// histogram by at most c = min(k, g·r) in L1 norm, so noise calibrated at
// row-level ε₀ (ρ₀) costs c·ε₀ (c²·ρ₀) per unit. A top-k selection also
// records its ε and the exponential mechanism's utility sensitivity, which
// must be at least min(k, r), the most one unit moves one cell's count.
//
// Entries without a unit (row privacy, and every entry written before
// units existed) have none, and their hashes are as they were.
type UnitBound struct {
	Column          string  `json:"column"`
	MaxRows         int64   `json:"max_rows"`
	MaxGroups       int64   `json:"max_groups,omitempty"`
	MaxRowsPerGroup int64   `json:"max_rows_per_group,omitempty"`
	RowEpsilon      float64 `json:"row_epsilon,omitempty"`
	RowRho          float64 `json:"row_rho,omitempty"`
	// SelectionEpsilon is a top-k selection's ε (part of Cost.Epsilon);
	// SelectionSensitivity the exponential mechanism's Δ.
	SelectionEpsilon     float64 `json:"selection_epsilon,omitempty"`
	SelectionSensitivity int64   `json:"selection_sensitivity,omitempty"`
}

// L1 is min(k, g·r).
func (u *UnitBound) L1() float64 {
	c := float64(u.MaxRows)
	if u.MaxGroups > 0 && u.MaxRowsPerGroup > 0 {
		c = math.Min(c, float64(u.MaxGroups)*float64(u.MaxRowsPerGroup))
	}
	return c
}

// encodeUnit is the stored (and hashed) text of a unit bound: "" for none.
func encodeUnit(u *UnitBound) (string, error) {
	if u == nil {
		return "", nil
	}
	b, err := json.Marshal(u)
	return string(b), err
}

// decodeUnit reads a stored unit bound strictly: its text must be exactly
// what encodeUnit writes.
func decodeUnit(s string) (*UnitBound, error) {
	if s == "" {
		return nil, nil
	}
	var u UnitBound
	if err := json.Unmarshal([]byte(s), &u); err != nil {
		return nil, err
	}
	if again, err := encodeUnit(&u); err != nil || again != s {
		return nil, errors.New("not in canonical form")
	}
	return &u, nil
}

// checkUnit says why a charge's cost does not cover its unit bound, or "".
func checkUnit(c Charge) string {
	u := c.Unit
	if u == nil {
		return ""
	}
	if u.Column == "" || u.MaxRows < 1 || u.MaxGroups < 0 || u.MaxRowsPerGroup < 0 {
		return fmt.Sprintf("privacy unit %+v has no column or a bound below 1", *u)
	}
	for _, x := range []float64{u.RowEpsilon, u.RowRho, u.SelectionEpsilon} {
		if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			return fmt.Sprintf("privacy unit %+v has a parameter that is not finite and non-negative", *u)
		}
	}
	const tol = 1e-9
	l1 := u.L1()
	if meas := c.Cost.Epsilon - u.SelectionEpsilon; meas < l1*u.RowEpsilon*(1-tol) {
		return fmt.Sprintf("charged ε=%g does not cover noise calibrated at row-level ε=%g for a unit of up to min(k, g·r)=%g rows (needs %g)",
			c.Cost.Epsilon, u.RowEpsilon, l1, u.SelectionEpsilon+l1*u.RowEpsilon)
	}
	if c.Cost.Rho < l1*l1*u.RowRho*(1-tol) {
		return fmt.Sprintf("charged ρ=%g does not cover noise calibrated at row-level ρ=%g for a unit of up to %g rows (needs %g)",
			c.Cost.Rho, u.RowRho, l1, l1*l1*u.RowRho)
	}
	if u.SelectionEpsilon > 0 {
		cell := u.MaxRows
		if u.MaxRowsPerGroup > 0 && u.MaxRowsPerGroup < cell {
			cell = u.MaxRowsPerGroup
		}
		if u.SelectionSensitivity < cell {
			return fmt.Sprintf("the top-k selection's sensitivity %d is below min(k, r)=%d, the most one unit moves a count", u.SelectionSensitivity, cell)
		}
	}
	return ""
}
