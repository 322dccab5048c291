package catalog

import (
	"strings"
	"testing"
)

// FuzzPrivacyUnit parses a catalog whose table has an arbitrary
// privacy_unit value: parsing never panics, and a catalog that loads has
// a unit within the documented bounds (1 ≤ r, g ≤ k ≤ MaxUnitRows, a
// column that is not a domain column).
func FuzzPrivacyUnit(f *testing.F) {
	for _, seed := range []string{
		"{column: user_id, max_rows: 5}",
		"{column: user_id, max_rows: 5, max_groups: 3, max_rows_per_group: 2}",
		"{column: age, max_rows: 5}",
		"{column: u, max_rows: 0}",
		"{column: [a], max_rows: 1e3}",
		"{max_rows: 2}",
		"user_id",
	} {
		f.Add(seed)
	}
	const budget = "    budget: {total: 10, per_user: 5, default_per_query: 0.1, max_per_query: 1, delta: 1e-9}"
	f.Fuzz(func(t *testing.T, unit string) {
		if len(unit) > 500 || strings.ContainsAny(unit, "\n\r") {
			return
		}
		c, err := Parse("catalog.yaml", []byte(edit(budget, budget+"\n    privacy_unit: "+unit)))
		if err != nil {
			return
		}
		tb := c.Table("orders")
		u := tb.Unit
		if u == nil {
			return // the value parsed as an empty mapping or null
		}
		if u.MaxRows < 1 || u.MaxRows > MaxUnitRows || u.MaxGroups < 0 || u.MaxGroups > u.MaxRows ||
			u.MaxRowsPerGroup < 0 || u.MaxRowsPerGroup > u.MaxRows || u.Column == "" || tb.Column(u.Column) != nil {
			t.Fatalf("%q loaded as %+v", unit, u)
		}
	})
}
