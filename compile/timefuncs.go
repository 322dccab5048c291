package compile

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/mysqltime"
	"github.com/dpproxy/dpproxy/parser"
)

// Date and time functions, with MySQL's semantics in UTC (the catalog's
// time rule). A time is a number of Unix seconds typed DATE or DATETIME;
// on a cell of a time column it is the range of whole seconds of the bin
// (of days, for a date column). A function that is constant on that range
// gives its value (DATE(ts) on hourly bins); a monotone one (DATE, YEAR,
// UNIX_TIMESTAMP, DATE_ADD, FROM_UNIXTIME, LAST_DAY, TO_DAYS) maps the range
// soundly, so comparisons can still decide; any other varies within the
// bin, and a query that needs it exact there is refused as finer than the
// bin width.

const day = mysqltime.Day

// timeFuncs are the functions evaluated here (parser.scalarFuncs names).
var timeFuncs = map[string]bool{
	"date": true, "timestamp": true, "year": true, "quarter": true, "month": true, "monthname": true,
	"week": true, "weekday": true, "weekofyear": true, "yearweek": true, "dayofmonth": true,
	"dayofweek": true, "dayofyear": true, "dayname": true, "hour": true, "minute": true, "second": true,
	"date_format": true, "str_to_date": true, "from_unixtime": true, "unix_timestamp": true,
	"to_days": true, "from_days": true, "to_seconds": true, "makedate": true, "last_day": true,
	"datediff": true, "date_add": true, "extract": true, "timestampdiff": true,
}

func timeArith(e parser.Expr) error {
	return parser.Errorf(parser.CodeDPRefused, "%s: arithmetic on a date or datetime is not supported; write UNIX_TIMESTAMP(ts) for seconds, ts + INTERVAL n unit (DATE_ADD) to move a time, or TIMESTAMPDIFF(unit, a, b) for a difference", ExprSQL(e))
}

// timeOperand converts the other side of a comparison with the time t: text
// is read as MySQL reads a time constant.
func timeOperand(v, t val) (val, error) {
	if v.kind == vStr {
		sec, dateOnly, ok := parseTimeLiteral(v.str)
		if !ok {
			return val{}, parser.Errorf(parser.CodeDPRefused, "'%s' is not a date or time: write times as '2025-01-31' or '2025-01-31 23:59:59' (UTC)", v.str)
		}
		typ := tDatetime
		if dateOnly {
			typ = tDate
		}
		return timeVal(sec, typ), nil
	}
	return val{}, parser.Errorf(parser.CodeDPRefused, "a %s is compared with the number %s: write the time as text ('2025-01-31 00:00:00') or FROM_UNIXTIME(%s) for Unix seconds", typeName(t), formatNumber(v), formatNumber(v))
}

func typeName(v val) string {
	if v.typ == tDate {
		return "DATE"
	}
	return "DATETIME"
}

func utc(sec float64) time.Time { return time.Unix(int64(math.Floor(sec)), 0).UTC() }

// asTime reads a function's argument as a time: a DATE or DATETIME as it
// is, text as a time constant (NULL when it is none, as in MySQL).
func asTime(name string, v val) (val, error) {
	switch {
	case v.isTime():
		return v, nil
	case v.kind == vStr:
		sec, dateOnly, ok := parseTimeLiteral(v.str)
		if !ok {
			return nullVal, nil
		}
		typ := tDatetime
		if dateOnly {
			typ = tDate
		}
		return timeVal(sec, typ), nil
	}
	return val{}, parser.Errorf(parser.CodeDPRefused, "%s takes a date or datetime, not the number %s: declare the column as type date or datetime, or write FROM_UNIXTIME(x) for Unix seconds", strings.ToUpper(name), formatNumber(v))
}

// truncKey identifies the calendar unit holding sec: two seconds with the
// same key are in the same second, minute, hour, day, week (starting on
// Sunday or Monday), month, quarter or year.
func truncKey(sec float64, unit string) int64 {
	t := utc(sec)
	switch unit {
	case "second":
		return t.Unix()
	case "minute":
		return t.Unix() / 60
	case "hour":
		return t.Unix() / 3600
	case "day":
		return mysqltime.FloorDiv(t.Unix(), day)
	case "week0", "week1": // days since a Sunday (or Monday), in weeks
		d := mysqltime.FloorDiv(t.Unix(), day) + 4 // 1970-01-01 was a Thursday: day 4 of a Sunday week
		if unit == "week1" {
			d--
		}
		return mysqltime.FloorDiv(d, 7)
	case "month":
		return int64(t.Year())*12 + int64(t.Month()) - 1
	case "quarter":
		return int64(t.Year())*4 + int64(t.Month()-1)/3
	}
	return int64(t.Year())
}

