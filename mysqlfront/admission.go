package mysqlfront

import (
	"container/list"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dolthub/vitess/go/mysql"

	"github.com/dpproxy/dpproxy/catalog"
)

// Admission: which place a connection holds, and who may take one. No
// client, authenticated or not, can lock the others out.
//
// A connection counts in one of two pools:
//
//   - Connecting: from accept until its password is checked. At most
//     MaxUnauthenticated connections, and MaxUnauthenticatedPerHost from
//     one client address (hostKey: an IPv4 address, an IPv6 /64). A new
//     connection over either cap is taken and the oldest connecting one (of
//     that address when the address is at its cap, else of all) is closed
//     at once. Refusing the newcomer instead would let a flood of idle
//     sockets that fills the cap lock every login out until the handshake
//     timeout, again and again; closing the oldest keeps the descriptors
//     bounded and lets a real client in, whose handshake takes milliseconds,
//     unless the flood opens connections faster than one cap per handshake.
//     An address at its cap only closes its own, so it takes many addresses
//     to press on the others. A connecting connection costs a goroutine and
//     a descriptor, no more: GMS hears of it once it is a session
//     (connHandler.NewConnection).
//   - Sessions: from a successful authentication until close. At most
//     MaxConnections, plus one kept for auditors, as MySQL keeps one for
//     SUPER: when the sessions reach MaxConnections, an analyst gets 1040
//     and an auditor may still take the extra place. At most
//     MaxUserConnections sessions per user (Server.userLimit: the user's
//     own, else the server's, read at each login from the catalog in force);
//     one more gets MySQL's 1226. Both are
//     checked only after the password, so a client learns nothing of them
//     before it authenticates, and a refused client's connection is closed
//     after the error, as MySQL does.
//
// So the descriptors the front holds for clients never exceed
// MaxConnections + 1 + MaxUnauthenticated.

// MySQL error codes of admission.
const (
	erUserLimitReached = 1226 // ER_USER_LIMIT_REACHED, 42000
)

// place is the pool a connection counts in.
type place uint8

const (
	placeNone       place = iota // counted nowhere: closed, or closed to admit a newer one
	placeConnecting              // in the connection phase
	placeSession                 // authenticated
)

// admission counts the connections of a Server in their pools.
type admission struct {
	lim catalog.Server
	// userLimit is the most sessions a user may hold, and whether they are
	// an auditor (from the catalog in force).
	userLimit func(user string) (limit int, auditor bool)

	mu         sync.Mutex
	connecting list.List             // *frontConn in accept order
	perHost    map[string]*list.List // hostKey -> its connecting *frontConn in accept order
	sessions   int
	perUser    map[string]int
	// change is closed, and replaced, at every change of the counts, so
	// that tests wait for a state, not for time.
	change chan struct{}

	evicted   atomic.Int64 // connecting connections closed for newer ones
	refused   atomic.Int64 // authenticated clients refused with 1040 or 1226
	evictLog  rateLog
	refuseLog rateLog
}

func newAdmission(lim catalog.Server, userLimit func(string) (int, bool)) *admission {
	return &admission{lim: lim, userLimit: userLimit, perHost: map[string]*list.List{}, perUser: map[string]int{},
		change: make(chan struct{})}
}

// enter counts a new connection as connecting. If that puts its address
// or all connecting connections over their cap, it returns the oldest one
// (of the address, or of all), already uncounted, for the caller to close;
// perHost says which cap.
func (a *admission) enter(fc *frontConn) (victim *frontConn, perHost bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if hl := a.perHost[fc.host]; hl != nil && hl.Len() >= a.lim.MaxUnauthenticatedPerHost {
		victim, perHost = hl.Front().Value.(*frontConn), true
	} else if a.connecting.Len() >= a.lim.MaxUnauthenticated {
		victim = a.connecting.Front().Value.(*frontConn)
	}
	if victim != nil {
		a.evicted.Add(1) // before uncount announces the change
		a.uncount(victim)
	}
	hl := a.perHost[fc.host]
	if hl == nil {
		hl = list.New()
		a.perHost[fc.host] = hl
	}
	fc.place = placeConnecting
	fc.elem = a.connecting.PushBack(fc)
	fc.hostElem = hl.PushBack(fc)
	a.changed()
	return victim, perHost
}

// errEvicted: the connection was closed for a newer one while it
// authenticated; nobody reads the error.
var errEvicted = errors.New("connection closed to admit newer ones")

// promote turns an authenticated connection into a session of user, or
// refuses it with MySQL's 1040 or 1226 (the connection then stays
// connecting until vitess closes it).
func (a *admission) promote(fc *frontConn, user string) error {
	limit, auditor := a.userLimit(user)
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case fc.place != placeConnecting:
		return errEvicted
	case a.sessions >= a.lim.MaxConnections+1, a.sessions >= a.lim.MaxConnections && !auditor:
		a.refused.Add(1)
		return mysql.NewSQLError(mysql.ERConCount, "08004", "Too many connections")
	case a.perUser[user] >= limit:
		a.refused.Add(1)
		return mysql.NewSQLError(erUserLimitReached, "42000",
			"User '%s' has exceeded the 'max_user_connections' resource (current value: %d)", user, limit)
	}
	a.uncount(fc)
	fc.place, fc.user = placeSession, user
	a.sessions++
	a.perUser[user]++
	a.changed()
	return nil
}

