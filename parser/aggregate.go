package parser

import (
	"strconv"
	"strings"

	"github.com/dolthub/vitess/go/vt/sqlparser"
)

// Aggregates in the select list, HAVING and ORDER BY: COUNT, SUM, AVG,
// the variances, DP_QUANTILE, the error bars around them, and
// post-processing over them (AggExpr).

// aggExpr parses post-processing over aggregates and constants: + - * /
// DIV %, unary minus, parentheses, numeric functions, numbers, strings and
// NULL.
func (b *selectBuilder) aggExpr(e sqlparser.Expr) (*AggExpr, error) {
	e = unparen(e)
	unsupported := Errorf(CodeNotSupported, "'%s': expressions over aggregates take + - * / DIV %% of aggregates (COUNT, SUM, AVG, VARIANCE, STDDEV ...), numbers and the functions %s; %s", sqlparser.String(e), funcNames(postFuncs), selectHelp)
	switch x := e.(type) {
	case *sqlparser.BinaryExpr:
		var op byte
		switch x.Operator {
		case sqlparser.PlusStr, sqlparser.MinusStr, sqlparser.MultStr, sqlparser.DivStr, sqlparser.ModStr:
			op = x.Operator[0]
		case sqlparser.IntDivStr:
			op = 'd'
		default:
			return nil, unsupported
		}
		l, err := b.aggExpr(x.Left)
		if err != nil {
			return nil, err
		}
		r, err := b.aggExpr(x.Right)
		if err != nil {
			return nil, err
		}
		return &AggExpr{Op: op, Left: l, Right: r}, nil
	case *sqlparser.UnaryExpr:
		switch x.Operator {
		case sqlparser.UMinusStr:
			inner, err := b.aggExpr(x.Expr)
			if err != nil {
				return nil, err
			}
			return &AggExpr{Op: '-', Left: &AggExpr{Number: 0}, Right: inner}, nil
		case sqlparser.UPlusStr:
			return b.aggExpr(x.Expr)
		}
		if lit, kind, err := literal(x); err == nil && kind == litValue && lit.Quoted {
			return &AggExpr{Str: lit.Text, IsStr: true}, nil
		}
		return nil, unsupported
	case *sqlparser.SQLVal:
		switch x.Type {
		case sqlparser.IntVal, sqlparser.FloatVal:
			f, err := strconv.ParseFloat(string(x.Val), 64)
			if err != nil {
				return nil, unsupported
			}
			return &AggExpr{Number: f}, nil
		case sqlparser.StrVal:
			return &AggExpr{Str: string(x.Val), IsStr: true}, nil
		}
		return nil, unsupported
	case sqlparser.BoolVal:
		if x {
			return &AggExpr{Number: 1}, nil
		}
		return &AggExpr{Number: 0}, nil
	case *sqlparser.NullVal:
		return &AggExpr{Null: true}, nil
	case *sqlparser.FuncExpr:
		name := x.Name.Lowered()
		if spec, ok := postFuncs[name]; ok && x.Qualifier.IsEmpty() && !x.Distinct && x.Over == nil {
			if len(x.Exprs) < spec.min || (spec.max >= 0 && len(x.Exprs) > spec.max) {
				return nil, Errorf(CodeNotSupported, "Incorrect parameter count in the call to native function '%s'", strings.ToUpper(name))
			}
			out := &AggExpr{Func: spec.name}
			for _, se := range x.Exprs {
				a, ok := se.(*sqlparser.AliasedExpr)
				if !ok {
					return nil, unsupported
				}
				arg, err := b.aggExpr(a.Expr)
				if err != nil {
					return nil, err
				}
				out.Args = append(out.Args, arg)
			}
			return out, nil
		}
		if _, scalar := scalarFuncs[name]; scalar && !sqlparser.Aggregates[name] {
			return nil, Errorf(CodeNotSupported, "%s in the select list of a DP query: only aggregates, GROUP BY keys and numeric functions of them are computed there; group by it if it reads columns, or write its value as a literal", sqlparser.String(x))
		}
		if !sqlparser.Aggregates[name] && barOf(name) == BarNone && name != "any_value" {
			return nil, refuseFunc(name, sqlparser.String(x))
		}
	case *sqlparser.ColName:
		if isVariable(x) {
			return nil, Errorf(CodeNotSupported, "variables (%s) are not supported in the select list of a DP query: %s", sqlparser.String(x), selectHelp)
		}
		return nil, Errorf(CodeNotSupported, "'%s': a column inside an expression over aggregates is not supported; select the GROUP BY key on its own, or aggregate an expression of it (SUM(%s * 2))", sqlparser.String(e), sqlparser.String(x))
	}
	agg, ok, err := b.aggregate(e)
	if !ok {
		return nil, unsupported
	}
	if err != nil {
		return nil, err
	}
	if agg.Bar != BarNone {
		return nil, Errorf(CodeNotSupported, "error bars of expressions are not supported: select DP_STDERR of each aggregate")
	}
	return &AggExpr{Leaf: &SelectItem{Agg: agg.Agg, Column: agg.Column, Arg: agg.Arg, Quantile: agg.Quantile}}, nil
}

