package mysqlfront

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/dolthub/vitess/go/mysql"
	"github.com/dolthub/vitess/go/sqltypes"
	querypb "github.com/dolthub/vitess/go/vt/proto/query"

	"github.com/dpproxy/dpproxy/parser"
)

// Checking what clients send before vitess reads it. vitess v0.20's server
// trusts the lengths inside packets: a handshake response that ends early
// (slice bounds out of range, before authentication), an auth response
// whose length-encoded size is 0xfe + a huge 64-bit number (makeslice), a
// prepared statement parameter with such a length, an empty
// COM_BINLOG_DUMP_GTID, a COM_STMT_RESET with a missing or unknown
// statement id (nil pointer), COM_STMT_SEND_LONG_DATA after COM_STMT_RESET
// (nil pointer) — each panics inside vitess, which recovers and drops the
// connection. The packet layer reads every packet first and:
//
//   - checks the handshake response with a parser of its own that follows
//     vitess's reading but checks every length; a malformed one gets
//     MySQL's 1043 "Bad handshake" and the connection is closed, as in
//     MySQL;
//   - lets through only the commands dpproxy serves (COM_QUIT, INIT_DB,
//     QUERY, FIELD_LIST, STATISTICS, PING, STMT_PREPARE, STMT_EXECUTE,
//     STMT_SEND_LONG_DATA, STMT_CLOSE, STMT_RESET, SET_OPTION, STMT_FETCH,
//     RESET_CONNECTION); every other one (replication and binlog commands,
//     COM_CHANGE_USER, COM_PROCESS_KILL, COM_SHUTDOWN, an empty packet, ...)
//     gets MySQL's 1047 "Unknown command" and the connection carries on;
//   - answers a COM_STMT_PREPARE whose text vitess's parser panics on
//     with MySQL's 1064, as a statement that does not parse;
//   - checks the layout of COM_FIELD_LIST, COM_STMT_EXECUTE and
//     COM_STMT_RESET against the connection's prepared statements
//     (vitess's own record of them): a malformed packet is 1835 "Malformed
//     communication packet", an unknown statement id 1243, and the
//     connection carries on;
//   - COM_STMT_SEND_LONG_DATA has no answer: one that is malformed or names
//     an unknown statement is dropped, as MySQL ignores it; one that names a
//     parameter the statement does not have, or makes it longer than
//     maxCommandBytes, is dropped and the statement's next
//     COM_STMT_EXECUTE answers 1210 or 1153, as in MySQL;
//   - a command whose first packet does not have sequence number 0 gets
//     1156 "Got packets out of order" and the connection is closed, and a
//     command longer than maxCommandBytes 1153, closed too, as in MySQL.

// MySQL error codes of malformed input.
const (
	erUnknownCom                = 1047 // ER_UNKNOWN_COM_ERROR, 08S01
	erWrongArguments            = 1210 // ER_WRONG_ARGUMENTS, HY000
	erUnknownStmt               = 1243 // ER_UNKNOWN_STMT_HANDLER, HY000
	erMalformedPacket           = 1835 // ER_MALFORMED_PACKET, HY000
	capabilityClientInteractive = 1 << 10
)

var (
	errPacketsOutOfOrder = errors.New("command packets out of order")
	errCommandTooLarge   = errors.New("command larger than max_allowed_packet")
	errIdleTimeout       = errors.New("session idle longer than its wait_timeout")
)

func unknownCommand() *mysql.SQLError {
	return mysql.NewSQLError(erUnknownCom, "08S01", "Unknown command")
}

func malformedPacket() *mysql.SQLError {
	return mysql.NewSQLError(erMalformedPacket, "HY000", "Malformed communication packet.")
}

func unknownStatement(id uint32, where string) *mysql.SQLError {
	return mysql.NewSQLError(erUnknownStmt, "HY000", "Unknown prepared statement handler (%d) given to %s", id, where)
}

// fillCommand reads the next command, every packet of it, and queues it
// for vitess unless the packet layer answers it itself.
func (c *frontConn) fillCommand() error {
	raw, payload, err := c.readCommand()
	if err != nil {
		return err
	}
	c.s.questions.Add(1)
	reply, forward := c.checkCommand(payload)
	if reply != nil {
		c.s.log.Debug("command refused before vitess", "conn", c.connID(), "command", firstByte(payload), "code", reply.Num)
		return c.writeSQLError(1, reply)
	}
	if !forward {
		return nil
	}
	switch payload[0] {
	case comStatistics:
		return c.writeRawPacket(1, []byte(c.s.statistics()))
	case comStmtPrepare:
		c.wmu.Lock()
		c.prepareText, c.prepareBuf, c.watchPrep = string(payload[1:]), c.prepareBuf[:0], true
		c.wmu.Unlock()
	}
	c.in = append(c.in, raw...)
	return nil
}

