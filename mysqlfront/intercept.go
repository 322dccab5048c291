package mysqlfront

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/dolthub/go-mysql-server/server"
	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/vitess/go/mysql"
	"github.com/dolthub/vitess/go/sqltypes"
	querypb "github.com/dolthub/vitess/go/vt/proto/query"
	"github.com/dolthub/vitess/go/vt/sqlparser"

	"github.com/dpproxy/dpproxy/engine"
	"github.com/dpproxy/dpproxy/parser"
)

// interceptor is the server.Interceptor that sends statements touching
// protected tables to the Backend and everything else down the chain to GMS.
// Every method recovers panics (its own, the backend's and GMS's) into error
// 3902, so that bad input never takes the server down.
type interceptor struct {
	backend Backend
	log     *slog.Logger
	srv     *Server
	// sm is GMS's session manager; it is set once, before the server starts.
	sm *server.SessionManager
}

var _ server.Interceptor = (*interceptor)(nil)

func (i *interceptor) Priority() int { return 0 }

// connState is the per-connection state of the interceptor, kept in
// mysql.Conn.ClientData (which neither vitess nor GMS uses). A connection's
// commands are handled one at a time, so it needs no lock.
//
// vitess sends exactly one result set per ComMultiQuery call (it writes the
// column definitions only for the first result a call passes to its
// callback), but a batch of n intercepted statements is answered by one
// Backend.Answer call. The results of statements 2..n wait here, and the
// following ComMultiQuery calls — vitess calls again at once with the
// remainder we returned — send them one per call without asking the backend.
type connState struct {
	next    string // the remainder the next ComMultiQuery call carries when pending is non-empty
	pending []pendingResult
}

type pendingResult struct {
	res  *engine.Result
	rest string // the remainder to return after sending res
}

func stateOf(c *mysql.Conn) *connState {
	st, _ := c.ClientData.(*connState)
	if st == nil {
		st = &connState{}
		c.ClientData = st
	}
	return st
}

func (st *connState) reset() {
	st.next = ""
	st.pending = nil
}

// take pops the next pending result if query is the remainder it belongs to;
// otherwise it drops stale pending results.
func (st *connState) take(query string) (pendingResult, bool) {
	if len(st.pending) == 0 || query != st.next {
		st.reset()
		return pendingResult{}, false
	}
	p := st.pending[0]
	st.pending = st.pending[1:]
	st.next = p.rest
	if len(st.pending) == 0 {
		st.reset()
	}
	return p, true
}

// Query handles COM_QUERY when the client did not enable multi-statements:
// the text is one statement.
func (i *interceptor) Query(ctx context.Context, chain server.Chain, c *mysql.Conn, query string, callback func(res *sqltypes.Result, more bool) error) (err error) {
	defer i.recoverPanic(c, &err)
	stateOf(c).reset()
	ctx, done := i.begin(ctx, c, query)
	defer done()
	if handled, err := i.frontStatement(ctx, c, query, func(r *sqltypes.Result) error { return callback(r, false) }); handled {
		return err
	}
	text := i.backendText(ctx, c, query)
	if isFieldListQuery(query) || !i.backend.Intercepts(text) {
		if err := guard(query); err != nil {
			return err
		}
		return i.gmsError(c, query, chain.ComQuery(ctx, c, query, callback))
	}
	if stmts := splitStatements(text); len(stmts) > 1 {
		// Without CLIENT_MULTI_STATEMENTS the text is one statement, and
		// MySQL reports the second as a syntax error.
		return i.clientError(c, parser.Errorf(parser.CodeParseError, "You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near '%s' at line %d", stmts[1], 1+strings.Count(text[:strings.Index(text, stmts[1])], "\n")))
	}
	results, err := i.answer(ctx, c, []string{strings.TrimSpace(text)})
	if err != nil {
		return err
	}
	return sendResult(results[0], func(r *sqltypes.Result) error { return callback(r, false) })
}

