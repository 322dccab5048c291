package mysqlfront

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	vtmysql "github.com/dolthub/vitess/go/mysql"
)

// A raw MySQL client for tests that must send what no driver sends: it
// logs in with mysql_native_password and then writes packets as given.

const (
	clientFlags = vtmysql.CapabilityClientProtocol41 | vtmysql.CapabilityClientSecureConnection |
		vtmysql.CapabilityClientPluginAuth | vtmysql.CapabilityClientConnectWithDB |
		vtmysql.CapabilityClientDeprecateEOF | vtmysql.CapabilityClientLongPassword
	clientInteractive = capabilityClientInteractive
)

// wireConn is a raw client connection.
type wireConn struct {
	net.Conn
}

// packet is one packet read from the server.
type packet struct {
	seq     byte
	payload []byte
}

func (p packet) isErr() bool { return len(p.payload) > 0 && p.payload[0] == 0xff }

// errCode is the code of an ERR packet, its SQLSTATE and message.
func (p packet) errCode() (uint16, string, string) {
	if !p.isErr() || len(p.payload) < 3 {
		return 0, "", ""
	}
	code := binary.LittleEndian.Uint16(p.payload[1:])
	rest := p.payload[3:]
	state := ""
	if len(rest) >= 6 && rest[0] == '#' {
		state, rest = string(rest[1:6]), rest[6:]
	}
	return code, state, string(rest)
}

func (p packet) String() string {
	if p.isErr() {
		code, state, msg := p.errCode()
		return fmt.Sprintf("ERR %d (%s) %s [seq %d]", code, state, msg, p.seq)
	}
	return fmt.Sprintf("packet seq %d % x", p.seq, p.payload[:min(len(p.payload), 32)])
}

// dialWire connects without logging in.
func dialWire(addr string) (*wireConn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &wireConn{Conn: c}, nil
}

// write sends one packet.
func (w *wireConn) write(seq byte, payload []byte) error {
	_ = w.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := w.Write(append([]byte{byte(len(payload)), byte(len(payload) >> 8), byte(len(payload) >> 16), seq}, payload...))
	return err
}

// read reads one packet within d.
func (w *wireConn) read(d time.Duration) (packet, error) {
	_ = w.SetReadDeadline(time.Now().Add(d))
	var hdr [4]byte
	if _, err := io.ReadFull(w, hdr[:]); err != nil {
		return packet{}, err
	}
	p := make([]byte, int(hdr[0])|int(hdr[1])<<8|int(hdr[2])<<16)
	if _, err := io.ReadFull(w, p); err != nil {
		return packet{}, err
	}
	return packet{seq: hdr[3], payload: p}, nil
}

// greeting reads the server's handshake and returns its 20-byte salt.
func (w *wireConn) greeting() ([]byte, error) {
	g, err := w.read(5 * time.Second)
	if err != nil {
		return nil, err
	}
	if g.isErr() {
		return nil, fmt.Errorf("greeting: %v", g)
	}
	d := g.payload
	i := bytes.IndexByte(d[1:], 0)
	if d[0] != 10 || i < 0 || len(d) < 1+i+1+4+8+1+2+1+2+2+1+10+12 {
		return nil, fmt.Errorf("greeting: % x", d)
	}
	pos := 1 + i + 1 + 4
	salt := append([]byte(nil), d[pos:pos+8]...)
	pos += 8 + 1 + 2 + 1 + 2 + 2 + 1 + 10
	return append(salt, d[pos:pos+12]...), nil
}

// handshakeResponsePacket is a HandshakeResponse41 for user with a native
// password scramble.
func handshakeResponsePacket(flags uint32, user, password, db string, salt []byte) []byte {
	var b bytes.Buffer
	_ = binary.Write(&b, binary.LittleEndian, flags)
	_ = binary.Write(&b, binary.LittleEndian, uint32(1<<24))
	b.WriteByte(45) // utf8mb4
	b.Write(make([]byte, 23))
	b.WriteString(user + "\x00")
	scr := vtmysql.ScramblePassword(salt, []byte(password))
	b.WriteByte(byte(len(scr)))
	b.Write(scr)
	if flags&vtmysql.CapabilityClientConnectWithDB != 0 {
		b.WriteString(db + "\x00")
	}
	b.WriteString("mysql_native_password\x00")
	return b.Bytes()
}

