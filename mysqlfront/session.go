package mysqlfront

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/vitess/go/mysql"
	"github.com/dolthub/vitess/go/sqltypes"
	querypb "github.com/dolthub/vitess/go/vt/proto/query"
	"github.com/dolthub/vitess/go/vt/sqlparser"

	"github.com/dpproxy/dpproxy/parser"
)

// Session statements the front answers itself, because go-mysql-server
// v0.20 gets them wrong for dpproxy's users:
//
//   - KILL [CONNECTION | QUERY] id: GMS requires a privilege nobody has
//     (and would then kill any connection). As in MySQL, a user may kill
//     its own connections and queries: BI tools cancel their running
//     queries this way (Connector/J's Statement.cancel, the mysql CLI's
//     Ctrl-C). KILL QUERY interrupts the running statement, DP queries
//     included (error 1317 for it); another user's connection is 1095 and
//     an unknown id 1094.
//   - SHOW [FULL] PROCESSLIST: the user's own connections, as MySQL shows
//     them to a user without the PROCESS privilege (GMS refuses); so does
//     information_schema.PROCESSLIST (processlist.go).
//   - SHOW GRANTS [FOR CURRENT_USER[()] | FOR own account]: the user's
//     grants (GMS requires access to the mysql schema).

// connInfo is what the front knows of a connection, for SHOW PROCESSLIST
// and KILL. Fields other than conn are guarded by Server.mu.
type connInfo struct {
	conn   *mysql.Conn
	since  time.Time // start of the current command, or of the connection
	query  string    // the running statement; "" when idle
	cancel context.CancelFunc
	killed bool // KILL QUERY interrupted the running statement
}

// begin records that c runs stmt and returns the context it runs under,
// which KILL QUERY cancels, and the function that ends it.
func (s *Server) begin(ctx context.Context, c *mysql.Conn, stmt string) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	ci := s.conns[c.ConnectionID]
	if ci != nil {
		ci.since, ci.query, ci.cancel, ci.killed = time.Now(), stmt, cancel, false
	}
	s.mu.Unlock()
	return ctx, func() {
		cancel()
		s.mu.Lock()
		if ci != nil && s.conns[c.ConnectionID] == ci {
			ci.since, ci.query, ci.cancel = time.Now(), "", nil
		}
		s.mu.Unlock()
	}
}

// wasKilled reports whether KILL QUERY interrupted c's running statement.
func (s *Server) wasKilled(c *mysql.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ci := s.conns[c.ConnectionID]
	return ci != nil && ci.killed
}

// frontStatement answers stmt if it is one of the front's own statements;
// handled is false otherwise.
func (i *interceptor) frontStatement(ctx context.Context, c *mysql.Conn, stmt string, emit func(*sqltypes.Result) error) (handled bool, err error) {
	switch parser.FirstWord(stmt) {
	case "kill":
		connection, id, err := parseKill(stmt, c.ConnectionID)
		if err == nil {
			err = i.srv.kill(c, connection, id)
		}
		if err != nil {
			return true, err
		}
		return true, emit(&sqltypes.Result{})
	case "show":
	default:
		return false, nil
	}
	tree, perr := sqlparser.Parse(stmt)
	if perr != nil {
		return false, nil
	}
	switch t := tree.(type) {
	case *sqlparser.Show:
		if strings.EqualFold(t.Type, "processlist") {
			return true, emit(i.srv.processList(c, t.Full))
		}
	case *sqlparser.ShowGrants:
		r, err := i.srv.grants(c, t)
		if err != nil {
			return true, err
		}
		return true, emit(r)
	}
	return false, nil
}

// parseKill reads KILL [CONNECTION | QUERY] {id | CONNECTION_ID()}, which
// vitess parses only with a number; connection is false for KILL QUERY.
func parseKill(stmt string, self uint32) (connection bool, id uint64, err error) {
	var words []string
	for _, t := range parser.Tokens(stmt, false) {
		w := t.Text
		if w == ";" || strings.HasPrefix(w, "/*!") {
			continue
		}
		words = append(words, strings.ToLower(w))
	}
	if len(words) < 2 || words[0] != "kill" {
		return false, 0, errKillSyntax(stmt)
	}
	words, connection = words[1:], true
	switch words[0] {
	case "query":
		connection, words = false, words[1:]
	case "connection":
		words = words[1:]
	}
	switch {
	case len(words) == 1 && words[0] != "" && strings.Trim(words[0], "0123456789") == "":
		if id, err = strconv.ParseUint(words[0], 10, 32); err != nil {
			return false, 0, mysql.NewSQLError(erNoSuchThread, "HY000", "Unknown thread id: %s", words[0])
		}
	case len(words) == 3 && words[0] == "connection_id" && words[1] == "(" && words[2] == ")":
		id = uint64(self)
	default:
		return false, 0, errKillSyntax(stmt)
	}
	return connection, id, nil
}

