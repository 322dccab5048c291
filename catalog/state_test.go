package catalog

import (
	"strings"
	"testing"
)

func TestStateSection(t *testing.T) {
	base := "database: d\nsources: {main: {driver: sqlite, path: x.sqlite}}\ntables:\n  t:\n    budget: {total: 1, per_user: 1, default_per_query: 0.1}\n    columns: {a: {type: integer, min: 0, max: 9}}\n"
	for _, tc := range []struct {
		yaml string
		want State
	}{
		{"", State{Driver: StateSQLite}},
		{"state: {driver: sqlite}\n", State{Driver: StateSQLite}},
		{"state: {driver: postgres, dsn_env: DPPROXY_STATE_DSN}\n", State{Driver: StatePostgres, DSNEnv: "DPPROXY_STATE_DSN"}},
		{"state: {driver: postgres, dsn: 'postgres://u:p@h/db', max_connections: 24}\n", State{Driver: StatePostgres, DSN: "postgres://u:p@h/db", MaxConnections: 24}},
	} {
		c, err := Parse("c.yaml", []byte(base+tc.yaml))
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if c.State != tc.want {
			t.Errorf("%q: %+v, want %+v", tc.yaml, c.State, tc.want)
		}
		if c.State.Shared() != (tc.want.Driver == StatePostgres) {
			t.Errorf("%q: Shared() = %v", tc.yaml, c.State.Shared())
		}
	}
	if d := Demo().State; d != (State{Driver: StateSQLite}) {
		t.Fatalf("demo state %+v", d)
	}
	for _, bad := range []struct{ yaml, msg string }{
		{"state: {driver: mysql}\n", "c.yaml:7: state.driver:"},
		{"state: {dsn_env: X}\n", "c.yaml:7: state.driver: required"},
		{"state: {driver: postgres}\n", "c.yaml:7: state.dsn_env: required for state driver postgres"},
		{"state: {driver: postgres, dsn: 'postgres://u:secret@h/db', dsn_env: X}\n", "c.yaml:7: state: give dsn or dsn_env, not both"},
		{"state: {driver: postgres, dsn_env: 'not a name'}\n", "invalid environment variable name"},
		{"state: {driver: sqlite, dsn_env: X}\n", "not used by state driver sqlite"},
		{"state: {driver: postgres, dsn_env: X, max_connections: 1}\n", "state.max_connections: must be between 2 and 1000"},
		{"state: {driver: postgres, dsn_env: X, pool: 3}\n", "unknown key"},
	} {
		_, err := Parse("c.yaml", []byte(base+bad.yaml))
		if err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("%q: got %v, want %q", bad.yaml, err, bad.msg)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: the error shows the DSN's password: %v", bad.yaml, err)
		}
	}
}
