package catalog

// State drivers.
const (
	// StateSQLite keeps the ledger, stored answers, measurements and the
	// unit-hash key in SQLite files under the data directory (the
	// default): processes on one host may share them.
	StateSQLite = "sqlite"
	// StatePostgres keeps them in one PostgreSQL database, so that
	// proxies on several hosts share one budget.
	StatePostgres = "postgres"
)

// State is the catalog's "state" section: where the proxy keeps what it
// must remember (the ledger, stored answers, measurements, released key
// sets, the unit-hash key and console sessions).
type State struct {
	// Driver is StateSQLite (also when the section is absent) or
	// StatePostgres.
	Driver string
	// DSN is PostgreSQL's connection string, or DSNEnv the environment
	// variable holding it (one of the two, for StatePostgres).
	DSN, DSNEnv string
	// MaxConnections bounds this proxy's connections to the state
	// database (0: the default of package state).
	MaxConnections int
}

// Shared reports whether the state lives in a database that proxies on
// several hosts share.
func (s State) Shared() bool { return s.Driver == StatePostgres }

// state reads the optional "state" section.
func (p *yamlReader) state(n node, s *State) {
	f, ok := p.fields(n, "driver", "dsn", "dsn_env", "max_connections")
	if !ok {
		return
	}
	if v, has := f["driver"]; !has {
		p.required(n, "driver")
		return
	} else if d, ok := p.word(v, StateSQLite, StatePostgres); ok {
		s.Driver = d
	} else {
		return
	}
	hasDSN, hasEnv := p.connection(f, &s.DSN, &s.DSNEnv)
	switch s.Driver {
	case StateSQLite:
		for _, k := range []string{"dsn", "dsn_env", "max_connections"} {
			if v, has := f[k]; has {
				p.errorf(v.line, v.path, "not used by state driver sqlite (its files are in the data directory)")
			}
		}
	case StatePostgres:
		switch {
		case hasDSN && hasEnv:
			p.errorf(n.line, n.path, "give dsn or dsn_env, not both")
		case !hasDSN && !hasEnv:
			p.errorf(n.line, join(n.path, "dsn_env"), "required for state driver postgres (or dsn: the connection string itself)")
		}
	}
	if v, has := f["max_connections"]; has {
		if k, ok := p.integer(v); ok {
			if k < 2 || k > 1000 {
				p.errorf(v.line, v.path, "must be between 2 and 1000")
			} else {
				s.MaxConnections = int(k)
			}
		}
	}
}
