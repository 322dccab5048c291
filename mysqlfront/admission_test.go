package mysqlfront

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"net"
	"runtime"
	"slices"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/dpproxy/dpproxy/catalog"
)

// Tests of admission (admission.go): floods of idle sockets, the session
// caps per server and per user, the place kept for auditors. They wait for
// the server's counts (waitAdmission), not for time; no test asserts a
// duration (BenchmarkLoginDuringFlood measures one).

// waitAdmission waits until ok holds of the server's counts of connecting
// connections and sessions, woken by each change of them.
func waitAdmission(t testing.TB, s *Server, ok func(connecting, sessions int) bool) {
	t.Helper()
	deadline := time.NewTimer(2 * time.Minute) // a guard against hanging, not a timing target
	defer deadline.Stop()
	for {
		connecting, sessions, next := s.adm.state()
		if ok(connecting, sessions) {
			return
		}
		select {
		case <-next:
		case <-deadline.C:
			t.Fatalf("admission: still %d connecting, %d sessions", connecting, sessions)
		}
	}
}

// loopback is a source address for test clients: 127.0.0.1 (i = 0) or
// another address of 127/8, which Linux serves without configuration.
// ok is false where the system refuses to bind it.
func loopback(t testing.TB, i int) (net.IP, bool) {
	t.Helper()
	ip := net.IPv4(127, 0, 0, byte(1+i))
	if i == 0 {
		return ip, true
	}
	l, err := net.ListenTCP("tcp", &net.TCPAddr{IP: ip})
	if err != nil {
		return nil, false
	}
	l.Close()
	return ip, true
}

// flood opens n idle TCP connections to addr from src and leaves them
// silent; they are closed when the test ends.
func flood(t testing.TB, addr string, src net.IP, n int) []net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src}, Timeout: 5 * time.Second}
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range n {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("flood: socket %d: %v", len(conns), err)
		}
		_ = c.(*net.TCPConn).SetLinger(0) // no TIME_WAIT left behind
		conns = append(conns, c)
	}
	return conns
}

// evicted is how many connecting connections the server closed for newer ones.
func evicted(h *harness) int64 { return h.srv.adm.evicted.Load() }

// TestIdleFloodDoesNotBlockLogins: 4,300 idle sockets from one address (the
// attack that locked every login out until the handshake timeout, and ran a
// process limited to 4,096 descriptors out of them) hold at most
// max_unauthenticated_per_host places; the server closes the others at
// once (the handshake timeout here is an hour, so any close is the cap's),
// and a real client logs in.
func TestIdleFloodDoesNotBlockLogins(t *testing.T) {
	const n = 4300
	needDescriptors(t, 2*n) // both ends of each socket are in this process
	h, rec := startLimited(t, catalog.Server{HandshakeTimeout: time.Hour})
	perHost := h.srv.limits.MaxUnauthenticatedPerHost
	conns := flood(t, h.addr, net.IPv4(127, 0, 0, 1), n)
	waitAdmission(t, h.srv, func(connecting, _ int) bool {
		return connecting == perHost && evicted(h) == n-int64(perHost)
	})
	// The oldest sockets were closed by the server, the newest are held.
	for i, c := range []net.Conn{conns[0], conns[n/2], conns[n-perHost-1]} {
		if !closedWithin(c, 5*time.Second) {
			t.Fatalf("flood socket %d not closed", i)
		}
	}
	if !rec.contains("max_unauthenticated_per_host reached") {
		t.Fatal("evictions not logged")
	}

	var got int64
	if err := h.analyst("").QueryRowContext(ctx(t), "SELECT COUNT(*) FROM adult").Scan(&got); err != nil || got != 1234 {
		t.Fatalf("login during the flood: %v %d", err, got)
	}
	// The login displaced the oldest idle socket of its address, then left
	// the connecting ones for a session.
	waitAdmission(t, h.srv, func(connecting, sessions int) bool { return connecting == perHost-1 && sessions == 1 })
}

