package parser

import (
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dolthub/vitess/go/vt/sqlparser"
)

// funcSpec is a deterministic scalar function dpproxy evaluates on the
// declared domain: its canonical name and arity (max -1: any number).
type funcSpec struct {
	name     string
	min, max int
}

// scalarFuncs are the functions of domain columns that compile/ evaluates
// with MySQL's semantics (see compile/funcs.go).
var scalarFuncs = map[string]funcSpec{
	"abs": {"abs", 1, 1}, "ceil": {"ceil", 1, 1}, "ceiling": {"ceil", 1, 1}, "floor": {"floor", 1, 1},
	"round": {"round", 1, 2}, "truncate": {"truncate", 2, 2}, "mod": {"mod", 2, 2},
	"pow": {"power", 2, 2}, "power": {"power", 2, 2}, "sqrt": {"sqrt", 1, 1}, "exp": {"exp", 1, 1},
	"ln": {"ln", 1, 1}, "log": {"log", 1, 2}, "log2": {"log2", 1, 1}, "log10": {"log10", 1, 1},
	"sign": {"sign", 1, 1}, "greatest": {"greatest", 2, -1}, "least": {"least", 2, -1}, "pi": {"pi", 0, 0},
	"concat": {"concat", 1, -1}, "concat_ws": {"concat_ws", 2, -1},
	"left": {"left", 2, 2}, "right": {"right", 2, 2},
	"substring": {"substring", 2, 3}, "substr": {"substring", 2, 3}, "mid": {"substring", 3, 3},
	"lower": {"lower", 1, 1}, "lcase": {"lower", 1, 1}, "upper": {"upper", 1, 1}, "ucase": {"upper", 1, 1},
	"length": {"length", 1, 1}, "octet_length": {"length", 1, 1},
	"char_length": {"char_length", 1, 1}, "character_length": {"char_length", 1, 1},
	"trim": {"trim", 1, 1}, "ltrim": {"ltrim", 1, 1}, "rtrim": {"rtrim", 1, 1},
	"replace": {"replace", 3, 3}, "reverse": {"reverse", 1, 1},
	"lpad": {"lpad", 3, 3}, "rpad": {"rpad", 3, 3}, "repeat": {"repeat", 2, 2},
	"locate": {"locate", 2, 3}, "instr": {"instr", 2, 2}, "strcmp": {"strcmp", 2, 2},
	"ifnull": {"ifnull", 2, 2}, "nullif": {"nullif", 2, 2}, "coalesce": {"coalesce", 1, -1},
	// Date and time functions (compile/timefuncs.go), over date and
	// datetime columns and times written as text, in UTC.
	"date": {"date", 1, 1}, "timestamp": {"timestamp", 1, 1}, "year": {"year", 1, 1},
	"quarter": {"quarter", 1, 1}, "month": {"month", 1, 1}, "monthname": {"monthname", 1, 1},
	"week": {"week", 1, 2}, "weekday": {"weekday", 1, 1}, "weekofyear": {"weekofyear", 1, 1},
	"yearweek": {"yearweek", 1, 2}, "day": {"dayofmonth", 1, 1}, "dayofmonth": {"dayofmonth", 1, 1},
	"dayofweek": {"dayofweek", 1, 1}, "dayofyear": {"dayofyear", 1, 1}, "dayname": {"dayname", 1, 1},
	"hour": {"hour", 1, 1}, "minute": {"minute", 1, 1}, "second": {"second", 1, 1},
	"date_format": {"date_format", 2, 2}, "str_to_date": {"str_to_date", 2, 2},
	"from_unixtime": {"from_unixtime", 1, 2}, "unix_timestamp": {"unix_timestamp", 1, 1},
	"to_days": {"to_days", 1, 1}, "from_days": {"from_days", 1, 1}, "to_seconds": {"to_seconds", 1, 1},
	"makedate": {"makedate", 2, 2}, "last_day": {"last_day", 1, 1}, "datediff": {"datediff", 2, 2},
}

// nowFuncs are the functions of the request's time: a constant per
// request (see ParseAt), a DATETIME or a DATE.
var nowFuncs = map[string]bool{
	"now": true, "current_timestamp": true, "localtime": true, "localtimestamp": true,
	"sysdate": true, "utc_timestamp": true,
}

var todayFuncs = map[string]bool{"curdate": true, "current_date": true, "utc_date": true}

