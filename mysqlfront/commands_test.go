package mysqlfront

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"testing"
	"time"

	vtmysql "github.com/dolthub/vitess/go/mysql"
)

// Regression tests for malformed protocol input (commands.go): each packet
// below panicked inside vitess (recovered there, costing the connection).
// Now each gets a MySQL error packet, nothing is logged as a panic, and the
// proxy — and, where MySQL keeps it, the connection — carries on.

func startRecorded(t *testing.T) (*harness, *logRecorder) {
	t.Helper()
	rec := &logRecorder{}
	h := startWith(t, func(c *Config) { c.Logger = slog.New(rec) })
	t.Cleanup(func() {
		if p := rec.panics(); len(p) > 0 {
			t.Errorf("panics logged: %q", p)
		}
	})
	return h, rec
}

// fixedPart is a handshake response's first 32 bytes.
func fixedPart(flags uint32) []byte {
	b := make([]byte, 32)
	binary.LittleEndian.PutUint32(b, flags)
	binary.LittleEndian.PutUint32(b[4:], 1<<24)
	b[8] = 45
	return b
}

func TestMalformedHandshakeResponses(t *testing.T) {
	h, _ := startRecorded(t)
	lenenc := uint32(vtmysql.CapabilityClientProtocol41 | vtmysql.CapabilityClientPluginAuthLenencClientData | vtmysql.CapabilityClientPluginAuth)
	cases := map[string][]byte{
		// vitess: slice bounds out of range reading the user name at offset 32 of 9 bytes.
		"short":           fixedPart(vtmysql.CapabilityClientProtocol41)[:9],
		"fixed part only": fixedPart(vtmysql.CapabilityClientProtocol41),
		// vitess: makeslice: len out of range.
		"auth length 0xfe+64 bit": append(append(fixedPart(lenenc), "analyst\x00"...), 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f),
		"auth length past end":    append(append(fixedPart(lenenc), "analyst\x00"...), 0xfc, 0x00, 0x10, 1, 2, 3),
		"secure auth past end":    append(append(fixedPart(vtmysql.CapabilityClientProtocol41|vtmysql.CapabilityClientSecureConnection), "analyst\x00"...), 200, 1, 2),
		"no database":             append(append(fixedPart(vtmysql.CapabilityClientProtocol41|vtmysql.CapabilityClientSecureConnection|vtmysql.CapabilityClientConnectWithDB), "analyst\x00"...), 0, 'd', 'e'),
		"not protocol 4.1":        append(fixedPart(0), "analyst\x00\x00"...),
		"empty":                   {},
	}
	for name, resp := range cases {
		w, err := dialWire(h.addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.greeting(); err != nil {
			t.Fatal(err)
		}
		if err := w.write(1, resp); err != nil {
			t.Fatal(err)
		}
		p, err := w.read(5 * time.Second)
		if err != nil {
			t.Fatalf("%s: no answer: %v", name, err)
		}
		if code, state, msg := p.errCode(); code != 1043 || state != "08S01" || msg != "Bad handshake" || p.seq != 2 {
			t.Fatalf("%s: %v", name, p)
		}
		if !closedWithin(w, time.Second) {
			t.Fatalf("%s: connection left open after a bad handshake", name)
		}
		w.Close()
	}
	// An oversized connection-phase packet is refused before it is read.
	w, _ := dialWire(h.addr)
	if _, err := w.greeting(); err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte{0xff, 0xff, 0xff, 1})
	if p, err := w.read(5 * time.Second); err != nil || func() bool { c, _, _ := p.errCode(); return c != 1043 }() {
		t.Fatalf("oversized handshake packet: %v %v", p, err)
	}
	w.Close()
	mustLoginWire(t, h.addr, 0) // the proxy serves on
}

