package parser

import (
	"strings"
	"testing"
)

// unitEnv: events and users share a unit (user_id, id), sessions has one,
// logs has none; countries is public.
func unitEnv() Env {
	cols := map[string][]string{
		"events":   {"country", "device", "user_id"},
		"users":    {"plan", "country", "id", "email"},
		"sessions": {"pages", "user_id"},
		"logs":     {"level"},
	}
	units := map[string]string{"events": "user_id", "users": "id", "sessions": "user_id"}
	return Env{
		Protected: func(_, t string) bool { return cols[t] != nil },
		Columns: func(t, c string) bool {
			for _, x := range cols[t] {
				if x == c {
					return true
				}
			}
			return false
		},
		Private: func(t, c string) bool { return c == units[t] || c == "email" },
		Units:   func(t string) string { return units[t] },
		Public: func(_, t string) *PublicTable {
			if t != "countries" {
				return nil
			}
			return &PublicTable{Name: "countries", Columns: []string{"code", "region"}, Text: []bool{true, true},
				Rows: [][]Value{{{Lit: Literal{Text: "FR", Quoted: true}}, {Lit: Literal{Text: "EU", Quoted: true}}}}}
		},
	}
}

func TestUnitJoinParses(t *testing.T) {
	for _, tc := range []struct{ sql, table, want string }{
		{"SELECT u.plan, COUNT(*) FROM events e JOIN users u ON e.user_id = u.id GROUP BY u.plan",
			"events JOIN users ON users.id = events.user_id", "users.plan"},
		{"SELECT plan AS p, COUNT(*) FROM events e LEFT JOIN users u ON u.id = e.user_id WHERE device = 'ios' GROUP BY p ORDER BY p",
			"events LEFT JOIN users ON users.id = events.user_id", "users.plan"},
		{"SELECT COUNT(*) FROM events e JOIN users u ON e.user_id = u.id AND u.plan = 'pro' JOIN sessions s ON s.user_id = u.id",
			"events JOIN users ON users.id = events.user_id JOIN sessions ON sessions.user_id = users.id", "users.plan"},
		{"SELECT c.region, COUNT(*) FROM events e JOIN countries c ON e.country = c.code JOIN users u ON u.id = e.user_id GROUP BY c.region",
			"events JOIN users ON users.id = events.user_id", "events.country"},
		{"SELECT COUNT(*) FROM events JOIN sessions USING (user_id) WHERE sessions.pages > 3",
			"events JOIN sessions ON sessions.user_id = events.user_id", "sessions.pages"},
	} {
		sts, err := ParseEnv(tc.sql, unitEnv())
		if err != nil {
			t.Errorf("%s: %v", tc.sql, err)
			continue
		}
		q := sts[0].Query
		if q.Table != tc.table || q.UnitJoin == nil || q.UnitJoin.Name() != tc.table {
			t.Errorf("%s: table %q", tc.sql, q.Table)
		}
		var cols []string
		for _, it := range q.Select {
			cols = append(cols, ItemColumns(it)...)
		}
		cols = append(cols, q.GroupBy...)
		for _, g := range q.GroupExprs {
			cols = append(cols, ExprColumns(g.Expr)...)
		}
		if q.Where != nil {
			cols = append(cols, PredColumns(q.Where)...)
		}
		if s := strings.Join(cols, ","); !strings.Contains(s, tc.want) {
			t.Errorf("%s: columns %s, want %s", tc.sql, s, tc.want)
		}
		if q.Select[0].Alias == "" || strings.Contains(q.Select[0].Alias, ".") && !strings.Contains(tc.sql, q.Select[0].Alias) {
			t.Errorf("%s: output name %q", tc.sql, q.Select[0].Alias)
		}
	}
}

func TestUnitJoinRefusals(t *testing.T) {
	for _, tc := range []struct {
		sql  string
		code int
		want string
	}{
		{"SELECT COUNT(*) FROM events e JOIN users u ON e.country = u.country", CodeDPRefused, "not on the privacy unit"},
		{"SELECT COUNT(*) FROM events e JOIN users u ON e.user_id = u.id OR e.country = u.country", CodeDPRefused, "not on the privacy unit"},
		{"SELECT COUNT(*) FROM events e JOIN logs l ON e.user_id = l.level", CodeDPRefused, "declares no privacy unit"},
		{"SELECT COUNT(*) FROM events e LEFT JOIN users u ON e.user_id = u.id AND u.plan = 'pro'", CodeDPRefused, "put them in WHERE"},
		{"SELECT COUNT(*) FROM events e RIGHT JOIN users u ON e.user_id = u.id", CodeDPRefused, "LEFT JOIN"},
		{"SELECT COUNT(*) FROM events a JOIN events b ON a.user_id = b.user_id", CodeDPRefused, "joined to itself"},
		{"SELECT country, COUNT(*) FROM events e JOIN users u ON e.user_id = u.id GROUP BY country", CodeNonUniqField, "ambiguous"},
		{"SELECT COUNT(*) FROM events e JOIN users u ON e.user_id = u.id WHERE u.email = 'x'", CodeDPRefused, "private"},
		{"SELECT COUNT(*) FROM events e JOIN users u ON e.user_id = u.id WHERE u.nosuch = 1", CodeBadField, "Unknown column"},
	} {
		_, err := ParseEnv(tc.sql, unitEnv())
		pe, ok := err.(*Error)
		if !ok || pe.Code != tc.code || !strings.Contains(pe.Message, tc.want) {
			t.Errorf("%s: %v, want %d with %q", tc.sql, err, tc.code, tc.want)
		}
	}
}