// ParsedQuery is part of server.Interceptor; GMS's interceptor chain never
// calls it (its Chain has no parsed-query path), so it behaves like Query.
func (i *interceptor) ParsedQuery(chain server.Chain, c *mysql.Conn, query string, _ sqlparser.Statement, callback func(res *sqltypes.Result, more bool) error) error {
	return i.Query(context.Background(), chain, c, query, callback)
}

// MultiQuery handles COM_QUERY with CLIENT_MULTI_STATEMENTS: it answers the
// first statement of query (or the run of intercepted statements at its
// front, as one batch) and returns the rest of the text, which vitess hands
// back until it is empty.
func (i *interceptor) MultiQuery(ctx context.Context, chain server.Chain, c *mysql.Conn, query string, callback func(res *sqltypes.Result, more bool) error) (rest string, err error) {
	defer i.recoverPanicMulti(c, &rest, &err)
	st := stateOf(c)
	if p, ok := st.take(query); ok {
		if err := sendResult(p.res, func(r *sqltypes.Result) error { return callback(r, p.rest != "") }); err != nil {
			st.reset()
			return "", err
		}
		return p.rest, nil
	}

	stmts := splitStatements(query)
	if len(stmts) == 0 {
		// Nothing but blanks, semicolons or comments: GMS reports it.
		rem, err := chain.ComMultiQuery(ctx, c, query, callback)
		return rem, i.gmsError(c, query, err)
	}
	ctx, done := i.begin(ctx, c, stmts[0])
	defer done()
	after := joinStatements(stmts[1:])
	if handled, err := i.frontStatement(ctx, c, stmts[0], func(r *sqltypes.Result) error { return callback(r, after != "") }); handled {
		if err != nil {
			return "", err
		}
		return after, nil
	}
	texts := make([]string, len(stmts))
	for k, st := range stmts {
		texts[k] = i.backendText(ctx, c, st)
	}
	if !i.backend.Intercepts(texts[0]) {
		if err := guard(stmts[0]); err != nil {
			return "", err
		}
		rem, err := chain.ComMultiQuery(ctx, c, stmts[0], func(res *sqltypes.Result, more bool) error {
			return callback(res, more || after != "")
		})
		if err != nil {
			// MySQL stops a multi-statement request at its first error; the
			// client reads nothing after an error packet.
			return "", i.gmsError(c, stmts[0], err)
		}
		return joinStatements(nonEmpty(rem, after)), nil
	}

	n := 1
	for n < len(stmts) && i.backend.Intercepts(texts[n]) {
		n++
	}
	results, err := i.answer(ctx, c, texts[:n])
	if err != nil {
		return "", err
	}
	for k := 1; k < n; k++ {
		st.pending = append(st.pending, pendingResult{res: results[k], rest: joinStatements(stmts[k+1:])})
	}
	rest = joinStatements(stmts[1:])
	if len(st.pending) > 0 {
		st.next = rest
	}
	if err := sendResult(results[0], func(r *sqltypes.Result) error { return callback(r, rest != "") }); err != nil {
		st.reset()
		return "", err
	}
	return rest, nil
}

// Prepare handles COM_STMT_PREPARE. vitess has already parsed the statement
// and counted its parameters. An intercepted statement is not prepared
// anywhere: the response announces no columns, and each execution sends its
// own column definitions.
func (i *interceptor) Prepare(ctx context.Context, chain server.Chain, c *mysql.Conn, query string, prepare *mysql.PrepareData) (fields []*querypb.Field, err error) {
	defer i.recoverPanic(c, &err)
	stmt := query
	if prepare != nil && prepare.PrepareStmt != "" {
		stmt = prepare.PrepareStmt
	}
	ctx, done := i.begin(ctx, c, stmt)
	defer done()
	text := i.backendText(ctx, c, stmt)
	if !i.backend.Intercepts(text) {
		if err := guard(query); err != nil {
			return nil, err
		}
		fields, err := chain.ComPrepare(ctx, c, query, prepare)
		return fields, i.gmsError(c, stmt, err)
	}
	if prepare != nil {
		if n := len(placeholders(text)); n != int(prepare.ParamsCount) {
			return nil, mysql.NewSQLError(parser.CodeParseError, "42000", "cannot locate the %d parameter markers of the prepared statement", prepare.ParamsCount)
		}
	}
	return nil, nil
}

