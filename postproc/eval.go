package postproc

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	sqle "github.com/dolthub/go-mysql-server"
	"github.com/dolthub/go-mysql-server/memory"
	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"
	"github.com/dolthub/vitess/go/sqltypes"
	"github.com/dpproxy/dpproxy/internal/gmsengine"
	"github.com/shopspring/decimal"
)

// Type is the MySQL type of a column of a released result.
type Type int

const (
	Int      Type = iota // BIGINT: int64 values
	Float                // DOUBLE: float64 values
	Text                 // VARCHAR: string values
	Date                 // DATE: 'YYYY-MM-DD' strings
	Datetime             // DATETIME: 'YYYY-MM-DD HH:MM:SS' strings
)

// Column is a named, typed column.
type Column struct {
	Name string
	Type Type
}

// Table is a released result under the name the outer query reads it by.
// Row values are int64, float64, string or nil (NULL), as Column.Type
// says.
type Table struct {
	Name    string
	Columns []Column
	Rows    [][]any
}

// Result is what the outer query returns, in the same value conventions.
type Result struct {
	Columns []Column
	Rows    [][]any
}

// database is the name of the one database an evaluation sees.
const database = "released"

// Evaluator runs outer queries over released rows. It holds one
// go-mysql-server engine for the life of the proxy: building an engine
// re-initialises the library's process-wide status variables, so an
// engine per evaluation reset the front's SHOW GLOBAL STATUS counters
// (Threads_connected read 0 with clients connected, then wrapped below
// zero when they left). Each evaluation still sees only its own tables:
// they live in a fresh in-memory database that the engine's provider
// finds through the evaluation's context (released), never through
// shared state. An Evaluator is safe for concurrent use.
type Evaluator struct {
	eng *sqle.Engine
}

// NewEvaluator builds the engine evaluations share.
func NewEvaluator() *Evaluator {
	return &Evaluator{eng: gmsengine.NewDefault(released{})}
}

// Close releases the engine.
func (e *Evaluator) Close() error { return e.eng.Close() }

// releasedKey keys an evaluation's database in its context.
type releasedKey struct{}

// released is the engine's database provider: the one database an
// evaluation's context carries, under the name database.
type released struct{}

func (released) db(ctx *sql.Context) (*memory.Database, bool) {
	if ctx == nil {
		return nil, false
	}
	db, ok := ctx.Value(releasedKey{}).(*memory.Database)
	return db, ok
}

func (r released) Database(ctx *sql.Context, name string) (sql.Database, error) {
	if db, ok := r.db(ctx); ok && strings.EqualFold(name, database) {
		return db, nil
	}
	return nil, sql.ErrDatabaseNotFound.New(name)
}

func (r released) HasDatabase(ctx *sql.Context, name string) bool {
	_, ok := r.db(ctx)
	return ok && strings.EqualFold(name, database)
}

func (r released) AllDatabases(ctx *sql.Context) []sql.Database {
	if db, ok := r.db(ctx); ok {
		return []sql.Database{db}
	}
	return nil
}

// Eval runs query, MySQL SQL that reads only tables, and returns its
// rows. Errors from the SQL itself (an unknown column, a type error) are
// returned as they are; they depend only on the query text and the
// released rows.
func (e *Evaluator) Eval(ctx context.Context, query string, tables []Table) (res *Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("post-processing: %v", r)
		}
	}()
	db := memory.NewDatabase(database)
	pro := memory.NewDBProvider(db)
	sctx := sql.NewContext(context.WithValue(ctx, releasedKey{}, db), sql.WithSession(memory.NewSession(sql.NewBaseSession(), pro)))
	sctx.SetCurrentDatabase(database)
	for _, t := range tables {
		if err := load(sctx, db, t); err != nil {
			return nil, fmt.Errorf("post-processing: loading %s: %w", t.Name, err)
		}
	}
	eng := e.eng
	schema, iter, _, err := eng.Query(sctx, query)
	if err != nil {
		return nil, err
	}
	rows, err := sql.RowIterToRows(sctx, iter)
	if err != nil {
		return nil, err
	}
	res = &Result{Columns: make([]Column, len(schema))}
	for k, c := range schema {
		res.Columns[k] = Column{Name: c.Name, Type: typeOf(c.Type)}
	}
	for _, r := range rows {
		out := make([]any, len(schema))
		for k := range schema {
			if k < len(r) {
				out[k] = value(res.Columns[k].Type, r[k])
			}
		}
		res.Rows = append(res.Rows, out)
	}
	return res, nil
}

