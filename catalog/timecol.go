package catalog

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Time columns (type date, datetime or timestamp) hold points in time. The
// time zone rule is UTC everywhere: the catalog's min and max, stored
// values without an offset, the server sessions (PostgreSQL's TimeZone,
// MySQL's time_zone) and every date function dpproxy evaluates read and
// write times in UTC, so a bin is the same interval on every engine.
//
// A time column's domain is whole seconds from Min to Max (both inclusive,
// Unix seconds; a date column's Max is the last second of its last day),
// cut into bins of Width seconds from Min, or of Months calendar months
// from Min (which then starts a month). A stored value is truncated to its
// whole second before it is binned, so 23:59:59.5 is in the bin of
// 23:59:59.

// Width units a catalog may write: 30s, 15min (or 15m), 1h, 1d, 7d, 2w,
// 1mo, 3mo, 1y.
var widthPattern = regexp.MustCompile(`^\s*([0-9]+)\s*([a-z]+)\s*$`)

var widthUnits = map[string]int64{
	"s": 1, "sec": 1, "second": 1, "seconds": 1,
	"m": 60, "min": 60, "minute": 60, "minutes": 60,
	"h": 3600, "hour": 3600, "hours": 3600,
	"d": 86400, "day": 86400, "days": 86400,
	"w": 7 * 86400, "week": 7 * 86400, "weeks": 7 * 86400,
}

var monthUnits = map[string]int64{"mo": 1, "month": 1, "months": 1, "y": 12, "year": 12, "years": 12}

// ParseWidth reads a bin width: a fixed number of seconds (seconds > 0), or
// a number of calendar months (months > 0).
func ParseWidth(s string) (seconds, months int64, err error) {
	m := widthPattern.FindStringSubmatch(strings.ToLower(s))
	if m == nil {
		return 0, 0, fmt.Errorf("must be a width such as 1h, 1d, 7d or 1mo (got %q)", s)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || n < 1 || n > 1<<40 {
		return 0, 0, fmt.Errorf("must be a positive width (got %q)", s)
	}
	if u, ok := widthUnits[m[2]]; ok {
		return n * u, 0, nil
	}
	if u, ok := monthUnits[m[2]]; ok && n <= 12*10000 {
		return 0, n * u, nil
	}
	return 0, 0, fmt.Errorf("unknown unit %q in %q (use s, min, h, d, w, mo or y)", m[2], s)
}

// FormatWidth writes a time column's bin width as the catalog would.
func (c *Column) FormatWidth() string {
	if c.Months > 0 {
		if c.Months%12 == 0 {
			return strconv.FormatInt(c.Months/12, 10) + "y"
		}
		return strconv.FormatInt(c.Months, 10) + "mo"
	}
	w := c.Width
	for _, u := range []struct {
		n    int64
		name string
	}{{7 * 86400, "w"}, {86400, "d"}, {3600, "h"}, {60, "min"}} {
		if w%u.n == 0 && (u.name != "w" || w/u.n > 1) {
			return strconv.FormatInt(w/u.n, 10) + u.name
		}
	}
	return strconv.FormatInt(w, 10) + "s"
}

// Time range limits: years 1000 to 9999, as MySQL's DATETIME.
var (
	minTime = time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	maxTime = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix()
)

// ParseTime reads a time as SQLite's date functions and ISO 8601 write it:
// YYYY-MM-DD, optionally followed by a space or T and HH:MM, HH:MM:SS or
// HH:MM:SS.fff, optionally followed by Z or an offset ±HH:MM (converted to
// UTC; without one the time is UTC), between the years 1000 and 9999. It
// returns Unix seconds (fractions truncated toward the past) and whether the
// text held a date only.
func ParseTime(s string) (sec int64, dateOnly, ok bool) {
	s = strings.TrimSpace(s)
	num := func(t string) (int, bool) {
		if t == "" {
			return 0, false
		}
		n := 0
		for i := 0; i < len(t); i++ {
			if t[i] < '0' || t[i] > '9' {
				return 0, false
			}
			n = n*10 + int(t[i]-'0')
		}
		return n, true
	}
	if len(s) < 10 || s[4] != '-' || s[7] != '-' {
		return 0, false, false
	}
	y, ok1 := num(s[0:4])
	mo, ok2 := num(s[5:7])
	d, ok3 := num(s[8:10])
	if !ok1 || !ok2 || !ok3 || mo < 1 || mo > 12 || d < 1 || d > daysIn(y, mo) {
		return 0, false, false
	}
	rest := s[10:]
	var h, mi, se int
	offset := 0
	dateOnly = true
	if rest != "" && (rest[0] == ' ' || rest[0] == 'T' || rest[0] == 't') {
		rest = rest[1:]
		dateOnly = false
		if len(rest) < 5 || rest[2] != ':' {
			return 0, false, false
		}
		var okh, okm bool
		h, okh = num(rest[0:2])
		mi, okm = num(rest[3:5])
		if !okh || !okm || h > 23 || mi > 59 {
			return 0, false, false
		}
		rest = rest[5:]
		if len(rest) >= 3 && rest[0] == ':' {
			var oks bool
			se, oks = num(rest[1:3])
			if !oks || se > 59 {
				return 0, false, false
			}
			rest = rest[3:]
			if len(rest) > 1 && rest[0] == '.' {
				i := 1
				for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
					i++
				}
				if i == 1 {
					return 0, false, false
				}
				rest = rest[i:]
			}
		}
		switch {
		case rest == "":
		case rest == "Z" || rest == "z":
			rest = ""
		case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
			oh, ok1 := num(rest[1:3])
			om, ok2 := num(rest[4:6])
			if !ok1 || !ok2 || oh > 14 || om > 59 {
				return 0, false, false
			}
			offset = oh*3600 + om*60
			if rest[0] == '-' {
				offset = -offset
			}
			rest = ""
		}
	}
	if rest != "" {
		return 0, false, false
	}
	t := time.Date(y, time.Month(mo), d, h, mi, se, 0, time.UTC).Unix() - int64(offset)
	if t < minTime || t > maxTime {
		return 0, false, false // MySQL's DATETIME range, years 1000 to 9999
	}
	return t, dateOnly, true
}