// StmtExecute handles COM_STMT_EXECUTE: for an intercepted statement the
// bound parameters become SQL literals in its text, which the backend
// answers like any query.
func (i *interceptor) StmtExecute(ctx context.Context, chain server.Chain, c *mysql.Conn, prepare *mysql.PrepareData, callback func(*sqltypes.Result) error) (err error) {
	defer i.recoverPanic(c, &err)
	ctx, done := i.begin(ctx, c, prepare.PrepareStmt)
	defer done()
	text := i.backendText(ctx, c, prepare.PrepareStmt)
	if !i.backend.Intercepts(text) {
		if err := guard(prepare.PrepareStmt); err != nil {
			return err
		}
		return i.gmsError(c, prepare.PrepareStmt, chain.ComStmtExecute(ctx, c, prepare, callback))
	}
	text, err = bindParams(text, prepare.ParamsCount, prepare.BindVars)
	if err != nil {
		return err
	}
	results, err := i.answer(ctx, c, []string{strings.TrimSpace(text)})
	if err != nil {
		return err
	}
	return sendResult(results[0], callback)
}

// answer calls the backend and checks that its results can be sent; errors
// come back as *mysql.SQLError ready for the client.
func (i *interceptor) answer(ctx context.Context, c *mysql.Conn, stmts []string) ([]*engine.Result, error) {
	results, err := i.backend.Answer(ctx, i.session(ctx, c), stmts)
	if err != nil {
		if ctx.Err() != nil && i.srv != nil && i.srv.wasKilled(c) {
			i.log.Info("statement interrupted by KILL QUERY", "conn", c.ConnectionID, "user", c.User)
			return nil, interrupted()
		}
		return nil, i.clientError(c, err)
	}
	if len(results) != len(stmts) {
		i.log.Error("backend returned the wrong number of results; nothing was released",
			"conn", c.ConnectionID, "user", c.User, "statements", len(stmts), "results", len(results))
		return nil, internalError()
	}
	for _, r := range results {
		if err := checkResult(r); err != nil {
			i.log.Error("backend result cannot be sent; nothing was released", "conn", c.ConnectionID, "user", c.User, "err", err)
			return nil, internalError()
		}
	}
	return results, nil
}

// session describes the connection to the backend. UserVar reads the GMS
// session's user variables (those SET @name = ... stored), normalised:
// numbers (integers, DECIMAL, DOUBLE) as float64, strings as string, NULL as
// nil with ok = true, dates and times as "2006-01-02 15:04:05.999999"
// strings, anything else as its string form. SelectLimit reads the
// session's sql_select_limit (see selectLimit).
func (i *interceptor) session(ctx context.Context, c *mysql.Conn) *engine.Session {
	s := &engine.Session{ConnID: c.ConnectionID, User: c.User}
	sm := i.sm
	if sm == nil {
		return s
	}
	var (
		once sync.Once
		sctx *sql.Context
	)
	gms := func() *sql.Context {
		once.Do(func() {
			var err error
			if sctx, err = sm.NewContextWithQuery(ctx, c, ""); err != nil {
				i.log.Warn("reading session variables", "conn", c.ConnectionID, "err", err)
				sctx = nil
			}
		})
		return sctx
	}
	s.SelectLimit = func() (uint64, bool) {
		if sctx := gms(); sctx != nil {
			return selectLimit(sctx)
		}
		return 0, false
	}
	s.UserVar = func(name string) (any, bool) {
		sctx := gms()
		if sctx == nil {
			return nil, false
		}
		name = strings.ToLower(strings.TrimPrefix(name, "@"))
		typ, val, err := sctx.GetUserVariable(sctx, name)
		if err != nil || typ == nil {
			return nil, false
		}
		return normaliseUserVar(val), true
	}
	return s
}

