package compile

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/dpproxy/dpproxy/parser"
)

// The scalar functions dpproxy evaluates on declared values, with MySQL's
// semantics: NULL in any argument gives NULL (except IFNULL, COALESCE and
// CONCAT_WS's separators), numbers in a string context print as MySQL
// prints them, strings in a numeric context take their numeric prefix.
// Monotone numeric functions (FLOOR, CEIL, ROUND, TRUNCATE, ABS, SIGN,
// SQRT, EXP, LN, LOG, POWER by a constant) map a bin's range of values
// soundly, so FLOOR(age / 10) over bins of width 5 stays exact where it
// can; other functions of a value that varies within its cell vary too.

// call evaluates a function on argument values.
func (ev *evaluator) call(name string, args []val) (val, error) {
	switch name {
	case "ifnull":
		if args[0].kind == vNull {
			return args[1], nil
		}
		return args[0], nil
	case "coalesce":
		for _, a := range args {
			if a.kind != vNull {
				return a, nil
			}
		}
		return nullVal, nil
	case "nullif":
		t, err := ev.compare(args[0], parser.OpEq, args[1])
		if err != nil {
			return val{}, err
		}
		if t == tTrue {
			return nullVal, nil
		}
		return args[0], nil
	case "concat_ws":
		if args[0].kind == vNull {
			return nullVal, nil
		}
		var parts []val
		for _, a := range args[1:] {
			if a.kind != vNull {
				parts = append(parts, a)
			}
		}
		return ev.strings(parts, func(s []string) val {
			sep := s[0]
			return strVal(strings.Join(s[1:], sep))
		}, args[0])
	case "pi":
		return numVal(math.Pi, tDouble), nil
	}
	for _, a := range args {
		if a.kind == vNull {
			return nullVal, nil
		}
	}
	for _, a := range args {
		if a.kind == vOther {
			return val{kind: vOther}, nil
		}
	}
	if timeFuncs[name] {
		return ev.timeFunc(name, args)
	}
	switch name {
	case "floor", "ceil", "round", "truncate", "abs", "sign", "sqrt", "exp", "ln", "log2", "log10", "log", "power", "mod", "cast_signed", "cast_unsigned", "cast_double":
		for _, a := range args {
			if a.isTime() {
				return val{}, parser.Errorf(parser.CodeDPRefused, "%s of a %s is not supported: write %s(UNIX_TIMESTAMP(ts)) for Unix seconds, or a date function (DATE, YEAR, DATE_FORMAT)", strings.ToUpper(strings.TrimPrefix(name, "cast_")), typeName(a), strings.ToUpper(strings.TrimPrefix(name, "cast_")))
			}
		}
		return numeric(name, args)
	case "greatest", "least":
		return ev.extreme(name == "greatest", args)
	}
	// String functions: every argument must be exact.
	return ev.strings(args, func(s []string) val { return ev.stringFunc(name, s) })
}

// strings applies f to the arguments as text; a number that varies within
// its cell varies as text too.
func (ev *evaluator) strings(args []val, f func([]string) val, extra ...val) (val, error) {
	all := append(append([]val(nil), extra...), args...)
	for _, a := range all {
		if a.kind == vOther {
			return val{kind: vOther}, nil
		}
		if a.wide() {
			return widen(val{kind: vAny}, a, a), nil
		}
	}
	s := make([]string, len(all))
	for i, a := range all {
		s[i] = textOf(a)
	}
	return f(s), nil
}

