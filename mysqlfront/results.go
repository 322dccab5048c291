package mysqlfront

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unsafe"

	"github.com/dolthub/vitess/go/mysql"
	"github.com/dolthub/vitess/go/sqltypes"
	querypb "github.com/dolthub/vitess/go/vt/proto/query"

	"github.com/dpproxy/dpproxy/engine"
	"github.com/dpproxy/dpproxy/parser"
)

// MySQL character set (collation) numbers for column definitions.
const (
	charsetBinary  = 63  // binary: numbers, as MySQL sends them
	charsetUTF8MB4 = 255 // utf8mb4_0900_ai_ci, as GMS sends text
)

// resultChunk is how many rows go to the client per write: a large result
// is converted and sent a chunk at a time, never held whole in vitess's
// form.
const resultChunk = 1024

// checkResult validates that every value of r converts to its column's
// type (an integral float in a BIGINT column is fine, a NaN or ±Inf becomes
// NULL), so that nothing is sent of a result that cannot be sent whole.
func checkResult(r *engine.Result) error {
	if r == nil {
		return errors.New("nil result")
	}
	if len(r.Columns) == 0 {
		if r.Len() > 0 {
			return errors.New("rows without columns")
		}
		return nil
	}
	for k, col := range r.Columns {
		if _, err := field(col); err != nil {
			return err
		}
		for n := 0; n < r.Len(); n++ {
			if err := convertible(col.Type, r.Value(n, k)); err != nil {
				return fmt.Errorf("row %d, column %q: %w", n, col.Name, err)
			}
		}
	}
	if r.Rows != nil {
		for n, row := range r.Rows {
			if len(row) != len(r.Columns) {
				return fmt.Errorf("row %d has %d values for %d columns", n, len(row), len(r.Columns))
			}
		}
	}
	return nil
}

// sendResult streams a checked engine result to send in chunks of
// resultChunk rows, the column definitions with the first (vitess writes
// them once per result set); a result without columns is one OK packet.
func sendResult(r *engine.Result, send func(*sqltypes.Result) error) error {
	if len(r.Columns) == 0 {
		return send(&sqltypes.Result{})
	}
	fields := make([]*querypb.Field, len(r.Columns))
	for k, col := range r.Columns {
		f, err := field(col)
		if err != nil {
			return err
		}
		fields[k] = f
	}
	n := r.Len()
	// vitess writes each chunk before send returns, so one chunk's rows,
	// values and text are reused for the next: a large result costs one
	// chunk of memory, not one allocation per cell.
	rows := make([][]sqltypes.Value, min(n, resultChunk))
	vals := make([]sqltypes.Value, len(rows)*len(r.Columns))
	for j := range rows {
		rows[j] = vals[j*len(r.Columns) : (j+1)*len(r.Columns) : (j+1)*len(r.Columns)]
	}
	var arena []byte
	for start := 0; start == 0 || start < n; start += resultChunk {
		end := min(start+resultChunk, n)
		chunk := &sqltypes.Result{Rows: rows[:end-start]}
		if start == 0 {
			chunk.Fields = fields
		}
		arena = arena[:0]
		for i := start; i < end; i++ {
			out := chunk.Rows[i-start]
			for k, col := range r.Columns {
				var err error
				if out[k], arena, err = appendValue(arena, col.Type, r.Value(i, k)); err != nil {
					return err
				}
			}
		}
		if err := send(chunk); err != nil {
			return err
		}
	}
	return nil
}

// convertible reports what value would, without converting: whether v can
// be sent in a column of type t.
func convertible(t engine.ColumnType, v engine.Value) error {
	switch {
	case v.Kind == engine.KindNull, v.Kind == engine.KindInt:
		return nil
	case v.Kind == engine.KindFloat && (t != engine.TypeInt64 || math.IsNaN(v.Float) || math.IsInf(v.Float, 0)):
		return nil
	case v.Kind == engine.KindString && (t == engine.TypeString || t == engine.TypeDate || t == engine.TypeDatetime):
		return nil
	}
	_, err := value(t, v)
	return err
}