func errKillSyntax(stmt string) error {
	return syntaxError(stmt)
}

// kill runs KILL [QUERY] id for c's user.
func (s *Server) kill(c *mysql.Conn, connection bool, id uint64) error {
	s.mu.Lock()
	target := s.conns[uint32(id)]
	if target == nil {
		s.mu.Unlock()
		return mysql.NewSQLError(erNoSuchThread, "HY000", "Unknown thread id: %d", id)
	}
	if target.conn.User != c.User {
		s.mu.Unlock()
		return mysql.NewSQLError(erKillDenied, "HY000", "You are not owner of thread %d", id)
	}
	if target.cancel != nil && target.conn != c {
		target.killed = true
		target.cancel()
	}
	conn := target.conn
	s.mu.Unlock()
	s.engine.ProcessList.Kill(uint32(id))
	s.log.Info("KILL", "conn", c.ConnectionID, "user", c.User, "target", id, "connection", connection)
	if connection {
		conn.Close()
	}
	return nil
}

// grants answers SHOW GRANTS for the user's own account.
func (s *Server) grants(c *mysql.Conn, g *sqlparser.ShowGrants) (*sqltypes.Result, error) {
	if g.For != nil && !g.CurrentUser && !strings.EqualFold(g.For.Name, c.User) {
		return nil, mysql.NewSQLError(erDBAccessDenied, "42000", "Access denied for user '%s'@'%%' to database 'mysql'", c.User)
	}
	mdb := s.engine.Analyzer.Catalog.MySQLDb
	rd := mdb.Reader()
	defer rd.Close()
	u := mdb.GetUser(rd, c.User, "%", false)
	if u == nil {
		return nil, mysql.NewSQLError(erDBAccessDenied, "42000", "Access denied for user '%s'@'%%' to database 'mysql'", c.User)
	}
	who := fmt.Sprintf("`%s`@`%s`", u.User, u.Host)
	res := &sqltypes.Result{Fields: []*querypb.Field{textField(fmt.Sprintf("Grants for %s@%s", u.User, u.Host), sqltypes.VarChar)}}
	add := func(s string) { res.Rows = append(res.Rows, []sqltypes.Value{sqltypes.NewVarChar(s)}) }
	add(fmt.Sprintf("GRANT %s ON *.* TO %s", privList(u.PrivilegeSet.ToSlice()), who))
	dbs := u.PrivilegeSet.GetDatabases()
	sort.Slice(dbs, func(a, b int) bool { return dbs[a].Name() < dbs[b].Name() })
	for _, d := range dbs {
		if p := d.ToSlice(); len(p) > 0 {
			add(fmt.Sprintf("GRANT %s ON `%s`.* TO %s", privList(p), d.Name(), who))
		}
		tables := d.GetTables()
		sort.Slice(tables, func(a, b int) bool { return tables[a].Name() < tables[b].Name() })
		for _, t := range tables {
			if p := t.ToSlice(); len(p) > 0 {
				add(fmt.Sprintf("GRANT %s ON `%s`.`%s` TO %s", privList(p), d.Name(), t.Name(), who))
			}
		}
	}
	return res, nil
}

func privList(ps []sql.PrivilegeType) string {
	if len(ps) == 0 {
		return "USAGE"
	}
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = strings.ToUpper(p.String())
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func textField(name string, t querypb.Type) *querypb.Field {
	f := &querypb.Field{Name: name, OrgName: name, Type: t}
	switch t {
	case sqltypes.VarChar:
		f.Charset = charsetUTF8MB4
		f.ColumnLength = 1024
	default:
		f.Charset = charsetBinary
		f.ColumnLength = 21
		f.Flags = uint32(querypb.MySqlFlag_NUM_FLAG)
	}
	return f
}