func firstByte(p []byte) int {
	if len(p) == 0 {
		return -1
	}
	return int(p[0])
}

func (c *frontConn) connID() uint32 {
	if vc := c.vconn.Load(); vc != nil {
		return vc.ConnectionID
	}
	return 0
}

// readCommand reads one command: its packets as they came (raw, headers
// included) and its payload. The first byte may take the session's idle
// timeout; the rest must follow within netReadTimeout.
func (c *frontConn) readCommand() (raw, payload []byte, err error) {
	var hdr [packetHeaderLen]byte
	_ = c.raw.SetReadDeadline(time.Now().Add(c.idleTimeout()))
	if _, err := io.ReadFull(c.br, hdr[:1]); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			c.s.log.Info("closing an idle session (wait_timeout)", "conn", c.connID(), "remote", c.raw.RemoteAddr().String())
			_ = c.writeErrPacket(0, erClientInteractionTimout, "HY000",
				"The client was disconnected by the server because of inactivity. See wait_timeout and interactive_timeout for configuring this behavior.")
			return nil, nil, errIdleTimeout
		}
		return nil, nil, err
	}
	_ = c.raw.SetReadDeadline(time.Now().Add(netReadTimeout))
	if _, err := io.ReadFull(c.br, hdr[1:]); err != nil {
		return nil, nil, err
	}
	if hdr[3] != 0 {
		_ = c.writeErrPacket(hdr[3]+1, erNetPacketsOutOfOrder, "08S01", "Got packets out of order")
		return nil, nil, errPacketsOutOfOrder
	}
	var parts [][]byte
	for {
		n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
		if len(raw)-packetHeaderLen*len(parts)+n > maxCommandBytes {
			_ = c.writeErrPacket(hdr[3]+1, erNetPacketTooLarge, "08S01", "Got a packet bigger than 'max_allowed_packet' bytes")
			return nil, nil, errCommandTooLarge
		}
		start := len(raw) + packetHeaderLen
		raw = append(append(raw, hdr[:]...), make([]byte, n)...)
		if _, err := io.ReadFull(c.br, raw[start:]); err != nil {
			return nil, nil, err
		}
		parts = append(parts, raw[start:])
		if n < maxPacketLen {
			break
		}
		seq := hdr[3]
		if _, err := io.ReadFull(c.br, hdr[:]); err != nil {
			return nil, nil, err
		}
		if hdr[3] != seq+1 {
			_ = c.writeErrPacket(hdr[3]+1, erNetPacketsOutOfOrder, "08S01", "Got packets out of order")
			return nil, nil, errPacketsOutOfOrder
		}
	}
	if len(parts) == 1 {
		return raw, parts[0], nil
	}
	return raw, bytes.Join(parts, nil), nil
}

// checkCommand decides what happens to a command: reply, when set, answers
// it in vitess's place; otherwise forward says whether vitess gets it (a
// dropped COM_STMT_SEND_LONG_DATA gets no answer at all). It runs on the
// connection's goroutine while vitess waits for the command, so it may
// read and repair vitess's record of the prepared statements.
func (c *frontConn) checkCommand(p []byte) (reply *mysql.SQLError, forward bool) {
	if len(p) == 0 {
		return unknownCommand(), false
	}
	vc := c.vconn.Load()
	switch p[0] {
	case mysql.ComQuit, mysql.ComInitDB, mysql.ComQuery, comStatistics, mysql.ComPing,
		mysql.ComSetOption, mysql.ComStmtFetch:
		return nil, true
	case mysql.ComPrepare:
		// vitess parses the statement itself, outside any handler, and its
		// parser panics on some malformed text (SELECT'').
		if parser.ParserFailed(string(p[1:])) {
			var se *mysql.SQLError
			errors.As(syntaxError(string(p[1:])), &se)
			return se, false
		}
		return nil, true
	case mysql.ComResetConnection:
		c.longDataErr = nil
		return nil, true
	case mysql.ComFieldList:
		// table name, NUL, wildcard: vitess drops the connection without the NUL.
		if bytes.IndexByte(p[1:], 0) < 0 {
			return malformedPacket(), false
		}
		return nil, true
	case mysql.ComStmtExecute:
		return c.checkStmtExecute(vc, p), true
	case mysql.ComStmtSendLongData:
		return nil, c.checkSendLongData(vc, p)
	case mysql.ComStmtClose:
		if len(p) >= 5 {
			delete(c.longDataErr, binary.LittleEndian.Uint32(p[1:]))
		}
		return nil, true
	case mysql.ComStmtReset:
		if len(p) < 5 {
			return malformedPacket(), false
		}
		id := binary.LittleEndian.Uint32(p[1:])
		if vc != nil && vc.PrepareData[id] == nil {
			return unknownStatement(id, "mysqld_stmt_reset"), false
		}
		delete(c.longDataErr, id)
		return nil, true
	}
	return unknownCommand(), false
}

