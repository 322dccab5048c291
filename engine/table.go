package engine

import (
	"math"

	"github.com/dpproxy/dpproxy/catalog"
)

// Large results keep their values by column, not as one boxed value per
// cell: a GROUP BY over a million groups is a few bytes per row (a cell
// index per group column, a float64 per aggregate) instead of a []any of
// interfaces per row. Results up to smallResult rows keep Rows, which is
// simpler to read and what tests inspect.
const smallResult = 4096

// ValueKind is the Go type of a result value.
type ValueKind uint8

const (
	KindNull   ValueKind = iota
	KindInt              // Int
	KindFloat            // Float
	KindString           // Str
)

// Value is one result value without boxing.
type Value struct {
	Kind  ValueKind
	Int   int64
	Float float64
	Str   string
}

// valueOf converts a boxed value (int64, float64, string or nil).
func valueOf(v any) Value {
	switch v := v.(type) {
	case int64:
		return Value{Kind: KindInt, Int: v}
	case int:
		return Value{Kind: KindInt, Int: int64(v)}
	case float64:
		return Value{Kind: KindFloat, Float: v}
	case string:
		return Value{Kind: KindString, Str: v}
	}
	return Value{}
}

// Any boxes the value (nil for NULL).
func (v Value) Any() any {
	switch v.Kind {
	case KindInt:
		return v.Int
	case KindFloat:
		return v.Float
	case KindString:
		return v.Str
	}
	return nil
}

// table is a result's rows by column.
type table struct {
	n    int // rows
	cols []tableColumn
}

// tableColumn holds one column: cell indexes into labels (group columns,
// strings), or numbers (NaN for NULL; int columns hold integers). A group
// column of an assembled GROUP BY stores no index per row: row i's cell is
// (group(i) / stride) % len(labels), group(i) being groups[i], or i itself
// when groups is nil (every group in domain order).
type tableColumn struct {
	labels  []Value  // the value of each cell index
	cells   []uint32 // the cell index per row, unless computed from groups
	groups  []int32  // shared by a result's group columns; nil: row i is group i
	stride  int      // > 0: the cell is computed from the row's group
	numbers []float64
	isInt   bool
	// time, when not TypeInt64, shows numbers (Unix seconds) as DATE or
	// DATETIME strings.
	time ColumnType
}

// cell is row i's index into labels.
func (c *tableColumn) cell(i int) int {
	if c.stride == 0 {
		return int(c.cells[i])
	}
	g := i
	if c.groups != nil {
		g = int(c.groups[i])
	}
	return (g / c.stride) % len(c.labels)
}

func (c *tableColumn) value(i int) Value {
	if c.numbers == nil {
		return c.labels[c.cell(i)]
	}
	f := c.numbers[i]
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return Value{}
	case c.isInt:
		return Value{Kind: KindInt, Int: int64(f)}
	case c.time != TypeInt64:
		return timeValue(f, c.time)
	}
	return Value{Kind: KindFloat, Float: f}
}

// timeValue shows Unix seconds as a DATE or DATETIME string (UTC).
func timeValue(sec float64, typ ColumnType) Value {
	return Value{Kind: KindString, Str: catalog.FormatTime(int64(math.Floor(sec)), typ == TypeDate)}
}

func (c *tableColumn) bytes() int64 {
	n := int64(4*len(c.cells) + 4*len(c.groups) + 8*len(c.numbers) + 48*len(c.labels))
	for _, l := range c.labels {
		n += int64(len(l.Str))
	}
	return n
}

// Len is the number of rows.
func (r *Result) Len() int {
	if r.table != nil {
		return r.table.n
	}
	return len(r.Rows)
}

// Value is row i's value in column k.
func (r *Result) Value(i, k int) Value {
	if r.table != nil {
		return r.table.cols[k].value(i)
	}
	return valueOf(r.Rows[i][k])
}

// Row boxes row i into dst (reused when large enough).
func (r *Result) Row(i int, dst []any) []any {
	if r.table == nil {
		return append(dst[:0], r.Rows[i]...)
	}
	dst = dst[:0]
	for k := range r.table.cols {
		dst = append(dst, r.table.cols[k].value(i).Any())
	}
	return dst
}

// AllRows boxes every row (for tests and small results).
func (r *Result) AllRows() [][]any {
	if r.table == nil {
		return r.Rows
	}
	out := make([][]any, r.Len())
	for i := range out {
		out[i] = r.Row(i, nil)
	}
	return out
}

// limited returns r with its first n rows only, sharing its storage.
func (r *Result) limited(n int) *Result {
	cp := *r
	if r.table != nil {
		t := *r.table
		t.n = min(t.n, n)
		cp.table = &t
		return &cp
	}
	cp.Rows = r.Rows[:n:n]
	return &cp
}

// bytes approximates the memory r holds.
func (r *Result) bytes() int64 {
	n := int64(64 + 48*len(r.Columns))
	if r.table != nil {
		for k := range r.table.cols {
			n += r.table.cols[k].bytes()
		}
		return n
	}
	for _, row := range r.Rows {
		n += 24 + 24*int64(len(row))
		for _, v := range row {
			if s, ok := v.(string); ok {
				n += int64(len(s))
			}
		}
	}
	return n
}

// compact stores a result of more than smallResult rows by column (Rows
// become nil); columns whose values do not fit a column kind stay boxed.
func (r *Result) compact() *Result {
	if r.table != nil || len(r.Rows) <= smallResult {
		return r
	}
	t := &table{n: len(r.Rows), cols: make([]tableColumn, len(r.Columns))}
	for k := range r.Columns {
		numeric, ints := true, true
		for _, row := range r.Rows {
			switch v := row[k].(type) {
			case nil:
			case int64:
				if v > 1<<53 || v < -(1<<53) {
					numeric = false
				}
			case float64:
				ints = false
			default:
				numeric = false
			}
		}
		c := &t.cols[k]
		if numeric {
			c.isInt = ints
			c.numbers = make([]float64, t.n)
			for i, row := range r.Rows {
				switch v := row[k].(type) {
				case nil:
					c.numbers[i] = math.NaN()
				case int64:
					c.numbers[i] = float64(v)
				case float64:
					c.numbers[i] = v
				}
			}
			continue
		}
		index := map[Value]uint32{}
		c.cells = make([]uint32, t.n)
		for i, row := range r.Rows {
			v := valueOf(row[k])
			j, ok := index[v]
			if !ok {
				j = uint32(len(c.labels))
				index[v] = j
				c.labels = append(c.labels, v)
			}
			c.cells[i] = j
		}
	}
	return &Result{Columns: r.Columns, table: t}
}
