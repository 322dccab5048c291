package mysqlfront

import (
	"context"
	"sort"
	"time"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/vitess/go/mysql"
	"github.com/dolthub/vitess/go/sqltypes"
	querypb "github.com/dolthub/vitess/go/vt/proto/query"
)

// Sessions are private. Every listing of sessions a client can read shows
// only the sessions of its own user, whatever the role, as MySQL shows them
// to a user without the PROCESS privilege (no dpproxy user has it): SHOW
// [FULL] PROCESSLIST, answered by the front (session.go), and
// information_schema.PROCESSLIST, which go-mysql-server fills from the
// query context's process list — newContext gives every query context a
// process list that lists the asking user's sessions from the same rows.
// go-mysql-server v0.20 has no performance_schema or sys schema, and its
// other information_schema tables list no sessions.

// sessionRow is one connection as the front sees it.
type sessionRow struct {
	id         uint32
	user, host string
	db         string // "" for none
	query      string // the running statement; "" when idle
	since      time.Time
}

// ownSessions lists the authenticated connections of user, by id.
func (s *Server) ownSessions(user string) []sessionRow {
	if user == "" {
		return nil
	}
	var rows []sessionRow
	s.mu.Lock()
	for id, ci := range s.conns {
		if ci.conn.User != user {
			continue
		}
		r := sessionRow{id: id, user: user, host: ci.conn.RemoteAddr().String(), query: ci.query, since: ci.since}
		if fc := frontConnOf(ci.conn); fc != nil {
			if sess := fc.session.Load(); sess != nil {
				r.db = sess.s.GetCurrentDatabase()
			}
		}
		rows = append(rows, r)
	}
	s.mu.Unlock()
	sort.Slice(rows, func(a, b int) bool { return rows[a].id < rows[b].id })
	return rows
}

// processList answers SHOW [FULL] PROCESSLIST for c's user.
func (s *Server) processList(c *mysql.Conn, full bool) *sqltypes.Result {
	res := &sqltypes.Result{Fields: []*querypb.Field{
		textField("Id", sqltypes.Uint64), textField("User", sqltypes.VarChar), textField("Host", sqltypes.VarChar),
		textField("db", sqltypes.VarChar), textField("Command", sqltypes.VarChar), textField("Time", sqltypes.Int32),
		textField("State", sqltypes.VarChar), textField("Info", sqltypes.VarChar),
	}}
	for _, r := range s.ownSessions(c.User) {
		cmd, info, state := "Sleep", sqltypes.NULL, sqltypes.NewVarChar("")
		if r.query != "" {
			q := r.query
			if !full && len(q) > 100 {
				q = q[:100]
			}
			cmd, info, state = "Query", sqltypes.NewVarChar(q), sqltypes.NewVarChar("executing")
		}
		dbv := sqltypes.NULL
		if r.db != "" {
			dbv = sqltypes.NewVarChar(r.db)
		}
		res.Rows = append(res.Rows, []sqltypes.Value{
			sqltypes.NewUint64(uint64(r.id)), sqltypes.NewVarChar(r.user), sqltypes.NewVarChar(r.host),
			dbv, sqltypes.NewVarChar(cmd), sqltypes.NewInt32(int32(time.Since(r.since) / time.Second)), state, info,
		})
	}
	return res
}

// newContext is the GMS context factory: GMS's own, with a process list
// that shows the session's user only their own sessions.
func (s *Server) newContext(ctx context.Context, opts ...sql.ContextOption) *sql.Context {
	c := sql.NewContext(ctx, opts...)
	if _, done := c.ProcessList.(ownProcessList); !done {
		c.ProcessList = ownProcessList{ProcessList: c.ProcessList, srv: s, user: c.Session.Client().User}
	}
	return c
}

// ownProcessList is a process list whose listing is the user's own
// sessions; everything else goes to GMS's.
type ownProcessList struct {
	sql.ProcessList
	srv  *Server
	user string
}

func (p ownProcessList) Processes() []sql.Process {
	rows := p.srv.ownSessions(p.user)
	out := make([]sql.Process, len(rows))
	for i, r := range rows {
		cmd := sql.ProcessCommandSleep
		if r.query != "" {
			cmd = sql.ProcessCommandQuery
		}
		out[i] = sql.Process{Connection: r.id, Host: r.host, Database: r.db, User: r.user, Command: cmd, StartedAt: r.since, Query: r.query}
	}
	return out
}
