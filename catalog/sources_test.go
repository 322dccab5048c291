package catalog

import (
	"math"
	"strings"
	"testing"
	"time"
)

func parseSources(t *testing.T, sources, extra string) (*Catalog, error) {
	t.Helper()
	y := "database: d\nsources:\n" + sources + "tables:\n  t:\n    budget: {total: 1, per_user: 1, default_per_query: 0.1}\n" +
		"    columns: {a: {type: integer, min: 0, max: 9}}\n" + extra
	return Parse("c.yaml", []byte(y))
}

func TestServerSources(t *testing.T) {
	c, err := parseSources(t, "  pg: {driver: postgres, dsn: \"postgres://u:pw@h/db\", max_connections: 8, cache_ttl: 0s}\n", "cache: {histograms: 64MiB, answers: 1GB}\n")
	if err != nil {
		t.Fatal(err)
	}
	s := c.Sources["pg"]
	if s.Driver != DriverPostgres || s.DSN != "postgres://u:pw@h/db" || s.MaxConnections != 8 || !s.CacheTTLSet || s.CacheTTL != 0 {
		t.Fatalf("%+v", s)
	}
	if c.Cache.HistogramBytes() != 64<<20 || c.Cache.AnswerBytes() != 1e9 || c.Cache.PlanBytes() != DefaultPlanCacheBytes {
		t.Fatalf("%+v", c.Cache)
	}
	if c.Tables[0].MaxCells != DefaultMaxCells {
		t.Fatalf("max_cells %d", c.Tables[0].MaxCells)
	}
	c, err = parseSources(t, "  my: {driver: mysql, dsn_env: SHOP_DSN, version_query: \"SELECT 1\", cache_ttl: 2m}\n", "")
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Sources["my"]; s.DSNEnv != "SHOP_DSN" || s.VersionQuery != "SELECT 1" || s.CacheTTL != 2*time.Minute {
		t.Fatalf("%+v", s)
	}
}

// Invalid source settings are refused, and no message repeats a DSN.
func TestServerSourceErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"  pg: {driver: postgres}\n", "sources.pg.dsn: required for driver postgres"},
		{"  pg: {driver: postgres, dsn: \"postgres://u:secretpw@h/db\", dsn_env: X}\n", "give dsn or dsn_env, not both"},
		{"  pg: {driver: postgres, dsn: \"postgres://u:secretpw@h/db\", path: x.sqlite}\n", "not used by driver postgres"},
		{"  s: {driver: sqlite, path: a.sqlite, dsn: \"postgres://u:secretpw@h/db\"}\n", "not used by driver sqlite"},
		{"  pg: {driver: postgres, dsn_env: 9bad}\n", "invalid environment variable name"},
		{"  pg: {driver: postgres, dsn: \"x\", max_connections: 0}\n", "between 1 and 1000"},
		{"  pg: {driver: postgres, dsn: \"x\", cache_ttl: soon}\n", "must be a duration"},
	} {
		_, err := parseSources(t, tc.src, "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.src, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "secretpw") {
			t.Errorf("%s: the DSN's password is in the error: %v", tc.src, err)
		}
	}
	if _, err := parseSources(t, "  s: {driver: sqlite, path: a.sqlite}\n", "cache: {histograms: lots}\n"); err == nil || !strings.Contains(err.Error(), "must be a size") {
		t.Errorf("cache size: %v", err)
	}
}

// CellOf, the reference every dialect implements, on the edges of each
// column kind and policy.
func TestCellOf(t *testing.T) {
	ages := &Column{Kind: IntegerRange, Min: 17, Max: 90, Width: 5, Null: PolicyCell, OutOfDomain: PolicyClamp}
	other := &Column{Kind: IntegerRange, Min: 0, Max: 9, Width: 1, Null: PolicyOther, OutOfDomain: PolicyOther}
	bins := &Column{Kind: Binned, Edges: []float64{-1.5, 0, 0.1, 2.5}, Null: PolicyDrop, OutOfDomain: PolicyDrop}
	cat := &Column{Kind: Categorical, Values: []string{"Male", "Ünï"}, Null: PolicyDrop, OutOfDomain: PolicyOther}
	for _, tc := range []struct {
		c    *Column
		v    any
		want int
	}{
		{ages, int64(17), 0}, {ages, int64(21), 0}, {ages, int64(22), 1}, {ages, 21.999, 0}, {ages, 22.0, 1},
		{ages, int64(90), 14}, {ages, 90.5, 14}, {ages, int64(-3), 0}, {ages, nil, 15}, {ages, "42", 5},
		{ages, "abc", -1}, {ages, math.NaN(), 14}, {ages, math.Inf(-1), 0},
		{other, int64(-1), 10}, {other, int64(10), 10}, {other, nil, 10}, {other, 9.5, 10}, {other, int64(9), 9},
		{bins, -1.5, 0}, {bins, -0.5, 0}, {bins, 0.0, 1}, {bins, 0.1, 2}, {bins, 2.5, 2}, {bins, 2.6, -1}, {bins, -2.0, -1}, {bins, nil, -1},
		{cat, "Male", 0}, {cat, "male", 2}, {cat, "Male ", 2}, {cat, "Ünï", 1}, {cat, []byte("Male"), 0}, {cat, nil, -1}, {cat, int64(1), 2},
	} {
		if got := tc.c.CellOf(tc.v); got != tc.want {
			t.Errorf("%+v: CellOf(%#v) = %d, want %d", *tc.c, tc.v, got, tc.want)
		}
	}
}