func (ev *evaluator) stringFunc(name string, s []string) val {
	num := func(i int) int {
		n := parser.MySQLNumber(s[i])
		if math.IsNaN(n) {
			return 0
		}
		return int(math.Round(n))
	}
	r := []rune(s[0])
	switch name {
	case "concat", "cast_char":
		return strVal(strings.Join(s, ""))
	case "lower":
		return strVal(strings.ToLower(s[0]))
	case "upper":
		return strVal(strings.ToUpper(s[0]))
	case "length":
		return numVal(float64(len(s[0])), tInt)
	case "char_length":
		return numVal(float64(utf8.RuneCountInString(s[0])), tInt)
	case "trim":
		return strVal(strings.Trim(s[0], " "))
	case "ltrim":
		return strVal(strings.TrimLeft(s[0], " "))
	case "rtrim":
		return strVal(strings.TrimRight(s[0], " "))
	case "reverse":
		out := make([]rune, len(r))
		for i, c := range r {
			out[len(r)-1-i] = c
		}
		return strVal(string(out))
	case "left":
		n := min(max(num(1), 0), len(r))
		return strVal(string(r[:n]))
	case "right":
		n := min(max(num(1), 0), len(r))
		return strVal(string(r[len(r)-n:]))
	case "substring":
		// SUBSTRING(s, pos[, len]): 1-based; a negative pos counts from the end; 0 gives ''.
		pos := num(1)
		switch {
		case pos > 0:
			pos--
		case pos < 0:
			pos = len(r) + pos
		default:
			return strVal("")
		}
		if pos < 0 || pos > len(r) {
			return strVal("")
		}
		end := len(r)
		if len(s) > 2 {
			n := num(2)
			if n <= 0 {
				return strVal("")
			}
			end = min(pos+n, len(r))
		}
		return strVal(string(r[pos:end]))
	case "replace":
		if s[1] == "" {
			return strVal(s[0])
		}
		return strVal(strings.ReplaceAll(s[0], s[1], s[2]))
	case "repeat":
		n := num(1)
		if n <= 0 || n*len(s[0]) > 1<<16 {
			if n <= 0 {
				return strVal("")
			}
			return nullVal
		}
		return strVal(strings.Repeat(s[0], n))
	case "lpad", "rpad":
		n, pad := num(1), []rune(s[2])
		if n < 0 || n > 1<<16 {
			return nullVal
		}
		if n <= len(r) {
			return strVal(string(r[:n]))
		}
		if len(pad) == 0 {
			return strVal("")
		}
		var fill []rune
		for len(fill) < n-len(r) {
			fill = append(fill, pad...)
		}
		fill = fill[:n-len(r)]
		if name == "lpad" {
			return strVal(string(fill) + s[0])
		}
		return strVal(s[0] + string(fill))
	case "locate", "instr":
		// LOCATE(sub, s[, pos]) and INSTR(s, sub): 1-based, 0 if absent; case-insensitive.
		sub, str, from := s[0], s[1], 1
		if name == "instr" {
			sub, str = s[1], s[0]
		} else if len(s) > 2 {
			from = num(2)
		}
		rs := []rune(fold(str))
		if from < 1 || from > len(rs)+1 {
			return numVal(0, tInt)
		}
		i := strings.Index(string(rs[from-1:]), fold(sub))
		if i < 0 {
			return numVal(0, tInt)
		}
		return numVal(float64(from+utf8.RuneCountInString(string(rs[from-1:])[:i])), tInt)
	case "strcmp":
		return numVal(float64(ev.co.compare(s[0], s[1])), tInt)
	}
	return val{kind: vAny}
}