// TestFloodFromOtherAddresses: floods from several addresses fill
// max_unauthenticated; each address holds at most its own cap, the total
// stays at max_unauthenticated, and logins from another address succeed
// while a flood goes on. Needs extra loopback addresses (Linux).
func TestFloodFromOtherAddresses(t *testing.T) {
	const maxUnauth, perHost = 12, 4
	var srcs []net.IP
	for i := 1; i <= 4; i++ {
		ip, ok := loopback(t, i)
		if !ok {
			t.Skip("cannot bind 127.0.0.x source addresses here")
		}
		srcs = append(srcs, ip)
	}
	h, _ := startLimited(t, catalog.Server{HandshakeTimeout: time.Hour, MaxUnauthenticated: maxUnauth, MaxUnauthenticatedPerHost: perHost})

	// Two idle sockets of 127.0.0.1 and a flood of 100 from 127.0.0.2: the
	// flood closes only its own (every eviction is one of the flood's).
	flood(t, h.addr, net.IPv4(127, 0, 0, 1), 2)
	flood(t, h.addr, srcs[0], 100)
	waitAdmission(t, h.srv, func(connecting, _ int) bool { return connecting == 2+perHost && evicted(h) == 100-perHost })

	// Floods from three more addresses reach max_unauthenticated: then the
	// oldest connecting connections of all are closed, 12 stay.
	for _, ip := range srcs[1:] {
		flood(t, h.addr, ip, 50)
	}
	waitAdmission(t, h.srv, func(connecting, _ int) bool { return connecting == maxUnauth })

	// Logins from 127.0.0.1 while 127.0.0.2 floods on (bounded; it stops by
	// itself): at its address's cap the flood closes only its own, so a
	// login, once it is the newest connecting connection, is never closed
	// for it.
	done := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(done)
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: srcs[0]}, Timeout: 5 * time.Second}
		var open []net.Conn
		defer func() {
			for _, c := range open {
				c.Close()
			}
		}()
		for range 2000 {
			select {
			case <-stop:
				return
			default:
			}
			c, err := d.Dial("tcp", h.addr)
			if err != nil {
				return
			}
			open = append(open, c)
		}
	}()
	defer func() { close(stop); <-done }()
	for i := range 20 {
		db := h.analyst("")
		if err := db.PingContext(ctx(t)); err != nil {
			t.Fatalf("login %d during the flood: %v", i, err)
		}
		db.Close()
	}
}

type driverConnector = driver.Connector

// holdAll opens up to most sessions of one user with a driver, until one
// is refused; it returns the sessions and the refusal. Closing a session
// closes its connection (the pool keeps none idle).
func holdAll(t *testing.T, h *harness, user, password string, most int) ([]*sql.Conn, *gomysql.MySQLError) {
	t.Helper()
	db := h.db(user, password, "")
	db.SetMaxIdleConns(0)
	var held []*sql.Conn
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	for range most {
		c, err := db.Conn(ctx(t))
		if err == nil {
			err = c.PingContext(ctx(t))
		}
		if err != nil {
			return held, mysqlErr(t, err)
		}
		held = append(held, c)
	}
	return held, nil
}

// TestMaxUserConnections: with the defaults, one user who holds every
// session they can get (max_user_connections, 100 of max_connections 151)
// gets MySQL's 1226, and another user still logs in; a user's own
// max_user_connections replaces the server's.
func TestMaxUserConnections(t *testing.T) {
	h, _ := startLimited(t, catalog.Server{})
	want := catalog.DefaultMaxUserConnections(catalog.DefaultMaxConnections)
	held, refusal := holdAll(t, h, "analyst", "analyst", catalog.DefaultMaxConnections+1)
	if len(held) != want || refusal == nil {
		t.Fatalf("analyst held %d sessions (refusal %v), want %d", len(held), refusal, want)
	}
	msg := fmt.Sprintf("User 'analyst' has exceeded the 'max_user_connections' resource (current value: %d)", want)
	if refusal.Number != 1226 || string(refusal.SQLState[:]) != "42000" || refusal.Message != msg {
		t.Fatalf("refusal: %v", refusal)
	}
	var v string
	if err := held[0].QueryRowContext(ctx(t), "SELECT @@max_user_connections").Scan(&v); err != nil || v != fmt.Sprint(want) {
		t.Fatalf("@@max_user_connections: %q %v", v, err)
	}
	// The refused connection freed what it held.
	waitAdmission(t, h.srv, func(connecting, sessions int) bool { return connecting == 0 && sessions == want })
	// Another user logs in.
	if err := h.db("bob", "bob", "").PingContext(ctx(t)); err != nil {
		t.Fatalf("bob while analyst holds all they may: %v", err)
	}
	// Closing one of analyst's sessions lets analyst in again.
	held[0].Close()
	waitAdmission(t, h.srv, func(_, sessions int) bool { return sessions == want }) // bob's pool keeps one
	if err := h.analyst("").PingContext(ctx(t)); err != nil {
		t.Fatalf("analyst after closing one: %v", err)
	}

	// A user's own limit.
	h2 := startWith(t, func(c *Config) {
		c.Catalog.User("bob").MaxUserConnections = 2
	})
	held2, refusal := holdAll(t, h2, "bob", "bob", 10)
	if len(held2) != 2 || refusal == nil || refusal.Number != 1226 ||
		refusal.Message != "User 'bob' has exceeded the 'max_user_connections' resource (current value: 2)" {
		t.Fatalf("bob held %d: %v", len(held2), refusal)
	}
}

