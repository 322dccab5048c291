package console

import (
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
)

// The catalog page shows a table's privacy unit and its bounds, and "each
// row" for tables without one.
func TestCatalogViewPrivacyUnit(t *testing.T) {
	cat := &catalog.Catalog{Tables: []*catalog.Table{
		{Name: "events", Unit: &catalog.PrivacyUnit{Column: "user_id", MaxRows: 10, MaxGroups: 3}},
		{Name: "adult"},
	}}
	v := catalogView(cat)
	if want := "user_id (max_rows 10, max_groups 3); rows with a NULL user_id are not counted"; v[0].PrivacyUnit != want {
		t.Errorf("events: %q, want %q", v[0].PrivacyUnit, want)
	}
	if v[1].PrivacyUnit != "" {
		t.Errorf("adult: %q", v[1].PrivacyUnit)
	}
}