// appendValue is value with the text written into arena (numbers; strings
// keep their own bytes). A value refers into arena, so arena must not be
// reused before the value is sent; when arena grows, earlier values keep
// the old array, which stays valid.
func appendValue(arena []byte, t engine.ColumnType, v engine.Value) (sqltypes.Value, []byte, error) {
	if v.Kind == engine.KindNull || v.Kind == engine.KindFloat && (math.IsNaN(v.Float) || math.IsInf(v.Float, 0)) {
		return sqltypes.NULL, arena, nil
	}
	start := len(arena)
	switch {
	case t == engine.TypeInt64 && v.Kind == engine.KindInt:
		arena = strconv.AppendInt(arena, v.Int, 10)
		return sqltypes.MakeTrusted(sqltypes.Int64, arena[start:len(arena):len(arena)]), arena, nil
	case t == engine.TypeFloat64 && v.Kind == engine.KindFloat:
		arena = appendFloat(arena, v.Float)
		return sqltypes.MakeTrusted(sqltypes.Float64, arena[start:len(arena):len(arena)]), arena, nil
	case t == engine.TypeString && v.Kind == engine.KindString:
		// The label's own bytes, not a copy: vitess only reads them.
		return sqltypes.MakeTrusted(sqltypes.VarChar, unsafe.Slice(unsafe.StringData(v.Str), len(v.Str))), arena, nil
	case (t == engine.TypeDate || t == engine.TypeDatetime) && v.Kind == engine.KindString:
		return sqltypes.MakeTrusted(timeSQLType(t), unsafe.Slice(unsafe.StringData(v.Str), len(v.Str))), arena, nil
	case t == engine.TypeString && v.Kind == engine.KindInt:
		arena = strconv.AppendInt(arena, v.Int, 10)
		return sqltypes.MakeTrusted(sqltypes.VarChar, arena[start:len(arena):len(arena)]), arena, nil
	}
	out, err := value(t, v)
	return out, arena, err
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
	case engine.TypeDate, engine.TypeDatetime:
		// As MySQL types DATE(ts) and a DATETIME column: binary, no decimals.
		f.Type = timeSQLType(c.Type)
		f.Charset = charsetBinary
		f.ColumnLength = 10
		if c.Type == engine.TypeDatetime {
			f.ColumnLength = 19
		}
		f.Flags = uint32(querypb.MySqlFlag_BINARY_FLAG)
	default:
		return nil, fmt.Errorf("column %q has unknown type %d", c.Name, c.Type)
	}
	return f, nil
}

func timeSQLType(t engine.ColumnType) querypb.Type {
	if t == engine.TypeDate {
		return sqltypes.Date
	}
	return sqltypes.Datetime
}

func value(t engine.ColumnType, v engine.Value) (sqltypes.Value, error) {
	switch v.Kind {
	case engine.KindNull:
		return sqltypes.NULL, nil
	case engine.KindFloat:
		if math.IsNaN(v.Float) || math.IsInf(v.Float, 0) {
			return sqltypes.NULL, nil
		}
	}
	switch t {
	case engine.TypeInt64:
		switch v.Kind {
		case engine.KindInt:
			return sqltypes.NewInt64(v.Int), nil
		case engine.KindFloat:
			r := math.Round(v.Float)
			if r < math.MinInt64 || r >= math.MaxInt64 {
				return sqltypes.Value{}, fmt.Errorf("%g overflows BIGINT", v.Float)
			}
			return sqltypes.NewInt64(int64(r)), nil
		case engine.KindString:
			n, err := strconv.ParseInt(v.Str, 10, 64)
			if err != nil {
				return sqltypes.Value{}, fmt.Errorf("%q is not a BIGINT", v.Str)
			}
			return sqltypes.NewInt64(n), nil
		}
	case engine.TypeFloat64:
		var f float64
		switch v.Kind {
		case engine.KindFloat:
			f = v.Float
		case engine.KindInt:
			f = float64(v.Int)
		case engine.KindString:
			var err error
			if f, err = strconv.ParseFloat(v.Str, 64); err != nil {
				return sqltypes.Value{}, fmt.Errorf("%q is not a DOUBLE", v.Str)
			}
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return sqltypes.NULL, nil
			}
		}
		return sqltypes.MakeTrusted(sqltypes.Float64, []byte(formatFloat(f))), nil
	case engine.TypeDate, engine.TypeDatetime:
		if v.Kind == engine.KindString {
			return sqltypes.MakeTrusted(timeSQLType(t), []byte(v.Str)), nil
		}
	case engine.TypeString:
		switch v.Kind {
		case engine.KindString:
			return sqltypes.NewVarChar(v.Str), nil
		case engine.KindInt:
			return sqltypes.NewVarChar(strconv.FormatInt(v.Int, 10)), nil
		case engine.KindFloat:
			return sqltypes.NewVarChar(formatFloat(v.Float)), nil
		}
	}
	return sqltypes.Value{}, fmt.Errorf("unexpected value kind %d for column type %d", v.Kind, t)
}

// formatFloat writes a DOUBLE the way people read it: plain decimals for
// ordinary magnitudes, exponent notation for very large or small ones.
func formatFloat(f float64) string { return string(appendFloat(nil, f)) }

func appendFloat(b []byte, f float64) []byte {
	a := math.Abs(f)
	if a == 0 || (a >= 1e-4 && a < 1e15) {
		return strconv.AppendFloat(b, f, 'f', -1, 64)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

// placeholders returns the byte offsets of the `?` parameter markers in stmt:
// those outside quoted strings, backquoted identifiers and comments.
func placeholders(stmt string) []int {
	var pos []int
	for _, t := range parser.Tokens(stmt, false) {
		if t.Quote == 0 && t.Text == "?" {
			pos = append(pos, t.Start)
		}
	}
	return pos
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