// TestReservedAuditorConnection: when analysts hold max_connections
// sessions, an auditor still logs in, once; analysts get 1040.
func TestReservedAuditorConnection(t *testing.T) {
	h, _ := startLimited(t, catalog.Server{MaxConnections: 3, MaxUserConnections: 2})
	heldA, _ := holdAll(t, h, "analyst", "analyst", 2)
	heldB, _ := holdAll(t, h, "bob", "bob", 1)
	if len(heldA) != 2 || len(heldB) != 1 {
		t.Fatalf("held %d + %d", len(heldA), len(heldB))
	}
	// Full: bob, under his own limit, gets 1040.
	if _, refusal := holdAll(t, h, "bob", "bob", 1); refusal == nil || refusal.Number != 1040 {
		t.Fatalf("bob over max_connections: %v", refusal)
	}
	// The auditor takes the place kept for auditors, and can work.
	aud, refusal := holdAll(t, h, "auditor", "audit pw", 1)
	if refusal != nil || len(aud) != 1 {
		t.Fatalf("auditor: %v", refusal)
	}
	var one int
	if err := aud[0].QueryRowContext(ctx(t), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("auditor session: %v", err)
	}
	// Only one place is kept.
	if _, refusal := holdAll(t, h, "auditor", "audit pw", 1); refusal == nil || refusal.Number != 1040 {
		t.Fatalf("second auditor: %v", refusal)
	}
	// When the auditor leaves, the kept place is free again, and still
	// not for analysts.
	aud[0].Close()
	waitAdmission(t, h.srv, func(connecting, sessions int) bool { return connecting == 0 && sessions == 3 })
	if _, refusal := holdAll(t, h, "bob", "bob", 1); refusal == nil || refusal.Number != 1040 {
		t.Fatalf("bob after the auditor left: %v", refusal)
	}
	if aud, refusal = holdAll(t, h, "auditor", "audit pw", 1); refusal != nil || len(aud) != 1 {
		t.Fatalf("auditor again: %v", refusal)
	}
}

// TestHostKey: IPv4 addresses count one by one, IPv6 ones by /64.
func TestHostKey(t *testing.T) {
	for addr, want := range map[net.Addr]string{
		&net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 5}:                  "10.1.2.3",
		&net.TCPAddr{IP: net.ParseIP("::ffff:10.1.2.3"), Port: 5}:         "10.1.2.3",
		&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:3:4:5:6"), Port: 5}:    "2001:db8:1:2::/64",
		&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:ffff::1"), Port: 5000}: "2001:db8:1:2::/64",
		&net.UnixAddr{Name: "/tmp/s", Net: "unix"}:                        "/tmp/s",
	} {
		if got := hostKey(addr); got != want {
			t.Errorf("hostKey(%v) = %q, want %q", addr, got, want)
		}
	}
}

// BenchmarkLoginDuringFlood measures a driver's login (connect,
// authenticate, close) during a flood from another address, against the
// same login with no flood in the same run (the mean of before and after
// it), and reports both and their ratio flood/quiet (1: the flood costs a
// login nothing):
//
//	go test -run '^$' -bench LoginDuringFlood -benchtime 2000x ./mysqlfront
//
// Two floods:
//   - idle: 4,000 idle sockets opened before the logins (the server keeps
//     max_unauthenticated_per_host of them and closed the others);
//   - churn: a flooder opens sockets as fast as it can during the logins,
//     keeping up to 4,000 open, so the server keeps closing the oldest.
//     The flooder runs in the benchmark's process and takes CPU from the
//     logins, which this ratio includes.
func BenchmarkLoginDuringFlood(b *testing.B) {
	b.Run("idle", func(b *testing.B) { benchLoginDuringFlood(b, false) })
	b.Run("churn", func(b *testing.B) { benchLoginDuringFlood(b, true) })
}

