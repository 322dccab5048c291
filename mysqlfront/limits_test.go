package mysqlfront

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/catalog"
)

// Tests of the limits (limits.go): connection count, handshake timeout,
// idle sessions, accept errors.

func startLimited(t testing.TB, lim catalog.Server) (*harness, *logRecorder) {
	t.Helper()
	rec := &logRecorder{}
	h := startWith(t, func(c *Config) {
		c.Catalog.Server = lim
		c.Logger = slog.New(rec)
	})
	return h, rec
}

// closedWithin reports whether the server closes c (EOF or reset) within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 512)
	for {
		if _, err := c.Read(buf); err != nil {
			var ne net.Error
			return !(errors.As(err, &ne) && ne.Timeout())
		}
	}
}

// TestHandshakeTimeout: connections that never finish connecting, silent or
// stalled mid-handshake, are closed at the handshake timeout, not before,
// and free their places.
func TestHandshakeTimeout(t *testing.T) {
	const hsTimeout = 1500 * time.Millisecond
	h, _ := startLimited(t, catalog.Server{HandshakeTimeout: hsTimeout})
	opened := time.Now()

	// Two silent sockets: connected, greeting unread, nothing sent.
	var hold []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		hold = append(hold, c)
	}
	// Two half-handshaken ones: greeting read, then part of a response.
	for range 2 {
		w, err := dialWire(h.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if _, err := w.greeting(); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte{60, 0, 0, 1, 0x0d, 0xa2}); err != nil { // a header promising 60 bytes, and 2 of them
			t.Fatal(err)
		}
		hold = append(hold, w.Conn)
	}
	waitAdmission(t, h.srv, func(connecting, _ int) bool { return connecting == 4 })

	// Every held socket is closed by the server, not before the timeout.
	for i, c := range hold {
		if !closedWithin(c, hsTimeout+3*time.Second) {
			t.Fatalf("held socket %d still open after the handshake timeout", i)
		}
	}
	if took := time.Since(opened); took < hsTimeout-100*time.Millisecond {
		t.Fatalf("held sockets closed after %v, before the handshake timeout %v", took, hsTimeout)
	}
	// The server releases a place just after it closes the socket (the
	// client can see the close first).
	waitAdmission(t, h.srv, func(connecting, _ int) bool { return connecting == 0 })
	var n int64
	if err := h.analyst("").QueryRowContext(ctx(t), "SELECT COUNT(*) FROM adult").Scan(&n); err != nil || n != 1234 {
		t.Fatalf("after the handshake timeout: %v %d", err, n)
	}
}