// constantOn gives f's value when every second of t's range is in one
// calendar unit (and, with sameYear, one year), else a value that varies
// within t's cell.
func constantOn(t val, unit string, sameYear bool, f func(time.Time) val) val {
	if truncKey(t.lo, unit) != truncKey(t.hi, unit) || sameYear && utc(t.lo).Year() != utc(t.hi).Year() {
		return widen(val{kind: vAny}, t, t)
	}
	out := f(utc(t.lo))
	out.splitCol, out.splitCell = t.splitCol, t.splitCell
	return out
}

// monotoneTime maps t's range through a non-decreasing f.
func monotoneTime(t val, typ sqlType, f func(time.Time) float64) val {
	out := val{kind: vNum, typ: typ, integral: true, lo: f(utc(t.lo)), hi: f(utc(t.hi)), splitCol: t.splitCol, splitCell: t.splitCell}
	out.mid = f(utc(t.mid))
	if out.lo == out.hi {
		out.mid = out.lo
	}
	return out
}

func intVal(x int) val { return numVal(float64(x), tInt) }

func midnight(t time.Time) float64 {
	return float64(time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC).Unix())
}

// timeFunc evaluates a date or time function on non-NULL arguments. It is
// one switch over the function names, each case a few lines of MySQL's
// semantics on a bin's range; the table of cases is the point.
func (ev *evaluator) timeFunc(name string, args []val) (val, error) {
	for _, a := range args {
		if a.kind == vAny {
			return widen(val{kind: vAny}, a, a), nil
		}
	}
	switch name {
	case "from_unixtime":
		x := toNumber(args[0])
		if x.isTime() {
			return val{}, parser.Errorf(parser.CodeDPRefused, "FROM_UNIXTIME takes Unix seconds, not a %s: write the time itself", typeName(x))
		}
		t := val{kind: vNum, typ: tDatetime, integral: true, lo: math.Floor(x.lo), hi: math.Floor(x.hi), mid: math.Floor(x.mid), splitCol: x.splitCol, splitCell: x.splitCell}
		if t.lo < -30610224000 || t.hi > 253402300799 { // years 1000..9999
			if t.lo == t.hi {
				return nullVal, nil
			}
			return widen(val{kind: vAny}, x, x), nil
		}
		if len(args) == 2 {
			return ev.timeFunc("date_format", []val{t, args[1]})
		}
		return t, nil
	case "from_days":
		x := toNumber(args[0])
		f := func(d float64) float64 { return (math.Floor(d) - 719528) * day }
		return val{kind: vNum, typ: tDate, integral: true, lo: f(x.lo), hi: f(x.hi), mid: f(x.mid), splitCol: x.splitCol, splitCell: x.splitCell}, nil
	case "makedate":
		y, d := toNumber(args[0]), toNumber(args[1])
		if !y.exact() || !d.exact() {
			return widen(val{kind: vAny}, y, d), nil
		}
		if d.lo < 1 || y.lo < 0 || y.lo > 9999 {
			return nullVal, nil
		}
		return timeVal(time.Date(int(y.lo), 1, int(d.lo), 0, 0, 0, 0, time.UTC).Unix(), tDate), nil
	case "extract":
		return ev.timeFunc(map[string]string{"second": "second", "minute": "minute", "hour": "hour", "day": "dayofmonth",
			"week": "week", "month": "month", "quarter": "quarter", "year": "year"}[args[0].str], args[1:])
	case "timestampdiff":
		a, err := asTime(name, args[1])
		if err != nil || a.kind == vNull {
			return a, err
		}
		b, err := asTime(name, args[2])
		if err != nil || b.kind == vNull {
			return b, err
		}
		f := func(x, y float64) float64 { return float64(mysqltime.TimestampDiff(args[0].str, utc(x), utc(y))) }
		out := val{kind: vNum, typ: tInt, integral: true, lo: f(a.hi, b.lo), hi: f(a.lo, b.hi), mid: f(a.mid, b.mid)}
		if out.lo == out.hi {
			out.mid = out.lo
		}
		return widen(out, a, b), nil
	case "date_add":
		t, err := asTime(name, args[0])
		if err != nil || t.kind == vNull {
			return t, err
		}
		n := toNumber(args[1])
		unit := args[2].str
		typ := t.typ
		if unit == "second" || unit == "minute" || unit == "hour" {
			typ = tDatetime
		}
		add := func(sec, k float64) float64 {
			return float64(mysqltime.AddInterval(utc(sec), int64(math.Round(k)), unit).Unix())
		}
		out := val{kind: vNum, typ: typ, integral: true, lo: add(t.lo, n.lo), hi: add(t.hi, n.hi), mid: add(t.mid, n.mid)}
		if out.lo == out.hi {
			out.mid = out.lo
		}
		if out.lo < -30610224000 || out.hi > 253402300799 {
			return nullVal, nil
		}
		return widen(out, t, n), nil
	case "str_to_date":
		if args[0].kind != vStr && !args[0].exact() {
			return widen(val{kind: vAny}, args[0], args[0]), nil
		}
		return strToDate(textOf(args[0]), textOf(args[1])), nil
	case "datediff":
		a, err := asTime(name, args[0])
		if err != nil || a.kind == vNull {
			return a, err
		}
		b, err := asTime(name, args[1])
		if err != nil || b.kind == vNull {
			return b, err
		}
		days := func(s float64) float64 { return float64(mysqltime.FloorDiv(int64(math.Floor(s)), day)) }
		out := val{kind: vNum, typ: tInt, integral: true, lo: days(a.lo) - days(b.hi), hi: days(a.hi) - days(b.lo), mid: days(a.mid) - days(b.mid)}
		if out.lo == out.hi {
			out.mid = out.lo
		}
		return widen(out, a, b), nil
	}
	t, err := asTime(name, args[0])
	if err != nil || t.kind == vNull {
		return t, err
	}
	switch name {
	case "date":
		return monotoneTime(t, tDate, midnight), nil
	case "timestamp":
		out := t
		out.typ = tDatetime
		return out, nil
	case "unix_timestamp":
		out := t
		out.typ = tInt
		if out.lo < 0 { // MySQL: 0 before the epoch
			out.lo, out.hi, out.mid = math.Max(out.lo, 0), math.Max(out.hi, 0), math.Max(out.mid, 0)
		}
		return out, nil
	case "to_days":
		return monotoneTime(t, tInt, func(x time.Time) float64 { return float64(mysqltime.FloorDiv(x.Unix(), day) + 719528) }), nil
	case "to_seconds":
		return monotoneTime(t, tInt, func(x time.Time) float64 { return float64(x.Unix() + 719528*day) }), nil
	case "year":
		return monotoneTime(t, tInt, func(x time.Time) float64 { return float64(x.Year()) }), nil
	case "last_day":
		return monotoneTime(t, tDate, func(x time.Time) float64 {
			return float64(time.Date(x.Year(), x.Month()+1, 0, 0, 0, 0, 0, time.UTC).Unix())
		}), nil
	case "quarter":
		return constantOn(t, "quarter", false, func(x time.Time) val { return intVal((int(x.Month())-1)/3 + 1) }), nil
	case "month":
		return constantOn(t, "month", false, func(x time.Time) val { return intVal(int(x.Month())) }), nil
	case "monthname":
		return constantOn(t, "month", false, func(x time.Time) val { return strVal(x.Month().String()) }), nil
	case "dayofmonth":
		return constantOn(t, "day", false, func(x time.Time) val { return intVal(x.Day()) }), nil
	case "dayofweek":
		return constantOn(t, "day", false, func(x time.Time) val { return intVal(int(x.Weekday()) + 1) }), nil
	case "weekday":
		return constantOn(t, "day", false, func(x time.Time) val { return intVal((int(x.Weekday()) + 6) % 7) }), nil
	case "dayofyear":
		return constantOn(t, "day", false, func(x time.Time) val { return intVal(x.YearDay()) }), nil
	case "dayname":
		return constantOn(t, "day", false, func(x time.Time) val { return strVal(x.Weekday().String()) }), nil
	case "hour":
		return constantOn(t, "hour", false, func(x time.Time) val { return intVal(x.Hour()) }), nil
	case "minute":
		return constantOn(t, "minute", false, func(x time.Time) val { return intVal(x.Minute()) }), nil
	case "second":
		return constantOn(t, "second", false, func(x time.Time) val { return intVal(x.Second()) }), nil
	case "week", "weekofyear", "yearweek":
		mode := 0
		switch {
		case name == "weekofyear":
			mode = 3
		case len(args) > 1:
			m := toNumber(args[1])
			if !m.exact() {
				return widen(val{kind: vAny}, m, m), nil
			}
			mode = int(m.lo) & 7
		}
		unit := "week0"
		if mode&1 != 0 {
			unit = "week1"
		}
		if name == "yearweek" {
			return constantOn(t, unit, false, func(x time.Time) val {
				w, y := mysqltime.CalcWeek(x, mysqltime.WeekMode(mode)|mysqltime.WeekYear)
				return intVal(y*100 + w)
			}), nil
		}
		return constantOn(t, unit, true, func(x time.Time) val {
			w, _ := mysqltime.CalcWeek(x, mysqltime.WeekMode(mode))
			return intVal(w)
		}), nil
	case "date_format":
		if !args[1].exact() && args[1].kind != vStr {
			return widen(val{kind: vAny}, args[1], args[1]), nil
		}
		format := textOf(args[1])
		units, sameYear := mysqltime.FormatUnits(format)
		if sameYear {
			units = append(units, "year")
		}
		for _, u := range units {
			if truncKey(t.lo, u) != truncKey(t.hi, u) {
				return widen(val{kind: vAny}, t, t), nil
			}
		}
		out := strVal(mysqltime.DateFormat(utc(t.lo), format))
		out.splitCol, out.splitCell = t.splitCol, t.splitCell
		return out, nil
	}
	return val{}, parser.Errorf(parser.CodeDPRefused, "the function %s is not supported over dates", strings.ToUpper(name))
}