func TestUnknownAndUnsupportedCommands(t *testing.T) {
	h, _ := startRecorded(t)
	w := mustLoginWire(t, h.addr, 0)
	for name, payload := range map[string][]byte{
		// vitess: index out of range in parseComBinlogDumpGTID.
		"empty COM_BINLOG_DUMP_GTID": {0x1e},
		"COM_BINLOG_DUMP":            {0x12, 4, 0, 0, 0},
		"COM_REGISTER_SLAVE":         {0x15},
		"COM_CHANGE_USER":            append([]byte{0x11}, "auditor\x00\x14"...),
		"COM_PROCESS_KILL":           {0x0c, 1, 0, 0, 0},
		"COM_SHUTDOWN":               {0x08},
		"COM_SLEEP":                  {0x00},
		"empty packet":               {},
		"0xee":                       {0xee, 1, 2},
	} {
		if err := w.command(payload); err != nil {
			t.Fatal(err)
		}
		ps, err := w.response(5 * time.Second)
		if err != nil || len(ps) != 1 {
			t.Fatalf("%s: %v %v", name, ps, err)
		}
		if code, state, msg := ps[0].errCode(); code != 1047 || state != "08S01" || msg != "Unknown command" || ps[0].seq != 1 {
			t.Fatalf("%s: %v", name, ps[0])
		}
		if v, err := w.queryValue("SELECT 42"); err != nil || v != "42" {
			t.Fatalf("after %s: %q %v", name, v, err)
		}
	}
}

