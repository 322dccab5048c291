package planner

import (
	"fmt"
	"math"

	"github.com/dpproxy/dpproxy/catalog"
)

// Contribution bounds what one privacy unit adds to the histogram a plan
// measures (catalog.PrivacyUnit; package sources truncates the table to
// it): at most Rows rows (k), in at most Groups cells (g), at most PerGroup
// rows in one cell (r). Zero fields are unbounded; the zero Contribution is
// row privacy (one row, one cell).
//
// Sensitivity. Let v be the change one unit makes to the truncated
// histogram x (v ≥ 0 cell by cell when the unit is added). Truncation
// keeps its rows within the bounds and never changes another unit's rows,
// so v is a non-negative integer vector with ‖v‖₁ ≤ k, at most g non-zero
// cells, each ≤ r; hence ‖v‖₁ ≤ min(k, g·r) =: c. Every plan measures a
// linear map B of the histogram (the Direct plan's scaled rows, a
// Kronecker product, a marginal or residual block of the marginal table
// on its columns — a marginal of v obeys ‖M v‖₁ = ‖v‖₁ ≤ c too) with noise
// calibrated to B's largest column norm Δ (the Sensitivity of the plan or
// of the block at row level). Then
//
//	‖B v‖₁ = ‖Σᵢ vᵢ B eᵢ‖₁ ≤ Σᵢ vᵢ ‖B eᵢ‖₁ ≤ c · max ‖column‖₁ = c·Δ₁,
//	‖B v‖₂ ≤ Σᵢ vᵢ ‖B eᵢ‖₂ ≤ c · max ‖column‖₂ = c·Δ₂
//
// (the triangle inequality over the at most c unit columns v is a sum
// of). Both are attained when a column of largest norm may receive all c
// rows (no per-cell bound r below c), or c rows spread over columns of
// largest norm for L1, so c·Δ₁ is exact, and c·Δ₂ is exact without r. Laplace noise
// of scale c·Δ₁/ε is ε-DP per unit, Gaussian noise of variance
// (c·Δ₂)²/(2ρ) ρ-zCDP per unit. The planner therefore plans and
// calibrates every strategy at the row-level parameters ε/c and ρ/c²
// (Options.Calibration): the strategy minimising error is the same, and
// each noise is exactly the row-level noise of its strategy at c times
// the sensitivity. Marginal and split plans give each block or aggregate a
// share of those; shares add up under composition exactly as at row level.
//
// For Gaussian noise the bare rule r·√g·‖column‖₂ is wrong for correlated
// strategies (trees, wavelets: the worst unit was measured at 1.8–3.4×
// it); the valid alternative r·√g·σ_max(B) (from ‖v‖₂ ≤ r·√g) is smaller
// than c·Δ₂ only when g·r is large and B is close to the identity, and is
// not used: c·Δ₂ is valid for every B. The one-row case, c = 1, is exactly the
// row-level planner.
//
// The exponential mechanism's utility is a group's count; one unit moves
// one group's count by at most min(k, r) when the group is one cell, and by
// at most c otherwise (UtilitySensitivity).
type Contribution struct {
	Rows, Groups, PerGroup int64
}

// ContributionOf is the contribution bound of a table's privacy unit (the
// zero Contribution for none).
func ContributionOf(u *catalog.PrivacyUnit) Contribution {
	if u == nil {
		return Contribution{}
	}
	return Contribution{Rows: u.MaxRows, Groups: u.MaxGroups, PerGroup: u.MaxRowsPerGroup}
}

// IsRow reports whether c is row privacy (each row its own unit).
func (c Contribution) IsRow() bool { return c == Contribution{} }

// L1 is c = min(k, g·r): the most one unit changes the histogram in L1
// norm, and the factor on every strategy's sensitivity (see Contribution).
// It is 1 for row privacy.
func (c Contribution) L1() float64 {
	if c.IsRow() {
		return 1
	}
	k := float64(c.Rows)
	if c.Groups > 0 && c.PerGroup > 0 {
		k = math.Min(k, float64(c.Groups)*float64(c.PerGroup))
	}
	return k
}

// CellsPerUnit is the most cells one unit's kept rows lie in: min(k, g), k
// without g; 1 for row privacy.
func (c Contribution) CellsPerUnit() int64 {
	if c.IsRow() {
		return 1
	}
	if c.Groups > 0 && c.Groups < c.Rows {
		return c.Groups
	}
	return c.Rows
}

// UtilitySensitivity is the most one unit changes one group's count: the
// exponential mechanism's Δ. A group of one cell moves by at most
// min(k, r); a group of several cells by at most L1.
func (c Contribution) UtilitySensitivity(oneCell bool) int64 {
	if c.IsRow() {
		return 1
	}
	l1 := int64(c.L1())
	if oneCell && c.PerGroup > 0 && c.PerGroup < l1 {
		return c.PerGroup
	}
	return l1
}

// String is "row", or the bounds: "max_rows 5, max_groups 3,
// max_rows_per_group 2".
func (c Contribution) String() string {
	if c.IsRow() {
		return "row"
	}
	s := fmt.Sprintf("max_rows %d", c.Rows)
	if c.Groups > 0 {
		s += fmt.Sprintf(", max_groups %d", c.Groups)
	}
	if c.PerGroup > 0 {
		s += fmt.Sprintf(", max_rows_per_group %d", c.PerGroup)
	}
	return s
}

// Calibration is the row-level options the noise is calibrated for: ε/c
// (Laplace) or ρ/c² (Gaussian) with c = Unit.L1(), rounded down so that
// calibrating sensitivity Δ at them never gives less noise than c·Δ at ε
// or ρ. For row privacy it is o itself.
func (o Options) Calibration() Options {
	if o.Unit.IsRow() {
		return o
	}
	c := o.Unit.L1()
	r := o
	r.Unit = Contribution{}
	if r.Epsilon > 0 {
		r.Epsilon = math.Nextafter(o.Epsilon/c, 0)
	}
	if r.Rho > 0 {
		r.Rho = math.Nextafter(o.Rho/(c*c), 0)
	}
	return r
}

// UnitSensitivity is the plan's sensitivity per privacy unit: c times
// Sensitivity, the largest column norm of the measured matrix at row level
// (1 for Marginal and split plans, whose blocks carry their own).
func (p *Plan) UnitSensitivity() float64 { return p.Options.Unit.L1() * p.Sensitivity }
