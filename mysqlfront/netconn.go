package mysqlfront

import (
	"bufio"
	"container/list"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dolthub/vitess/go/mysql"
)

// The packet layer. Every accepted connection is a frontConn, a net.Conn
// under vitess that sees the MySQL packets going both ways. It does what
// vitess v0.20's server cannot:
//
//   - TLS. The front terminates TLS itself: when the client's first packet
//     is an SSLRequest, frontConn runs the TLS handshake and from then on
//     reads and writes through the TLS connection, while vitess sees a plain
//     handshake response (its CLIENT_SSL flag cleared) and never switches.
//     Sitting above TLS is what lets frontConn see the commands of TLS
//     connections too. The TLS handshake adds one packet to the exchange,
//     so during the connection phase frontConn renumbers packets between
//     vitess's sequence and the wire's (and auth methods can add packets of
//     their own, see authExchange).
//   - RequireTLS. A client whose first packet is not an SSLRequest gets
//     MySQL's error 3159 and the connection is closed before any
//     authentication (vitess would send an error and carry on).
//   - COM_STATISTICS (mysql CLI "status", mysqladmin status), which vitess
//     answers with "command not implemented": frontConn answers it with
//     MySQL's statistics line.
//   - Syntax errors of COM_STMT_PREPARE: vitess parses the statement and
//     answers the error itself (1105, "syntax error at position ..."),
//     before any handler sees it; frontConn rewrites that error packet into
//     MySQL's 1064.
//
// The connection phase ends with the first OK or ERR packet vitess writes
// after the greeting; from then on, writes pass straight through and reads
// are only inspected at the first packet of each command.

// MySQL protocol constants that vitess does not export.
const (
	comStatistics           = 0x09
	comStmtPrepare          = 0x16
	erSecureTransportNeeded = 3159
	packetHeaderLen         = 4
	maxPacketLen            = 1<<24 - 1
	sslRequestLen           = 32
	tlsHandshakeTimeout     = 10 * time.Second
)

// frontConn is one client connection as vitess sees it. Read and Write are
// called from the connection's own goroutine (vitess handles one command at
// a time), Close from anywhere.
type frontConn struct {
	raw net.Conn
	s   *Server
	// host is the client address as admission counts it (hostKey).
	host string
	// Its place in the server's admission, guarded by admission.mu.
	place          place
	elem, hostElem *list.Element // in the connecting lists
	user           string        // the session's user

	closeOnce sync.Once
	// handshake closes the connection if the connection phase outlives
	// the handshake timeout.
	handshake *time.Timer
	// interactive: the client announced CLIENT_INTERACTIVE (set when the
	// handshake response is read, before any session exists).
	interactive bool
	// session is the connection's GMS session, for its @@wait_timeout.
	session atomic.Pointer[sessionRef]
	// gmsKnown: GMS has been told of the connection (once authenticated;
	// see connHandler.NewConnection).
	gmsKnown atomic.Bool
	// vconn is vitess's connection over this one (set by NewConnection);
	// commands are checked against its prepared statements.
	vconn atomic.Pointer[mysql.Conn]
	// longDataErr: prepared statements whose COM_STMT_SEND_LONG_DATA was
	// refused; their next execution reports it (see commands.go).
	longDataErr map[uint32]*mysql.SQLError

	wmu sync.Mutex // serialises writes to rw
	rw  net.Conn   // raw, or the TLS connection over it
	br  *bufio.Reader
	tls atomic.Bool

	// read side: whole packets waiting for vitess
	in []byte

	// connection phase
	connecting atomic.Bool
	responded  bool // the client's handshake response has been read
	wireSeq    byte // the next sequence number on the wire
	vSeq       byte // the next sequence number in vitess's view
	// write-side packet parser (connection phase only)
	whdr     [packetHeaderLen]byte
	whn      int  // header bytes collected
	wremain  int  // payload bytes still to pass
	wfirst   bool // the next payload byte is the packet's first
	wpackets int  // packets written so far
	wend     bool // the packet being written ends the connection phase

	// the answer to a COM_STMT_PREPARE, held until its first packet is
	// complete (guarded by wmu)
	prepareText string
	prepareBuf  []byte
	watchPrep   bool
}

func newFrontConn(c net.Conn, s *Server) *frontConn {
	fc := &frontConn{raw: c, s: s, rw: c, host: hostKey(c.RemoteAddr())}
	fc.br = bufio.NewReader(c)
	fc.connecting.Store(true)
	fc.handshake = time.AfterFunc(s.limits.HandshakeTimeout, fc.handshakeExpired)
	return fc
}

func (c *frontConn) LocalAddr() net.Addr                { return c.raw.LocalAddr() }
func (c *frontConn) RemoteAddr() net.Addr               { return c.raw.RemoteAddr() }
func (c *frontConn) SetDeadline(t time.Time) error      { return c.raw.SetDeadline(t) }
func (c *frontConn) SetReadDeadline(t time.Time) error  { return c.raw.SetReadDeadline(t) }
func (c *frontConn) SetWriteDeadline(t time.Time) error { return c.raw.SetWriteDeadline(t) }

