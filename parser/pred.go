package parser

import (
	"math"
	"strconv"
	"strings"

	"github.com/dolthub/vitess/go/vt/sqlparser"
)

// whereHelp says what a WHERE clause may hold.
const whereHelp = "WHERE supports column = <> != < <= > >= literal, column [NOT] BETWEEN literal AND literal, column [NOT] IN (literals), column IS [NOT] NULL, combined with AND, OR, NOT and parentheses"

// havingHelp says what a HAVING clause may hold.
const havingHelp = "HAVING compares aggregates with numbers, e.g. HAVING COUNT(*) > 100 or HAVING n > 100 for an alias n, combined with AND, OR, NOT"

func notSupportedWhere(what string) *Error {
	return Errorf(CodeNotSupported, "%s in WHERE is not supported: %s", what, whereHelp)
}

type litKind int

const (
	notLiteral litKind = iota
	litValue
	litNull
)

// literal reads a constant: a number (with sign), a quoted string (with an
// optional _charset introducer), TRUE/FALSE or NULL.
func literal(e sqlparser.Expr) (Literal, litKind, error) {
	switch v := unparen(e).(type) {
	case *sqlparser.SQLVal:
		switch v.Type {
		case sqlparser.StrVal:
			return Literal{Text: string(v.Val), Quoted: true}, litValue, nil
		case sqlparser.IntVal, sqlparser.FloatVal:
			return Literal{Text: strings.TrimPrefix(string(v.Val), "+")}, litValue, nil
		case sqlparser.ValArg:
			return Literal{}, notLiteral, Errorf(CodeNotSupported, "placeholders (?) are not supported: send the query with literal values")
		default:
			return Literal{}, notLiteral, Errorf(CodeNotSupported, "hexadecimal and bit literals are not supported: write the value as a number or a quoted string")
		}
	case sqlparser.BoolVal:
		if v {
			return Literal{Text: "1"}, litValue, nil
		}
		return Literal{Text: "0"}, litValue, nil
	case *sqlparser.NullVal:
		return Literal{}, litNull, nil
	case *sqlparser.UnaryExpr:
		inner, kind, err := literal(v.Expr)
		if err != nil || kind != litValue {
			return Literal{}, notLiteral, err
		}
		switch {
		case v.Operator == sqlparser.UMinusStr && !inner.Quoted:
			if t, ok := strings.CutPrefix(inner.Text, "-"); ok {
				inner.Text = t
			} else {
				inner.Text = "-" + inner.Text
			}
			return inner, litValue, nil
		case v.Operator == sqlparser.UPlusStr && !inner.Quoted:
			return inner, litValue, nil
		case (strings.HasPrefix(v.Operator, "_") || v.Operator == sqlparser.BinaryStr) && inner.Quoted:
			return inner, litValue, nil
		}
	}
	return Literal{}, notLiteral, nil
}

// mysqlNumber converts a literal to a number the way MySQL does in a
// numeric context: the longest numeric prefix, 0 if there is none.
func mysqlNumber(s string) float64 {
	s = strings.TrimLeft(s, " \t\n\r")
	digits := func(i int) int {
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
		return i
	}
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	j := digits(i)
	mant := j > i
	if j < len(s) && s[j] == '.' {
		k := digits(j + 1)
		mant = mant || k > j+1
		j = k
	}
	if !mant {
		return 0
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		if e := digits(k); e > k {
			j = e
		}
	}
	f, err := strconv.ParseFloat(strings.TrimSuffix(s[:j], "."), 64)
	if err != nil && !math.IsInf(f, 0) {
		return 0
	}
	return f
}

