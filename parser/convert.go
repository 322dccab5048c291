package parser

import (
	"sort"
	"strconv"
	"strings"

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
}

// nonDeterministic are functions whose value does not follow from a row's
// domain values: they cannot be evaluated on the declared domain.
var nonDeterministic = map[string]bool{
	"rand": true, "uuid": true, "uuid_short": true, "random_bytes": true,
	"now": true, "sysdate": true, "current_timestamp": true, "localtime": true, "localtimestamp": true,
	"curdate": true, "current_date": true, "curtime": true, "current_time": true,
	"utc_date": true, "utc_time": true, "utc_timestamp": true,
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
	case nonDeterministic[name]:
		return Errorf(CodeNotSupported, "%s is not a deterministic function of a row's domain values, so dpproxy cannot evaluate it on the declared domain: write its value as a literal", text)
	case dateFuncs[name]:
		return Errorf(CodeNotSupported, "%s: date and time functions need date or time domains, which dpproxy does not declare yet; group and filter on declared columns instead", text)
	}
	return Errorf(CodeNotSupported, "the function %s is not supported over domain columns; supported: %s, IF, CASE, CAST", strings.ToUpper(name), funcNames(scalarFuncs))
}

// expr converts a scalar expression over the table's columns (no
// aggregates). clause names the clause for 1054 messages. In HAVING,
// unqualified names that are not columns resolve to select-list aliases.
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
		}
		return nil, Errorf(CodeNotSupported, "%s is not supported over domain columns: CAST takes SIGNED, UNSIGNED, CHAR, DECIMAL or DOUBLE", sqlparser.String(x))
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
	case *sqlparser.ExtractFuncExpr, *sqlparser.IntervalExpr, *sqlparser.TimestampFuncExpr:
		return nil, refuseFunc("extract", sqlparser.String(x))
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
