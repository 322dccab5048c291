package mysqlfront

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	vtmysql "github.com/dolthub/vitess/go/mysql"

	"github.com/dpproxy/dpproxy/answers"
	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/demo"
	"github.com/dpproxy/dpproxy/engine"
	"github.com/dpproxy/dpproxy/sources"
)

// Fuzz targets for the wire front. Each fuzzing process starts one real
// front (go-mysql-server, the engine, a ledger, over a small generated demo
// table in SQLite) and, for each input, opens a TCP connection, logs in
// where the target needs it, sends the fuzzed packets and reads the answer
// up to its end (or a short deadline). The input fails if the server logs
// a recovered panic (vitess's, go-mysql-server's or the front's: every one
// is logged with "panic"), or if a fresh client can no longer log in and
// run SELECT 1. Seeds are in testdata/fuzz/<target>. Run one target longer
// with, e.g.:
//
//	go test -run '^$' -fuzz '^FuzzComQuery$' -fuzztime 10m ./mysqlfront

// fuzzFront is the front the fuzz targets of one process share.
type fuzzFront struct {
	addr  string
	log   *slog.Logger
	rec   *panicRecorder
	close func()

	sha2Once sync.Once
	sha2Err  error
}

var (
	fuzzOnce sync.Once
	fuzzFx   *fuzzFront
	fuzzErr  error
)

// frontForFuzzing starts the shared front on first use. It is called from
// the fuzz function's body, so that only the processes that run inputs
// (fuzzing workers, or go test running the seeds) start one, not the
// fuzzing coordinator.
func frontForFuzzing(t *testing.T) *fuzzFront {
	t.Helper()
	fuzzOnce.Do(func() { fuzzFx, fuzzErr = startFuzzFront() })
	if fuzzErr != nil {
		t.Fatal(fuzzErr)
	}
	// Tests in between may have routed the libraries' logs elsewhere.
	routeLibraryLogs(fuzzFx.log)
	return fuzzFx
}

// stopFuzzFront is called by TestMain.
func stopFuzzFront() {
	if fuzzFx != nil {
		fuzzFx.close()
	}
}

func startFuzzFront() (*fuzzFront, error) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "dpproxy-fuzz-")
	if err != nil {
		return nil, err
	}
	var closers []func()
	fail := func(err error) (*fuzzFront, error) {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
		os.RemoveAll(dir)
		return nil, err
	}
	cat := catalog.Demo()
	for _, t := range cat.Tables {
		t.Budget.Total, t.Budget.PerUser = 1e12, 1e12 // fuzzing must never run out
	}
	cat.AuthPlugin = "caching_sha2_password"
	cat.Server = catalog.Server{MaxConnections: 10000, MaxUserConnections: 10000, MaxUnauthenticated: 10000, MaxUnauthenticatedPerHost: 10000}
	if err := demo.Generate(ctx, filepath.Join(dir, cat.Sources["main"].Path), 2000); err != nil {
		return fail(err)
	}
	ledger, err := budget.Open(ctx, filepath.Join(dir, "ledger.sqlite"))
	if err != nil {
		return fail(err)
	}
	closers = append(closers, func() { ledger.Close() })
	store, err := answers.Open(ctx, filepath.Join(dir, "answers.sqlite"))
	if err != nil {
		return fail(err)
	}
	closers = append(closers, func() { store.Close() })
	hist, err := sources.Open(ctx, cat, sources.Options{DataDir: dir})
	if err != nil {
		return fail(err)
	}
	closers = append(closers, func() { hist.Close() })

	rec := &panicRecorder{}
	var h slog.Handler = rec
	if os.Getenv("DPPROXY_TEST_LOG") != "" {
		h = teeHandler{rec, slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})}
	}
	log := slog.New(h)
	live := engine.NewLive(engine.New(engine.Config{Catalog: cat, Ledger: ledger, Histograms: hist, Logger: log, Answers: store}))
	if _, err := live.SyncLimits(ctx); err != nil {
		return fail(err)
	}
	srv, err := New(Config{Catalog: cat, Backend: live, Address: "127.0.0.1:0", Version: "8.0.33-dpproxy", Logger: log,
		AuthPlugin: cat.AuthPlugin, Audit: &Audit{Ledger: ledger, Catalog: live.Catalog}})
	if err != nil {
		return fail(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Start() }()
	closers = append(closers, func() { srv.Close(); <-done })
	fx := &fuzzFront{addr: srv.Addr().String(), log: log, rec: rec}
	fx.close = func() { _, _ = fail(nil) }

	return fx, nil
}

