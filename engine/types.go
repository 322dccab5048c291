// Package engine answers batches of DP statements for one session: it runs
// parser → compile → planner, charges the ledger, then exec, and returns
// result sets. It is the only package that sees the whole pipeline; the
// MySQL front calls it and knows nothing of matrices or budgets.
package engine

// ColumnType is the MySQL type of a result column.
type ColumnType int

const (
	TypeInt64    ColumnType = iota // BIGINT
	TypeFloat64                    // DOUBLE
	TypeString                     // VARCHAR
	TypeDate                       // DATE: 'YYYY-MM-DD' strings
	TypeDatetime                   // DATETIME: 'YYYY-MM-DD HH:MM:SS' strings
)

// Column is a result column: its name as the client asked for it (alias or expression text).
type Column struct {
	Name string
	Type ColumnType
}

// Result is one result set. Row values are int64, float64, string, or nil
// for NULL. Small results hold them in Rows; large ones by column (Rows is
// then nil): read any result with Len and Value (or Row, AllRows).
type Result struct {
	Columns []Column
	Rows    [][]any
	table   *table
}

// Session is what the engine needs to know about a client connection.
type Session struct {
	ConnID uint32
	User   string
	// UserVar reads a session user variable set with SET @name = ... (name without '@', lower-case);
	// ok is false when it was never set. nil means no variables.
	UserVar func(name string) (value any, ok bool)
	// SelectLimit reads the session's sql_select_limit: the most rows a
	// SELECT without a LIMIT of its own returns. ok is false when there is
	// no such limit (MySQL's default, 18446744073709551615). nil means none.
	SelectLimit func() (n uint64, ok bool)
}