func load(ctx *sql.Context, db *memory.Database, t Table) error {
	schema := make(sql.Schema, len(t.Columns))
	for k, c := range t.Columns {
		schema[k] = &sql.Column{Name: c.Name, Type: sqlType(c.Type), Nullable: true, Source: t.Name}
	}
	tab := memory.NewTable(db, t.Name, sql.NewPrimaryKeySchema(schema), db.GetForeignKeyCollection())
	db.AddTable(t.Name, tab)
	for _, r := range t.Rows {
		row := make(sql.Row, len(r))
		for k, v := range r {
			x, err := input(t.Columns[k].Type, v)
			if err != nil {
				return fmt.Errorf("column %s: %w", t.Columns[k].Name, err)
			}
			row[k] = x
		}
		if err := tab.Insert(ctx, row); err != nil {
			return err
		}
	}
	return nil
}

func sqlType(t Type) sql.Type {
	switch t {
	case Int:
		return types.Int64
	case Float:
		return types.Float64
	case Date:
		return types.Date
	case Datetime:
		return types.Datetime
	}
	return types.LongText
}

// input converts a released value to what go-mysql-server stores.
func input(t Type, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch t {
	case Int:
		switch x := v.(type) {
		case int64:
			return x, nil
		case float64:
			return int64(x), nil
		}
	case Float:
		switch x := v.(type) {
		case float64:
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, nil
			}
			return x, nil
		case int64:
			return float64(x), nil
		}
	case Date, Datetime:
		s, ok := v.(string)
		if !ok {
			break
		}
		layout := time.DateOnly
		if t == Datetime && len(s) > len(time.DateOnly) {
			layout = time.DateTime
		}
		return time.ParseInLocation(layout, s, time.UTC)
	default:
		switch x := v.(type) {
		case string:
			return x, nil
		case int64:
			return strconv.FormatInt(x, 10), nil
		case float64:
			return strconv.FormatFloat(x, 'g', -1, 64), nil
		}
	}
	return nil, fmt.Errorf("value %v (%T) for a column of type %d", v, v, t)
}

func typeOf(t sql.Type) Type {
	switch {
	case types.IsInteger(t):
		return Int
	case types.IsFloat(t), types.IsDecimal(t):
		return Float
	case types.IsDateType(t):
		return Date
	case types.IsDatetimeType(t), types.IsTimestampType(t):
		return Datetime
	case t != nil && t.Type() == sqltypes.Year:
		return Int
	}
	return Text
}

// value converts what go-mysql-server returns to the released conventions.
func value(t Type, v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case int8:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case int64:
		return x
	case int:
		return int64(x)
	case uint8:
		return int64(x)
	case uint16:
		return int64(x)
	case uint32:
		return int64(x)
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x)
		}
		return float64(x)
	case bool:
		if x {
			return int64(1)
		}
		return int64(0)
	case float32:
		return float64(x)
	case float64:
		return x
	case decimal.Decimal:
		f, _ := x.Float64()
		return f
	case decimal.NullDecimal:
		if !x.Valid {
			return nil
		}
		f, _ := x.Decimal.Float64()
		return f
	case time.Time:
		if t == Date {
			return x.Format(time.DateOnly)
		}
		return x.Format(time.DateTime)
	case []byte:
		return string(x)
	case string:
		return x
	case fmt.Stringer:
		return x.String()
	}
	return fmt.Sprint(v)
}