// MySQL's week modes (sql_time.cc): the flags of calc_week.

// A bucket such as Superset's week, DATE(DATE_SUB(ts, INTERVAL
// DAYOFWEEK(ts) - 1 DAY)), is constant on a weekly bin although its parts
// (DAYOFWEEK) are not: range evaluation alone refuses it. So an evaluation
// that a time bin splits is tried again on the bin's calendar pieces — its
// days (hours for a bin of two days or less; a date column's days are its
// values) —, each evaluated soundly on its range; when every piece gives the
// same value, that is the bin's value.

// maxPieces bounds the pieces one bin is cut into.
const maxPieces = 400

// timePieces cuts a time column's value on a bin into calendar pieces, or
// returns nil when it is not worth it (not a wide time, too many pieces).
func timePieces(v val) []val {
	if !v.isTime() || v.lo == v.hi {
		return nil
	}
	step := int64(day)
	if v.typ == tDatetime && v.hi-v.lo <= 2*day {
		step = 3600
	}
	lo, hi := int64(v.lo), int64(v.hi)
	if (hi-lo)/step+2 > maxPieces {
		return nil
	}
	var out []val
	for start := lo; start <= hi; {
		end := min((mysqltime.FloorDiv(start, step)+1)*step-1, hi)
		if v.typ == tDate {
			end = start // a date's values are days: each piece exact
		}
		p := v
		p.lo, p.hi, p.mid = float64(start), float64(end), float64(start+end)/2
		out = append(out, p)
		if v.typ == tDate {
			start += day
		} else {
			start = end + 1
		}
	}
	return out
}

