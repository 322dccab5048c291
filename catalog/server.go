package catalog

import (
	"strconv"
	"time"
)

// Server is the catalog's "server" section: what one client may hold of the
// MySQL front. Every field is set after Load or Parse (defaults filled in);
// a Catalog built by hand may leave fields zero, and the front then uses the
// defaults.
type Server struct {
	// MaxConnections bounds the sessions (authenticated connections),
	// plus one kept for auditors, as MySQL keeps one for SUPER: a user who
	// authenticates while MaxConnections sessions are open gets MySQL's
	// 1040 "Too many connections", unless they are an auditor and the
	// extra place is free. As MySQL's max_connections.
	MaxConnections int
	// MaxUserConnections bounds the sessions of one user (a User's own
	// MaxUserConnections overrides it); one more gets MySQL's 1226. Its
	// default, DefaultMaxUserConnections(MaxConnections), is below
	// MaxConnections, so that a user holding all they can get leaves
	// places for the others. As MySQL's max_user_connections.
	MaxUserConnections int
	// MaxUnauthenticated bounds the connections that have not finished
	// authenticating, apart from the sessions; MaxUnauthenticatedPerHost
	// bounds those of one client address (an IPv4 address, an IPv6 /64).
	// A new connection over either bound is taken and the oldest
	// unauthenticated one (of that address, or of all) is closed at once,
	// so a flood of idle sockets holds few descriptors and locks no login
	// out. dpproxy's own; MySQL counts them in max_connections.
	MaxUnauthenticated        int
	MaxUnauthenticatedPerHost int
	// HandshakeTimeout bounds the connection phase, from accept to the end
	// of authentication; a client still in it is disconnected. As MySQL's
	// connect_timeout.
	HandshakeTimeout time.Duration
	// WaitTimeout is how long a session may stay idle between commands
	// (MySQL's wait_timeout); InteractiveTimeout replaces it for clients
	// that connect with CLIENT_INTERACTIVE, such as the mysql CLI (MySQL's
	// interactive_timeout). A session may change its own with SET SESSION
	// wait_timeout = n.
	WaitTimeout        time.Duration
	InteractiveTimeout time.Duration
}

// MySQL's defaults for the server section.
const (
	DefaultMaxConnections     = 151
	DefaultMaxUnauthenticated = 256
	// DefaultMaxUnauthenticatedPerHost: a quarter of the default
	// MaxUnauthenticated, so one address alone cannot fill it, and above
	// the connections a BI server's pool opens at once.
	DefaultMaxUnauthenticatedPerHost = 64
	DefaultHandshakeTimeout          = 10 * time.Second
	DefaultWaitTimeout               = 8 * time.Hour
	DefaultInteractiveTimeout        = 8 * time.Hour
)

// Bounds of the server settings: MySQL's ranges for max_connections,
// connect_timeout, wait_timeout and interactive_timeout.
const (
	MaxMaxConnections   = 100_000
	MinHandshakeTimeout = 2 * time.Second
	MaxTimeout          = 31_536_000 * time.Second // one year
)

// DefaultMaxUserConnections is the default max_user_connections: two
// thirds of maxConnections (100 of MySQL's default 151), at least 1. Below
// maxConnections from 2 on, so that one user leaves a third for the others.
func DefaultMaxUserConnections(maxConnections int) int {
	return max(1, 2*maxConnections/3)
}

// WithDefaults returns s with every zero field set to its default.
func (s Server) WithDefaults() Server {
	if s.MaxConnections == 0 {
		s.MaxConnections = DefaultMaxConnections
	}
	if s.MaxUserConnections == 0 {
		s.MaxUserConnections = DefaultMaxUserConnections(s.MaxConnections)
	}
	if s.MaxUnauthenticated == 0 {
		s.MaxUnauthenticated = DefaultMaxUnauthenticated
	}
	if s.MaxUnauthenticatedPerHost == 0 {
		s.MaxUnauthenticatedPerHost = min(DefaultMaxUnauthenticatedPerHost, s.MaxUnauthenticated)
	}
	if s.HandshakeTimeout == 0 {
		s.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if s.WaitTimeout == 0 {
		s.WaitTimeout = DefaultWaitTimeout
	}
	if s.InteractiveTimeout == 0 {
		s.InteractiveTimeout = DefaultInteractiveTimeout
	}
	return s
}

// server reads the optional "server" section. Timeouts are whole seconds:
// a number (28800, as MySQL's variables) or a duration with a unit (10s,
// 30m, 8h).
func (p *yamlReader) server(n node, s *Server) {
	f, ok := p.fields(n, "max_connections", "max_user_connections", "max_unauthenticated", "max_unauthenticated_per_host",
		"handshake_timeout", "wait_timeout", "interactive_timeout")
	if !ok {
		return
	}
	count := func(key string, high int, highName string, dst *int) {
		if v, has := f[key]; has {
			if i, ok := p.integer(v); ok {
				if i < 1 || i > int64(high) {
					p.errorf(v.line, v.path, "must be between 1 and %s%d (got %d)", highName, high, i)
				} else {
					*dst = int(i)
				}
			}
		}
	}
	count("max_connections", MaxMaxConnections, "", &s.MaxConnections)
	count("max_unauthenticated", MaxMaxConnections, "", &s.MaxUnauthenticated)
	maxConns, maxUnauth := s.MaxConnections, s.MaxUnauthenticated
	if maxConns == 0 {
		maxConns = DefaultMaxConnections
	}
	if maxUnauth == 0 {
		maxUnauth = DefaultMaxUnauthenticated
	}
	// A user cannot hold more than max_connections sessions, nor one address
	// more than max_unauthenticated: a larger value is a mistake.
	count("max_user_connections", maxConns, "max_connections = ", &s.MaxUserConnections)
	count("max_unauthenticated_per_host", maxUnauth, "max_unauthenticated = ", &s.MaxUnauthenticatedPerHost)
	for key, dst := range map[string]*time.Duration{
		"handshake_timeout":   &s.HandshakeTimeout,
		"wait_timeout":        &s.WaitTimeout,
		"interactive_timeout": &s.InteractiveTimeout,
	} {
		if v, has := f[key]; has {
			low := time.Second
			if key == "handshake_timeout" {
				low = MinHandshakeTimeout
			}
			if d, ok := p.seconds(v, low); ok {
				*dst = d
			}
		}
	}
}

// seconds reads a timeout of whole seconds between low and MaxTimeout.
func (p *yamlReader) seconds(n node, low time.Duration) (time.Duration, bool) {
	s, ok := p.scalar(n)
	if !ok {
		return 0, false
	}
	var d time.Duration
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		if i < 0 || i > int64(MaxTimeout/time.Second) {
			i = -1 // reported below
		}
		d = time.Duration(i) * time.Second
	} else if d, err = time.ParseDuration(s); err != nil {
		p.errorf(n.line, n.path, "must be a number of seconds or a duration such as 30s, 10m, 8h (got %q)", s)
		return 0, false
	}
	if d%time.Second != 0 {
		p.errorf(n.line, n.path, "must be a whole number of seconds (got %q)", s)
		return 0, false
	}
	if d < low || d > MaxTimeout {
		p.errorf(n.line, n.path, "must be between %d and %d seconds (got %q)", int64(low/time.Second), int64(MaxTimeout/time.Second), s)
		return 0, false
	}
	return d, true
}