// selectLimit reads the session's sql_select_limit: ok is false when there
// is no limit. That is the default (GMS's 2147483647 stands for MySQL's
// 18446744073709551615), and also a negative value: GMS keeps the variable
// as a signed 64-bit integer, so MySQL's default written out (SET
// sql_select_limit = 18446744073709551615), or any value from 2^63 on,
// reads back negative.
func selectLimit(sctx *sql.Context) (uint64, bool) {
	isDefault, v := sql.HasDefaultValue(sctx, sctx.Session, "sql_select_limit")
	if isDefault {
		return 0, false
	}
	var n int64
	switch v := v.(type) {
	case int64:
		n = v
	case int32:
		n = int64(v)
	case int:
		n = int64(v)
	case uint64:
		return v, true
	case uint32:
		return uint64(v), true
	default:
		return 0, false
	}
	if n < 0 {
		return 0, false
	}
	return uint64(n), true
}

func normaliseUserVar(v any) any {
	switch v := v.(type) {
	case nil:
		return nil
	case float64:
		return v
	case float32:
		return float64(v)
	case int:
		return float64(v)
	case int8:
		return float64(v)
	case int16:
		return float64(v)
	case int32:
		return float64(v)
	case int64:
		return float64(v)
	case uint:
		return float64(v)
	case uint8:
		return float64(v)
	case uint16:
		return float64(v)
	case uint32:
		return float64(v)
	case uint64:
		return float64(v)
	case bool:
		if v {
			return float64(1)
		}
		return float64(0)
	case string:
		return v
	case []byte:
		return string(v)
	case time.Time:
		return v.Format("2006-01-02 15:04:05.999999")
	case interface{ Float64() (float64, bool) }: // decimal.Decimal, what GMS stores for SET @x = 0.2
		f, _ := v.Float64()
		return f
	case fmt.Stringer:
		return v.String()
	}
	return fmt.Sprint(v)
}

// clientError maps a backend error to the protocol error the client sees.
func (i *interceptor) clientError(c *mysql.Conn, err error) error {
	var pe *parser.Error
	if errors.As(err, &pe) && pe.Code > 0 {
		state := pe.SQLState
		if state == "" {
			state = "HY000"
		}
		i.log.Debug("backend refused", "conn", c.ConnectionID, "user", c.User, "code", pe.Code)
		return mysql.NewSQLError(pe.Code, state, "%s", pe.Message)
	}
	i.log.Error("backend failed; nothing was released", "conn", c.ConnectionID, "user", c.User, "err", err)
	return internalError()
}

func internalError() error {
	return mysql.NewSQLError(parser.CodeDPInternal, "HY000", "internal error; nothing was released")
}

func (i *interceptor) recoverPanic(c *mysql.Conn, err *error) {
	if r := recover(); r != nil {
		i.logPanic(c, r)
		*err = internalError()
	}
}

func (i *interceptor) recoverPanicMulti(c *mysql.Conn, rest *string, err *error) {
	if r := recover(); r != nil {
		stateOf(c).reset()
		i.logPanic(c, r)
		*rest, *err = "", internalError()
	}
}

