package engine

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/sources"
)

// TestJoinPublicTable answers a count per region of the demo's events
// joined to its public table countries, and checks it against the exact
// counts of the same join over the events each shopper keeps (the privacy
// unit user_id, max_rows k = 5: the k of least sources.UnitHash64,
// replayed here): noise at ε = 2 per shopper (Laplace scale k/2 = 2.5 per
// country count, ≤ 7 countries per region: standard deviation under 10)
// never moves a region by 200 (false failure rate below 10⁻¹⁰).
func TestJoinPublicTable(t *testing.T) {
	f := newFixtureCatalog(t, string(catalog.DemoYAML()))
	s := session("analyst", map[string]any{"dp_epsilon": 2.0})
	db, err := sql.Open("sqlite", f.data+"?_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	region := map[string]string{}
	for _, r := range f.cfg.Catalog.PublicTable("countries").Rows {
		region[r[0].Text] = r[2].Text
	}
	key, err := os.ReadFile(filepath.Join(filepath.Dir(f.data), sources.UnitKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	type event struct {
		hash, country, device string
	}
	byUser := map[int64][]event{}
	// The hash covers the unit and every declared column, in catalog order.
	rows, err := db.Query("SELECT user_id, ts, country, device, page, duration_s, amount, referrer, search_term FROM events WHERE user_id IS NOT NULL")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var u int64
		var ts, country, device, page, dur, amount, referrer, search any
		if err := rows.Scan(&u, &ts, &country, &device, &page, &dur, &amount, &referrer, &search); err != nil {
			t.Fatal(err)
		}
		h := fmt.Sprintf("%016x", sources.UnitHash64(strings.TrimSpace(string(key)), u, ts, country, device, page, dur, amount, referrer, search))
		byUser[u] = append(byUser[u], event{h, fmt.Sprint(country), fmt.Sprint(device)})
	}
	rows.Close()
	exact := map[string]float64{}
	for _, es := range byUser {
		slices.SortFunc(es, func(a, b event) int { return strings.Compare(a.hash, b.hash) })
		for _, e := range es[:min(len(es), int(f.cfg.Catalog.Table("events").Unit.MaxRows))] {
			if e.device == "mobile" {
				exact[region[e.country]]++
			}
		}
	}

	r := f.answer(t, s, "SELECT d.region, COUNT(*) AS n FROM events e JOIN countries d ON e.country = d.code WHERE e.device = 'mobile' GROUP BY d.region ORDER BY d.region")
	if len(r.Rows) != 5 || r.Columns[0].Name != "region" || r.Columns[1].Name != "n" {
		t.Fatalf("columns %+v, %d rows", r.Columns, len(r.Rows))
	}
	var got []string
	for _, row := range r.Rows {
		name := fmt.Sprint(row[0])
		got = append(got, name)
		n, _ := toFloat(row[1])
		if math.Abs(n-exact[name]) > 200 {
			t.Errorf("%s: %v, exact %v", name, n, exact[name])
		}
	}
	if strings.Join(got, ",") != "Africa,Asia-Pacific,Europe,Latin America,North America" {
		t.Errorf("regions %v", got)
	}

	// EXPLAIN names the join and spends nothing.
	before := len(f.entries(t))
	ex := f.answer(t, s, "EXPLAIN SELECT d.region, SUM(e.amount) FROM events e LEFT JOIN countries d ON e.country = d.code GROUP BY d.region")
	var text strings.Builder
	for _, row := range ex.Rows {
		fmt.Fprintln(&text, row...)
	}
	if !strings.Contains(text.String(), "LEFT JOIN countries d ON country = d.code") {
		t.Errorf("EXPLAIN does not show the join:\n%s", text.String())
	}
	if len(f.entries(t)) != before {
		t.Error("EXPLAIN charged")
	}

	// LIMIT 0 over a join: the empty result with its columns, free; a
	// top-k over a join's groups by the exponential mechanism.
	if r := f.answer(t, s, "SELECT d.region, COUNT(*) FROM events e JOIN countries d ON e.country = d.code GROUP BY d.region LIMIT 0"); len(r.Rows) != 0 || len(r.Columns) != 2 || r.Columns[0].Name != "region" {
		t.Errorf("LIMIT 0: %+v", r)
	}
	if r := f.answer(t, s, "SELECT d.name, COUNT(*) AS n FROM events e JOIN countries d ON e.country = d.code WHERE d.region = 'Europe' GROUP BY d.name ORDER BY n DESC LIMIT 2"); len(r.Rows) != 2 {
		t.Errorf("top-k: %+v", r)
	}
	// The demo's time column with a join: a month per row for one region.
	if r := f.answer(t, s, "SELECT DATE_FORMAT(e.ts, '%Y-%m') AS month, COUNT(*) AS n FROM events e JOIN countries d ON e.country = d.code WHERE d.region = 'Africa' GROUP BY month ORDER BY month"); len(r.Rows) != 12 || fmt.Sprint(r.Rows[0][0]) != "2025-01" {
		t.Errorf("months: %d rows, first %v", len(r.Rows), r.Rows)
	}
	// Public tables are not intercepted: the schema database serves them.
	if f.eng.Intercepts("SELECT * FROM countries") || !f.eng.Intercepts("SELECT COUNT(*) FROM events JOIN countries ON country = code") {
		t.Error("interception of public tables")
	}
	for _, tc := range []struct{ sql, msg string }{
		{"SELECT COUNT(*) FROM events WHERE user_id = 3", "column 'user_id' of 'events' is private"},
		{"SELECT user_id, COUNT(*) FROM events GROUP BY user_id", "column 'user_id' of 'events' is private"},
		{"SELECT COUNT(*) FROM events e JOIN adult a ON e.country = a.sex", "table 'adult' declares no privacy unit: protected tables are joined only on their privacy unit"},
		{"SELECT COUNT(*) FROM events e JOIN countries d ON e.user_id = d.code", "column 'user_id' of 'events' is private"},
	} {
		_, err := f.eng.Answer(context.Background(), s, []string{tc.sql})
		refusal(t, err, parser.CodeDPRefused, tc.msg)
	}
}

// A reload keeps the public tables loaded at start-up and says so when the
// new catalog declares others; a source's rows (not loaded in the new
// catalog) are not a difference.
func TestReloadKeepsPublicTables(t *testing.T) {
	cur := catalog.Demo()
	next := catalog.Demo()
	if _, ignored := mergeBudgets(cur, next); len(ignored) != 0 {
		t.Fatalf("same catalog: ignored %v", ignored)
	}
	next.PublicTables[0].Rows = next.PublicTables[0].Rows[1:]
	merged, ignored := mergeBudgets(cur, next)
	if len(ignored) != 1 || ignored[0] != "public tables" || len(merged.PublicTables[0].Rows) != 20 {
		t.Fatalf("ignored %v, %d rows", ignored, len(merged.PublicTables[0].Rows))
	}
	// A user's own max_user_connections is applied, as their ε defaults.
	next = catalog.Demo()
	next.Users[0].MaxUserConnections = 7
	if merged, ignored := mergeBudgets(cur, next); len(ignored) != 0 || merged.Users[0].MaxUserConnections != 7 {
		t.Fatalf("max_user_connections: ignored %v, got %d", ignored, merged.Users[0].MaxUserConnections)
	}
	src := &catalog.PublicTable{Name: "s", Source: "main", SourceTable: "s", Columns: []catalog.PublicColumn{{Name: "a", Type: catalog.PublicText}},
		Rows: [][]catalog.PublicValue{{{Text: "x"}}}}
	loaded, fresh := *src, *src
	fresh.Rows = nil
	if !samePublicTables([]*catalog.PublicTable{&loaded}, []*catalog.PublicTable{&fresh}) {
		t.Error("a source's rows count as a difference")
	}
}