// warmSHA2 makes one full caching_sha2_password login (the Go driver
// fetches the RSA key), once, so that fast authentication has a cached
// verifier to check.
func (fx *fuzzFront) warmSHA2(t *testing.T) {
	t.Helper()
	fx.sha2Once.Do(func() {
		db, err := sql.Open("mysql", fmt.Sprintf("analyst:analyst@tcp(%s)/demo?timeout=10s", fx.addr))
		if err == nil {
			defer db.Close()
			err = db.PingContext(context.Background())
		}
		fx.sha2Err = err
	})
	if fx.sha2Err != nil {
		t.Fatalf("caching_sha2_password login: %v", fx.sha2Err)
	}
}

// panicRecorder is the front's log handler: it keeps every message that
// reports a panic.
type panicRecorder struct {
	mu     sync.Mutex
	panics []string
}

func (r *panicRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *panicRecorder) Handle(_ context.Context, rec slog.Record) error {
	msg := rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "panic" || a.Key == "stack" {
			msg += " " + a.Key + "=" + a.Value.String()
		}
		return true
	})
	if strings.Contains(strings.ToLower(msg), "panic") {
		r.mu.Lock()
		r.panics = append(r.panics, msg)
		r.mu.Unlock()
	}
	return nil
}
func (r *panicRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *panicRecorder) WithGroup(string) slog.Handler      { return r }

// take returns the panics logged so far and forgets them.
func (r *panicRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.panics
	r.panics = nil
	return p
}

type teeHandler struct{ a, b slog.Handler }

func (t teeHandler) Enabled(ctx context.Context, l slog.Level) bool { return true }
func (t teeHandler) Handle(ctx context.Context, r slog.Record) error {
	_ = t.a.Handle(ctx, r)
	return t.b.Handle(ctx, r)
}
func (t teeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return teeHandler{t.a.WithAttrs(as), t.b.WithAttrs(as)}
}
func (t teeHandler) WithGroup(g string) slog.Handler {
	return teeHandler{t.a.WithGroup(g), t.b.WithGroup(g)}
}

// check fails the input if the server logged a panic or a fresh client
// cannot log in and run SELECT 1.
func (fx *fuzzFront) check(t *testing.T) {
	t.Helper()
	w, err := loginWire(fx.addr, "analyst", "analyst", 0)
	if err == nil {
		var ps []packet
		if ps, err = w.query("SELECT 1"); err == nil && (len(ps) != 4 || ps[0].isErr()) {
			err = fmt.Errorf("SELECT 1: %v", ps)
		}
		w.Close()
	}
	for _, p := range fx.rec.take() {
		t.Fatalf("the server recovered from a panic: %s", p)
	}
	if err != nil {
		t.Fatalf("a fresh client is no longer served: %v", err)
	}
}

// login connects as analyst, with extra client capabilities.
func (fx *fuzzFront) login(t *testing.T, extra uint32) *wireConn {
	t.Helper()
	w, err := loginWire(fx.addr, "analyst", "analyst", extra)
	if err != nil {
		t.Fatalf("login: %v", err)
	}
	return w
}

// readAnswer reads the answer to a command: an OK or ERR packet, or result
// sets up to the last one (CLIENT_DEPRECATE_EOF framing). It stops at the
// deadline or when the server closes the connection; neither is an error
// here (a fuzzed statement may sleep, or end the session).
func (w *wireConn) readAnswer(d time.Duration) {
	deadline := time.Now().Add(d)
	next := func() (packet, bool) {
		if time.Now().After(deadline) {
			return packet{}, false
		}
		p, err := w.read(time.Until(deadline))
		return p, err == nil
	}
	for {
		p, ok := next()
		if !ok || len(p.payload) == 0 || p.isErr() {
			return
		}
		switch b := p.payload[0]; {
		case b == 0x00 || (b == 0xfe && len(p.payload) < 9):
			if !moreResults(p.payload) {
				return
			}
			continue
		case b == 0xfb: // LOCAL INFILE request: send no file
			_ = w.write(p.seq+1, nil)
			continue
		}
		n, _, ok := lenEncInt(p.payload)
		if !ok {
			return
		}
		for range n { // column definitions
			if _, ok := next(); !ok {
				return
			}
		}
		for { // rows, then the OK that ends the result set
			r, ok := next()
			if !ok || len(r.payload) == 0 || r.isErr() {
				return
			}
			if r.payload[0] == 0xfe && len(r.payload) < 0xffffff {
				if !moreResults(r.payload) {
					return
				}
				break
			}
		}
	}
}