// hasAggregate reports whether an aggregate call occurs anywhere in e.
// trimQuotes strips the quotes of a select expression that is one quoted
// string, as MySQL does when it names the column ('abc' is named abc).
func trimQuotes(s string) string {
	if len(s) < 2 || s[0] != s[len(s)-1] || (s[0] != '\'' && s[0] != '"' && s[0] != '`') {
		return s
	}
	t := lex(s)
	if len(t) != 1 || t[0].start != 0 || t[0].end != len(s) {
		return s
	}
	return t[0].text
}

func hasAggregate(e sqlparser.Expr) bool {
	found := false
	_ = sqlparser.Walk(func(n sqlparser.SQLNode) (bool, error) {
		switch f := n.(type) {
		case *sqlparser.FuncExpr:
			name := f.Name.Lowered()
			if sqlparser.Aggregates[name] || barOf(name) != BarNone || name == "dp_quantile" || name == "dp_median" {
				found = true
			}
		case *sqlparser.GroupConcatExpr:
			found = true
		}
		return !found, nil
	}, e)
	return found
}

func barOf(name string) ErrorBar {
	switch name {
	case "dp_stderr":
		return BarStderr
	case "dp_ci_low":
		return BarCILow
	case "dp_ci_high":
		return BarCIHigh
	}
	return BarNone
}

// aggregate recognises an aggregate call (or an error bar around one). ok
// reports that e is an aggregate call at all; err that it is one dpproxy
// does not answer.
func (b *selectBuilder) aggregate(e sqlparser.Expr) (SelectItem, bool, error) {
	switch f := e.(type) {
	case *sqlparser.GroupConcatExpr:
		return SelectItem{}, true, Errorf(CodeDPRefused, "GROUP_CONCAT is refused: it returns row values; %s", rowsRefusal)
	case *sqlparser.FuncExpr:
		if !f.Qualifier.IsEmpty() {
			return SelectItem{}, false, nil
		}
		name := f.Name.Lowered()
		upper := strings.ToUpper(name)
		if bar := barOf(name); bar != BarNone {
			usage := Errorf(CodeNotSupported, "%s takes one aggregate: %s(COUNT(*)), %s(SUM(x)), %s(AVG(x)), %s(COUNT(x)) or %s(STDDEV(x))", upper, upper, upper, upper, upper, upper)
			if len(f.Exprs) != 1 || f.Distinct || f.Over != nil {
				return SelectItem{}, true, usage
			}
			arg, ok := f.Exprs[0].(*sqlparser.AliasedExpr)
			if !ok {
				return SelectItem{}, true, usage
			}
			inner, ok, err := b.aggregate(unparen(arg.Expr))
			if !ok {
				return SelectItem{}, true, usage
			}
			if err != nil {
				return SelectItem{}, true, err
			}
			if inner.Bar != BarNone {
				return SelectItem{}, true, usage
			}
			inner.Bar = bar
			return inner, true, nil
		}
		if name == "dp_quantile" || name == "dp_median" {
			return b.quantile(f, name)
		}
		if !sqlparser.Aggregates[name] && name != "any_value" {
			return SelectItem{}, false, nil
		}
		if f.Over != nil {
			return SelectItem{}, true, Errorf(CodeNotSupported, "window functions (%s(...) OVER ...) are not supported; %s", upper, selectHelp)
		}
		arg := func(usage *Error) (string, Expr, error) {
			if len(f.Exprs) != 1 {
				return "", nil, usage
			}
			a, ok := f.Exprs[0].(*sqlparser.AliasedExpr)
			if !ok {
				return "", nil, usage
			}
			x := unparen(a.Expr)
			if col, ok := x.(*sqlparser.ColName); ok && !isVariable(col) {
				name, err := b.column(col, "field list")
				return name, nil, err
			}
			if hasAggregate(x) {
				return "", nil, Errorf(CodeNotSupported, "%s: aggregates cannot be nested (Invalid use of group function)", sqlparser.String(f))
			}
			saved := b.clause
			b.clause = "field list"
			defer func() { b.clause = saved }()
			ex, err := b.expr(x, "field list")
			if c, ok := ex.(Col); ok && err == nil {
				return c.Name, nil, nil
			}
			return "", ex, err
		}
		switch name {
		case "count":
			distinctUsage := Errorf(CodeNotSupported, "COUNT(DISTINCT ...) is not supported: count rows with COUNT(*) or COUNT(x), list the declared values with SELECT c FROM t GROUP BY c, or count people with COUNT(DISTINCT <privacy unit column>) on a table that declares one")
			if f.Distinct {
				if len(f.Exprs) != 1 {
					return SelectItem{}, true, distinctUsage
				}
				col, ex, err := arg(distinctUsage)
				if err != nil {
					return SelectItem{}, true, err
				}
				if ex != nil || col == "" {
					return SelectItem{}, true, distinctUsage
				}
				return SelectItem{Agg: AggCountDistinct, Column: col}, true, nil
			}
			usage := Errorf(CodeNotSupported, "COUNT takes *, a column or an expression: COUNT(*), COUNT(c), COUNT(CASE WHEN ... THEN 1 END)")
			if len(f.Exprs) != 1 {
				return SelectItem{}, true, usage
			}
			if a, ok := f.Exprs[0].(*sqlparser.StarExpr); ok {
				if !a.TableName.IsEmpty() && !b.qualifierOK(a.TableName) {
					return SelectItem{}, true, Errorf(CodeBadField, "Unknown column '%s.*' in 'field list'", a.TableName.Name.String())
				}
				return SelectItem{Agg: AggCount}, true, nil
			}
			if a, ok := f.Exprs[0].(*sqlparser.AliasedExpr); ok {
				if _, kind, err := literal(unparen(a.Expr)); err == nil && kind == litValue {
					return SelectItem{Agg: AggCount}, true, nil // COUNT(1), COUNT('x'): every row
				}
			}
			col, ex, err := arg(usage)
			return SelectItem{Agg: AggCountCol, Column: col, Arg: ex}, true, err
		case "sum", "avg", "variance", "var_pop", "var_samp", "std", "stddev", "stddev_pop", "stddev_samp":
			agg := map[string]AggFunc{"sum": AggSum, "avg": AggAvg, "variance": AggVarPop, "var_pop": AggVarPop,
				"var_samp": AggVarSamp, "std": AggStdPop, "stddev": AggStdPop, "stddev_pop": AggStdPop,
				"stddev_samp": AggStdSamp}[name]
			if f.Distinct {
				return SelectItem{}, true, Errorf(CodeNotSupported, "%s(DISTINCT ...) is not supported: write %s(x)", upper, upper)
			}
			col, ex, err := arg(Errorf(CodeNotSupported, "%s takes one column or expression: %s(x)", upper, upper))
			return SelectItem{Agg: agg, Column: col, Arg: ex}, true, err
		case "min", "max", "any_value", "json_arrayagg", "json_objectagg", "bit_and", "bit_or", "bit_xor":
			return SelectItem{}, true, Errorf(CodeDPRefused, "%s is refused: it would reveal values of single rows; dpproxy answers COUNT, SUM, AVG, VARIANCE and STDDEV of columns and expressions, with GROUP BY over declared columns (the declared range of a column is in its catalog domain)", upper)
		default:
			return SelectItem{}, true, Errorf(CodeNotSupported, "the aggregate %s is not supported: dpproxy answers COUNT, SUM, AVG, VARIANCE, VAR_POP, VAR_SAMP, STD, STDDEV, STDDEV_POP and STDDEV_SAMP, each optionally wrapped in DP_STDERR(), DP_CI_LOW() or DP_CI_HIGH()", upper)
		}
	}
	return SelectItem{}, false, nil
}