// intervalUnits are the units of INTERVAL n unit that dpproxy evaluates.
var intervalUnits = map[string]bool{
	"second": true, "minute": true, "hour": true, "day": true, "week": true,
	"month": true, "quarter": true, "year": true,
}

// nonDeterministic are functions whose value does not follow from a row's
// domain values: they cannot be evaluated on the declared domain.
var nonDeterministic = map[string]bool{
	"rand": true, "uuid": true, "uuid_short": true, "random_bytes": true,
	"curtime": true, "current_time": true, "utc_time": true,
	"connection_id": true, "user": true, "current_user": true, "session_user": true, "system_user": true,
	"database": true, "schema": true, "version": true, "last_insert_id": true, "found_rows": true,
	"row_count": true, "sleep": true, "benchmark": true, "get_lock": true, "release_lock": true,
}

// dateFuncs need date or time domains.
var dateFuncs = map[string]bool{
	"date": true, "time": true, "timestamp": true, "year": true, "quarter": true, "month": true, "monthname": true,
	"week": true, "weekday": true, "weekofyear": true, "yearweek": true, "day": true, "dayofmonth": true,
	"dayofweek": true, "dayofyear": true, "dayname": true, "hour": true, "minute": true, "second": true,
	"microsecond": true, "date_format": true, "time_format": true, "str_to_date": true, "from_unixtime": true,
	"unix_timestamp": true, "date_add": true, "date_sub": true, "adddate": true, "subdate": true,
	"addtime": true, "subtime": true, "datediff": true, "timediff": true, "timestampdiff": true,
	"timestampadd": true, "last_day": true, "makedate": true, "maketime": true, "to_days": true,
	"from_days": true, "to_seconds": true, "sec_to_time": true, "time_to_sec": true, "convert_tz": true,
	"period_add": true, "period_diff": true, "extract": true,
}

// postFuncs are the numeric functions of aggregates and constants computed
// as post-processing in the select list, with their arity.
var postFuncs = map[string]funcSpec{
	"pow": {"power", 2, 2}, "power": {"power", 2, 2}, "sqrt": {"sqrt", 1, 1},
	"round": {"round", 1, 2}, "truncate": {"truncate", 2, 2}, "floor": {"floor", 1, 1},
	"ceil": {"ceil", 1, 1}, "ceiling": {"ceil", 1, 1}, "abs": {"abs", 1, 1}, "sign": {"sign", 1, 1},
	"exp": {"exp", 1, 1}, "ln": {"ln", 1, 1}, "log": {"log", 1, 2}, "log2": {"log2", 1, 1},
	"log10": {"log10", 1, 1}, "mod": {"mod", 2, 2}, "greatest": {"greatest", 2, -1},
	"least": {"least", 2, -1}, "ifnull": {"ifnull", 2, 2}, "coalesce": {"coalesce", 1, -1}, "pi": {"pi", 0, 0},
}