func (i *interceptor) logPanic(c *mysql.Conn, r any) {
	i.log.Error("panic while handling a statement; nothing was released",
		"conn", c.ConnectionID, "user", c.User, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
}

// splitStatements splits a multi-statement text at its top-level semicolons
// (vitess's tokenizer: quotes and comments are respected) and drops the
// statements that are empty or only comments. A text the tokenizer rejects
// (e.g. an unterminated quote) stays one statement, so that whoever answers
// it reports the syntax error.
func splitStatements(text string) []string {
	pieces, err := sqlparser.SplitStatementToPieces(text)
	if err != nil {
		if isBlank(text) {
			return nil
		}
		return []string{strings.TrimSpace(text)}
	}
	out := pieces[:0]
	for _, p := range pieces {
		if !isBlank(p) {
			out = append(out, strings.TrimSpace(p))
		}
	}
	return out
}

// isBlank reports whether s has no tokens but comments.
func isBlank(s string) bool {
	if strings.TrimSpace(s) == "" {
		return true
	}
	tok := sqlparser.NewStringTokenizer(s)
	for {
		t, _ := tok.Scan()
		switch t {
		case sqlparser.COMMENT:
			continue
		case 0, eofToken:
			return tok.LastError == nil
		default:
			return false
		}
	}
}

// eofToken is what vitess's tokenizer returns at the end of its input.
const eofToken = 0x100

func joinStatements(stmts []string) string { return strings.Join(stmts, ";") }

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// fieldListQuery is the query vitess runs through ComQuery to answer
// COM_FIELD_LIST; GMS answers it with the columns and, having no rows, none.
var fieldListQuery = regexp.MustCompile("^SELECT \\* FROM `(?:[^`]|``)+` LIMIT 0;$")

func isFieldListQuery(q string) bool { return fieldListQuery.MatchString(q) }

// guard refuses, before GMS sees them, the statements that GMS v0.20.0 would
// run without the privilege checks MySQL makes, and those that would bypass
// the backend:
//   - SQL-level PREPARE/EXECUTE (1235): GMS would prepare and run the text
//     itself, over the empty schema-only tables, out of the backend's sight;
//   - SET GLOBAL/PERSIST/PERSIST_ONLY and SET @@global.x (1227): GMS checks no
//     privilege for them, and its system variables are process-wide;
//   - file access — LOAD_FILE(), SELECT ... INTO OUTFILE/DUMPFILE, LOAD DATA
//     (1227): GMS checks no FILE privilege, and the proxy's files include
//     the protected data. (secure_file_priv also points nowhere; see New.)
//   - text vitess's parser panics on, and variable names GMS cannot
//     resolve without panicking (1064; see scopableVariable).
//
// It works on vitess's tokens, so quoted strings and comments do not count,
// while MySQL's executable /*! ... */ comments do.
func guard(stmt string) error {
	tok := sqlparser.NewStringTokenizer(stmt)
	first, isSet, global := true, false, false
scan:
	for {
		t, v := tok.Scan()
		switch t {
		case 0, eofToken, sqlparser.LEX_ERROR:
			break scan
		case sqlparser.COMMENT:
			continue
		}
		if first {
			first = false
			switch t {
			case sqlparser.PREPARE, sqlparser.EXECUTE:
				return errSQLPrepare()
			case sqlparser.LOAD:
				return errFileAccess()
			case sqlparser.SET:
				isSet = true
			}
		}
		switch t {
		case sqlparser.OUTFILE, sqlparser.DUMPFILE, sqlparser.INFILE:
			return errFileAccess()
		case sqlparser.GLOBAL, sqlparser.PERSIST, sqlparser.PERSIST_ONLY:
			global = true
		case sqlparser.ID:
			if len(v) > 0 && v[0] == '@' && !scopableVariable(string(v)) {
				return syntaxError(stmt)
			}
			switch id := strings.ToLower(string(v)); {
			case id == "load_file":
				return errFileAccess()
			case strings.HasPrefix(id, "@@global"), strings.HasPrefix(id, "@@persist"):
				global = true
			}
		}
	}
	// go-mysql-server parses the statement with vitess, whose parser
	// panics on some malformed text (SELECT''); MySQL calls it a syntax error.
	if parser.ParserFailed(stmt) {
		return syntaxError(stmt)
	}
	if isSet {
		if err := checkPrivacyOptions(stmt); err != nil {
			return err
		}
	}
	if isSet && global {
		ast, err := sqlparser.Parse(stmt)
		set, ok := ast.(*sqlparser.Set)
		if err != nil || !ok {
			return errSetGlobal()
		}
		for _, e := range set.Exprs {
			switch e.Scope {
			case sqlparser.SetScope_Global, sqlparser.SetScope_Persist, sqlparser.SetScope_PersistOnly:
				return errSetGlobal()
			}
		}
	}
	return nil
}

// scopableVariable reports whether go-mysql-server can resolve a variable
// token (@x, @@x, @@global.x, ...): vitess's VarScope, which it calls,
// panics on an empty or lone-quote name (SELECT @@, SELECT @@global.,
// SELECT @@'); MySQL calls those syntax errors.
func scopableVariable(tok string) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	_, _, _, _ = sqlparser.VarScope(tok)
	_, _, _, _ = sqlparser.VarScope(strings.Split(tok, ".")...)
	return true
}