// numeric evaluates a numeric function over ranges. It is one switch over
// the function names, each case that function's interval arithmetic; the
// table of cases is the point, as in timeFunc.
func numeric(name string, args []val) (val, error) {
	for i := range args {
		if args[i].kind == vAny {
			return widen(val{kind: vAny}, args[i], args[i]), nil
		}
		args[i] = toNumber(args[i])
	}
	x := args[0]
	// monotone maps [lo, hi] through a non-decreasing f.
	monotone := func(f func(float64) float64, typ sqlType, integral bool) val {
		out := x
		out.lo, out.hi, out.mid = f(x.lo), f(x.hi), f(x.mid)
		out.typ, out.integral = typ, integral
		if typ != tDecimal {
			out.scale = 0
		}
		if math.IsNaN(out.lo) || math.IsNaN(out.hi) {
			return nullVal
		}
		if out.lo == out.hi {
			out.mid = out.lo
		}
		return out
	}
	intType := func() sqlType {
		if x.typ == tDouble {
			return tDouble
		}
		return tInt
	}
	digits := func() (int, bool) {
		if len(args) < 2 {
			return 0, true
		}
		if !args[1].exact() {
			return 0, false
		}
		return int(args[1].lo), true
	}
	switch name {
	case "floor":
		return monotone(math.Floor, intType(), true), nil
	case "ceil":
		return monotone(math.Ceil, intType(), true), nil
	case "round", "truncate":
		d, ok := digits()
		if !ok {
			return widen(val{kind: vAny}, args[1], args[1]), nil
		}
		p := math.Pow(10, float64(d))
		f := func(v float64) float64 {
			if name == "truncate" {
				return math.Trunc(v*p) / p
			}
			if x.typ == tDouble {
				return math.RoundToEven(v*p) / p
			}
			return math.Round(v*p) / p // half away from zero for exact types
		}
		typ, integral := x.typ, d <= 0
		if d <= 0 && x.typ != tDouble {
			typ = tInt
		}
		out := monotone(f, typ, integral)
		if typ == tDecimal {
			out.scale = max(d, 0)
		}
		return out, nil
	case "abs":
		out := x
		out.mid = math.Abs(x.mid)
		switch {
		case x.lo >= 0:
		case x.hi <= 0:
			out.lo, out.hi = -x.hi, -x.lo
		default:
			out.lo, out.hi = 0, math.Max(-x.lo, x.hi)
		}
		return out, nil
	case "sign":
		return monotone(func(v float64) float64 {
			switch {
			case v > 0:
				return 1
			case v < 0:
				return -1
			}
			return 0
		}, tInt, true), nil
	case "sqrt":
		if x.lo < 0 {
			if x.hi < 0 {
				return nullVal, nil
			}
			return widen(val{kind: vAny}, x, x), nil
		}
		return monotone(math.Sqrt, tDouble, false), nil
	case "exp":
		return monotone(math.Exp, tDouble, false), nil
	case "ln", "log2", "log10", "log":
		base := map[string]float64{"ln": math.E, "log": math.E, "log2": 2, "log10": 10}[name]
		if name == "log" && len(args) == 2 {
			// LOG(b, x)
			if !x.exact() || x.lo <= 0 || x.lo == 1 {
				if x.exact() {
					return nullVal, nil
				}
				return widen(val{kind: vAny}, x, x), nil
			}
			base, x = x.lo, args[1]
		}
		if x.hi <= 0 {
			return nullVal, nil
		}
		if x.lo <= 0 {
			return widen(val{kind: vAny}, x, x), nil
		}
		lb := math.Log(base)
		return monotone(func(v float64) float64 { return math.Log(v) / lb }, tDouble, false), nil
	case "power":
		e := args[1]
		if !e.exact() {
			if x.exact() && x.lo > 0 {
				b := x.lo
				out := e
				out.lo, out.hi, out.mid = math.Pow(b, e.lo), math.Pow(b, e.hi), math.Pow(b, e.mid)
				if out.lo > out.hi {
					out.lo, out.hi = out.hi, out.lo
				}
				out.typ, out.integral = tDouble, false
				return out, nil
			}
			return widen(val{kind: vAny}, e, e), nil
		}
		p := e.lo
		f := func(v float64) float64 { return math.Pow(v, p) }
		switch {
		case x.exact():
			return finite(monotone(f, tDouble, false), x), nil
		case x.lo >= 0 && p >= 0:
			return finite(monotone(f, tDouble, false), x), nil
		case x.hi <= 0 && p == math.Trunc(p) && p >= 0:
			// (-v)^p: even powers decrease, odd increase on negatives.
			out := monotone(f, tDouble, false)
			if out.lo > out.hi {
				out.lo, out.hi = out.hi, out.lo
			}
			return finite(out, x), nil
		}
		return widen(val{kind: vAny}, x, x), nil
	case "mod":
		return arith("%", args[0], args[1]), nil
	case "cast_signed", "cast_unsigned":
		out := monotone(func(v float64) float64 {
			if x.typ == tDouble || x.typ == tDecimal {
				return math.Round(v)
			}
			return math.Trunc(v)
		}, tInt, true)
		return out, nil
	case "cast_double":
		out := x
		out.typ = tDouble
		return out, nil
	}
	return val{}, fmt.Errorf("compile: unknown function %s", name)
}

func finite(v, from val) val {
	if v.kind == vNum && (math.IsNaN(v.lo) || math.IsInf(v.lo, 0) || math.IsNaN(v.hi) || math.IsInf(v.hi, 0)) {
		return widen(val{kind: vAny}, from, from)
	}
	return v
}

// extreme is GREATEST or LEAST: NULL if any argument is, compared as
// numbers when all are numbers, else as strings.
func (ev *evaluator) extreme(greatest bool, args []val) (val, error) {
	allNum := true
	for _, a := range args {
		if a.kind == vAny {
			return widen(val{kind: vAny}, a, a), nil
		}
		allNum = allNum && a.kind == vNum
	}
	if !allNum {
		return ev.strings(args, func(s []string) val {
			best := s[0]
			for _, x := range s[1:] {
				c := ev.co.compare(x, best)
				if (greatest && c > 0) || (!greatest && c < 0) {
					best = x
				}
			}
			return strVal(best)
		})
	}
	out := args[0]
	for _, a := range args[1:] {
		typ, scale := resultType(out, a)
		if greatest {
			out.lo, out.hi, out.mid = math.Max(out.lo, a.lo), math.Max(out.hi, a.hi), math.Max(out.mid, a.mid)
		} else {
			out.lo, out.hi, out.mid = math.Min(out.lo, a.lo), math.Min(out.hi, a.hi), math.Min(out.mid, a.mid)
		}
		out.typ, out.scale = typ, scale
		out.integral = out.integral && a.integral
		out = widen(out, out, a)
	}
	return out, nil
}
