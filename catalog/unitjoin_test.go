package catalog

import (
	"errors"
	"strings"
	"testing"
)

const joinCatalog = `database: d
sources:
  main: {driver: sqlite, path: x.sqlite}
  other: {driver: sqlite, path: y.sqlite}
tables:
  events:
    source: main
    budget: {total: 10, per_user: 5, default_per_query: 1, max_per_query: 2}
    privacy_unit: {column: user_id, max_rows: 4, max_groups: 2, max_rows_per_group: 2, space: customer}
    columns:
      country: {type: categorical, values: [FR, DE]}
  users:
    source: main
    budget: {total: 10, per_user: 5, default_per_query: 0.5}
    privacy_unit: {column: id, max_rows: 1, space: customer}
    private_columns: [email]
    columns:
      plan: {type: categorical, values: [free, pro]}
  alone:
    source: main
    budget: {total: 10, per_user: 5, default_per_query: 0.5}
    privacy_unit: {column: user_id, max_rows: 1}
    columns:
      x: {type: integer, min: 0, max: 3}
  elsewhere:
    source: other
    budget: {total: 10, per_user: 5, default_per_query: 0.5}
    privacy_unit: {column: user_id, max_rows: 1, space: customer}
    columns:
      x: {type: integer, min: 0, max: 3}
`

// Spaces come from privacy_unit.space, else the table's name; the joined
// table takes the first table's bounds, every table's columns and the
// strictest per-query settings, and refuses joins across spaces or sources.
func TestJoinTables(t *testing.T) {
	cat, err := Parse("c.yaml", []byte(joinCatalog))
	if err != nil {
		t.Fatal(err)
	}
	if s := cat.Table("events").Space(); s != "customer" {
		t.Errorf("events space %q", s)
	}
	if s := cat.Table("alone").Space(); s != "alone" {
		t.Errorf("alone space %q", s)
	}
	j := &UnitJoin{Tables: []JoinedTable{{Table: "events"}, {Table: "users", Left: true}}}
	jt, err := JoinTables(cat, j)
	if err != nil {
		t.Fatal(err)
	}
	if jt.Name != "events LEFT JOIN users ON users.id = events.user_id" {
		t.Errorf("name %q", jt.Name)
	}
	if jt.Unit.Column != "events.user_id" || jt.Unit.MaxRows != 4 || jt.Unit.MaxGroups != 2 || jt.Unit.MaxRowsPerGroup != 2 {
		t.Errorf("unit %+v", jt.Unit)
	}
	if jt.Column("users.plan") == nil || jt.Column("events.country") == nil || len(jt.Columns) != 2 {
		t.Errorf("columns %v", jt.Columns)
	}
	if !jt.IsPrivate("users.id") || !jt.IsPrivate("users.email") || !jt.IsUnitColumn("events.user_id") {
		t.Errorf("private %v", jt.Private)
	}
	if b := jt.Budget; b.DefaultPerQuery != 0.5 || b.MaxPerQuery != 2 || b.PerUser != 5 {
		t.Errorf("budget %+v", b)
	}
	if got := strings.Join(jt.JoinedTables(), ","); got != "events,users" {
		t.Errorf("joined tables %s", got)
	}
	for _, bad := range []struct {
		tables []string
		want   string
	}{
		{[]string{"events", "alone"}, "different privacy unit spaces"},
		{[]string{"events", "elsewhere"}, "different sources"},
		{[]string{"events", "events"}, "joined to itself"},
	} {
		var js []JoinedTable
		for _, n := range bad.tables {
			js = append(js, JoinedTable{Table: n})
		}
		_, err := JoinTables(cat, &UnitJoin{Tables: js})
		var je *JoinError
		if !errors.As(err, &je) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: %v, want a JoinError saying %q", bad.tables, err, bad.want)
		}
	}
}