func errSQLPrepare() error {
	return mysql.NewSQLError(parser.CodeNotSupported, "42000",
		"dpproxy does not support SQL-level PREPARE/EXECUTE; send the query itself or use protocol-level prepared statements")
}

func errSetGlobal() error {
	return mysql.NewSQLError(mysql.ERSpecifiedAccessDenied, mysql.SSClientError,
		"Access denied; you need (at least one of) the SUPER or SYSTEM_VARIABLES_ADMIN privilege(s) for this operation")
}

func errFileAccess() error {
	return mysql.NewSQLError(mysql.ERSpecifiedAccessDenied, mysql.SSClientError,
		"Access denied; you need (at least one of) the FILE privilege(s) for this operation")
}

// begin records the running statement (SHOW PROCESSLIST, KILL QUERY).
func (i *interceptor) begin(ctx context.Context, c *mysql.Conn, stmt string) (context.Context, func()) {
	if i.srv == nil {
		return ctx, func() {}
	}
	return i.srv.begin(ctx, c, stmt)
}

// currentDB is the session's current database ("" for none).
func (i *interceptor) currentDB(c *mysql.Conn) string {
	if i.sm == nil {
		return ""
	}
	return i.sm.GetCurrentDB(c)
}

// gmsError makes an error of go-mysql-server MySQL-shaped (see errors.go).
func (i *interceptor) gmsError(c *mysql.Conn, stmt string, err error) error {
	if err == nil {
		return nil
	}
	if i.srv != nil && i.srv.wasKilled(c) {
		return interrupted()
	}
	return gmsError(err, stmt, i.currentDB(c), i.databases)
}

func (i *interceptor) databases() []string {
	if i.srv == nil {
		return nil
	}
	ctx := sql.NewEmptyContext()
	names := []string{"mysql"} // GMS's user tables: they exist, but nobody may read them
	for _, db := range i.srv.engine.Analyzer.Catalog.AllDatabases(ctx) {
		names = append(names, db.Name())
	}
	return names
}

// backendText is stmt as the backend must read it: under a session
// sql_mode with ANSI_QUOTES or NO_BACKSLASH_ESCAPES, quotes are rewritten
// to MySQL's default reading (see parser.NormaliseQuotes), so that the backend
// recognises "adult" as the table it is.
func (i *interceptor) backendText(ctx context.Context, c *mysql.Conn, stmt string) string {
	if !strings.ContainsAny(stmt, "\"\\") || i.sm == nil {
		return stmt
	}
	sctx, err := i.sm.NewContextWithQuery(ctx, c, "")
	if err != nil {
		return stmt
	}
	v, err := sctx.GetSessionVariable(sctx, "sql_mode")
	if err != nil {
		return stmt
	}
	mode := strings.ToUpper(fmt.Sprint(v))
	return parser.NormaliseQuotes(stmt, strings.Contains(mode, "ANSI_QUOTES"), strings.Contains(mode, "NO_BACKSLASH_ESCAPES"))
}