// loginWire connects and logs in as user; extra flags are added to the
// client's capabilities.
func loginWire(addr, user, password string, extra uint32) (*wireConn, error) {
	w, err := dialWire(addr)
	if err != nil {
		return nil, err
	}
	salt, err := w.greeting()
	if err != nil {
		w.Close()
		return nil, err
	}
	if err := w.write(1, handshakeResponsePacket(clientFlags|extra, user, password, "demo", salt)); err != nil {
		w.Close()
		return nil, err
	}
	ok, err := w.read(5 * time.Second)
	if err != nil || ok.isErr() || len(ok.payload) == 0 || ok.payload[0] != 0 {
		w.Close()
		return nil, fmt.Errorf("login: %v %v", ok, err)
	}
	return w, nil
}

func mustLoginWire(t testing.TB, addr string, extra uint32) *wireConn {
	t.Helper()
	w, err := loginWire(addr, "analyst", "analyst", extra)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// command sends one command (sequence 0).
func (w *wireConn) command(payload []byte) error { return w.write(0, payload) }

// response reads a command's answer up to its end: an ERR or OK packet, a
// result set's final EOF/OK, or silence for quiet. It returns the packets.
func (w *wireConn) response(quiet time.Duration) ([]packet, error) {
	var out []packet
	for {
		p, err := w.read(quiet)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return out, nil
			}
			return out, err
		}
		out = append(out, p)
		if p.isErr() || (len(out) == 1 && len(p.payload) > 0 && p.payload[0] == 0) {
			return out, nil
		}
		if len(p.payload) > 0 && p.payload[0] == 0xfe && len(p.payload) < 0xffffff {
			return out, nil // EOF/OK ending a result set (DEPRECATE_EOF)
		}
	}
}

// query sends a COM_QUERY and returns its packets.
func (w *wireConn) query(q string) ([]packet, error) {
	if err := w.command(append([]byte{vtmysql.ComQuery}, q...)); err != nil {
		return nil, err
	}
	return w.response(5 * time.Second)
}

// queryValue runs a query returning one text value.
func (w *wireConn) queryValue(q string) (string, error) {
	ps, err := w.query(q)
	if err != nil {
		return "", err
	}
	// column count, column definition, row, EOF/OK
	if len(ps) != 4 || ps[0].isErr() {
		return "", fmt.Errorf("%s: %v", q, ps)
	}
	row := ps[2].payload
	if len(row) == 0 || row[0] == 0xfb {
		return "NULL", nil
	}
	n, k, ok := lenEncInt(row)
	if !ok || int(n)+k > len(row) {
		return "", fmt.Errorf("%s: row % x", q, row)
	}
	return string(row[k : k+int(n)]), nil
}

// prepare sends a COM_STMT_PREPARE and returns the statement id and its
// number of parameters.
func (w *wireConn) prepare(q string) (uint32, int, error) {
	if err := w.command(append([]byte{vtmysql.ComPrepare}, q...)); err != nil {
		return 0, 0, err
	}
	p, err := w.read(5 * time.Second)
	if err != nil {
		return 0, 0, err
	}
	if p.isErr() || len(p.payload) < 9 {
		return 0, 0, fmt.Errorf("prepare %q: %v", q, p)
	}
	id := binary.LittleEndian.Uint32(p.payload[1:])
	cols, params := int(binary.LittleEndian.Uint16(p.payload[5:])), int(binary.LittleEndian.Uint16(p.payload[7:]))
	for i := 0; i < cols+params; i++ { // column definitions (DEPRECATE_EOF: no EOF packets)
		if _, err := w.read(5 * time.Second); err != nil {
			return 0, 0, err
		}
	}
	return id, params, nil
}

// logRecorder is a slog handler that keeps the messages it sees.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	r.mu.Lock()
	r.msgs = append(r.msgs, b.String())
	r.mu.Unlock()
	return nil
}
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }

// panics returns the logged messages that report a recovered panic.
func (r *logRecorder) panics() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, m := range r.msgs {
		if strings.Contains(m, "panic") {
			out = append(out, m)
		}
	}
	return out
}

func (r *logRecorder) contains(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.msgs {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}
