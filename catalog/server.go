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
	// MaxConnections bounds the open client connections, authenticated or
	// not; a connection over it gets MySQL's 1040 "Too many connections"
	// instead of the greeting. As MySQL's max_connections.
	MaxConnections int
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
	DefaultHandshakeTimeout   = 10 * time.Second
	DefaultWaitTimeout        = 8 * time.Hour
	DefaultInteractiveTimeout = 8 * time.Hour
)

// Bounds of the server settings: MySQL's ranges for max_connections,
// connect_timeout, wait_timeout and interactive_timeout.
const (
	MaxMaxConnections   = 100_000
	MinHandshakeTimeout = 2 * time.Second
	MaxTimeout          = 31_536_000 * time.Second // one year
)

// WithDefaults returns s with every zero field set to its default.
func (s Server) WithDefaults() Server {
	if s.MaxConnections == 0 {
		s.MaxConnections = DefaultMaxConnections
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
func (p *parser) server(n node, s *Server) {
	f, ok := p.fields(n, "max_connections", "handshake_timeout", "wait_timeout", "interactive_timeout")
	if !ok {
		return
	}
	if v, has := f["max_connections"]; has {
		if i, ok := p.integer(v); ok {
			if i < 1 || i > MaxMaxConnections {
				p.errorf(v.line, v.path, "must be between 1 and %d (got %d)", MaxMaxConnections, i)
			} else {
				s.MaxConnections = int(i)
			}
		}
	}
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
func (p *parser) seconds(n node, low time.Duration) (time.Duration, bool) {
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