func benchLoginDuringFlood(b *testing.B, churn bool) {
	const n = 4000
	needDescriptors(b, 2*n)
	src, ok := loopback(b, 1)
	if !ok {
		src = net.IPv4(127, 0, 0, 1)
	}
	h := startWith(b, func(c *Config) { c.Catalog.Server.HandshakeTimeout = time.Hour })
	cfg := gomysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = "analyst", "analyst", "tcp", h.addr, "demo"
	// Closing with a reset leaves no TIME_WAIT behind: thousands of those
	// slow down the next connects of this client, whichever phase it is.
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		return c, err
	}
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		b.Fatal(err)
	}
	c := context.Background()
	var each []time.Duration // the last logins' durations
	logins := func() time.Duration {
		each = each[:0]
		start := time.Now()
		for range b.N {
			t0 := time.Now()
			if err := loginOnce(c, conn); err != nil {
				b.Fatal(err)
			}
			each = append(each, time.Since(t0))
		}
		return time.Since(start)
	}
	// median of each: the mean hides whether a few logins waited (a SYN
	// retransmitted after a full accept queue waits a second) or all did.
	median := func() float64 {
		slices.Sort(each)
		return float64(each[len(each)/2].Nanoseconds())
	}
	// settle waits until the server's handlers of closed connections are
	// done (vitess logs and unregisters each): that work is the flood's
	// arrival, not its presence.
	settle := func(want int) {
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
			h.srv.mu.Lock()
			open := len(h.srv.conns)
			h.srv.mu.Unlock()
			if open <= want {
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("%d connections still open", open)
			}
		}
	}
	_ = logins() // warm up: caches, the first RSA key, the scheduler
	runtime.GC()
	quiet := logins()
	perHost := h.srv.limits.MaxUnauthenticatedPerHost
	var during time.Duration
	if churn {
		stop, done := make(chan struct{}), make(chan int)
		go func() { done <- churnFlood(h.addr, src, n, stop) }()
		b.ResetTimer()
		during = logins()
		b.StopTimer()
		b.ReportMetric(median(), "flood-median-ns/login")
		b.ReportMetric(float64(each[len(each)-1].Nanoseconds()), "flood-max-ns/login")
		close(stop)
		dials := <-done
		b.ReportMetric(float64(dials)/float64(b.N), "flood-sockets/login")
	} else {
		conns := flood(b, h.addr, src, n)
		waitAdmission(b, h.srv, func(connecting, _ int) bool { return evicted(h) == n-int64(perHost) })
		settle(perHost)
		runtime.GC() // collect the closed connections' garbage now, as before the quiet logins
		b.ResetTimer()
		during = logins()
		b.StopTimer()
		b.ReportMetric(median(), "flood-median-ns/login")
		b.ReportMetric(float64(each[len(each)-1].Nanoseconds()), "flood-max-ns/login")
		for _, c := range conns {
			c.Close()
		}
	}
	settle(0)
	runtime.GC()
	after := logins()
	b.ReportMetric(float64(quiet.Nanoseconds())/float64(b.N), "quiet-ns/login")
	b.ReportMetric(float64(after.Nanoseconds())/float64(b.N), "after-ns/login")
	quiet = (quiet + after) / 2 // quiet: the mean of before and after the flood
	b.ReportMetric(float64(during.Nanoseconds())/float64(b.N), "flood-ns/login")
	b.ReportMetric(float64(during)/float64(quiet), "flood/quiet")
}

// churnFlood opens idle sockets to addr from src until stop, keeping at
// most n open (closing its oldest with a reset), and at most 10 million in
// all, so that it ends by itself; it returns how many it opened.
func churnFlood(addr string, src net.IP, n int, stop <-chan struct{}) int {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src}, Timeout: 5 * time.Second}
	open := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for dials := 0; dials < 10_000_000; dials++ {
		select {
		case <-stop:
			return dials
		default:
		}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			return dials
		}
		_ = c.(*net.TCPConn).SetLinger(0)
		if len(open) == n {
			open[0].Close()
			open = append(open[:0], open[1:]...)
		}
		open = append(open, c)
	}
	return 10_000_000
}

// loginOnce connects with the driver (the handshake and authentication)
// and closes.
func loginOnce(ctx context.Context, conn driverConnector) error {
	c, err := conn.Connect(ctx)
	if err != nil {
		return err
	}
	return c.Close()
}