// quantile parses DP_QUANTILE(c, q) (q a number in [0, 1]) and
// DP_MEDIAN(c) = DP_QUANTILE(c, 0.5), c a column.
func (b *selectBuilder) quantile(f *sqlparser.FuncExpr, name string) (SelectItem, bool, error) {
	usage := Errorf(CodeNotSupported, "DP_QUANTILE takes a numeric column and a number in [0, 1], DP_MEDIAN a numeric column: DP_QUANTILE(age, 0.9), DP_MEDIAN(age)")
	want := 2
	if name == "dp_median" {
		want = 1
	}
	if len(f.Exprs) != want || f.Distinct || f.Over != nil {
		return SelectItem{}, true, usage
	}
	var args []sqlparser.Expr
	for _, e := range f.Exprs {
		a, ok := e.(*sqlparser.AliasedExpr)
		if !ok {
			return SelectItem{}, true, usage
		}
		args = append(args, unparen(a.Expr))
	}
	col, ok := args[0].(*sqlparser.ColName)
	if !ok || isVariable(col) {
		return SelectItem{}, true, usage
	}
	c, err := b.column(col, "field list")
	if err != nil {
		return SelectItem{}, true, err
	}
	q := 0.5
	if want == 2 {
		text, kind, err := literal(args[1])
		if err != nil || kind != litValue {
			return SelectItem{}, true, usage
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(text.Text), 64)
		if err != nil || !(v >= 0 && v <= 1) {
			return SelectItem{}, true, usage
		}
		q = v
	}
	return SelectItem{Agg: AggQuantile, Column: c, Quantile: q}, true, nil
}

// countDistinctColumn is c of COUNT(DISTINCT c) for one plain column c, or
// nil.
func countDistinctColumn(f *sqlparser.FuncExpr) *sqlparser.ColName {
	if !f.Distinct || !strings.EqualFold(f.Name.String(), "count") || len(f.Exprs) != 1 {
		return nil
	}
	ae, ok := f.Exprs[0].(*sqlparser.AliasedExpr)
	if !ok {
		return nil
	}
	c, _ := unparen(ae.Expr).(*sqlparser.ColName)
	return c
}