// splitTimeColumn names the time column whose bin makes a result wide or
// splits a decision ("" when there is none).
func splitTimeColumn(v val, err error, en env) string {
	col := ""
	switch e := err.(type) {
	case nil:
		if !v.wide() {
			return ""
		}
		col = v.splitCol
	case *splitError:
		col = e.col
	default:
		return ""
	}
	if x, ok := en[col]; ok && x.isTime() {
		return col
	}
	return ""
}

// exprOnPieces is expr, retried piece by piece where a time bin splits it.
func (ev *evaluator) exprOnPieces(e parser.Expr, en env) (val, error) {
	v, err := ev.expr(e, en)
	col := splitTimeColumn(v, err, en)
	if col == "" {
		return v, err
	}
	pieces := timePieces(en[col])
	if pieces == nil {
		return v, err
	}
	sub := make(env, len(en))
	for k, x := range en {
		sub[k] = x
	}
	var out val
	for i, p := range pieces {
		sub[col] = p
		w, err2 := ev.expr(e, sub)
		if err2 != nil || w.wide() || i > 0 && w.key() != out.key() {
			return v, err
		}
		out = w
	}
	out.splitCol, out.splitCell = en[col].splitCol, en[col].splitCell
	return out, nil
}

// predOnPieces is pred, retried piece by piece where a time bin splits it.
func (ev *evaluator) predOnPieces(p parser.Pred, en env) (tri, error) {
	t, err := ev.pred(p, en)
	col := splitTimeColumn(val{}, err, en)
	if col == "" {
		return t, err
	}
	pieces := timePieces(en[col])
	if pieces == nil {
		return t, err
	}
	sub := make(env, len(en))
	for k, x := range en {
		sub[k] = x
	}
	var out tri
	for i, piece := range pieces {
		sub[col] = piece
		u, err2 := ev.pred(p, sub)
		if err2 != nil || i > 0 && u != out {
			return t, err
		}
		out = u
	}
	return out, nil
}