// moreResults reads SERVER_MORE_RESULTS_EXISTS from an OK or EOF packet.
func moreResults(p []byte) bool {
	const more = 0x0008
	if len(p) == 5 && p[0] == 0xfe { // EOF: warnings, status
		return binary.LittleEndian.Uint16(p[3:])&more != 0
	}
	_, k1, ok1 := lenEncInt(p[1:])
	if !ok1 {
		return false
	}
	_, k2, ok2 := lenEncInt(p[1+k1:])
	if !ok2 || len(p) < 1+k1+k2+2 {
		return false
	}
	return binary.LittleEndian.Uint16(p[1+k1+k2:])&more != 0
}

// FuzzHandshakeResponse sends the fuzzed bytes as the client's handshake
// response (before any authentication).
func FuzzHandshakeResponse(f *testing.F) {
	f.Fuzz(func(t *testing.T, resp []byte) {
		fx := frontForFuzzing(t)
		w, err := dialWire(fx.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if _, err := w.greeting(); err != nil {
			t.Fatal(err)
		}
		if err := w.write(1, resp); err != nil {
			t.Fatal(err)
		}
		// OK, ERR, an auth switch or more auth data, or the connection closed.
		_, _ = w.read(2 * time.Second)
		w.Close()
		fx.check(t)
	})
}

// FuzzAuth logs in with mysql_native_password or caching_sha2_password: the
// correct scramble of password XORed with tamper (and extended by it), then
// up to two continuation packets (caching_sha2's public key request, its
// RSA-encrypted or clear password; an auth switch's answer).
func FuzzAuth(f *testing.F) {
	f.Fuzz(func(t *testing.T, sha2 bool, user, password string, tamper, cont1, cont2 []byte) {
		fx := frontForFuzzing(t)
		fx.warmSHA2(t)
		w, err := dialWire(fx.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		salt, err := w.greeting()
		if err != nil {
			t.Fatal(err)
		}
		plugin, scr := "mysql_native_password", vtmysql.ScrambleMysqlNativePassword(salt, []byte(password))
		if sha2 {
			plugin, scr = "caching_sha2_password", vtmysql.ScrambleCachingSha2Password(salt, []byte(password))
		}
		for i, b := range tamper {
			if i < len(scr) {
				scr[i] ^= b
			} else {
				scr = append(scr, b)
			}
		}
		var b bytes.Buffer
		flags := uint32(clientFlags | vtmysql.CapabilityClientPluginAuthLenencClientData)
		_ = binary.Write(&b, binary.LittleEndian, flags)
		_ = binary.Write(&b, binary.LittleEndian, uint32(1<<24))
		b.WriteByte(45)
		b.Write(make([]byte, 23))
		b.WriteString(strings.ReplaceAll(user, "\x00", "") + "\x00")
		b.Write(lenEncBytes(scr))
		b.WriteString("demo\x00" + plugin + "\x00")
		if err := w.write(1, b.Bytes()); err != nil {
			t.Fatal(err)
		}
		for _, cont := range [][]byte{cont1, cont2, nil} {
			p, err := w.read(2 * time.Second)
			if err != nil || len(p.payload) == 0 || p.isErr() || p.payload[0] == 0x00 {
				break
			}
			if p.payload[0] == 0x01 && len(p.payload) == 2 && p.payload[1] == 0x03 {
				continue // fast authentication succeeded; OK follows
			}
			if cont == nil || w.write(p.seq+1, cont) != nil {
				break
			}
		}
		w.Close()
		fx.check(t)
	})
}

// lenEncBytes is b with a length-encoded length in front.
func lenEncBytes(b []byte) []byte {
	n := len(b)
	var out []byte
	switch {
	case n < 251:
		out = []byte{byte(n)}
	case n < 1<<16:
		out = []byte{0xfc, byte(n), byte(n >> 8)}
	default:
		out = []byte{0xfd, byte(n), byte(n >> 8), byte(n >> 16)}
	}
	return append(out, b...)
}

// FuzzComQuery sends the fuzzed text as a COM_QUERY, with or without
// CLIENT_MULTI_STATEMENTS: DP queries reach the engine, the rest
// go-mysql-server.
func FuzzComQuery(f *testing.F) {
	f.Fuzz(func(t *testing.T, multi bool, query string) {
		fx := frontForFuzzing(t)
		extra := uint32(0)
		if multi {
			extra = vtmysql.CapabilityClientMultiStatements | vtmysql.CapabilityClientMultiResults
		}
		w := fx.login(t, extra)
		defer w.Close()
		if err := w.command(append([]byte{vtmysql.ComQuery}, query...)); err != nil {
			t.Fatal(err)
		}
		w.readAnswer(5 * time.Second)
		w.Close()
		fx.check(t)
	})
}

// stmtCommands are the commands FuzzPreparedStatements chooses from.
var stmtCommands = []byte{vtmysql.ComStmtExecute, vtmysql.ComStmtSendLongData, vtmysql.ComStmtReset,
	vtmysql.ComStmtClose, vtmysql.ComStmtFetch, vtmysql.ComPrepare}

// FuzzPreparedStatements prepares the fuzzed statement, then sends two
// prepared-statement commands (chosen by kind1, kind2) whose bodies follow
// the statement id: COM_STMT_EXECUTE, SEND_LONG_DATA, RESET, CLOSE, FETCH,
// or another COM_STMT_PREPARE (body = its text).
func FuzzPreparedStatements(f *testing.F) {
	f.Fuzz(func(t *testing.T, query string, kind1 byte, body1 []byte, kind2 byte, body2 []byte) {
		fx := frontForFuzzing(t)
		w := fx.login(t, 0)
		defer w.Close()
		id := uint32(1)
		if err := w.command(append([]byte{vtmysql.ComPrepare}, query...)); err != nil {
			t.Fatal(err)
		}
		if p, err := w.read(5 * time.Second); err == nil && !p.isErr() && len(p.payload) >= 9 {
			id = binary.LittleEndian.Uint32(p.payload[1:])
			n := int(binary.LittleEndian.Uint16(p.payload[5:])) + int(binary.LittleEndian.Uint16(p.payload[7:]))
			for range n {
				if _, err := w.read(5 * time.Second); err != nil {
					break
				}
			}
		}
		for _, c := range []struct {
			kind byte
			body []byte
		}{{kind1, body1}, {kind2, body2}} {
			cmd := stmtCommands[int(c.kind)%len(stmtCommands)]
			payload := []byte{cmd}
			if cmd != vtmysql.ComPrepare {
				payload = binary.LittleEndian.AppendUint32(payload, id)
			}
			if err := w.command(append(payload, c.body...)); err != nil {
				break
			}
			switch cmd {
			case vtmysql.ComStmtSendLongData, vtmysql.ComStmtClose: // no answer
			default:
				w.readAnswer(5 * time.Second)
			}
		}
		w.Close()
		fx.check(t)
	})
}

// FuzzFieldList sends a COM_FIELD_LIST (table name, NUL, wildcard) with the
// fuzzed body.
func FuzzFieldList(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		fx := frontForFuzzing(t)
		w := fx.login(t, 0)
		defer w.Close()
		if err := w.command(append([]byte{vtmysql.ComFieldList}, body...)); err != nil {
			t.Fatal(err)
		}
		for { // column definitions up to an EOF or ERR
			p, err := w.read(5 * time.Second)
			if err != nil || len(p.payload) == 0 || p.isErr() || (p.payload[0] == 0xfe && len(p.payload) < 9) {
				break
			}
		}
		w.Close()
		fx.check(t)
	})
}

