package catalog

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Binning: which cell of a column's domain a stored value falls in. This is
// the one definition every source dialect implements (package sources
// generates each engine's SQL from these methods and its conformance tests
// compare every engine with CellOf):
//
//   - NULL goes to NullCell.
//   - Categorical: a value belongs to a declared value's cell when its text
//     equals the declared value exactly, byte for byte (case, accents and
//     trailing spaces count; no collation is involved). Any other value is
//     out of domain. (Literals in queries are another matter: compile
//     matches them case-insensitively against the declared values.)
//   - Integer ranges: a number x with Min ≤ x ≤ Max falls in bin
//     ⌊(x − Min) / Width⌋ (exact integer division for integers, IEEE double
//     arithmetic for fractional values, so 30.5 is in the bin of 30); below
//     Min it goes to LowCell, above Max to HighCell.
//   - Numeric bins: x falls in the bin [e(i), e(i+1)) that holds it, the
//     last bin closed; below e0 LowCell, above the last edge HighCell.
//     Values are compared as IEEE doubles.
//   - A NaN (only PostgreSQL stores one) sorts above every number, as in
//     PostgreSQL: it goes to HighCell. ±Inf are below or above everything.
//   - Time columns (date, datetime; see timecol.go): text is read as an
//     ISO 8601 time (ParseTime: YYYY-MM-DD[ HH:MM[:SS[.fff]]][Z|±HH:MM],
//     UTC unless it carries an offset), an integer or real number as Unix
//     seconds (SQLite's two other time storages), a driver's time.Time as
//     itself; every time is truncated to its whole second, then binned by
//     whole seconds (or calendar months) from Min. Text that is no such
//     time is out of domain, below Min goes to LowCell, above Max to
//     HighCell.
//   - A batch's copy of an open column with LIKE patterns (Patterns): a
//     value that is no declared value goes to the match cell of the
//     patterns it matches (MatchOf, Like: exact, character by character).
//   - Text in a numeric column counts as the number it spells (as SQLite and
//     MySQL compare it), and as out of domain (OtherCell) when it spells none.
//
// A cell index of -1 means the row is dropped by this column's policy: it is
// not counted in any histogram over this column. On a batch's copy of the
// column with a dropped cell (Column.WithDroppedCell), the values the
// policies drop go to that trailing cell instead, so that the batch's
// queries that do not read the column still count their rows.

// Declared is the number of declared values or bins, the cells before the
// other and NULL cells.
func (c *Column) Declared() int {
	switch c.Kind {
	case Categorical:
		if len(c.Patterns) > 0 {
			return len(c.Values) + 1<<len(c.Patterns)
		}
		return len(c.Values)
	case IntegerRange:
		return int((c.Max - c.Min + c.Width) / c.Width)
	case TimeRange:
		return c.timeBins()
	default:
		return len(c.Edges) - 1
	}
}

// OtherCell is the cell of values outside the declared domain that are not
// clamped (the "other" cell), or, when they are dropped, the dropped cell
// of a batch's copy (WithDroppedCell) or -1. A clamping column sends them
// to LowCell or HighCell instead.
func (c *Column) OtherCell() int {
	if c.OutOfDomain == PolicyOther {
		return c.Declared()
	}
	// Dropped; under clamp, only values with no nearest bin (text spelling
	// no number) get here, and a clamping column drops them too.
	return c.DroppedCellIndex()
}

// NullCell is the cell of NULL values, or, when they are dropped, the
// dropped cell of a batch's copy (WithDroppedCell) or -1.
func (c *Column) NullCell() int {
	switch c.Null {
	case PolicyCell:
		n := c.Declared()
		if c.OutOfDomain == PolicyOther {
			n++
		}
		return n
	case PolicyOther:
		return c.OtherCell()
	}
	return c.DroppedCellIndex()
}

// LowCell is the cell of numbers below a range column's domain: the first
// bin when clamping, else OtherCell.
func (c *Column) LowCell() int {
	if c.OutOfDomain == PolicyClamp {
		return 0
	}
	return c.OtherCell()
}

