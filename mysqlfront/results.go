package mysqlfront

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/dolthub/vitess/go/mysql"
	"github.com/dolthub/vitess/go/sqltypes"
	querypb "github.com/dolthub/vitess/go/vt/proto/query"

	"github.com/dpproxy/dpproxy/engine"
)

// MySQL character set (collation) numbers for column definitions.
const (
	charsetBinary  = 63  // binary: numbers, as MySQL sends them
	charsetUTF8MB4 = 255 // utf8mb4_0900_ai_ci, as GMS sends text
)

// toSQLResult converts an engine result set to vitess's form. Columns are
// BIGINT, DOUBLE or VARCHAR; values are coerced to their column's type (an
// integral float in a BIGINT column is fine, a NaN or ±Inf becomes NULL)
// and anything that does not fit is an error.
func toSQLResult(r *engine.Result) (*sqltypes.Result, error) {
	if r == nil {
		return nil, errors.New("nil result")
	}
	if len(r.Columns) == 0 {
		if len(r.Rows) > 0 {
			return nil, errors.New("rows without columns")
		}
		return &sqltypes.Result{}, nil // an OK packet
	}
	res := &sqltypes.Result{Fields: make([]*querypb.Field, len(r.Columns))}
	for k, col := range r.Columns {
		f, err := field(col)
		if err != nil {
			return nil, err
		}
		res.Fields[k] = f
	}
	res.Rows = make([][]sqltypes.Value, 0, len(r.Rows))
	for n, row := range r.Rows {
		if len(row) != len(r.Columns) {
			return nil, fmt.Errorf("row %d has %d values for %d columns", n, len(row), len(r.Columns))
		}
		out := make([]sqltypes.Value, len(row))
		for k, v := range row {
			var err error
			if out[k], err = value(r.Columns[k].Type, v); err != nil {
				return nil, fmt.Errorf("row %d, column %q: %w", n, r.Columns[k].Name, err)
			}
		}
		res.Rows = append(res.Rows, out)
	}
	return res, nil
}

func field(c engine.Column) (*querypb.Field, error) {
	f := &querypb.Field{Name: c.Name, OrgName: c.Name}
	switch c.Type {
	case engine.TypeInt64:
		f.Type = sqltypes.Int64
		f.Charset = charsetBinary
		f.ColumnLength = 21
		f.Flags = uint32(querypb.MySqlFlag_BINARY_FLAG | querypb.MySqlFlag_NUM_FLAG)
	case engine.TypeFloat64:
		f.Type = sqltypes.Float64
		f.Charset = charsetBinary
		f.ColumnLength = 22
		f.Decimals = 31 // NOT_FIXED_DEC: as many decimals as the value needs
		f.Flags = uint32(querypb.MySqlFlag_BINARY_FLAG | querypb.MySqlFlag_NUM_FLAG)
	case engine.TypeString:
		f.Type = sqltypes.VarChar
		f.Charset = charsetUTF8MB4
		f.ColumnLength = 255 * 4
	default:
		return nil, fmt.Errorf("column %q has unknown type %d", c.Name, c.Type)
	}
	return f, nil
}

func value(t engine.ColumnType, v any) (sqltypes.Value, error) {
	if v == nil {
		return sqltypes.NULL, nil
	}
	switch t {
	case engine.TypeInt64:
		switch v := v.(type) {
		case int64:
			return sqltypes.NewInt64(v), nil
		case int:
			return sqltypes.NewInt64(int64(v)), nil
		case int32:
			return sqltypes.NewInt64(int64(v)), nil
		case uint64:
			if v > math.MaxInt64 {
				return sqltypes.Value{}, fmt.Errorf("%d overflows BIGINT", v)
			}
			return sqltypes.NewInt64(int64(v)), nil
		case float64:
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return sqltypes.NULL, nil
			}
			r := math.Round(v)
			if r < math.MinInt64 || r >= math.MaxInt64 {
				return sqltypes.Value{}, fmt.Errorf("%g overflows BIGINT", v)
			}
			return sqltypes.NewInt64(int64(r)), nil
		case string:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return sqltypes.Value{}, fmt.Errorf("%q is not a BIGINT", v)
			}
			return sqltypes.NewInt64(n), nil
		}
	case engine.TypeFloat64:
		var f float64
		switch v := v.(type) {
		case float64:
			f = v
		case float32:
			f = float64(v)
		case int64:
			f = float64(v)
		case int:
			f = float64(v)
		case string:
			var err error
			if f, err = strconv.ParseFloat(v, 64); err != nil {
				return sqltypes.Value{}, fmt.Errorf("%q is not a DOUBLE", v)
			}
		default:
			return sqltypes.Value{}, fmt.Errorf("unexpected %T value", v)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return sqltypes.NULL, nil
		}
		return sqltypes.MakeTrusted(sqltypes.Float64, []byte(formatFloat(f))), nil
	case engine.TypeString:
		switch v := v.(type) {
		case string:
			return sqltypes.NewVarChar(v), nil
		case []byte:
			return sqltypes.NewVarChar(string(v)), nil
		case int64:
			return sqltypes.NewVarChar(strconv.FormatInt(v, 10)), nil
		case int:
			return sqltypes.NewVarChar(strconv.Itoa(v)), nil
		case float64:
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return sqltypes.NULL, nil
			}
			return sqltypes.NewVarChar(formatFloat(v)), nil
		case bool:
			return sqltypes.NewVarChar(strconv.FormatBool(v)), nil
		}
	}
	return sqltypes.Value{}, fmt.Errorf("unexpected %T value", v)
}