// checkStmtExecute checks a COM_STMT_EXECUTE the way vitess will read it
// (parseComStmtExecute), with every length checked.
func (c *frontConn) checkStmtExecute(vc *mysql.Conn, p []byte) *mysql.SQLError {
	if len(p) < 5 {
		return malformedPacket()
	}
	id := binary.LittleEndian.Uint32(p[1:])
	if vc == nil {
		return nil
	}
	prep := vc.PrepareData[id]
	if prep == nil {
		return unknownStatement(id, "mysqld_stmt_execute")
	}
	if e := c.longDataErr[id]; e != nil {
		delete(c.longDataErr, id)
		return e
	}
	q := p[1:]       // vitess's offsets are relative to the payload after the command byte
	pos := 4 + 1 + 4 // statement id, cursor flags, iteration count
	if len(q) < pos {
		return malformedPacket()
	}
	if prep.ParamsCount == 0 {
		return nil
	}
	nb := (int(prep.ParamsCount) + 7) / 8
	if len(q) < pos+nb {
		return malformedPacket()
	}
	nulls := q[pos : pos+nb]
	pos += nb
	types := prep.ParamsType
	if pos >= len(q) {
		// vitess reads a missing new-params-bound flag as "start again at
		// offset 0": parameters are then read from the statement id on.
		pos = 0
	} else if q[pos] == 1 {
		pos++
		if len(q) < pos+2*int(prep.ParamsCount) {
			return malformedPacket()
		}
		types = make([]int32, prep.ParamsCount)
		for i := range types {
			t, err := sqltypes.MySQLToType(int64(q[pos]), int64(q[pos+1])>>2)
			if err != nil {
				return malformedPacket()
			}
			types[i] = int32(t)
			pos += 2
		}
	} else {
		pos++
	}
	for i := range types {
		if v, ok := prep.BindVars[fmt.Sprintf("v%d", i+1)]; ok && v != nil {
			continue // sent with COM_STMT_SEND_LONG_DATA
		}
		if nulls[i/8]&(1<<(i%8)) != 0 {
			continue
		}
		n, ok := paramSize(q, querypb.Type(types[i]), pos)
		if !ok {
			return malformedPacket()
		}
		pos += n
	}
	return nil
}

// paramSize is the size of a parameter value of type t at q[pos:], read as
// vitess's parseStmtArgs reads it; ok is false where vitess would fail or
// read past the end.
func paramSize(q []byte, t querypb.Type, pos int) (int, bool) {
	left := len(q) - pos
	fixed := func(n int) (int, bool) { return n, n <= left }
	switch t {
	case sqltypes.Null:
		return 0, true
	case sqltypes.Int8, sqltypes.Uint8:
		return fixed(1)
	case sqltypes.Uint16, sqltypes.Int16, sqltypes.Year:
		return fixed(2)
	case sqltypes.Uint24, sqltypes.Uint32, sqltypes.Int24, sqltypes.Int32, sqltypes.Float32:
		return fixed(4)
	case sqltypes.Uint64, sqltypes.Int64, sqltypes.Float64:
		return fixed(8)
	case sqltypes.Timestamp, sqltypes.Date, sqltypes.Datetime, sqltypes.Time:
		if left < 1 {
			return 0, false
		}
		size := int(q[pos])
		valid := size == 0 || size == 4 || size == 7 || size == 11
		if t == sqltypes.Time {
			valid = size == 0 || size == 8 || size == 12
		}
		if !valid {
			return 0, false
		}
		return fixed(1 + size)
	case sqltypes.Decimal, sqltypes.Text, sqltypes.Blob, sqltypes.VarChar, sqltypes.Char, sqltypes.VarBinary,
		sqltypes.Bit, sqltypes.Enum, sqltypes.Set, sqltypes.Geometry, sqltypes.Binary, sqltypes.TypeJSON:
		n, k, ok := lenEncInt(q[pos:])
		if !ok || n > uint64(left-k) {
			return 0, false
		}
		return k + int(n), true
	}
	return 0, false
}