// compareLiterals orders two constants: as strings (case-insensitively, as
// MySQL's default collation does) when both are quoted, else as numbers.
func compareLiterals(a, b Literal) int {
	if a.Quoted && b.Quoted {
		return strings.Compare(strings.ToLower(strings.TrimRight(a.Text, " ")), strings.ToLower(strings.TrimRight(b.Text, " ")))
	}
	x, y := mysqlNumber(a.Text), mysqlNumber(b.Text)
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func compareOp(op string) (CompareOp, bool) {
	switch op {
	case sqlparser.EqualStr:
		return OpEq, true
	case sqlparser.NotEqualStr, "<>":
		return OpNe, true
	case sqlparser.LessThanStr:
		return OpLt, true
	case sqlparser.LessEqualStr:
		return OpLe, true
	case sqlparser.GreaterThanStr:
		return OpGt, true
	case sqlparser.GreaterEqualStr:
		return OpGe, true
	}
	return 0, false
}

// flip turns `a op b` into `b op' a`.
func flip(op CompareOp) CompareOp {
	switch op {
	case OpLt:
		return OpGt
	case OpLe:
		return OpGe
	case OpGt:
		return OpLt
	case OpGe:
		return OpLe
	}
	return op
}

func holds(op CompareOp, c int) bool {
	switch op {
	case OpEq:
		return c == 0
	case OpNe:
		return c != 0
	case OpLt:
		return c < 0
	case OpLe:
		return c <= 0
	case OpGt:
		return c > 0
	default:
		return c >= 0
	}
}

// and builds a simplified conjunction: nested Ands flattened, TRUE terms
// dropped, FALSE absorbing.
func and(terms ...Pred) Pred {
	var out []Pred
	for _, t := range terms {
		switch t := t.(type) {
		case Const:
			if !t.Value {
				return Const{Value: false}
			}
		case And:
			out = append(out, t.Terms...)
		default:
			out = append(out, t)
		}
	}
	switch len(out) {
	case 0:
		return Const{Value: true}
	case 1:
		return out[0]
	}
	return And{Terms: out}
}

// or builds a simplified disjunction: nested Ors flattened, FALSE terms
// dropped, TRUE absorbing.
func or(terms ...Pred) Pred {
	var out []Pred
	for _, t := range terms {
		switch t := t.(type) {
		case Const:
			if t.Value {
				return Const{Value: true}
			}
		case Or:
			out = append(out, t.Terms...)
		default:
			out = append(out, t)
		}
	}
	switch len(out) {
	case 0:
		return Const{Value: false}
	case 1:
		return out[0]
	}
	return Or{Terms: out}
}

func not(p Pred) Pred {
	switch p := p.(type) {
	case Const:
		return Const{Value: !p.Value}
	case Not:
		return p.Term
	}
	return Not{Term: p}
}

// pred converts a WHERE expression.
func (b *selectBuilder) pred(e sqlparser.Expr) (Pred, error) {
	switch e := e.(type) {
	case *sqlparser.ParenExpr:
		return b.pred(e.Expr)
	case *sqlparser.AndExpr:
		l, err := b.pred(e.Left)
		if err != nil {
			return nil, err
		}
		r, err := b.pred(e.Right)
		if err != nil {
			return nil, err
		}
		return and(l, r), nil
	case *sqlparser.OrExpr:
		l, err := b.pred(e.Left)
		if err != nil {
			return nil, err
		}
		r, err := b.pred(e.Right)
		if err != nil {
			return nil, err
		}
		return or(l, r), nil
	case *sqlparser.NotExpr:
		p, err := b.pred(e.Expr)
		if err != nil {
			return nil, err
		}
		return not(p), nil
	case *sqlparser.ComparisonExpr:
		return b.comparison(e)
	case *sqlparser.RangeCond:
		return b.between(e)
	case *sqlparser.IsExpr:
		return b.isExpr(e)
	case *sqlparser.XorExpr:
		return nil, notSupportedWhere("XOR")
	case *sqlparser.ColName:
		return nil, Errorf(CodeNotSupported, "a bare column is not a condition: compare it with a value, e.g. WHERE %s = 1; %s", e.Name.String(), whereHelp)
	case *sqlparser.UnaryExpr:
		if e.Operator == sqlparser.BangStr {
			p, err := b.pred(e.Expr)
			if err != nil {
				return nil, err
			}
			return not(p), nil
		}
	}
	lit, kind, err := literal(e)
	if err != nil {
		return nil, err
	}
	switch kind {
	case litValue:
		return Const{Value: mysqlNumber(lit.Text) != 0}, nil
	case litNull:
		return nil, notSupportedWhere("NULL as a condition")
	}
	return nil, b.unsupported(e, "WHERE")
}

// unsupported explains why an expression is not a supported predicate.
func (b *selectBuilder) unsupported(e sqlparser.Expr, clause string) *Error {
	help := whereHelp
	if clause == "HAVING" {
		help = havingHelp
	}
	switch e.(type) {
	case *sqlparser.Subquery, *sqlparser.ExistsExpr:
		return refuseSubquery(b.table)
	case *sqlparser.FuncExpr, *sqlparser.GroupConcatExpr, *sqlparser.ConvertExpr, *sqlparser.SubstrExpr,
		*sqlparser.TrimExpr, *sqlparser.CaseExpr, *sqlparser.ExtractFuncExpr, *sqlparser.TimestampFuncExpr,
		*sqlparser.ConvertUsingExpr, *sqlparser.CharExpr, *sqlparser.MatchExpr:
		return Errorf(CodeNotSupported, "functions in %s (%s) are not supported: %s", clause, sqlparser.String(e), help)
	case *sqlparser.BinaryExpr, *sqlparser.IntervalExpr:
		return Errorf(CodeNotSupported, "arithmetic in %s (%s) is not supported: %s", clause, sqlparser.String(e), help)
	case *sqlparser.ColName:
		return Errorf(CodeNotSupported, "variables in %s (%s) are not supported: write the value as a literal; %s", clause, sqlparser.String(e), help)
	}
	return Errorf(CodeNotSupported, "%s in %s is not supported: %s", sqlparser.String(e), clause, help)
}

// operand is one side of a comparison: a column or a literal.
type operand struct {
	column string
	lit    Literal
	kind   litKind // notLiteral for a column
}

func (b *selectBuilder) operand(e sqlparser.Expr) (operand, error) {
	x := unparen(e)
	if col, ok := x.(*sqlparser.ColName); ok && !isVariable(col) {
		c, err := b.column(col, "where clause")
		return operand{column: c}, err
	}
	lit, kind, err := literal(x)
	if err != nil {
		return operand{}, err
	}
	if kind == notLiteral {
		return operand{}, b.unsupported(x, "WHERE")
	}
	return operand{lit: lit, kind: kind}, nil
}

func (b *selectBuilder) comparison(e *sqlparser.ComparisonExpr) (Pred, error) {
	switch e.Operator {
	case sqlparser.InStr, sqlparser.NotInStr:
		return b.in(e)
	case sqlparser.LikeStr, sqlparser.NotLikeStr:
		return nil, Errorf(CodeNotSupported, "LIKE is not supported: list the values with IN ('a', 'b', ...); %s", whereHelp)
	case sqlparser.RegexpStr, sqlparser.NotRegexpStr:
		return nil, Errorf(CodeNotSupported, "REGEXP is not supported: list the values with IN ('a', 'b', ...); %s", whereHelp)
	case sqlparser.NullSafeEqualStr:
		return nil, Errorf(CodeNotSupported, "<=> is not supported: use = for values and IS NULL for NULL; %s", whereHelp)
	}
	op, ok := compareOp(e.Operator)
	if !ok {
		return nil, notSupportedWhere("the operator " + e.Operator)
	}
	l, err := b.operand(e.Left)
	if err != nil {
		return nil, err
	}
	r, err := b.operand(e.Right)
	if err != nil {
		return nil, err
	}
	if l.kind == litNull || r.kind == litNull {
		return nil, Errorf(CodeNotSupported, "comparing with NULL is never true: use IS NULL or IS NOT NULL; %s", whereHelp)
	}
	switch {
	case l.kind == notLiteral && r.kind == notLiteral:
		return nil, Errorf(CodeNotSupported, "comparing two columns (%s %s %s) is not supported: compare a column with a literal; %s", l.column, op, r.column, whereHelp)
	case l.kind == notLiteral:
		return Compare{Column: l.column, Op: op, Value: r.lit}, nil
	case r.kind == notLiteral:
		return Compare{Column: r.column, Op: flip(op), Value: l.lit}, nil
	}
	return Const{Value: holds(op, compareLiterals(l.lit, r.lit))}, nil
}

func (b *selectBuilder) in(e *sqlparser.ComparisonExpr) (Pred, error) {
	negated := e.Operator == sqlparser.NotInStr
	l, err := b.operand(e.Left)
	if err != nil {
		return nil, err
	}
	tuple, ok := e.Right.(sqlparser.ValTuple)
	if !ok {
		if _, sub := e.Right.(*sqlparser.Subquery); sub {
			return nil, refuseSubquery(b.table)
		}
		return nil, notSupportedWhere("IN " + sqlparser.String(e.Right))
	}
	var values []Literal
	for _, v := range tuple {
		lit, kind, err := literal(v)
		if err != nil {
			return nil, err
		}
		switch kind {
		case litNull:
			return nil, Errorf(CodeNotSupported, "NULL in an IN list is not supported: use IS NULL; %s", whereHelp)
		case notLiteral:
			return nil, Errorf(CodeNotSupported, "IN takes a list of literals (%s is not one): %s", sqlparser.String(v), whereHelp)
		}
		values = append(values, lit)
	}
	switch l.kind {
	case litNull:
		return nil, Errorf(CodeNotSupported, "NULL IN (...) is never true: %s", whereHelp)
	case litValue:
		member := false
		for _, v := range values {
			member = member || compareLiterals(l.lit, v) == 0
		}
		return Const{Value: member != negated}, nil
	}
	return In{Column: l.column, Values: values, Negated: negated}, nil
}

func (b *selectBuilder) between(e *sqlparser.RangeCond) (Pred, error) {
	negated := e.Operator == sqlparser.NotBetweenStr
	x, err := b.operand(e.Left)
	if err != nil {
		return nil, err
	}
	lo, err := b.operand(e.From)
	if err != nil {
		return nil, err
	}
	hi, err := b.operand(e.To)
	if err != nil {
		return nil, err
	}
	if lo.kind != litValue || hi.kind != litValue {
		return nil, Errorf(CodeNotSupported, "BETWEEN takes two literals: column BETWEEN lo AND hi; %s", whereHelp)
	}
	switch x.kind {
	case litNull:
		return nil, Errorf(CodeNotSupported, "NULL BETWEEN ... is never true: %s", whereHelp)
	case litValue:
		in := compareLiterals(x.lit, lo.lit) >= 0 && compareLiterals(x.lit, hi.lit) <= 0
		return Const{Value: in != negated}, nil
	}
	return Between{Column: x.column, Lo: lo.lit, Hi: hi.lit, Negated: negated}, nil
}

func (b *selectBuilder) isExpr(e *sqlparser.IsExpr) (Pred, error) {
	x, err := b.operand(e.Expr)
	if err != nil {
		return nil, err
	}
	switch e.Operator {
	case sqlparser.IsNullStr, sqlparser.IsNotNullStr:
		negated := e.Operator == sqlparser.IsNotNullStr
		if x.kind == notLiteral {
			return IsNull{Column: x.column, Negated: negated}, nil
		}
		return Const{Value: (x.kind == litNull) != negated}, nil
	}
	if x.kind == notLiteral {
		return nil, Errorf(CodeNotSupported, "%s %s is not supported: compare the column with a value, e.g. %s = 1; %s", x.column, strings.ToUpper(e.Operator), x.column, whereHelp)
	}
	truth := x.kind == litValue && mysqlNumber(x.lit.Text) != 0
	falsity := x.kind == litValue && !truth
	switch e.Operator {
	case sqlparser.IsTrueStr:
		return Const{Value: truth}, nil
	case sqlparser.IsNotTrueStr:
		return Const{Value: !truth}, nil
	case sqlparser.IsFalseStr:
		return Const{Value: falsity}, nil
	case sqlparser.IsNotFalseStr:
		return Const{Value: !falsity}, nil
	}
	return nil, notSupportedWhere(strings.ToUpper(e.Operator))
}

// having converts a HAVING clause; hasAgg reports that it names an
// aggregate.
func (b *selectBuilder) having() (p Pred, hasAgg bool, err error) {
	if b.sel.Having == nil || b.sel.Having.Expr == nil {
		return nil, false, nil
	}
	p, err = b.havingPred(b.sel.Having.Expr, &hasAgg)
	return p, hasAgg, err
}

func (b *selectBuilder) havingPred(e sqlparser.Expr, hasAgg *bool) (Pred, error) {
	switch e := e.(type) {
	case *sqlparser.ParenExpr:
		return b.havingPred(e.Expr, hasAgg)
	case *sqlparser.AndExpr, *sqlparser.OrExpr:
		var l, r sqlparser.Expr
		if a, ok := e.(*sqlparser.AndExpr); ok {
			l, r = a.Left, a.Right
		} else {
			o := e.(*sqlparser.OrExpr)
			l, r = o.Left, o.Right
		}
		lp, err := b.havingPred(l, hasAgg)
		if err != nil {
			return nil, err
		}
		rp, err := b.havingPred(r, hasAgg)
		if err != nil {
			return nil, err
		}
		if _, ok := e.(*sqlparser.AndExpr); ok {
			return and(lp, rp), nil
		}
		return or(lp, rp), nil
	case *sqlparser.NotExpr:
		p, err := b.havingPred(e.Expr, hasAgg)
		if err != nil {
			return nil, err
		}
		return not(p), nil
	case *sqlparser.ComparisonExpr:
		op, ok := compareOp(e.Operator)
		if !ok {
			return nil, Errorf(CodeNotSupported, "%s in HAVING is not supported: %s", strings.ToUpper(e.Operator), havingHelp)
		}
		if l, lk, _ := literal(e.Left); lk == litValue {
			if r, rk, _ := literal(e.Right); rk == litValue {
				return Const{Value: holds(op, compareLiterals(l, r))}, nil
			}
		}
		if item, ok, err := b.aggRef(e.Left); ok || err != nil {
			if err != nil {
				return nil, err
			}
			v, err := number(e.Right)
			if err != nil {
				return nil, err
			}
			*hasAgg = true
			return AggCompare{Item: item, Op: op, Value: v}, nil
		}
		if item, ok, err := b.aggRef(e.Right); ok || err != nil {
			if err != nil {
				return nil, err
			}
			v, err := number(e.Left)
			if err != nil {
				return nil, err
			}
			*hasAgg = true
			return AggCompare{Item: item, Op: flip(op), Value: v}, nil
		}
	case *sqlparser.RangeCond:
		item, ok, err := b.aggRef(e.Left)
		if err != nil {
			return nil, err
		}
		if ok {
			lo, err := number(e.From)
			if err != nil {
				return nil, err
			}
			hi, err := number(e.To)
			if err != nil {
				return nil, err
			}
			*hasAgg = true
			p := and(AggCompare{Item: item, Op: OpGe, Value: lo}, AggCompare{Item: item, Op: OpLe, Value: hi})
			if e.Operator == sqlparser.NotBetweenStr {
				return not(p), nil
			}
			return p, nil
		}
	case sqlparser.BoolVal:
		return Const{Value: bool(e)}, nil
	}
	return nil, Errorf(CodeNotSupported, "HAVING %s is not supported: %s; put conditions on group columns in WHERE", sqlparser.String(e), havingHelp)
}

// aggRef resolves an aggregate in HAVING: written out (COUNT(*)) or by the
// alias of an aggregate select item.
func (b *selectBuilder) aggRef(e sqlparser.Expr) (SelectItem, bool, error) {
	x := unparen(e)
	if col, ok := x.(*sqlparser.ColName); ok && col.Qualifier.IsEmpty() {
		if i := b.byAlias(col.Name.String()); i >= 0 && b.items[i].kind == itemAgg {
			return b.items[i].SelectItem, b.items[i].err == nil, b.items[i].err
		}
		for _, it := range b.items {
			if it.kind == itemAgg && it.err == nil && it.Alias == col.Name.String() {
				return it.SelectItem, true, nil // `COUNT(*)` in backquotes
			}
		}
		return SelectItem{}, false, nil
	}
	item, ok, err := b.aggregate(x)
	if ok && err == nil {
		item.Alias = sqlparser.String(x)
		for _, it := range b.items {
			if it.kind == itemAgg && it.err == nil && it.Agg == item.Agg && it.Column == item.Column && it.Bar == item.Bar {
				item.Alias = it.Alias
				break
			}
		}
	}
	return item, ok, err
}

// number reads a numeric constant of HAVING ('5' and 5 alike).
func number(e sqlparser.Expr) (float64, error) {
	lit, kind, err := literal(e)
	if err != nil {
		return 0, err
	}
	if kind == litValue {
		if f, err := strconv.ParseFloat(strings.TrimSpace(lit.Text), 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return f, nil
		}
	}
	return 0, Errorf(CodeNotSupported, "HAVING compares an aggregate with a number (%s is not one): %s", sqlparser.String(e), havingHelp)
}
