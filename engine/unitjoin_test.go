package engine

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/sources"
)

// unitJoinCatalog is a small catalog of its own (not the demo's): orders
// and customers of one space (shop), visits of another; a public table of
// countries.
const unitJoinCatalog = `
database: demo
sources: {main: {driver: sqlite, path: demo.sqlite}}
tables:
  orders:
    budget: {total: 50, per_user: 20, default_per_query: 1, max_per_query: 5}
    privacy_unit: {column: customer_id, max_rows: 3, space: shop}
    columns:
      country: {type: categorical, values: [FR, DE, US]}
      amount: {type: integer, min: 0, max: 90, width: 30}
  customers:
    budget: {total: 50, per_user: 20, default_per_query: 0.5}
    privacy_unit: {column: id, max_rows: 1, space: shop}
    private_columns: [email]
    columns:
      plan: {type: categorical, values: [free, pro], null: cell}
  customers_text:
    budget: {total: 50, per_user: 20, default_per_query: 0.5}
    privacy_unit: {column: id, max_rows: 1, space: shop}
    columns:
      plan: {type: categorical, values: [free, pro], null: cell}
  visits:
    budget: {total: 30, per_user: 10, default_per_query: 0.5}
    privacy_unit: {column: customer_id, max_rows: 5}
    columns:
      page: {type: categorical, values: [home, cart]}
public_tables:
  regions:
    columns: {code: text, region: text}
    rows:
      - [FR, Europe]
      - [DE, Europe]
      - [US, America]
users:
  analyst: {password: analyst, role: analyst}
`

type joinOrder struct {
	customer any
	country  string
	amount   int64
}

// unitJoinFixture writes the tables into the fixture's SQLite file and
// returns the rows.
func unitJoinFixture(t *testing.T) (*fixture, []joinOrder, map[int64]any) {
	f := newFixtureCatalog(t, unitJoinCatalog)
	f.eng.withoutNoise()
	db, err := sql.Open("sqlite", f.data)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := rand.New(rand.NewPCG(1, 2))
	var orders []joinOrder
	for c := int64(1); c <= 30; c++ {
		n := r.IntN(5)
		if c == 1 {
			n = 40 // a heavy customer
		}
		for range n {
			orders = append(orders, joinOrder{c, []string{"FR", "DE", "US"}[r.IntN(3)], int64(r.IntN(90))})
		}
	}
	orders = append(orders, joinOrder{nil, "FR", 5})
	plans := map[int64]any{}
	for c := int64(1); c <= 30; c++ {
		if c%7 != 3 { // some customers have no row: LEFT JOIN keeps their orders
			plans[c] = []any{"free", "pro", nil}[r.IntN(3)]
		}
	}
	stmts := []string{
		"CREATE TABLE orders (customer_id INTEGER, country TEXT, amount INTEGER)",
		"CREATE TABLE customers (id INTEGER, plan TEXT, email TEXT)",
		"CREATE TABLE customers_text (id TEXT, plan TEXT)",
		"CREATE TABLE visits (customer_id INTEGER, page TEXT)",
	}
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range orders {
		if _, err := db.Exec("INSERT INTO orders VALUES (?, ?, ?)", o.customer, o.country, o.amount); err != nil {
			t.Fatal(err)
		}
	}
	for c, p := range plans {
		if _, err := db.Exec("INSERT INTO customers VALUES (?, ?, ?)", c, p, fmt.Sprintf("c%d@x", c)); err != nil {
			t.Fatal(err)
		}
	}
	return f, orders, plans
}

