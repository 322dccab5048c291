package compile

import (
	"math"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/parser"
)

// vkind is what an expression is on one domain cell.
type vkind uint8

const (
	vNull  vkind = iota // SQL NULL
	vNum                // a number, or the range of numbers the cell's rows can have
	vStr                // a string
	vOther              // the other cell's value: some value outside the declared domain, unknown
	vAny                // values that vary within the cell in a way no range describes (x / a bin around 0)
)

// sqlType is MySQL's static type of an expression, which decides how a
// group label is shown.
type sqlType uint8

const (
	tNull     sqlType = iota // only NULL so far
	tInt                     // BIGINT
	tDecimal                 // DECIMAL: exact, shown with its scale
	tDouble                  // DOUBLE
	tString                  // VARCHAR
	tDate                    // DATE: a number of Unix seconds at midnight UTC
	tDatetime                // DATETIME: a number of Unix seconds (UTC, whole seconds)
)

// isTime reports whether v is a DATE or DATETIME (its numbers are Unix
// seconds).
func (v val) isTime() bool { return v.kind == vNum && (v.typ == tDate || v.typ == tDatetime) }

// timeVal is an exact time.
func timeVal(sec int64, typ sqlType) val {
	return val{kind: vNum, lo: float64(sec), hi: float64(sec), mid: float64(sec), integral: true, typ: typ}
}

// val is an expression's value on one domain cell. A cell stands for every
// value its rows can have: one categorical value, the integers of an
// integer bin, the reals of a numeric bin. A number is kept as the closed
// range [lo, hi] of the values it can take (exact when lo == hi; an open
// bin end is the nearest float inside it) and mid, the value that
// represents the cell in a SUM or AVG (the bin's midpoint, as for SUM(c)).
// Ranges are sound over-approximations: a comparison decided on them holds
// for every row of the cell, and one they cannot decide splits the cell and
// is refused.
type val struct {
	kind      vkind
	lo, hi    float64
	mid       float64
	integral  bool // every value in the range is an integer
	str       string
	typ       sqlType
	scale     int    // tDecimal: decimals
	splitCol  string // the column whose bin makes the range wide, for messages
	splitCell int    // that column's cell index
	// open is set on the cells of a batch's copy of an open column
	// (catalog.Column.OpenCopy), whose rows were binned by exact text:
	// openValue, a declared value, compares and matches LIKE exactly;
	// openOther, the other cell, and openMatch, a match cell (its
	// patterns in match), hold values that differ from every literal.
	open  openKind
	match uint64
}

// openKind is what an open column's cell holds (val.open).
type openKind uint8

const (
	openNone  openKind = iota
	openValue          // one declared value (a literal of the batch, a released key)
	openOther          // values other than the declared ones, not split by pattern
	openMatch          // values other than the declared ones matching val.match's patterns
)

var nullVal = val{kind: vNull}

func numVal(x float64, typ sqlType) val {
	return val{kind: vNum, lo: x, hi: x, mid: x, integral: x == math.Trunc(x), typ: typ}
}

func strVal(s string) val { return val{kind: vStr, str: s, typ: tString} }

// exact reports whether a number takes one value on the cell.
func (v val) exact() bool { return v.kind == vNum && v.lo == v.hi }

// wide reports whether v varies within its cell.
func (v val) wide() bool { return v.kind == vAny || (v.kind == vNum && v.lo != v.hi) }

// widen records that a result derived from a and b varies as they do.
func widen(out val, a, b val) val {
	switch {
	case a.wide():
		out.splitCol, out.splitCell = a.splitCol, a.splitCell
	case b.wide():
		out.splitCol, out.splitCell = b.splitCol, b.splitCell
	}
	return out
}

// resultType is the type of an arithmetic result of a and b (MySQL's
// rules: integers stay integers, a DOUBLE makes a DOUBLE, else DECIMAL).
func resultType(a, b val) (sqlType, int) {
	switch {
	case a.typ == tDouble || b.typ == tDouble || a.typ == tString || b.typ == tString:
		return tDouble, 0
	case a.typ == tDecimal || b.typ == tDecimal:
		return tDecimal, max(a.scale, b.scale)
	}
	return tInt, 0
}

// literalVal reads a constant as written: a quoted string is a string, an
// unquoted number a number (integer, decimal or, with an exponent, double).
func literalVal(text string, quoted bool) val {
	if quoted {
		return strVal(text)
	}
	t := strings.TrimSpace(text)
	if n, err := strconv.ParseInt(t, 10, 64); err == nil && math.Abs(float64(n)) < 1<<53 {
		return numVal(float64(n), tInt)
	}
	f := parser.MySQLNumber(t)
	v := numVal(f, tDouble)
	if !strings.ContainsAny(t, "eE") {
		v.typ = tDecimal
		if i := strings.IndexByte(t, '.'); i >= 0 {
			v.scale = len(t) - i - 1
		}
	}
	return v
}

// toNumber converts v to a number as MySQL does in a numeric context:
// strings by their longest numeric prefix.
func toNumber(v val) val {
	if v.kind != vStr {
		return v
	}
	return numVal(parser.MySQLNumber(v.str), tDouble)
}

// isNumeric reports whether s is a number as a whole (what a client
// interpolating a numeric parameter sends).
func isNumeric(s string) bool {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	return err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
}

// formatNumber is a number as MySQL shows it in a string context: an
// integer without decimals, a decimal with its scale.
func formatNumber(v val) string {
	switch v.typ {
	case tDate, tDatetime:
		return catalog.FormatTime(int64(v.mid), v.typ == tDate)
	case tInt:
		return strconv.FormatFloat(v.mid, 'f', 0, 64)
	case tDecimal:
		return strconv.FormatFloat(v.mid, 'f', v.scale, 64)
	}
	return strconv.FormatFloat(v.mid, 'g', -1, 64)
}

// label is a group label as a result value: int64, float64, string or nil.
func (v val) label() any {
	switch v.kind {
	case vNull:
		return nil
	case vStr:
		return v.str
	case vOther:
		return "other"
	case vNum:
		if v.isTime() {
			return formatNumber(v)
		}
		if v.typ == tInt && math.Abs(v.mid) < 1<<62 {
			return int64(v.mid)
		}
		return v.mid
	}
	return nil
}

// key identifies a label among groups (NULL and "other" apart from values).
func (v val) key() string {
	switch v.kind {
	case vNull:
		return "\x00null"
	case vOther:
		return "\x00other"
	case vStr:
		return "s" + v.str
	}
	return "n" + strconv.FormatFloat(v.mid, 'g', -1, 64)
}