// FuzzChangeUser sends a COM_CHANGE_USER with the fuzzed body: dpproxy does
// not serve it, so the answer must be 1047 and the session must carry on.
func FuzzChangeUser(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		fx := frontForFuzzing(t)
		w := fx.login(t, 0)
		defer w.Close()
		if err := w.command(append([]byte{0x11}, body...)); err != nil {
			t.Fatal(err)
		}
		p, err := w.read(5 * time.Second)
		if code, _, _ := p.errCode(); err != nil || code != erUnknownCom {
			t.Fatalf("COM_CHANGE_USER: %v %v", p, err)
		}
		if v, err := w.queryValue("SELECT 1"); err != nil || v != "1" {
			t.Fatalf("session after COM_CHANGE_USER: %q %v", v, err)
		}
		w.Close()
		fx.check(t)
	})
}

// FuzzCommand sends any command packet after login.
func FuzzCommand(f *testing.F) {
	f.Fuzz(func(t *testing.T, payload []byte) {
		fx := frontForFuzzing(t)
		w := fx.login(t, 0)
		defer w.Close()
		if err := w.command(payload); err != nil {
			t.Fatal(err)
		}
		switch {
		case len(payload) > 0 && (payload[0] == vtmysql.ComStmtSendLongData || payload[0] == vtmysql.ComStmtClose):
			// no answer
		case len(payload) > 0 && payload[0] == comStatistics:
			_, _ = w.read(2 * time.Second) // one string packet
		default:
			w.readAnswer(2 * time.Second)
		}
		w.Close()
		fx.check(t)
	})
}