func daysIn(y, m int) int {
	return time.Date(y, time.Month(m)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// FormatTime writes Unix seconds as MySQL shows a DATETIME (or a DATE).
func FormatTime(sec int64, dateOnly bool) string {
	t := time.Unix(sec, 0).UTC()
	if dateOnly {
		return t.Format(time.DateOnly)
	}
	return t.Format(time.DateTime)
}

// AddMonths adds n calendar months to the first second of a month.
func AddMonths(sec, n int64) int64 {
	t := time.Unix(sec, 0).UTC()
	return time.Date(t.Year(), t.Month()+time.Month(n), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.UTC).Unix()
}

// monthsSince is the number of whole calendar months from Min (the start
// of a month) to sec ≥ Min.
func (c *Column) monthsSince(sec int64) int64 {
	a, b := time.Unix(c.Min, 0).UTC(), time.Unix(sec, 0).UTC()
	return int64(b.Year()-a.Year())*12 + int64(b.Month()-a.Month())
}

// timeBins is the number of bins of a time column.
func (c *Column) timeBins() int {
	if c.Months > 0 {
		return int(c.monthsSince(c.Max)/c.Months) + 1
	}
	return int((c.Max - c.Min + c.Width) / c.Width)
}

// BinStart is the first second of time bin i (i may be the number of bins:
// the end of the last bin, exclusive, before it is cut at Max).
func (c *Column) BinStart(i int) int64 {
	if c.Months > 0 {
		return AddMonths(c.Min, int64(i)*c.Months)
	}
	return c.Min + int64(i)*c.Width
}

// cellOfSecond bins a whole second of a time column.
func (c *Column) cellOfSecond(x int64) int {
	switch {
	case x < c.Min:
		return c.LowCell()
	case x > c.Max:
		return c.HighCell()
	}
	if c.Months > 0 {
		return int(c.monthsSince(x) / c.Months)
	}
	return int((x - c.Min) / c.Width)
}

// cellOfSeconds bins a time given as (possibly fractional) Unix seconds.
func (c *Column) cellOfSeconds(x float64) int {
	switch {
	case math.IsNaN(x):
		return c.OtherCell()
	case x < float64(c.Min):
		return c.LowCell()
	case x >= float64(c.Max)+1:
		return c.HighCell()
	}
	return c.cellOfSecond(int64(math.Floor(x)))
}

// TimeUnit is how a time column's values are written: "date" or "datetime".
func (c *Column) TimeUnit() string {
	if c.DateOnly {
		return "date"
	}
	return "datetime"
}