// Close closes the client connection; the first Close frees its place
// (admission.go).
func (c *frontConn) Close() error {
	c.closeOnce.Do(func() {
		c.handshake.Stop()
		c.s.adm.leave(c)
	})
	return c.raw.Close()
}

// TLS reports whether the client switched to TLS.
func (c *frontConn) TLS() bool { return c.tls.Load() }

// Read gives vitess whole packets that frontConn has already looked at.
func (c *frontConn) Read(p []byte) (int, error) {
	for len(c.in) == 0 {
		if err := c.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, c.in)
	c.in = c.in[n:]
	return n, nil
}

// readPacket reads one packet of the connection phase from the client: its
// header and payload. A packet longer than maxHandshakePacket is refused
// before its payload is read.
func (c *frontConn) readPacket() ([]byte, []byte, error) {
	hdr := make([]byte, packetHeaderLen)
	if _, err := io.ReadFull(c.br, hdr); err != nil {
		return nil, nil, err
	}
	n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
	if n > maxHandshakePacket {
		_ = c.writeErrPacket(hdr[3]+1, erHandshake, "08S01", "Bad handshake")
		return nil, nil, fmt.Errorf("connection-phase packet of %d bytes", n)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(c.br, payload); err != nil {
		return nil, nil, err
	}
	return hdr, payload, nil
}

// fill reads the next client packet and queues it for vitess, unless
// frontConn handles it itself.
func (c *frontConn) fill() error {
	if !c.connecting.Load() {
		return c.fillCommand()
	}
	hdr, payload, err := c.readPacket()
	if err != nil {
		return err
	}

	c.wireSeq = hdr[3] + 1
	if !c.responded {
		flags := uint32(0)
		if len(payload) >= 4 {
			flags = binary.LittleEndian.Uint32(payload)
		}
		ssl := flags&mysql.CapabilityClientSSL != 0
		if ssl && len(payload) == sslRequestLen && c.s.tlsConfig != nil && !c.tls.Load() {
			return c.startTLS()
		}
		if c.s.requireTLS && !c.tls.Load() {
			_ = c.writeErrPacket(c.wireSeq, erSecureTransportNeeded, "HY000",
				"Connections using insecure transport are prohibited while --require_secure_transport=ON.")
			c.raw.Close()
			return errInsecureTransport
		}
		hs, err := parseHandshakeResponse(payload)
		if err != nil {
			// vitess would misread it (some malformed responses panic
			// there); MySQL answers a bad handshake with 1043.
			c.s.log.Debug("bad handshake response", "remote", c.raw.RemoteAddr().String(), "err", err)
			_ = c.writeErrPacket(c.wireSeq, erHandshake, "08S01", "Bad handshake")
			c.raw.Close()
			return err
		}
		c.responded = true
		c.interactive = hs.flags&capabilityClientInteractive != 0
		// vitess must never switch to TLS itself: the packet layer runs it.
		binary.LittleEndian.PutUint32(payload, flags&^mysql.CapabilityClientSSL)
	}
	hdr[3] = c.vSeq
	c.vSeq++
	c.in = append(append(c.in, hdr...), payload...)
	return nil
}

var errInsecureTransport = errors.New("client did not switch to TLS")

// startTLS runs the server side of the TLS handshake after an SSLRequest.
func (c *frontConn) startTLS() error {
	// The TLS connection reads through br: the client may already have sent
	// its ClientHello behind the SSLRequest.
	t := tls.Server(&bufferedConn{Conn: c.raw, r: c.br}, c.s.tlsConfig)
	_ = c.raw.SetDeadline(time.Now().Add(tlsHandshakeTimeout))
	if err := t.Handshake(); err != nil {
		c.s.log.Debug("TLS handshake failed", "remote", c.raw.RemoteAddr().String(), "err", err)
		return err
	}
	_ = c.raw.SetDeadline(time.Time{})
	c.wmu.Lock()
	c.rw = t
	c.wmu.Unlock()
	c.br = bufio.NewReader(t)
	c.tls.Store(true)
	return nil
}

type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// Write passes vitess's output to the client; during the connection phase
// it renumbers the packets and watches for the OK or ERR that ends it.
func (c *frontConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.watchPrep {
		return c.writePrepareAnswer(p)
	}
	if !c.connecting.Load() {
		return c.write(p)
	}
	out := make([]byte, 0, len(p))
	i := 0
	for i < len(p) {
		if c.whn < packetHeaderLen {
			k := copy(c.whdr[c.whn:], p[i:])
			c.whn += k
			i += k
			if c.whn < packetHeaderLen {
				break
			}
			c.wremain = int(c.whdr[0]) | int(c.whdr[1])<<8 | int(c.whdr[2])<<16
			c.vSeq = c.whdr[3] + 1
			c.whdr[3] = c.wireSeq
			c.wireSeq++
			out = append(out, c.whdr[:]...)
			c.wfirst = true
			c.wend = false
		}
		n := min(c.wremain, len(p)-i)
		if c.wfirst && n > 0 {
			c.wfirst = false
			// OK (0x00) or ERR (0xff) after the greeting ends the connection phase;
			// so does an ERR instead of the greeting.
			if b := p[i]; b == mysql.ErrPacket || (b == mysql.OKPacket && c.wpackets > 0) {
				c.wend = true
			}
		}
		out = append(out, p[i:i+n]...)
		i += n
		c.wremain -= n
		if c.wremain == 0 {
			c.whn = 0
			c.wpackets++
			if c.wend {
				c.connecting.Store(false)
				c.handshake.Stop()
				out = append(out, p[i:]...)
				break
			}
		}
	}
	if _, err := c.write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// write writes to the client (wmu held); a client that does not read
// for netWriteTimeout is dropped.
func (c *frontConn) write(b []byte) (int, error) {
	_ = c.raw.SetWriteDeadline(time.Now().Add(netWriteTimeout))
	return c.rw.Write(b)
}

// writePrepareAnswer holds the answer to a COM_STMT_PREPARE until its first
// packet is complete; a vitess syntax error becomes MySQL's 1064.
func (c *frontConn) writePrepareAnswer(p []byte) (int, error) {
	c.prepareBuf = append(c.prepareBuf, p...)
	buf := c.prepareBuf
	if len(buf) < packetHeaderLen {
		return len(p), nil
	}
	n := int(buf[0]) | int(buf[1])<<8 | int(buf[2])<<16
	if len(buf) < packetHeaderLen+n {
		return len(p), nil
	}
	c.watchPrep = false
	payload := buf[packetHeaderLen : packetHeaderLen+n]
	if n > 9 && payload[0] == mysql.ErrPacket && int(payload[1])|int(payload[2])<<8 == mysql.ERUnknownError &&
		strings.Contains(string(payload[9:]), "syntax error at position") {
		var se *mysql.SQLError
		if errors.As(syntaxError(c.prepareText), &se) {
			np := []byte{mysql.ErrPacket, byte(se.Num), byte(se.Num >> 8), '#'}
			np = append(append(np, se.State...), se.Message...)
			out := []byte{byte(len(np)), byte(len(np) >> 8), byte(len(np) >> 16), buf[3]}
			out = append(append(out, np...), buf[packetHeaderLen+n:]...)
			if _, err := c.write(out); err != nil {
				return 0, err
			}
			return len(p), nil
		}
	}
	if _, err := c.write(buf); err != nil {
		return 0, err
	}
	return len(p), nil
}

// writeRawPacket writes one packet that vitess knows nothing of.
func (c *frontConn) writeRawPacket(seq byte, payload []byte) error {
	if len(payload) >= maxPacketLen {
		return fmt.Errorf("packet of %d bytes too large", len(payload))
	}
	buf := make([]byte, packetHeaderLen, packetHeaderLen+len(payload))
	buf[0], buf[1], buf[2], buf[3] = byte(len(payload)), byte(len(payload)>>8), byte(len(payload)>>16), seq
	buf = append(buf, payload...)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.write(buf)
	return err
}

func (c *frontConn) writeErrPacket(seq byte, code uint16, state, msg string) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.write(errPacket(seq, code, state, msg))
	return err
}

func (c *frontConn) writeSQLError(seq byte, e *mysql.SQLError) error {
	return c.writeErrPacket(seq, uint16(e.Num), e.State, e.Message)
}

// authExchange lets an auth method talk to the client during the
// connection phase, in packets vitess does not see: it sends payload and
// returns the client's answer. The wire's sequence numbers advance; vitess's
// do not.
func (c *frontConn) authExchange(payload []byte) ([]byte, error) {
	if !c.connecting.Load() || len(c.in) > 0 {
		return nil, errors.New("authExchange outside the authentication exchange")
	}
	if err := c.writeRawPacket(c.wireSeq, payload); err != nil {
		return nil, err
	}
	c.wireSeq++
	return c.authRead()
}

// authSend sends one packet vitess does not see, expecting no answer.
func (c *frontConn) authSend(payload []byte) error {
	if !c.connecting.Load() {
		return errors.New("authSend outside the authentication exchange")
	}
	if err := c.writeRawPacket(c.wireSeq, payload); err != nil {
		return err
	}
	c.wireSeq++
	return nil
}

func (c *frontConn) authRead() ([]byte, error) {
	hdr, payload, err := c.readPacket()
	if err != nil {
		return nil, err
	}
	c.wireSeq = hdr[3] + 1
	return payload, nil
}

// frontConnOf finds the frontConn under a vitess connection.
func frontConnOf(c *mysql.Conn) *frontConn {
	fc, _ := c.Conn.(*frontConn)
	return fc
}

// connTLS reports whether a client connection uses TLS.
func connTLS(c *mysql.Conn) bool {
	if fc := frontConnOf(c); fc != nil {
		return fc.TLS()
	}
	return c.TLSEnabled()
}
