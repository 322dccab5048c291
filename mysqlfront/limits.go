package mysqlfront

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/vitess/go/mysql"

	"github.com/dpproxy/dpproxy/catalog"
)

// What a client may hold of the server, and for how long. A connection
// costs a file descriptor, a goroutine and its buffers from the moment it
// is accepted, so every phase of its life is bounded:
//
//   - Accepting. Accept errors never end the server: like net/http's
//     Server.Serve, the accept loop logs them and retries with back-off
//     (5 ms doubling to 1 s), so running out of file descriptors (EMFILE)
//     only delays new clients until some close. Only an explicit Close ends
//     it, or a listener that can no longer accept at all (closed under us,
//     or failing with non-temporary errors for listenerDeadAfter): Start
//     then returns the error, so that serve exits non-zero.
//   - Counting (admission.go). Connections still connecting are capped
//     apart from sessions, in all and per client address: over a cap, the
//     oldest connecting one is closed at once. Sessions are capped by
//     MaxConnections (plus one kept for auditors; MySQL's 1040 "Too many
//     connections", 08004) and per user by MaxUserConnections (MySQL's
//     1226), checked once the password is.
//   - The connection phase (greeting, TLS, authentication) must end within
//     HandshakeTimeout (MySQL's connect_timeout) of the accept; a client
//     that says nothing or stalls mid-handshake is disconnected.
//   - Idle sessions. Between commands a session may stay idle for its
//     @@wait_timeout (initialised from WaitTimeout, or InteractiveTimeout for
//     clients that connect with CLIENT_INTERACTIVE, as in MySQL; a session
//     may SET SESSION wait_timeout = n). Then it gets MySQL 8's error 4031
//     and is closed.
//   - Within a command, the rest of a packet must arrive within
//     netReadTimeout and each write must drain within netWriteTimeout
//     (MySQL's net_read_timeout and net_write_timeout defaults), and a
//     command may not exceed maxCommandBytes (MySQL's default
//     max_allowed_packet; error 1153 and the connection is closed).

// MySQL error codes of the limits.
const (
	erHandshake               = 1043 // ER_HANDSHAKE_ERROR, 08S01
	erNetPacketTooLarge       = 1153 // ER_NET_PACKET_TOO_LARGE, 08S01
	erNetPacketsOutOfOrder    = 1156 // ER_NET_PACKETS_OUT_OF_ORDER, 08S01
	erClientInteractionTimout = 4031 // ER_CLIENT_INTERACTION_TIMEOUT, HY000
)

const (
	netReadTimeout  = 30 * time.Second
	netWriteTimeout = 60 * time.Second
	// maxCommandBytes bounds one command (all its packets): MySQL 8's
	// default max_allowed_packet, which sessions also show.
	maxCommandBytes = 64 << 20
	// maxHandshakePacket bounds a packet of the connection phase (MySQL
	// itself caps connection attributes at 64 KiB).
	maxHandshakePacket = 1 << 16

	acceptMinDelay = 5 * time.Millisecond
	acceptMaxDelay = time.Second
	// listenerDeadAfter: non-temporary accept errors for this long, without
	// one successful accept, mean the listener is dead.
	listenerDeadAfter = time.Minute
)

// limits are the server section of the catalog with defaults filled in.
func limitsOf(cat *catalog.Catalog) catalog.Server {
	return cat.Server.WithDefaults()
}

// descriptorMargin is what the proxy may need besides its clients: the
// listener, the ledger, answer and measurement stores, source pools, logs.
const descriptorMargin = 128

// checkDescriptors warns when the process may not open as many descriptors
// as the limits let clients hold, plus a margin: then a full server runs
// out of descriptors before it refuses anyone.
func checkDescriptors(log *slog.Logger, l catalog.Server) {
	limit, ok := descriptorLimit()
	need := uint64(l.MaxConnections+1+l.MaxUnauthenticated) + descriptorMargin
	if ok && limit < need {
		log.Warn("RLIMIT_NOFILE is below what clients may hold; raise it (ulimit -n, systemd LimitNOFILE=) or lower max_connections or max_unauthenticated",
			"rlimit_nofile", limit, "max_connections", l.MaxConnections, "max_unauthenticated", l.MaxUnauthenticated, "needed", need)
	}
}

// frontListener wraps the accepted connections in frontConns and keeps the
// accept loop alive (see above). vitess's Listener.Accept returns at the
// first error it gets from Accept, so this Accept returns one only when the
// server is closing or the listener is dead.
type frontListener struct {
	net.Listener
	s *Server
}