// parseTimeLiteral reads a time constant as MySQL does: ISO 8601 (and
// catalog.ParseTime's forms), any punctuation between the date's parts,
// one-digit months, days and hours, YYYYMMDD and YYYYMMDDHHMMSS.
func parseTimeLiteral(s string) (sec int64, dateOnly, ok bool) {
	if sec, dateOnly, ok := catalog.ParseTime(s); ok {
		return sec, dateOnly, true
	}
	s = strings.TrimSpace(s)
	digits := func(t string) bool {
		for i := 0; i < len(t); i++ {
			if t[i] < '0' || t[i] > '9' {
				return false
			}
		}
		return t != ""
	}
	var f [6]int
	n := 0
	switch {
	case digits(s) && (len(s) == 8 || len(s) == 14):
		for i, w := range []int{4, 2, 2, 2, 2, 2} {
			if len(s) < w {
				break
			}
			f[i], _ = strconv.Atoi(s[:w])
			s = s[w:]
			n = i + 1
		}
	default:
		// Fields of digits separated by one punctuation character; a space
		// or T between the date and the time; a fraction after seconds.
		datePart, timePart, _ := strings.Cut(s, " ")
		if i := strings.IndexAny(datePart, "Tt"); i > 0 && timePart == "" {
			datePart, timePart = datePart[:i], datePart[i+1:]
		}
		if i := strings.IndexByte(timePart, '.'); i >= 0 {
			if !digits(timePart[i+1:]) {
				return 0, false, false
			}
			timePart = timePart[:i]
		}
		split := func(t string, want int) ([]int, bool) {
			var out []int
			start := 0
			for i := 0; i <= len(t); i++ {
				if i == len(t) || t[i] < '0' || t[i] > '9' {
					if i == start || i-start > 4 {
						return nil, false
					}
					x, _ := strconv.Atoi(t[start:i])
					out = append(out, x)
					start = i + 1
					if i < len(t) && !strings.ContainsRune("-/.:_", rune(t[i])) {
						return nil, false
					}
				}
			}
			return out, len(out) <= want
		}
		d, ok := split(datePart, 3)
		if !ok || len(d) != 3 {
			return 0, false, false
		}
		copy(f[:], d)
		n = 3
		if datePart[:strings.IndexAny(datePart, "-/.:_")] != "" && len(datePart[:strings.IndexAny(datePart, "-/.:_")]) <= 2 {
			if f[0] < 70 {
				f[0] += 2000
			} else {
				f[0] += 1900
			}
		}
		if strings.TrimSpace(timePart) != "" {
			t, ok := split(strings.TrimSpace(timePart), 3)
			if !ok || len(t) < 2 {
				return 0, false, false
			}
			copy(f[3:], t)
			n = 6
		}
	}
	if f[1] < 1 || f[1] > 12 || f[2] < 1 || f[0] < 1000 || f[0] > 9999 || f[2] > mysqltime.DaysInMonth(f[0], f[1]) || f[3] > 23 || f[4] > 59 || f[5] > 59 {
		return 0, false, false
	}
	return time.Date(f[0], time.Month(f[1]), f[2], f[3], f[4], f[5], 0, time.UTC).Unix(), n == 3, true
}

// strToDate is STR_TO_DATE as a value: a DATE or DATETIME, NULL when s
// does not match (mysqltime.StrToDate).
func strToDate(s, format string) val {
	sec, hasTime, ok := mysqltime.StrToDate(s, format)
	switch {
	case !ok:
		return nullVal
	case hasTime:
		return timeVal(sec, tDatetime)
	}
	return timeVal(sec, tDate)
}
