package mysqlfront

import (
	"context"
	"errors"
	"regexp"
	"strings"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/vitess/go/mysql"

	"github.com/dpproxy/dpproxy/parser"
)

// MySQL error codes the front sends that vitess does not name.
const (
	erDBAccessDenied   = 1044 // ER_DBACCESS_DENIED_ERROR, 42000
	erBadDB            = 1049 // ER_BAD_DB_ERROR, 42000
	erNoSuchThread     = 1094 // ER_NO_SUCH_THREAD, HY000
	erKillDenied       = 1095 // ER_KILL_DENIED_ERROR, HY000
	erCommandDenied    = 1142 // ER_TABLEACCESS_DENIED_ERROR, 42000 (audit.go names it erTableAccessDenied too)
	erUnknownSystemVar = 1193 // ER_UNKNOWN_SYSTEM_VARIABLE, HY000
	erWrongValueForVar = 1231 // ER_WRONG_VALUE_FOR_VAR, 42000
	erReadOnlyMode     = 1290 // ER_OPTION_PREVENTS_STATEMENT, HY000
	erSPDoesNotExist   = 1305 // ER_SP_DOES_NOT_EXIST, 42000
	erQueryInterrupted = 1317 // ER_QUERY_INTERRUPTED, 70100
)

// mysqlStates are the SQLSTATEs MySQL sends with the codes go-mysql-server
// reports under the generic HY000.
var mysqlStates = map[int]string{
	mysql.ERNoSuchTable:           "42S02",
	mysql.ERBadFieldError:         "42S22",
	mysql.ERParseError:            "42000",
	erBadDB:                       "42000",
	erDBAccessDenied:              "42000",
	erCommandDenied:               "42000",
	mysql.ERAccessDeniedError:     "28000",
	mysql.ERNotSupportedYet:       "42000",
	erSPDoesNotExist:              "42000",
	erWrongValueForVar:            "42000",
	mysql.ERSpecifiedAccessDenied: "42000",
}

var (
	reGMSSyntax        = regexp.MustCompile(`^syntax error at position \d+`)
	reGMSTableNotFound = regexp.MustCompile(`^table not found: (.+)$`)
	reGMSDBDenied      = regexp.MustCompile(`^Access denied for user '(.*)'@'(.*)' to database '(.*)'$`)
	reGMSNoColumn      = regexp.MustCompile(`^column "(.+)" could not be found in any table in scope$`)
	reGMSNoTableColumn = regexp.MustCompile(`^table "(.+)" does not have column "(.+)"$`)
	reGMSCommandDenied = regexp.MustCompile(`^command denied to user '(.*)'@'(.*)'$`)
	reGMSNoFunction    = regexp.MustCompile(`^function: '(.+)' not found$`)
	reGMSUnknownVar    = regexp.MustCompile(`^Unknown system variable '@*(.+)'$`)
	reGMSWrongValue    = regexp.MustCompile(`^Variable '(.+)' can't be set to the value of '(.*)'$`)
)

// gmsError turns an error go-mysql-server returned for stmt into the one
// MySQL would send: code, SQLSTATE and message shape (clients such as
// Superset and Metabase parse the messages). db is the session's current
// database; databases lists the databases that exist.
func gmsError(err error, stmt, db string, databases func() []string) error {
	if err == nil {
		return nil
	}
	var se *mysql.SQLError
	if !errors.As(err, &se) {
		if errors.Is(err, context.Canceled) {
			return interrupted()
		}
		se = sql.CastSQLError(err)
	}
	code, msg := se.Num, se.Message
	switch code {
	case mysql.ERUnknownError:
		switch {
		case reGMSSyntax.MatchString(msg):
			return syntaxError(stmt)
		case reGMSDBDenied.MatchString(msg):
			m := reGMSDBDenied.FindStringSubmatch(msg)
			for _, d := range databases() {
				if strings.EqualFold(d, m[3]) {
					return mysql.NewSQLError(erDBAccessDenied, "42000", "Access denied for user '%s'@'%s' to database '%s'", m[1], m[2], m[3])
				}
			}
			return mysql.NewSQLError(erBadDB, "42000", "Unknown database '%s'", m[3])
		case reGMSNoColumn.MatchString(msg):
			m := reGMSNoColumn.FindStringSubmatch(msg)
			return mysql.NewSQLError(mysql.ERBadFieldError, "42S22", "Unknown column '%s' in 'field list'", m[1])
		case reGMSNoTableColumn.MatchString(msg):
			m := reGMSNoTableColumn.FindStringSubmatch(msg)
			return mysql.NewSQLError(mysql.ERBadFieldError, "42S22", "Unknown column '%s.%s' in 'field list'", m[1], m[2])
		case reGMSCommandDenied.MatchString(msg):
			m := reGMSCommandDenied.FindStringSubmatch(msg)
			verb := strings.ToUpper(parser.FirstWord(stmt))
			if verb == "" {
				verb = "This"
			}
			return mysql.NewSQLError(erCommandDenied, "42000", "%s command denied to user '%s'@'%s'", verb, m[1], m[2])
		case reGMSNoFunction.MatchString(msg):
			m := reGMSNoFunction.FindStringSubmatch(msg)
			return mysql.NewSQLError(erSPDoesNotExist, "42000", "FUNCTION %s.%s does not exist", db, m[1])
		case reGMSUnknownVar.MatchString(msg):
			m := reGMSUnknownVar.FindStringSubmatch(msg)
			return mysql.NewSQLError(erUnknownSystemVar, "HY000", "Unknown system variable '%s'", m[1])
		case reGMSWrongValue.MatchString(msg):
			m := reGMSWrongValue.FindStringSubmatch(msg)
			return mysql.NewSQLError(erWrongValueForVar, "42000", "Variable '%s' can't be set to the value of '%s'", m[1], m[2])
		case sql.ErrReadOnly.Is(err) || msg == sql.ErrReadOnly.New().Error():
			return mysql.NewSQLError(erReadOnlyMode, "HY000", "The MySQL server is running with the --read-only option so it cannot execute this statement")
		case strings.Contains(msg, "context canceled") || strings.Contains(msg, "query was interrupted"):
			return interrupted()
		}
	case mysql.ERNoSuchTable:
		if m := reGMSTableNotFound.FindStringSubmatch(msg); m != nil {
			if db == "" {
				db = "(none)"
			}
			return mysql.NewSQLError(mysql.ERNoSuchTable, "42S02", "Table '%s.%s' doesn't exist", db, m[1])
		}
	}
	if st, ok := mysqlStates[code]; ok && se.State != st {
		return mysql.NewSQLError(code, st, "%s", msg)
	}
	return se
}

func interrupted() error {
	return mysql.NewSQLError(erQueryInterrupted, "70100", "Query execution was interrupted")
}

// syntaxError is MySQL's 1064 for stmt (parser.SyntaxError: the parser's
// lexer and message, so that the front and the parser agree); "near ”"
// for a statement the grammar accepts but the front rejects.
func syntaxError(stmt string) error {
	e := parser.SyntaxError(stmt)
	if e == nil {
		e = parser.Errorf(parser.CodeParseError, "You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near '' at line 1")
	}
	return mysql.NewSQLError(e.Code, e.SQLState, "%s", e.Message)
}