// truncatedJoin is the exact answer of a count of orders joined to
// customers per group, after contribution bounding as the engine does it,
// computed here from the rows: each customer keeps the max_rows (3) joined
// rows of least sources.UnitHash over (unit, orders.country,
// orders.amount, customers.plan) — the joined table's columns in order.
func truncatedJoin(t *testing.T, f *fixture, orders []joinOrder, plans map[int64]any, left bool, group func(o joinOrder, plan any) string) map[string]float64 {
	key, err := os.ReadFile(filepath.Join(filepath.Dir(f.data), sources.UnitKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		hash, group string
	}
	by := map[int64][]row{}
	for _, o := range orders {
		if o.customer == nil {
			continue
		}
		c := o.customer.(int64)
		plan, ok := plans[c]
		if !ok && !left {
			continue
		}
		h := fmt.Sprintf("%016x", sources.UnitHash64(strings.TrimSpace(string(key)), c, o.country, o.amount, plan))
		by[c] = append(by[c], row{h, group(o, plan)})
	}
	out := map[string]float64{}
	for _, rs := range by {
		slices.SortFunc(rs, func(a, b row) int { return strings.Compare(a.hash, b.hash) })
		for _, r := range rs[:min(3, len(rs))] {
			out[r.group]++
		}
	}
	return out
}

// Joins on the unit through the whole engine, noise off: inner and LEFT
// joins, with a public join and a WHERE, equal the exact truncated counts;
// the charge names both tables and their space's budget and uses the
// strictest default ε; joins not on the unit, across spaces or on units
// of different types are refused with 3900 before any charge.
func TestUnitJoinEngine(t *testing.T) {
	f, orders, plans := unitJoinFixture(t)
	s := session("analyst", nil)
	ctx := context.Background()
	str := func(v any) string {
		if v == nil {
			return "NULL"
		}
		return fmt.Sprint(v)
	}
	for _, tc := range []struct {
		sql   string
		left  bool
		group func(o joinOrder, plan any) string
	}{
		{"SELECT c.plan, COUNT(*) FROM orders o JOIN customers c ON o.customer_id = c.id GROUP BY c.plan", false,
			func(o joinOrder, plan any) string { return str(plan) }},
		{"SELECT plan, COUNT(*) FROM orders o LEFT JOIN customers c ON c.id = o.customer_id GROUP BY plan", true,
			func(o joinOrder, plan any) string { return str(plan) }},
		{"SELECT r.region, COUNT(*) FROM orders o JOIN customers c ON o.customer_id = c.id JOIN regions r ON o.country = r.code WHERE c.plan = 'pro' GROUP BY r.region", false,
			func(o joinOrder, plan any) string {
				if plan != "pro" {
					return "-"
				}
				return map[string]string{"FR": "Europe", "DE": "Europe", "US": "America"}[o.country]
			}},
	} {
		want := truncatedJoin(t, f, orders, plans, tc.left, tc.group)
		rs, err := f.eng.Answer(ctx, s, []string{tc.sql})
		if err != nil {
			t.Fatalf("%s: %v", tc.sql, err)
		}
		got := map[string]float64{}
		for i := range rs[0].Len() {
			row := rs[0].Row(i, nil)
			n, _ := toFloat(row[1])
			got[str(row[0])] = n
		}
		for g, n := range want {
			if g != "-" && got[g] != n {
				t.Errorf("%s: group %s = %v, want %v (all %v, want %v)", tc.sql, g, got[g], n, got, want)
			}
		}
	}
	es := f.entries(t)
	last := es[len(es)-1]
	if !slices.Equal(last.Tables, []string{"customers", "orders"}) {
		t.Errorf("charged tables %v, want customers and orders", last.Tables)
	}
	if last.Unit == nil || last.Unit.MaxRows != 3 {
		t.Errorf("unit bound %+v, want the first table's (max_rows 3)", last.Unit)
	}
	n := len(es)
	for _, tc := range []struct{ sql, want string }{
		{"SELECT COUNT(*) FROM orders o JOIN customers c ON o.country = c.plan", "not on the privacy unit"},
		{"SELECT COUNT(*) FROM orders o JOIN visits v ON o.customer_id = v.customer_id", "different privacy unit spaces"},
		{"SELECT COUNT(*) FROM orders o JOIN customers_text c ON o.customer_id = c.id", "different types"},
		{"SELECT COUNT(*) FROM orders o JOIN customers c ON o.customer_id = c.id WHERE c.email = 'x'", "private"},
		{"EXPLAIN SELECT COUNT(*) FROM orders o JOIN customers_text c ON o.customer_id = c.id", "different types"},
	} {
		_, err := f.eng.Answer(ctx, s, []string{tc.sql})
		pe, ok := err.(*parser.Error)
		if !ok || pe.Code != parser.CodeDPRefused || !strings.Contains(pe.Message, tc.want) {
			t.Errorf("%s: %v, want 3900 saying %q", tc.sql, err, tc.want)
		}
	}
	if len(f.entries(t)) != n {
		t.Error("a refused join was charged")
	}
	// EXPLAIN names the joined table, the first table's bounds and each
	// table's budget.
	rs, err := f.eng.Answer(ctx, s, []string{"EXPLAIN SELECT c.plan, COUNT(*) FROM orders o JOIN customers c ON o.customer_id = c.id GROUP BY c.plan"})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for i := range rs[0].Len() {
		row := rs[0].Row(i, nil)
		fmt.Fprintf(&text, "%v: %v\n", row[0], row[1])
	}
	for _, want := range []string{"orders JOIN customers ON customers.id = orders.customer_id", "budget space", "space shop:", "max_rows 3", "epsilon: 0.5"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("EXPLAIN lacks %q:\n%s", want, text.String())
		}
	}
	t.Logf("EXPLAIN:\n%s", text.String())
}
