package catalog

import "fmt"

// PrivacyUnit is a protected table's privacy unit: the column naming the
// person (or account, device, …) the guarantee protects, and the declared
// bounds on what one unit contributes. With a unit, neighbouring datasets
// differ by all the rows of one unit, and every histogram is built from the
// table truncated to those bounds (package sources). The bounds come from
// the catalog only, never from the data.
//
// The unit column is not a domain column: it is never selected, grouped by
// or filtered on, and no value of it leaves the proxy. Rows whose unit is
// NULL are not counted (a person who cannot be told apart cannot be
// bounded); see the README's "Privacy units".
type PrivacyUnit struct {
	// Column names the unit in the source table (lower-case).
	Column string
	// Space is the privacy unit space (privacy_unit.space, lower-case):
	// tables that declare the same space hold rows about the same people,
	// share one budget, per analyst and in total, and may be joined on the
	// unit ("": the table's own name; see Table.Space).
	Space string
	// MaxRows is k: the most rows one unit keeps (≥ 1).
	MaxRows int64
	// MaxGroups is g: the most distinct cells of a batch's domain one unit
	// keeps rows in (0: no bound beyond MaxRows).
	MaxGroups int64
	// MaxRowsPerGroup is r: the most rows one unit keeps in one cell (0: no
	// bound beyond MaxRows).
	MaxRowsPerGroup int64
}

// MaxUnitRows bounds max_rows: a larger bound would be no bound at all, and
// the sensitivities it multiplies must stay far below the samplers' range.
const MaxUnitRows = 1_000_000

// L1 is the most one unit changes the truncated histogram in L1 norm:
// min(k, g·r), each of its at most g cells changing by at most r and all of
// them by at most k together. It is 1 for a nil unit (row privacy).
func (u *PrivacyUnit) L1() int64 {
	if u == nil {
		return 1
	}
	k := u.MaxRows
	if u.MaxGroups > 0 && u.MaxRowsPerGroup > 0 && u.MaxGroups*u.MaxRowsPerGroup < k {
		k = u.MaxGroups * u.MaxRowsPerGroup
	}
	return k
}

// PerCell is the most one unit changes one cell of the truncated
// histogram: min(k, r). It is 1 for a nil unit.
func (u *PrivacyUnit) PerCell() int64 {
	if u == nil {
		return 1
	}
	if u.MaxRowsPerGroup > 0 && u.MaxRowsPerGroup < u.MaxRows {
		return u.MaxRowsPerGroup
	}
	return u.MaxRows
}

// Groups is the most cells one unit's rows lie in after truncation:
// min(k, g) (k when g is not declared). It is 1 for a nil unit.
func (u *PrivacyUnit) Groups() int64 {
	if u == nil {
		return 1
	}
	if u.MaxGroups > 0 && u.MaxGroups < u.MaxRows {
		return u.MaxGroups
	}
	return u.MaxRows
}

// CellBounded reports whether truncation depends on the batch's cells
// (max_groups or max_rows_per_group declared): such histograms are built for
// their own columns, never summed from a histogram over more columns.
func (u *PrivacyUnit) CellBounded() bool {
	return u != nil && (u.MaxGroups > 0 || u.MaxRowsPerGroup > 0)
}

// String is the unit and its bounds as EXPLAIN and the ledger show them:
// "user_id (max_rows 5, max_groups 3, max_rows_per_group 2)", or "row" for
// none.
func (u *PrivacyUnit) String() string {
	if u == nil {
		return "row"
	}
	s := fmt.Sprintf("%s (max_rows %d", u.Column, u.MaxRows)
	if u.MaxGroups > 0 {
		s += fmt.Sprintf(", max_groups %d", u.MaxGroups)
	}
	if u.MaxRowsPerGroup > 0 {
		s += fmt.Sprintf(", max_rows_per_group %d", u.MaxRowsPerGroup)
	}
	return s + ")"
}