// HighCell is the cell of numbers above a range column's domain: the last
// bin when clamping, else OtherCell.
func (c *Column) HighCell() int {
	if c.OutOfDomain == PolicyClamp {
		return c.Declared() - 1
	}
	return c.OtherCell()
}

// Bounds are the smallest and largest in-domain numbers of a range column:
// Min and Max of an integer range, the first and last edge of numeric bins.
func (c *Column) Bounds() (lo, hi float64) {
	if c.Kind == IntegerRange || c.Kind == TimeRange {
		return float64(c.Min), float64(c.Max)
	}
	return c.Edges[0], c.Edges[len(c.Edges)-1]
}

// CellOf is the reference binning of one stored value, as a database driver
// returns it: nil (NULL), int64, float64, string or []byte (text), bool. It
// returns the cell index, or -1 when the column's policy drops the value.
func (c *Column) CellOf(v any) int {
	switch v := v.(type) {
	case nil:
		return c.NullCell()
	case string:
		return c.CellOfText(v)
	case []byte:
		return c.CellOfText(string(v))
	case int64:
		return c.CellOfInt(v)
	case int:
		return c.CellOfInt(int64(v))
	case float64:
		return c.CellOfFloat(v)
	case time.Time:
		if c.Kind == TimeRange {
			return c.cellOfSeconds(float64(v.Unix()) + float64(v.Nanosecond())/1e9)
		}
		return c.CellOfText(v.UTC().Format(time.DateTime))
	case bool:
		if v {
			return c.CellOfInt(1)
		}
		return c.CellOfInt(0)
	}
	return c.OtherCell()
}

// CellOfText bins a text value.
func (c *Column) CellOfText(s string) int {
	if c.Kind == Categorical {
		if i := c.valueIndex(s); i >= 0 {
			return i
		}
		if len(c.Patterns) > 0 {
			return len(c.Values) + int(c.MatchOf(s))
		}
		return c.OtherCell()
	}
	if c.Kind == TimeRange {
		sec, _, ok := ParseTime(s)
		if !ok {
			return c.OtherCell()
		}
		return c.cellOfSecond(sec)
	}
	t := strings.TrimSpace(s)
	if i, err := strconv.ParseInt(t, 10, 64); err == nil {
		return c.CellOfInt(i)
	}
	if f, err := strconv.ParseFloat(t, 64); err == nil || isRangeErr(err) {
		return c.CellOfFloat(f)
	}
	return c.OtherCell()
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// valueIndex finds a declared categorical value by exact text.
func (c *Column) valueIndex(s string) int {
	for i, v := range c.Values {
		if v == s {
			return i
		}
	}
	return -1
}

// CellOfInt bins an integer.
func (c *Column) CellOfInt(x int64) int {
	switch c.Kind {
	case Categorical:
		return c.CellOfText(strconv.FormatInt(x, 10))
	case IntegerRange:
		switch {
		case x < c.Min:
			return c.LowCell()
		case x > c.Max:
			return c.HighCell()
		}
		return int((x - c.Min) / c.Width)
	case TimeRange:
		return c.cellOfSecond(x)
	}
	return c.CellOfFloat(float64(x))
}

// CellOfFloat bins a floating-point number.
func (c *Column) CellOfFloat(x float64) int {
	if c.Kind == Categorical {
		return c.CellOfText(strconv.FormatFloat(x, 'g', -1, 64))
	}
	if c.Kind == TimeRange {
		return c.cellOfSeconds(x)
	}
	lo, hi := c.Bounds()
	switch {
	case math.IsNaN(x) || x > hi:
		return c.HighCell()
	case x < lo:
		return c.LowCell()
	}
	if c.Kind == IntegerRange {
		return int(math.Floor((x - float64(c.Min)) / float64(c.Width)))
	}
	// The bin [e(i), e(i+1)) holding x: the last edge ≤ x, the last bin closed.
	i := sort.SearchFloat64s(c.Edges, x) // first edge ≥ x
	if i < len(c.Edges) && c.Edges[i] == x {
		i++
	}
	i-- // last edge ≤ x
	if i >= len(c.Edges)-1 {
		i = len(c.Edges) - 2
	}
	return i
}