func TestMalformedPreparedStatementCommands(t *testing.T) {
	h, _ := startRecorded(t)
	w := mustLoginWire(t, h.addr, 0)
	id, params, err := w.prepare("SELECT ?")
	if err != nil || params != 1 {
		t.Fatalf("prepare: %v %d", err, params)
	}
	le := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	execute := func(id uint32, rest ...byte) []byte {
		return append(append([]byte{vtmysql.ComStmtExecute}, le(id)...), append([]byte{0, 1, 0, 0, 0}, rest...)...)
	}
	want := func(name string, code uint16) {
		t.Helper()
		ps, err := w.response(5 * time.Second)
		if err != nil || len(ps) != 1 {
			t.Fatalf("%s: %v %v", name, ps, err)
		}
		if c, _, msg := ps[0].errCode(); c != code {
			t.Fatalf("%s: %v, want %d (%s)", name, ps[0], code, msg)
		}
		if v, err := w.queryValue("SELECT 7"); err != nil || v != "7" {
			t.Fatalf("after %s: %q %v", name, v, err)
		}
	}
	for _, c := range []struct {
		name    string
		payload []byte
		code    uint16
	}{
		// vitess: nil pointer dereference (it writes an error and carries on).
		{"COM_STMT_RESET without a statement id", []byte{vtmysql.ComStmtReset}, 1835},
		{"COM_STMT_RESET of an unknown statement", append([]byte{vtmysql.ComStmtReset}, le(id+100)...), 1243},
		// vitess: makeslice, a string parameter 0xfe + 2^63.
		{"COM_STMT_EXECUTE, huge string length", execute(id, 0, 1, 0xfd, 0, 0xfe, 0, 0, 0, 0, 0, 0, 0, 0x80), 1835},
		{"COM_STMT_EXECUTE, string past the end", execute(id, 0, 1, 0xfd, 0, 0x20, 'a'), 1835},
		{"COM_STMT_EXECUTE, int past the end", execute(id, 0, 1, 0x08, 0, 1, 2), 1835},
		{"COM_STMT_EXECUTE, bad date size", execute(id, 0, 1, 0x0c, 0, 5, 1, 2, 3, 4, 5), 1835},
		{"COM_STMT_EXECUTE, unknown type", execute(id, 0, 1, 0xf0, 0, 1), 1835},
		{"COM_STMT_EXECUTE, no null bitmap", execute(id), 1835},
		{"COM_STMT_EXECUTE, unknown statement", execute(id + 100), 1243},
		{"COM_STMT_EXECUTE, short", []byte{vtmysql.ComStmtExecute, 1}, 1835},
		{"COM_FIELD_LIST without NUL", append([]byte{vtmysql.ComFieldList}, "adult"...), 1835},
	} {
		if err := w.command(c.payload); err != nil {
			t.Fatal(err)
		}
		want(c.name, c.code)
	}

	// COM_STMT_SEND_LONG_DATA after COM_STMT_RESET: vitess appended to the
	// nil entry the reset left (nil pointer). Now the data is taken.
	longData := func(id uint32, param uint16, data string) []byte {
		p := append([]byte{vtmysql.ComStmtSendLongData}, le(id)...)
		return append(binary.LittleEndian.AppendUint16(p, param), data...)
	}
	for _, p := range [][]byte{longData(id, 0, "ab"), append([]byte{vtmysql.ComStmtReset}, le(id)...)} {
		if err := w.command(p); err != nil {
			t.Fatal(err)
		}
	}
	if ps, err := w.response(5 * time.Second); err != nil || len(ps) != 1 || ps[0].isErr() {
		t.Fatalf("reset: %v %v", ps, err)
	}
	if err := w.command(longData(id, 0, "xyz")); err != nil {
		t.Fatal(err)
	}
	// execute with the parameter bound as a string (its value came as long data)
	if err := w.command(execute(id, 0, 1, 0xfd, 0)); err != nil {
		t.Fatal(err)
	}
	ps, err := w.response(5 * time.Second)
	if err != nil || len(ps) != 4 || !bytes.Contains(ps[2].payload, []byte("xyz")) {
		t.Fatalf("execute after long data: %v %v", ps, err)
	}

	// Long data for a parameter the statement does not have: dropped, and
	// reported by the next execution, as MySQL does; malformed or unknown
	// ones are ignored.
	for _, p := range [][]byte{longData(id, 3, "x"), {vtmysql.ComStmtSendLongData, 1}, longData(id+100, 0, "x")} {
		if err := w.command(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.command(execute(id, 0, 1, 0xfd, 0, 1, 'q')); err != nil {
		t.Fatal(err)
	}
	want("long data for parameter 3", 1210)
	if err := w.command(execute(id, 0, 1, 0xfd, 0, 1, 'q')); err != nil {
		t.Fatal(err)
	}
	if ps, err := w.response(5 * time.Second); err != nil || len(ps) != 4 || !bytes.Contains(ps[2].payload, []byte("q")) {
		t.Fatalf("execute: %v %v", ps, err)
	}
}

func TestOutOfOrderCommandCloses(t *testing.T) {
	h, _ := startRecorded(t)
	w := mustLoginWire(t, h.addr, 0)
	if err := w.write(3, append([]byte{vtmysql.ComQuery}, "SELECT 1"...)); err != nil {
		t.Fatal(err)
	}
	p, err := w.read(5 * time.Second)
	if c, _, _ := p.errCode(); err != nil || c != 1156 {
		t.Fatalf("out of order: %v %v", p, err)
	}
	if !closedWithin(w, time.Second) {
		t.Fatal("connection left open")
	}
	mustLoginWire(t, h.addr, 0)
}

// TestUnresolvableVariables: vitess's VarScope panicked inside
// go-mysql-server on an empty variable name (found by FuzzComQuery:
// "SELECT @@"), and the client got 3902. MySQL calls these syntax errors.
func TestUnresolvableVariables(t *testing.T) {
	h, _ := startRecorded(t)
	db := h.analyst("")
	for _, q := range []string{"SELECT @@", "SELECT @@global.", "SELECT @@session.", "SELECT @@'", "SELECT 1, @@ FROM dual", "SELECT @@GLOBAL.`"} {
		_, err := db.ExecContext(ctx(t), q)
		wantCode(t, q, err, 1064, "42000", "You have an error in your SQL syntax")
	}
	var v string
	if err := db.QueryRowContext(ctx(t), "SELECT @@version_comment").Scan(&v); err != nil || v != VersionComment {
		t.Fatalf("@@version_comment: %q %v", v, err)
	}
}

// TestParserPanics: vitess's parser panics on SELECT” (found by
// FuzzComQuery): through COM_QUERY the panic was recovered into 3902, and
// through COM_STMT_PREPARE, which vitess parses itself, it cost the
// connection. Both are now syntax errors (MySQL would answer ” here; the
// parser cannot), and the session carries on.
func TestParserPanics(t *testing.T) {
	h, _ := startRecorded(t)
	w := mustLoginWire(t, h.addr, 0)
	for _, cmd := range []byte{vtmysql.ComQuery, vtmysql.ComPrepare} {
		for _, q := range []string{"SELECT''", "SELECT'' FROM dual"} {
			if err := w.command(append([]byte{cmd}, q...)); err != nil {
				t.Fatal(err)
			}
			ps, err := w.response(5 * time.Second)
			if err != nil || len(ps) != 1 {
				t.Fatalf("%x %q: %v %v", cmd, q, ps, err)
			}
			if code, state, _ := ps[0].errCode(); code != 1064 || state != "42000" {
				t.Fatalf("%x %q: %v", cmd, q, ps[0])
			}
			if v, err := w.queryValue("SELECT 3"); err != nil || v != "3" {
				t.Fatalf("after %x %q: %q %v", cmd, q, v, err)
			}
		}
	}
}