// TestMaxConnectionsCountsSessions: authenticated sessions hold their
// places; one more analyst gets 1040 after authenticating; closing one
// frees a place.
func TestMaxConnectionsCountsSessions(t *testing.T) {
	h, rec := startLimited(t, catalog.Server{MaxConnections: 2, MaxUserConnections: 2})
	a := mustLoginWire(t, h.addr, 0)
	b := mustLoginWire(t, h.addr, 0)
	_, err := loginWire(h.addr, "analyst", "analyst", 0)
	if err == nil || !strings.Contains(err.Error(), "1040") {
		t.Fatalf("third session: %v", err)
	}
	me := mysqlErr(t, h.db("bob", "bob", "").PingContext(ctx(t)))
	if me.Number != 1040 || string(me.SQLState[:]) != "08004" || me.Message != "Too many connections" {
		t.Fatalf("driver over the limit: %v", me)
	}
	if !rec.contains("session refused") {
		t.Fatal("refusals not logged")
	}
	// Idle sockets take no session place.
	for range 3 {
		c, err := net.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	a.Close()
	waitAdmission(t, h.srv, func(_, sessions int) bool { return sessions == 1 })
	c, err := loginWire(h.addr, "analyst", "analyst", 0)
	if err != nil {
		t.Fatalf("place not freed: %v", err)
	}
	c.Close()
	if v, err := b.queryValue("SELECT 1"); err != nil || v != "1" {
		t.Fatalf("held session: %v %q", err, v)
	}
}

// deadlineListener records, per client address, the read deadlines the
// server sets on the connections it accepts, and when it set them. On a
// session, readCommand sets two per command: the idle deadline (now plus
// @@wait_timeout) while it waits for the command, then netReadTimeout once
// the command's first byte is in. They are the observable facts of the idle
// timeout, so tests need not sleep through it.
type deadlineListener struct {
	net.Listener
	mu      sync.Mutex
	set     map[string][]deadlineSet
	changed chan struct{} // closed and replaced at each record
}

// deadlineSet is one SetReadDeadline: the deadline, and a time taken just
// after the server computed it from time.Now.
type deadlineSet struct{ deadline, at time.Time }

func newDeadlineListener(l net.Listener) *deadlineListener {
	return &deadlineListener{Listener: l, set: map[string][]deadlineSet{}, changed: make(chan struct{})}
}

func (l *deadlineListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &deadlineConn{Conn: c, l: l}, nil
}

type deadlineConn struct {
	net.Conn
	l *deadlineListener
}

func (c *deadlineConn) SetReadDeadline(d time.Time) error {
	at := time.Now()
	c.l.mu.Lock()
	addr := c.RemoteAddr().String()
	c.l.set[addr] = append(c.l.set[addr], deadlineSet{deadline: d, at: at})
	close(c.l.changed)
	c.l.changed = make(chan struct{})
	c.l.mu.Unlock()
	return c.Conn.SetReadDeadline(d)
}

// idleDeadline waits until the server has armed the idle deadline before
// the n-th command (from 1) of client's session, and returns it.
func (l *deadlineListener) idleDeadline(t testing.TB, client net.Conn, n int) deadlineSet {
	t.Helper()
	guard := time.NewTimer(time.Minute) // against hanging, not a timing target
	defer guard.Stop()
	for {
		l.mu.Lock()
		set, changed := l.set[client.LocalAddr().String()], l.changed
		l.mu.Unlock()
		if len(set) >= 2*n-1 {
			return set[2*n-2]
		}
		select {
		case <-changed:
		case <-guard.C:
			t.Fatalf("the idle deadline before command %d was never set (%d read deadlines)", n, len(set))
		}
	}
}

func TestWaitTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dl := newDeadlineListener(l)
	h := startWith(t, func(c *Config) {
		c.Listener = dl
		c.Catalog.Server = catalog.Server{WaitTimeout: 2 * time.Second, InteractiveTimeout: 3 * time.Second}
	})
	for _, c := range []struct {
		extra             uint32
		wait, interactive string
	}{{0, "2", "3"}, {clientInteractive, "3", "3"}} {
		w := mustLoginWire(t, h.addr, c.extra)
		for v, want := range map[string]string{"@@wait_timeout": c.wait, "@@session.interactive_timeout": c.interactive, "@@global.wait_timeout": "2"} {
			if got, err := w.queryValue("SELECT " + v); err != nil || got != want {
				t.Fatalf("interactive=%v: %s = %q, %v; want %s", c.extra != 0, v, got, err, want)
			}
		}
	}

	// A session idle past its wait_timeout gets 4031 and is closed, not
	// before; SET SESSION wait_timeout changes it.
	w := mustLoginWire(t, h.addr, 0)
	if ps, err := w.query("SET SESSION wait_timeout = 1"); err != nil || len(ps) != 1 || ps[0].isErr() {
		t.Fatalf("SET: %v %v", ps, err)
	}
	sent := time.Now()
	if v, err := w.queryValue("SELECT @@wait_timeout"); err != nil || v != "1" {
		t.Fatalf("@@wait_timeout after SET: %q %v", v, err)
	}
	// The deadline is 1s after a moment between the last command's sending
	// and the arming.
	idle := dl.idleDeadline(t, w, 3)
	if idle.deadline.Before(sent.Add(time.Second)) || idle.deadline.After(idle.at.Add(time.Second)) {
		t.Fatalf("idle deadline %v after the last command, %v after it was set; want 1s",
			idle.deadline.Sub(sent), idle.deadline.Sub(idle.at))
	}
	p, err := w.read(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	code, state, msg := p.errCode()
	if code != 4031 || state != "HY000" || p.seq != 0 {
		t.Fatalf("idle session: %v", p)
	}
	if early := time.Until(idle.deadline); early > 0 {
		t.Fatalf("closed %v before its idle deadline (%s)", early, msg)
	}
	if !closedWithin(w, 5*time.Second) {
		t.Fatal("idle session left open")
	}

	// A session that keeps talking is not closed: each command sets the
	// idle deadline wait_timeout after itself again (the deadline is the
	// only thing that closes it, above).
	w = mustLoginWire(t, h.addr, 0)
	for n := 1; n <= 5; n++ {
		sent := time.Now()
		if v, err := w.queryValue("SELECT 1"); err != nil || v != "1" {
			t.Fatalf("active session: %q %v", v, err)
		}
		if idle := dl.idleDeadline(t, w, n+1); idle.deadline.Before(sent.Add(2 * time.Second)) {
			t.Fatalf("after command %d, the idle deadline is %v after it; want wait_timeout (2s)", n, idle.deadline.Sub(sent))
		}
	}
}

// flakyListener fails its first accepts with the errors of a process out
// of file descriptors.
type flakyListener struct {
	net.Listener
	mu    sync.Mutex
	fails int
}

func (l *flakyListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	fail := l.fails > 0
	if fail {
		l.fails--
	}
	l.mu.Unlock()
	if fail {
		time.Sleep(time.Millisecond)
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

func TestAcceptErrorsDoNotStopTheServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fl := &flakyListener{Listener: l, fails: 6} // back-off 5 ms, 10 ms, ... 160 ms
	rec := &logRecorder{}
	h := startWith(t, func(c *Config) { c.Listener = fl; c.Logger = slog.New(rec) })
	var n int64
	if err := h.analyst("").QueryRowContext(ctx(t), "SELECT COUNT(*) FROM adult").Scan(&n); err != nil || n != 1234 {
		t.Fatalf("after accept errors: %v %d", err, n)
	}
	if !rec.contains("accept failed; retrying") || !rec.contains("too many open files") {
		t.Fatalf("accept errors not logged: %v", rec.msgs)
	}
}

// accepting waits until the server at addr is in its accept loop: only a
// connection that loop took gets a greeting.
func accepting(t *testing.T, addr string) {
	t.Helper()
	w, err := dialWire(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.greeting(); err != nil {
		t.Fatalf("no greeting: %v", err)
	}
}

// TestListenerDeathEndsStart: a listener closed under the server (not by
// Close) makes Start return an error, so that serve exits non-zero.
func TestListenerDeathEndsStart(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Catalog: testCatalog(), Backend: newFakeBackend(), Listener: l, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	errc := make(chan error, 1)
	go func() { errc <- srv.Start() }()
	accepting(t, l.Addr().String())
	l.Close()
	select {
	case err := <-errc:
		if err == nil || !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Start: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Start did not return")
	}

	// After Close, Start returns nil.
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listener = l2
	srv2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	go func() { errc <- srv2.Start() }()
	accepting(t, l2.Addr().String())
	srv2.Close()
	if err := <-errc; err != nil {
		t.Fatalf("Start after Close: %v", err)
	}
}
