package parser

import "fmt"

// MySQL error numbers and SQLSTATEs that dpproxy returns. The MySQL front
// maps *Error values to protocol errors unchanged.
const (
	CodeParseError     = 1064 // ER_PARSE_ERROR, SQLSTATE 42000
	CodeNoSuchTable    = 1146 // ER_NO_SUCH_TABLE, 42S02
	CodeBadField       = 1054 // ER_BAD_FIELD_ERROR, 42S22
	CodeNonUniqField   = 1052 // ER_NON_UNIQ_ERROR, 23000: an unqualified column of two joined tables
	CodeNonUniqTable   = 1066 // ER_NONUNIQ_TABLE, 42000: two joined tables with one alias
	CodeDupField       = 1060 // ER_DUP_FIELDNAME, 42S21: two columns of one derived table with one name
	CodeAccessDenied   = 1045 // ER_ACCESS_DENIED_ERROR, 28000
	CodeNotSupported   = 1235 // ER_NOT_SUPPORTED_YET, 42000: the SQL is valid MySQL but not a DP query dpproxy answers
	CodeDPRefused      = 3900 // dpproxy: the query would expose rows or leaves the domain (SQLSTATE HY000)
	CodeBudgetExceeded = 3901 // dpproxy: the batch would overspend a privacy budget (SQLSTATE HY000)
	CodeDPInternal     = 3902 // dpproxy: internal failure; nothing was released
)

// Error is a refusal with a MySQL error code and SQLSTATE. Its message never
// depends on the protected data.
type Error struct {
	Code     int
	SQLState string
	Message  string
}

func (e *Error) Error() string { return e.Message }

// Errorf builds an *Error with the SQLSTATE that belongs to code.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, SQLState: sqlStateFor(code), Message: fmt.Sprintf(format, args...)}
}

func sqlStateFor(code int) string {
	switch code {
	case CodeParseError, CodeNotSupported, CodeNonUniqTable:
		return "42000"
	case CodeNonUniqField:
		return "23000"
	case CodeNoSuchTable:
		return "42S02"
	case CodeBadField:
		return "42S22"
	case CodeDupField:
		return "42S21"
	case CodeAccessDenied:
		return "28000"
	default:
		return "HY000"
	}
}