// formatFloat writes a DOUBLE the way people read it: plain decimals for
// ordinary magnitudes, exponent notation for very large or small ones.
func formatFloat(f float64) string {
	a := math.Abs(f)
	if a == 0 || (a >= 1e-4 && a < 1e15) {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// placeholders returns the byte offsets of the `?` parameter markers in stmt:
// those outside quoted strings, backquoted identifiers and comments.
func placeholders(stmt string) []int {
	var pos []int
	for i := 0; i < len(stmt); i++ {
		switch ch := stmt[i]; ch {
		case '?':
			pos = append(pos, i)
		case '\'', '"', '`':
			i = skipQuoted(stmt, i)
		case '#':
			i = skipLine(stmt, i)
		case '-':
			if i+1 < len(stmt) && stmt[i+1] == '-' && (i+2 == len(stmt) || isSpace(stmt[i+2])) {
				i = skipLine(stmt, i)
			}
		case '/':
			if i+1 < len(stmt) && stmt[i+1] == '*' {
				if end := strings.Index(stmt[i+2:], "*/"); end >= 0 {
					i += 2 + end + 1
				} else {
					i = len(stmt)
				}
			}
		}
	}
	return pos
}

// skipQuoted returns the offset of the quote closing the one at i (a doubled
// quote and, in strings, a backslash escape do not close it), or the end.
func skipQuoted(s string, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			if q != '`' {
				j++
			}
		case q:
			if j+1 < len(s) && s[j+1] == q {
				j++
				continue
			}
			return j
		}
	}
	return len(s)
}

func skipLine(s string, i int) int {
	if end := strings.IndexByte(s[i:], '\n'); end >= 0 {
		return i + end
	}
	return len(s)
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// number is a plain SQL numeric literal.
var number = regexp.MustCompile(`^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)

// bindParams substitutes the bound parameters of a prepared statement for its
// `?` markers, as SQL literals: numbers as written, NULL as NULL, everything
// else (strings, bytes, dates) as a quoted, escaped string.
func bindParams(stmt string, count uint16, binds map[string]*querypb.BindVariable) (string, error) {
	pos := placeholders(stmt)
	if len(pos) != int(count) {
		return "", mysql.NewSQLError(mysql.ERWrongArguments, mysql.SSUnknownSQLState,
			"Incorrect arguments to mysqld_stmt_execute: %d parameter markers, %d parameters", len(pos), count)
	}
	var b strings.Builder
	last := 0
	for k, p := range pos {
		b.WriteString(stmt[last:p])
		bv := binds[fmt.Sprintf("v%d", k+1)]
		if bv == nil {
			return "", mysql.NewSQLError(mysql.ERWrongArguments, mysql.SSUnknownSQLState,
				"Incorrect arguments to mysqld_stmt_execute: parameter %d is not bound", k+1)
		}
		lit, err := literal(bv)
		if err != nil {
			return "", mysql.NewSQLError(mysql.ERWrongArguments, mysql.SSUnknownSQLState,
				"Incorrect arguments to mysqld_stmt_execute: parameter %d: %v", k+1, err)
		}
		if p > 0 && stmt[p-1] == '-' && strings.HasPrefix(lit, "-") {
			b.WriteByte(' ') // "x-?" with -1 must not become the comment "x--1"
		}
		b.WriteString(lit)
		last = p + 1
	}
	b.WriteString(stmt[last:])
	return b.String(), nil
}

func literal(bv *querypb.BindVariable) (string, error) {
	v, err := sqltypes.BindVariableToValue(bv)
	if err != nil {
		return "", err
	}
	if v.IsNull() {
		return "NULL", nil
	}
	if (v.IsIntegral() || v.IsFloat() || v.Type() == sqltypes.Decimal) && number.MatchString(v.ToString()) {
		return v.ToString(), nil
	}
	var b strings.Builder
	sqltypes.MakeTrusted(sqltypes.VarBinary, v.Raw()).EncodeSQL(&b)
	return b.String(), nil
}