// leave uncounts a closing connection.
func (a *admission) leave(fc *frontConn) {
	a.mu.Lock()
	a.uncount(fc)
	a.mu.Unlock()
}

// uncount removes fc from its pool (a.mu held).
func (a *admission) uncount(fc *frontConn) {
	switch fc.place {
	case placeNone:
		return
	case placeConnecting:
		a.connecting.Remove(fc.elem)
		hl := a.perHost[fc.host]
		hl.Remove(fc.hostElem)
		if hl.Len() == 0 {
			delete(a.perHost, fc.host)
		}
		fc.elem, fc.hostElem = nil, nil
	case placeSession:
		a.sessions--
		if a.perUser[fc.user]--; a.perUser[fc.user] == 0 {
			delete(a.perUser, fc.user)
		}
	}
	fc.place = placeNone
	a.changed()
}

// changed wakes those waiting for a change (a.mu held).
func (a *admission) changed() {
	close(a.change)
	a.change = make(chan struct{})
}

// state is the counts and a channel closed at their next change.
func (a *admission) state() (connecting, sessions int, next <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.connecting.Len(), a.sessions, a.change
}

// hostKey is the client address that MaxUnauthenticatedPerHost counts: the
// IPv4 address, or the /64 of an IPv6 address (one subscriber's usual
// share), or the whole address for other networks.
func hostKey(addr net.Addr) string {
	if addr == nil {
		return ""
	}
	var ip netip.Addr
	if ta, ok := addr.(*net.TCPAddr); ok {
		ip = ta.AddrPort().Addr()
	} else if ap, err := netip.ParseAddrPort(addr.String()); err == nil {
		ip = ap.Addr()
	} else {
		return addr.String()
	}
	ip = ip.Unmap()
	if ip.Is4() || !ip.IsValid() {
		return ip.String()
	}
	p, _ := ip.Prefix(64)
	return p.String()
}

// admitConnection counts a newly accepted connection and closes the one
// it displaces, if any.
func (s *Server) admitConnection(fc *frontConn) {
	victim, perHost := s.adm.enter(fc)
	if victim == nil {
		return
	}
	victim.raw.Close() // its goroutine then sees the error and closes the frontConn
	if s.adm.evictLog.allow() {
		n := s.adm.evicted.Load()
		if perHost {
			s.log.Warn("max_unauthenticated_per_host reached; closed the oldest connection still connecting from the address",
				"host", victim.host, "max_unauthenticated_per_host", s.limits.MaxUnauthenticatedPerHost, "closed_so_far", n)
		} else {
			s.log.Warn("max_unauthenticated reached; closed the oldest connection still connecting",
				"max_unauthenticated", s.limits.MaxUnauthenticated, "closed_so_far", n)
		}
	}
}

// admittingMethod is an auth method whose successful authentication must
// also win a session place (see above).
type admittingMethod struct {
	mysql.AuthMethod
	s *Server
}

func (m admittingMethod) HandleAuthPluginData(c *mysql.Conn, user string, serverData, clientData []byte, remote net.Addr) (mysql.Getter, error) {
	g, err := m.AuthMethod.HandleAuthPluginData(c, user, serverData, clientData, remote)
	if err != nil {
		return nil, err
	}
	fc := frontConnOf(c)
	if fc == nil {
		return g, nil
	}
	if err := m.s.adm.promote(fc, user); err != nil {
		var se *mysql.SQLError
		if errors.As(err, &se) && m.s.adm.refuseLog.allow() {
			m.s.log.Warn("session refused", "user", user, "code", se.Num, "err", se.Message,
				"max_connections", m.s.limits.MaxConnections, "refused_so_far", m.s.adm.refused.Load())
		}
		return nil, err
	}
	m.s.handler.authenticated(c)
	return g, nil
}

// userLimit is the most sessions user may hold (their own
// max_user_connections, else the server's) and whether they are an
// auditor, from the catalog in force.
func (s *Server) userLimit(user string) (int, bool) {
	u := s.liveCatalog().User(user)
	limit := s.limits.MaxUserConnections
	if u != nil && u.MaxUserConnections > 0 {
		limit = u.MaxUserConnections
	}
	return limit, u != nil && u.Role == catalog.RoleAuditor
}

// rateLog lets a message through at most once per 10 seconds.
type rateLog struct{ last atomic.Int64 } // UnixNano

func (r *rateLog) allow() bool {
	now := time.Now().UnixNano()
	last := r.last.Load()
	return now-last >= int64(10*time.Second) && r.last.CompareAndSwap(last, now)
}
