package catalog

import (
	"strings"
	"testing"
)

func TestPrivacyUnitParse(t *testing.T) {
	const budget = "    budget: {total: 10, per_user: 5, default_per_query: 0.1, max_per_query: 1, delta: 1e-9}"
	with := func(line string) string { return edit(budget, budget+"\n"+line) }
	c, err := Parse("catalog.yaml", []byte(with("    privacy_unit: {column: User_ID, max_rows: 5, max_groups: 3, max_rows_per_group: 2}")))
	if err != nil {
		t.Fatal(err)
	}
	u := c.Table("orders").Unit
	if u == nil || *u != (PrivacyUnit{Column: "user_id", MaxRows: 5, MaxGroups: 3, MaxRowsPerGroup: 2}) {
		t.Fatalf("unit %+v", u)
	}
	if !c.Table("orders").IsUnitColumn("USER_ID") || c.Table("orders").IsUnitColumn("age") {
		t.Error("IsUnitColumn")
	}
	if u.L1() != 5 || u.PerCell() != 2 || u.Groups() != 3 || !u.CellBounded() {
		t.Errorf("L1 %d PerCell %d Groups %d", u.L1(), u.PerCell(), u.Groups())
	}
	if got := u.String(); got != "user_id (max_rows 5, max_groups 3, max_rows_per_group 2)" {
		t.Errorf("String %q", got)
	}
	c, err = Parse("catalog.yaml", []byte(valid))
	if err != nil || c.Table("orders").Unit != nil {
		t.Fatalf("no privacy_unit: %v %+v", err, c.Table("orders").Unit)
	}
	for _, tc := range []struct{ name, line, want string }{
		{"domain column", "    privacy_unit: {column: age, max_rows: 5}",
			`tables.orders.privacy_unit.column: "age" is a domain column of table orders: the privacy unit column is never a domain column (remove it from columns)`},
		{"no max_rows", "    privacy_unit: {column: user_id}",
			"tables.orders.privacy_unit.max_rows: required: the most rows one unit keeps"},
		{"no column", "    privacy_unit: {max_rows: 5}", "tables.orders.privacy_unit.column: required"},
		{"zero", "    privacy_unit: {column: user_id, max_rows: 0}", "max_rows: must be between 1 and 1000000 (got 0)"},
		{"float", "    privacy_unit: {column: user_id, max_rows: 2.5}", "max_rows: must be an integer"},
		{"g > k", "    privacy_unit: {column: user_id, max_rows: 2, max_groups: 3}", "max_groups: must be ≤ max_rows (2)"},
		{"r > k", "    privacy_unit: {column: user_id, max_rows: 2, max_rows_per_group: 3}", "max_rows_per_group: must be ≤ max_rows (2)"},
		{"unknown key", "    privacy_unit: {column: user_id, max_rows: 2, max_ids: 3}", "max_ids: unknown key"},
		{"bad name", "    privacy_unit: {column: 1user, max_rows: 2}", `invalid name "1user"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("catalog.yaml", []byte(with(tc.line)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestPrivacyUnitBounds(t *testing.T) {
	for _, tc := range []struct {
		u                   *PrivacyUnit
		l1, perCell, groups int64
	}{
		{nil, 1, 1, 1},
		{&PrivacyUnit{MaxRows: 5}, 5, 5, 5},
		{&PrivacyUnit{MaxRows: 10, MaxGroups: 2, MaxRowsPerGroup: 3}, 6, 3, 2},
		{&PrivacyUnit{MaxRows: 4, MaxGroups: 2, MaxRowsPerGroup: 3}, 4, 3, 2},
		{&PrivacyUnit{MaxRows: 4, MaxGroups: 2}, 4, 4, 2},
		{&PrivacyUnit{MaxRows: 4, MaxRowsPerGroup: 1}, 4, 1, 4},
	} {
		if tc.u.L1() != tc.l1 || tc.u.PerCell() != tc.perCell || tc.u.Groups() != tc.groups {
			t.Errorf("%v: L1 %d PerCell %d Groups %d", tc.u, tc.u.L1(), tc.u.PerCell(), tc.u.Groups())
		}
	}
}