func (l *frontListener) Accept() (net.Conn, error) {
	var (
		delay        time.Duration
		failingSince time.Time // first of the current run of non-temporary errors
	)
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			delay, failingSince = 0, time.Time{}
			fc := newFrontConn(c, l.s)
			l.s.admitConnection(fc)
			return fc, nil
		}
		if l.s.isClosing() {
			return nil, err
		}
		var temp interface{ Temporary() bool }
		temporary := errors.As(err, &temp) && temp.Temporary()
		switch {
		case errors.Is(err, net.ErrClosed):
			return nil, l.s.listenerDied(err)
		case temporary:
			failingSince = time.Time{}
		case failingSince.IsZero():
			failingSince = time.Now()
		case time.Since(failingSince) > listenerDeadAfter:
			return nil, l.s.listenerDied(err)
		}
		delay = min(max(2*delay, acceptMinDelay), acceptMaxDelay)
		l.s.log.Warn("accept failed; retrying", "err", err, "retry_in", delay)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-l.s.closing:
			t.Stop()
			return nil, net.ErrClosed
		}
	}
}

// isClosing reports whether Close has been called.
func (s *Server) isClosing() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// listenerDied records why the listener can no longer accept.
func (s *Server) listenerDied(err error) error {
	s.log.Error("listener failed; the server stops accepting connections", "err", err)
	s.mu.Lock()
	if s.listenErr == nil {
		s.listenErr = err
	}
	s.mu.Unlock()
	return err
}

// errPacket is a complete ERR packet (header included) with sequence seq.
func errPacket(seq byte, code uint16, state, msg string) []byte {
	p := []byte{mysql.ErrPacket, byte(code), byte(code >> 8), '#'}
	p = append(p, state...)
	p = append(p, msg...)
	return append([]byte{byte(len(p)), byte(len(p) >> 8), byte(len(p) >> 16), seq}, p...)
}

// handshakeExpired closes a connection still in its connection phase.
func (c *frontConn) handshakeExpired() {
	if c.connecting.Load() {
		c.s.log.Debug("handshake timeout; closing the connection", "remote", c.raw.RemoteAddr().String(),
			"handshake_timeout", c.s.limits.HandshakeTimeout)
		c.raw.Close()
	}
}

// idleTimeout is how long the session may wait for its next command: its
// @@wait_timeout once it has a session, else the server's default for the
// kind of client.
func (c *frontConn) idleTimeout() time.Duration {
	if sess := c.session.Load(); sess != nil {
		v, err := sess.s.GetSessionVariable(sql.NewContext(context.Background(), sql.WithSession(sess.s)), "wait_timeout")
		if err == nil {
			if n, ok := v.(int64); ok && n > 0 {
				return time.Duration(n) * time.Second
			}
		}
	}
	if c.interactive {
		return c.s.limits.InteractiveTimeout
	}
	return c.s.limits.WaitTimeout
}

// sessionRef lets a frontConn read its GMS session's variables.
type sessionRef struct{ s sql.Session }

// initSessionTimeouts sets a new session's @@wait_timeout and
// @@interactive_timeout from the limits; the first is the second for an
// interactive client, as in MySQL.
func (s *Server) initSessionTimeouts(sctx *sql.Context, sess sql.Session, conn *mysql.Conn) {
	wait := s.limits.WaitTimeout
	fc := frontConnOf(conn)
	if fc != nil && fc.interactive {
		wait = s.limits.InteractiveTimeout
	}
	for name, d := range map[string]time.Duration{"wait_timeout": wait, "interactive_timeout": s.limits.InteractiveTimeout} {
		if err := sess.SetSessionVariable(sctx, name, clampSeconds(d, 1)); err != nil {
			s.log.Warn("setting @@"+name, "err", err)
		}
	}
	if fc != nil {
		fc.session.Store(&sessionRef{s: sess})
	}
}

// wholeSeconds rounds d up to whole seconds, at least 1.
func wholeSeconds(d time.Duration) int64 {
	return max(1, int64((d+time.Second-1)/time.Second))
}

func clampSeconds(d time.Duration, low int64) int64 {
	return min(max(low, wholeSeconds(d)), int64(catalog.MaxTimeout/time.Second))
}

// setGlobalLimits shows the limits in the process-wide global variables
// (@@global.max_connections, ...), clamped into GMS's ranges. Sessions get
// their own values in initSessionTimeouts.
func setGlobalLimits(l catalog.Server) error {
	err := sql.SystemVariables.AssignValues(map[string]any{
		"max_connections":      int64(min(l.MaxConnections, catalog.MaxMaxConnections)),
		"max_user_connections": int64(l.MaxUserConnections),
		"connect_timeout":      clampSeconds(l.HandshakeTimeout, 2),
		"wait_timeout":         clampSeconds(l.WaitTimeout, 1),
		"interactive_timeout":  clampSeconds(l.InteractiveTimeout, 1),
		"max_allowed_packet":   int64(maxCommandBytes),
	})
	if err != nil {
		return fmt.Errorf("mysqlfront: server limits: %w", err)
	}
	return nil
}