// checkSendLongData checks a COM_STMT_SEND_LONG_DATA (statement id,
// parameter number, data) and says whether vitess gets it.
func (c *frontConn) checkSendLongData(vc *mysql.Conn, p []byte) bool {
	if len(p) < 7 {
		return false
	}
	if vc == nil {
		return true
	}
	id, param := binary.LittleEndian.Uint32(p[1:]), binary.LittleEndian.Uint16(p[5:])
	prep := vc.PrepareData[id]
	if prep == nil {
		return false
	}
	if prep.BindVars == nil || param >= prep.ParamsCount {
		c.refuseLongData(id, mysql.NewSQLError(erWrongArguments, "HY000", "Incorrect arguments to mysqld_stmt_send_long_data"))
		return false
	}
	key := fmt.Sprintf("v%d", param+1)
	size := len(p) - 7
	if v, ok := prep.BindVars[key]; ok {
		if v == nil {
			// COM_STMT_RESET leaves nil entries; vitess would append to one.
			delete(prep.BindVars, key)
		} else {
			size += len(v.Value)
		}
	}
	if size > maxCommandBytes {
		c.refuseLongData(id, mysql.NewSQLError(erNetPacketTooLarge, "HY000",
			"Parameter of prepared statement which is set through mysql_send_long_data() is longer than 'max_allowed_packet' bytes"))
		return false
	}
	return true
}

func (c *frontConn) refuseLongData(id uint32, e *mysql.SQLError) {
	if c.longDataErr == nil {
		c.longDataErr = map[uint32]*mysql.SQLError{}
	}
	c.longDataErr[id] = e
}

// lenEncInt reads a length-encoded integer as vitess does (0xfb and 0xff
// stand for themselves): its value and its size in bytes.
func lenEncInt(b []byte) (uint64, int, bool) {
	if len(b) == 0 {
		return 0, 0, false
	}
	var k int
	switch b[0] {
	case 0xfc:
		k = 2
	case 0xfd:
		k = 3
	case 0xfe:
		k = 8
	default:
		return uint64(b[0]), 1, true
	}
	if len(b) < 1+k {
		return 0, 0, false
	}
	var v uint64
	for i := k; i >= 1; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v, 1 + k, true
}

// handshakeResponse is what the packet layer needs of a client's
// HandshakeResponse41.
type handshakeResponse struct {
	flags uint32
}

// parseHandshakeResponse reads a HandshakeResponse41 as vitess's
// parseClientHandshakePacket does, checking every length against the
// packet. vitess also reads connection attributes, but checks them itself.
func parseHandshakeResponse(d []byte) (handshakeResponse, error) {
	var hs handshakeResponse
	bad := func(what string) (handshakeResponse, error) {
		return hs, fmt.Errorf("handshake response: %s", what)
	}
	if len(d) < 32 { // flags, max packet size, character set, 23 reserved bytes
		return bad("shorter than its fixed part")
	}
	hs.flags = binary.LittleEndian.Uint32(d)
	if hs.flags&mysql.CapabilityClientProtocol41 == 0 {
		return bad("not protocol 4.1")
	}
	pos := 32
	nullString := func() bool {
		i := bytes.IndexByte(d[pos:], 0)
		if i < 0 {
			return false
		}
		pos += i + 1
		return true
	}
	if !nullString() {
		return bad("user name")
	}
	switch {
	case hs.flags&mysql.CapabilityClientPluginAuthLenencClientData != 0:
		n, k, ok := lenEncInt(d[pos:])
		if !ok || n > uint64(len(d)-pos-k) {
			return bad("auth response length")
		}
		pos += k + int(n)
	case hs.flags&mysql.CapabilityClientSecureConnection != 0:
		if pos >= len(d) || int(d[pos]) > len(d)-pos-1 {
			return bad("auth response length")
		}
		pos += 1 + int(d[pos])
	default:
		if !nullString() {
			return bad("auth response")
		}
	}
	if hs.flags&mysql.CapabilityClientConnectWithDB != 0 && !nullString() {
		return bad("database name")
	}
	if hs.flags&mysql.CapabilityClientPluginAuth != 0 && !nullString() {
		return bad("auth plugin name")
	}
	return hs, nil
}
