package catalog

import (
	"slices"
	"strings"
	"testing"
)

func spacesCatalog(events, users, adult string) string {
	return `database: shop
sources:
  main: {driver: sqlite, path: shop.sqlite}
tables:
  events:
    budget: ` + events + `
    privacy_unit: {column: user_id, space: Customer, max_rows: 10}
    columns: {page: {type: categorical, values: [home, cart]}}
  users:
    budget: ` + users + `
    privacy_unit: {column: user_id, space: customer, max_rows: 1}
    columns: {plan: {type: categorical, values: [free, pro]}}
  adult:
    budget: {total: 5, per_user: 1, default_per_query: 0.1}
` + adult + `
    columns: {sex: {type: categorical, values: [Female, Male]}}
users:
  alice: {password: secret, role: analyst}
`
}

// Tables naming one space share it; every other table is its own; a
// space's tables must agree on its budgets.
func TestPrivacyUnitSpaces(t *testing.T) {
	b := "{total: 100, per_user: 20, default_per_query: 0.1}"
	c, err := Parse("c.yaml", []byte(spacesCatalog(b, "{total: 100, per_user: 20, default_per_query: 0.5, max_per_query: 1}", "")))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"events": "customer", "users": "customer", "adult": "adult"} {
		if got := c.Table(name).Space(); got != want {
			t.Errorf("%s.Space() = %q, want %q", name, got, want)
		}
	}
	if got := c.Spaces(); !slices.Equal(got, []string{"customer", "adult"}) {
		t.Errorf("Spaces() = %v", got)
	}
	if got := len(c.SpaceTables("customer")); got != 2 {
		t.Errorf("SpaceTables(customer) has %d tables", got)
	}
	for _, tc := range []struct{ name, users, adult, want string }{
		{"budgets differ", "{total: 100, per_user: 10, default_per_query: 0.1}", "",
			`tables.users.privacy_unit.space: tables events and users are in privacy unit space "customer", which has one budget: their budget's total, per_user and delta must be equal (per_user 10 here, 20 on events)`},
		{"delta differs", "{total: 100, per_user: 20, default_per_query: 0.1, delta: 1e-6}", "",
			"(delta 1e-06 here, 1e-05 on events)"},
		{"space is a row-privacy table", b, "    privacy_unit: {column: uid, space: events, max_rows: 1}",
			`space "events" is the name of table events, which is in space "customer"`},
		{"bad space name", b, "    privacy_unit: {column: uid, space: 1x, max_rows: 1}", `invalid name "1x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(spacesCatalog(b, tc.users, tc.adult)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v\nwant %q", err, tc.want)
			}
		})
	}
	// A unit table can not join a row-privacy table's space.
	row := strings.Replace(spacesCatalog(b, b, ""), "space: customer, max_rows: 1", "space: adult, max_rows: 1", 1)
	if _, err := Parse("c.yaml", []byte(row)); err == nil || !strings.Contains(err.Error(), "table adult, which has row privacy") {
		t.Errorf("row-privacy space: %v", err)
	}
}