func funcNames(m map[string]funcSpec) string {
	var names []string
	for n := range m {
		names = append(names, strings.ToUpper(n))
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// refuseFunc explains why a function cannot be evaluated on the domain.
func refuseFunc(name, text string) *Error {
	switch {
	case nowFuncs[name] || todayFuncs[name]:
		return Errorf(CodeNotSupported, "%s in the select list of a DP query is not supported: it is a constant of the request, not a deterministic function of a row's domain values; select it in a statement of its own (SELECT NOW())", text)
	case name == "curtime" || name == "current_time" || name == "utc_time":
		return Errorf(CodeNotSupported, "%s: TIME values are not supported; compare with NOW() or a datetime literal, or use HOUR(), MINUTE() and SECOND() of a datetime", text)
	case nonDeterministic[name]:
		return Errorf(CodeNotSupported, "%s is not a deterministic function of a row's domain values, so dpproxy cannot evaluate it on the declared domain: write its value as a literal (NOW() and CURRENT_TIMESTAMP are fine: one constant per request)", text)
	case dateFuncs[name]:
		return Errorf(CodeNotSupported, "%s: this date function is not supported (TIME values are not); supported: DATE, TIMESTAMP, YEAR, QUARTER, MONTH, WEEK, YEARWEEK, DAYOFWEEK, DAYOFMONTH, DAYOFYEAR, HOUR, MINUTE, SECOND, DATE_FORMAT, STR_TO_DATE, FROM_UNIXTIME, UNIX_TIMESTAMP, DATE_ADD, DATE_SUB, EXTRACT, TIMESTAMPDIFF, DATEDIFF, MAKEDATE, LAST_DAY, x ± INTERVAL n unit", text)
	}
	return Errorf(CodeNotSupported, "the function %s is not supported over domain columns; supported: %s, IF, CASE, CAST", strings.ToUpper(name), funcNames(scalarFuncs))
}

// expr converts a scalar expression over the table's columns (no
// aggregates). clause names the clause for 1054 messages. In HAVING,
// unqualified names that are not columns resolve to select-list aliases.
// It is one switch over vitess's expression node types, each case a few
// lines; split, the cases would only move apart from the switch that
// dispatches them.
func (b *selectBuilder) expr(e sqlparser.Expr, clause string) (Expr, error) {
	switch x := e.(type) {
	case *sqlparser.ParenExpr:
		return b.expr(x.Expr, clause)
	case *sqlparser.ColName:
		if isVariable(x) {
			return nil, Errorf(CodeNotSupported, "variables (%s) are not supported in expressions over domain columns: write the value as a literal", sqlparser.String(x))
		}
		if r, ok, err := b.resolveAlias(x, clause); ok || err != nil {
			return r, err
		}
		c, err := b.column(x, clause)
		return Col{Name: c}, err
	case *sqlparser.SQLVal, sqlparser.BoolVal, *sqlparser.NullVal:
		lit, kind, err := literal(x)
		if err != nil {
			return nil, err
		}
		if kind == litNull {
			return Value{Null: true}, nil
		}
		return Value{Lit: lit}, nil
	case *sqlparser.UnaryExpr:
		if lit, kind, err := literal(x); err == nil && kind == litValue {
			return Value{Lit: lit}, nil
		}
		inner, err := b.expr(x.Expr, clause)
		if err != nil {
			return nil, err
		}
		switch x.Operator {
		case sqlparser.UMinusStr:
			return Neg{X: inner}, nil
		case sqlparser.UPlusStr:
			return inner, nil
		case sqlparser.BangStr:
			p, err := b.pred(x.Expr)
			if err != nil {
				return nil, err
			}
			return Cond{P: not(p)}, nil
		}
		return nil, Errorf(CodeNotSupported, "the operator %s in %s is not supported over domain columns", strings.TrimSpace(x.Operator), sqlparser.String(x))
	case *sqlparser.BinaryExpr:
		switch x.Operator {
		case sqlparser.PlusStr, sqlparser.MinusStr, sqlparser.MultStr, sqlparser.DivStr, sqlparser.IntDivStr, sqlparser.ModStr:
		default:
			return nil, Errorf(CodeNotSupported, "the bit operator %s in %s is not supported over domain columns: use + - * / DIV %%", x.Operator, sqlparser.String(x))
		}
		if iv, ok := x.Right.(*sqlparser.IntervalExpr); ok && (x.Operator == sqlparser.PlusStr || x.Operator == sqlparser.MinusStr) {
			return b.interval(x.Left, iv, x.Operator == sqlparser.MinusStr, clause)
		}
		if iv, ok := x.Left.(*sqlparser.IntervalExpr); ok && x.Operator == sqlparser.PlusStr {
			return b.interval(x.Right, iv, false, clause)
		}
		l, err := b.expr(x.Left, clause)
		if err != nil {
			return nil, err
		}
		r, err := b.expr(x.Right, clause)
		if err != nil {
			return nil, err
		}
		return Arith{Op: x.Operator, Left: l, Right: r}, nil
	case *sqlparser.FuncExpr:
		return b.call(x, clause)
	case *sqlparser.CaseExpr:
		var c Case
		if x.Expr != nil {
			op, err := b.expr(x.Expr, clause)
			if err != nil {
				return nil, err
			}
			c.Operand = op
		}
		for _, w := range x.Whens {
			var when When
			if c.Operand != nil {
				v, err := b.expr(w.Cond, clause)
				if err != nil {
					return nil, err
				}
				when.Value = v
			} else {
				p, err := b.pred(w.Cond)
				if err != nil {
					return nil, err
				}
				when.Cond = p
			}
			then, err := b.expr(w.Val, clause)
			if err != nil {
				return nil, err
			}
			when.Then = then
			c.Whens = append(c.Whens, when)
		}
		if x.Else != nil {
			el, err := b.expr(x.Else, clause)
			if err != nil {
				return nil, err
			}
			if v, ok := el.(Value); !ok || !v.Null {
				c.Else = el
			}
		}
		return c, nil
	case *sqlparser.ConvertExpr:
		inner, err := b.expr(x.Expr, clause)
		if err != nil {
			return nil, err
		}
		t := ""
		if x.Type != nil {
			t = strings.ToLower(x.Type.Type)
		}
		switch t {
		case "signed", "signed integer", "integer", "int":
			return Call{Name: "cast_signed", Args: []Expr{inner}}, nil
		case "unsigned", "unsigned integer":
			return Call{Name: "cast_unsigned", Args: []Expr{inner}}, nil
		case "char", "nchar", "varchar":
			return Call{Name: "cast_char", Args: []Expr{inner}}, nil
		case "decimal", "double", "float", "real":
			return Call{Name: "cast_double", Args: []Expr{inner}}, nil
		case "date":
			return Call{Name: "date", Args: []Expr{inner}}, nil
		case "datetime", "timestamp":
			return Call{Name: "timestamp", Args: []Expr{inner}}, nil
		}
		return nil, Errorf(CodeNotSupported, "%s is not supported over domain columns: CAST takes SIGNED, UNSIGNED, CHAR, DECIMAL, DOUBLE, DATE or DATETIME", sqlparser.String(x))
	case *sqlparser.SubstrExpr:
		var s Expr
		if x.Name != nil {
			c, err := b.expr(x.Name, clause)
			if err != nil {
				return nil, err
			}
			s = c
		} else {
			lit, _, err := literal(x.StrVal)
			if err != nil {
				return nil, err
			}
			s = Value{Lit: lit}
		}
		args := []Expr{s}
		for _, a := range []sqlparser.Expr{x.From, x.To} {
			if a == nil {
				continue
			}
			v, err := b.expr(a, clause)
			if err != nil {
				return nil, err
			}
			args = append(args, v)
		}
		return Call{Name: "substring", Args: args}, nil
	case *sqlparser.TrimExpr:
		if x.Pattern != nil {
			if v, ok := x.Pattern.(*sqlparser.SQLVal); !ok || string(v.Val) != " " {
				return nil, Errorf(CodeNotSupported, "TRIM of characters other than spaces is not supported: write TRIM(x), LTRIM(x) or RTRIM(x)")
			}
		}
		s, err := b.expr(x.Str, clause)
		if err != nil {
			return nil, err
		}
		name := "trim"
		switch x.Dir {
		case sqlparser.Leading:
			name = "ltrim"
		case sqlparser.Trailing:
			name = "rtrim"
		}
		return Call{Name: name, Args: []Expr{s}}, nil
	case *sqlparser.CollateExpr:
		return nil, Errorf(CodeNotSupported, "COLLATE is not supported: dpproxy compares text as MySQL's default collation utf8mb4_0900_ai_ci does (case- and accent-insensitive); remove the COLLATE clause")
	case *sqlparser.ExtractFuncExpr:
		unit := strings.ToLower(x.Unit)
		if !intervalUnits[unit] {
			return nil, Errorf(CodeNotSupported, "%s: EXTRACT takes SECOND, MINUTE, HOUR, DAY, WEEK, MONTH, QUARTER or YEAR", sqlparser.String(x))
		}
		inner, err := b.expr(x.Expr, clause)
		if err != nil {
			return nil, err
		}
		return Call{Name: "extract", Args: []Expr{unitValue(unit), inner}}, nil
	case *sqlparser.TimestampFuncExpr:
		unit := strings.ToLower(x.Unit)
		if !intervalUnits[unit] {
			return nil, Errorf(CodeNotSupported, "%s: the unit must be SECOND, MINUTE, HOUR, DAY, WEEK, MONTH, QUARTER or YEAR", sqlparser.String(x))
		}
		a, err := b.expr(x.Expr1, clause)
		if err != nil {
			return nil, err
		}
		c, err := b.expr(x.Expr2, clause)
		if err != nil {
			return nil, err
		}
		if strings.EqualFold(x.Name, "timestampadd") {
			return Call{Name: "date_add", Args: []Expr{c, a, unitValue(unit)}}, nil
		}
		return Call{Name: "timestampdiff", Args: []Expr{unitValue(unit), a, c}}, nil
	case *sqlparser.IntervalExpr:
		return nil, Errorf(CodeNotSupported, "%s: an INTERVAL goes with a time, as in ts - INTERVAL 7 DAY or DATE_ADD(ts, INTERVAL 1 HOUR)", sqlparser.String(x))
	case *sqlparser.Subquery, *sqlparser.ExistsExpr:
		return nil, refuseSubquery(b.table)
	case *sqlparser.GroupConcatExpr:
		return nil, Errorf(CodeDPRefused, "GROUP_CONCAT is refused: it returns row values; %s", rowsRefusal)
	case *sqlparser.ComparisonExpr, *sqlparser.AndExpr, *sqlparser.OrExpr, *sqlparser.NotExpr,
		*sqlparser.RangeCond, *sqlparser.IsExpr, *sqlparser.XorExpr:
		p, err := b.pred(x)
		if err != nil {
			return nil, err
		}
		return Cond{P: p}, nil
	}
	return nil, Errorf(CodeNotSupported, "%s is not supported in an expression over domain columns: use columns, numbers, strings, + - * / DIV %%, CASE, IF, COALESCE and the functions %s", sqlparser.String(e), funcNames(scalarFuncs))
}

// call converts a function call over domain columns.
func (b *selectBuilder) call(f *sqlparser.FuncExpr, clause string) (Expr, error) {
	name := f.Name.Lowered()
	text := sqlparser.String(f)
	if sqlparser.Aggregates[name] || barOf(name) != BarNone {
		return nil, Errorf(CodeNotSupported, "%s: aggregates cannot be nested or compared with row values here; write the aggregate at the top of a select-list expression, in HAVING or in ORDER BY", text)
	}
	if !f.Qualifier.IsEmpty() || f.Distinct || f.Over != nil {
		return nil, refuseFunc(name, text)
	}
	if e, ok, err := b.timeCall(f, name, clause); ok {
		return e, err
	}
	var args []Expr
	for _, se := range f.Exprs {
		a, ok := se.(*sqlparser.AliasedExpr)
		if !ok {
			return nil, Errorf(CodeNotSupported, "%s: a function takes expressions as arguments", text)
		}
		x, err := b.expr(a.Expr, clause)
		if err != nil {
			return nil, err
		}
		args = append(args, x)
	}
	switch name {
	case "if":
		if len(f.Exprs) != 3 {
			return nil, Errorf(CodeNotSupported, "IF takes three arguments: IF(condition, then, else)")
		}
		p, err := b.pred(f.Exprs[0].(*sqlparser.AliasedExpr).Expr)
		if err != nil {
			return nil, err
		}
		c := Case{Whens: []When{{Cond: p, Then: args[1]}}}
		if v, ok := args[2].(Value); !ok || !v.Null {
			c.Else = args[2]
		}
		return c, nil
	case "isnull":
		if len(args) != 1 {
			return nil, Errorf(CodeNotSupported, "ISNULL takes one argument")
		}
		return Cond{P: ExprIsNull{X: args[0]}}, nil
	}
	spec, ok := scalarFuncs[name]
	if !ok {
		return nil, refuseFunc(name, text)
	}
	if len(args) < spec.min || (spec.max >= 0 && len(args) > spec.max) {
		want := strconv.Itoa(spec.min)
		switch {
		case spec.max < 0:
			want = "at least " + want
		case spec.max != spec.min:
			want += " or " + strconv.Itoa(spec.max)
		}
		return nil, Errorf(CodeNotSupported, "Incorrect parameter count in the call to native function '%s': it takes %s", strings.ToUpper(name), want)
	}
	return Call{Name: spec.name, Args: args}, nil
}

// unitValue is an interval unit as the string argument compile reads.
func unitValue(unit string) Expr { return Value{Lit: Literal{Text: unit, Quoted: true}} }

// interval converts x + INTERVAL n unit (x - INTERVAL n unit when sub) to
// DATE_ADD(x, n, 'unit') (n negated for a subtraction).
func (b *selectBuilder) interval(x sqlparser.Expr, iv *sqlparser.IntervalExpr, sub bool, clause string) (Expr, error) {
	unit := strings.ToLower(iv.Unit)
	if !intervalUnits[unit] {
		return nil, Errorf(CodeNotSupported, "INTERVAL ... %s is not supported: use SECOND, MINUTE, HOUR, DAY, WEEK, MONTH, QUARTER or YEAR", strings.ToUpper(iv.Unit))
	}
	t, err := b.expr(x, clause)
	if err != nil {
		return nil, err
	}
	n, err := b.expr(iv.Expr, clause)
	if err != nil {
		return nil, err
	}
	if sub {
		n = Neg{X: n}
	}
	return Call{Name: "date_add", Args: []Expr{t, n, unitValue(unit)}}, nil
}

// timeCall converts the functions of the request's time (a constant, see
// ParseAt) and DATE_ADD/DATE_SUB/ADDDATE/SUBDATE, whose second argument
// may be an INTERVAL. ok is false for other functions.
func (b *selectBuilder) timeCall(f *sqlparser.FuncExpr, name, clause string) (Expr, bool, error) {
	text := sqlparser.String(f)
	switch {
	case nowFuncs[name], todayFuncs[name], name == "unix_timestamp" && len(f.Exprs) == 0:
		if len(f.Exprs) > 1 || len(f.Exprs) == 1 && !todayFuncs[name] && !isSmallConstant(f.Exprs[0]) {
			return nil, true, Errorf(CodeNotSupported, "%s takes at most one argument, the number of fractional digits (0 to 6)", text)
		}
		now := b.c.now
		switch {
		case todayFuncs[name]:
			return Call{Name: "date", Args: []Expr{Value{Lit: Literal{Text: now.Format(time.DateOnly), Quoted: true}}}}, true, nil
		case name == "unix_timestamp":
			return Value{Lit: Literal{Text: strconv.FormatInt(now.Unix(), 10)}}, true, nil
		}
		return Call{Name: "timestamp", Args: []Expr{Value{Lit: Literal{Text: now.Format(time.DateTime), Quoted: true}}}}, true, nil
	case name == "date_add" || name == "date_sub" || name == "adddate" || name == "subdate":
		if len(f.Exprs) != 2 {
			return nil, true, Errorf(CodeNotSupported, "Incorrect parameter count in the call to native function '%s': it takes 2 (a time and an INTERVAL)", strings.ToUpper(name))
		}
		x, ok1 := f.Exprs[0].(*sqlparser.AliasedExpr)
		y, ok2 := f.Exprs[1].(*sqlparser.AliasedExpr)
		if !ok1 || !ok2 {
			return nil, true, Errorf(CodeNotSupported, "%s: a function takes expressions as arguments", text)
		}
		sub := name == "date_sub" || name == "subdate"
		if iv, ok := y.Expr.(*sqlparser.IntervalExpr); ok {
			e, err := b.interval(x.Expr, iv, sub, clause)
			return e, true, err
		}
		if name == "date_add" || name == "date_sub" {
			return nil, true, Errorf(CodeNotSupported, "%s: the second argument is an INTERVAL, as in %s(ts, INTERVAL 1 DAY)", text, strings.ToUpper(name))
		}
		// ADDDATE(x, n) adds n days.
		e, err := b.interval(x.Expr, &sqlparser.IntervalExpr{Expr: y.Expr, Unit: "day"}, sub, clause)
		return e, true, err
	}
	return nil, false, nil
}

// isSmallConstant reports whether e is an integer literal 0 to 6 (the
// fractional digits of NOW(6)).
func isSmallConstant(se sqlparser.SelectExpr) bool {
	a, ok := se.(*sqlparser.AliasedExpr)
	if !ok {
		return false
	}
	v, ok := a.Expr.(*sqlparser.SQLVal)
	if !ok || v.Type != sqlparser.IntVal {
		return false
	}
	n, err := strconv.Atoi(string(v.Val))
	return err == nil && n >= 0 && n <= 6
}

// resolveAlias resolves, in HAVING, an unqualified name that is not a
// column to the select-list item it aliases (MySQL searches the table's
// columns first, then the aliases). ok is false when the name is not such
// an alias.
func (b *selectBuilder) resolveAlias(c *sqlparser.ColName, clause string) (Expr, bool, error) {
	if clause != "having clause" || !c.Qualifier.IsEmpty() {
		return nil, false, nil
	}
	name := c.Name.String()
	if b.isColumn(name) {
		return nil, false, nil
	}
	i := b.byAlias(name)
	if i < 0 {
		return nil, false, nil
	}
	it := b.items[i]
	switch {
	case it.kind == itemColumn:
		return Col{Name: it.Column}, true, nil
	case it.Key != nil:
		return it.Key, true, nil
	}
	return nil, true, Errorf(CodeNotSupported, "HAVING %s: the alias names an aggregate; compare it with a number (HAVING %s > 10)", name, name)
}

// isColumn reports whether name is a column of the table; without a
// column checker every name may be one.
func (b *selectBuilder) isColumn(name string) bool {
	for _, j := range b.joins {
		if j.table.column(strings.ToLower(name)) >= 0 {
			return true
		}
	}
	if b.c.columns == nil {
		return b.byAlias(name) < 0
	}
	return b.c.columns(strings.ToLower(b.table.Name.String()), strings.ToLower(name))
}
