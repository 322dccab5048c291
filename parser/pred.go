package parser

import (
	"math"
	"strconv"
	"strings"

	"github.com/dolthub/vitess/go/vt/sqlparser"
)

// whereHelp says what a WHERE clause may hold.
const whereHelp = "WHERE supports comparisons (= <> != < <= > >= <=>), [NOT] BETWEEN, [NOT] IN (...), IS [NOT] NULL, [NOT] LIKE, [NOT] REGEXP of columns and expressions of columns, combined with AND, OR, XOR, NOT and parentheses"

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

// MySQLNumber converts a literal to a number the way MySQL does in a
// numeric context: the longest numeric prefix, 0 if there is none.
func MySQLNumber(s string) float64 {
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
	x, y := MySQLNumber(a.Text), MySQLNumber(b.Text)
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

// pred converts a WHERE expression (or a condition inside CASE, IF or a
// HAVING key condition: b.clause says which clause names are resolved in).
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
	case *sqlparser.XorExpr:
		// a XOR b = (a AND NOT b) OR (NOT a AND b), NULL when either is.
		l, err := b.pred(e.Left)
		if err != nil {
			return nil, err
		}
		r, err := b.pred(e.Right)
		if err != nil {
			return nil, err
		}
		return or(and(l, not(r)), and(not(l), r)), nil
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
	case *sqlparser.UnaryExpr:
		if e.Operator == sqlparser.BangStr {
			p, err := b.pred(e.Expr)
			if err != nil {
				return nil, err
			}
			return not(p), nil
		}
	case *sqlparser.Subquery, *sqlparser.ExistsExpr:
		return nil, refuseSubquery(b.table)
	}
	lit, kind, err := literal(e)
	if err != nil {
		return nil, err
	}
	switch kind {
	case litValue:
		return Const{Value: MySQLNumber(lit.Text) != 0}, nil
	case litNull:
		return Truth{X: Value{Null: true}}, nil // UNKNOWN, also under NOT
	}
	// A bare expression as a condition: TRUE where it is a non-zero number.
	x, err := b.expr(e, b.clause)
	if err != nil {
		return nil, err
	}
	return Truth{X: x}, nil
}

// operand is one side of a comparison: a bare column, a literal, or (kind
// notLiteral, column "") any other expression.
type operand struct {
	column string
	lit    Literal
	kind   litKind // notLiteral for a column or an expression
	expr   Expr
}

func (b *selectBuilder) operand(e sqlparser.Expr) (operand, error) {
	x := unparen(e)
	if col, ok := x.(*sqlparser.ColName); ok && !isVariable(col) {
		ex, err := b.expr(col, b.clause)
		if err != nil {
			return operand{}, err
		}
		if c, ok := ex.(Col); ok {
			return operand{column: c.Name, expr: ex}, nil
		}
		return operand{expr: ex}, nil
	}
	lit, kind, err := literal(x)
	if err != nil {
		return operand{}, err
	}
	if kind != notLiteral {
		v := Value{Lit: lit, Null: kind == litNull}
		return operand{lit: lit, kind: kind, expr: v}, nil
	}
	ex, err := b.expr(x, b.clause)
	if err != nil {
		return operand{}, err
	}
	return operand{expr: ex}, nil
}

func (b *selectBuilder) comparison(e *sqlparser.ComparisonExpr) (Pred, error) {
	switch e.Operator {
	case sqlparser.InStr, sqlparser.NotInStr:
		return b.in(e)
	case sqlparser.LikeStr, sqlparser.NotLikeStr:
		x, err := b.expr(e.Left, b.clause)
		if err != nil {
			return nil, err
		}
		pat, err := b.expr(e.Right, b.clause)
		if err != nil {
			return nil, err
		}
		if v, ok := pat.(Value); ok && v.Lit.Quoted {
			v.Lit.Text = b.likePattern(v.Lit.Text)
			pat = v
		}
		esc := `\`
		if e.Escape != nil {
			lit, kind, err := literal(e.Escape)
			if err != nil || kind != litValue || len([]rune(lit.Text)) > 1 {
				return nil, Errorf(CodeNotSupported, "ESCAPE takes one character in quotes: LIKE 'a!%%' ESCAPE '!'")
			}
			esc = lit.Text
		}
		return Like{X: x, Pattern: pat, Escape: esc, Negated: e.Operator == sqlparser.NotLikeStr}, nil
	case sqlparser.RegexpStr, sqlparser.NotRegexpStr:
		x, err := b.expr(e.Left, b.clause)
		if err != nil {
			return nil, err
		}
		pat, err := b.expr(e.Right, b.clause)
		if err != nil {
			return nil, err
		}
		return Regexp{X: x, Pattern: pat, Negated: e.Operator == sqlparser.NotRegexpStr}, nil
	}
	op, ok := compareOp(e.Operator)
	if e.Operator == sqlparser.NullSafeEqualStr {
		op, ok = OpNullSafeEq, true
	}
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
	switch {
	case op == OpNullSafeEq:
	case l.column != "" && r.kind == litValue:
		return Compare{Column: l.column, Op: op, Value: r.lit}, nil
	case r.column != "" && l.kind == litValue:
		return Compare{Column: r.column, Op: flip(op), Value: l.lit}, nil
	case l.kind == litValue && r.kind == litValue:
		return Const{Value: holds(op, compareLiterals(l.lit, r.lit))}, nil
	}
	if op == OpNullSafeEq && l.kind != notLiteral && r.kind != notLiteral {
		if l.kind == litNull || r.kind == litNull {
			return Const{Value: l.kind == r.kind}, nil
		}
		return Const{Value: compareLiterals(l.lit, r.lit) == 0}, nil
	}
	return ExprCompare{Left: l.expr, Op: op, Right: r.expr}, nil
}

func (b *selectBuilder) in(e *sqlparser.ComparisonExpr) (Pred, error) {
	negated := e.Operator == sqlparser.NotInStr
	if _, isTuple := unparen(e.Left).(sqlparser.ValTuple); isTuple {
		return nil, notSupportedWhere("a row constructor (a, b) IN")
	}
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
	var ops []operand
	simple := true
	for _, v := range tuple {
		o, err := b.operand(v)
		if err != nil {
			return nil, err
		}
		simple = simple && o.kind == litValue
		ops = append(ops, o)
	}
	switch {
	case simple && l.column != "":
		var values []Literal
		for _, o := range ops {
			values = append(values, o.lit)
		}
		return In{Column: l.column, Values: values, Negated: negated}, nil
	case simple && l.kind == litValue:
		member := false
		for _, o := range ops {
			member = member || compareLiterals(l.lit, o.lit) == 0
		}
		return Const{Value: member != negated}, nil
	}
	var list []Expr
	for _, o := range ops {
		list = append(list, o.expr)
	}
	return ExprIn{X: l.expr, List: list, Negated: negated}, nil
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
	switch {
	case x.column != "" && lo.kind == litValue && hi.kind == litValue:
		return Between{Column: x.column, Lo: lo.lit, Hi: hi.lit, Negated: negated}, nil
	case x.kind == litValue && lo.kind == litValue && hi.kind == litValue:
		in := compareLiterals(x.lit, lo.lit) >= 0 && compareLiterals(x.lit, hi.lit) <= 0
		return Const{Value: in != negated}, nil
	}
	return ExprBetween{X: x.expr, Lo: lo.expr, Hi: hi.expr, Negated: negated}, nil
}

func (b *selectBuilder) isExpr(e *sqlparser.IsExpr) (Pred, error) {
	x, err := b.operand(e.Expr)
	if err != nil {
		return nil, err
	}
	switch e.Operator {
	case sqlparser.IsNullStr, sqlparser.IsNotNullStr:
		negated := e.Operator == sqlparser.IsNotNullStr
		switch {
		case x.column != "":
			return IsNull{Column: x.column, Negated: negated}, nil
		case x.kind != notLiteral:
			return Const{Value: (x.kind == litNull) != negated}, nil
		}
		return ExprIsNull{X: x.expr, Negated: negated}, nil
	case sqlparser.IsTrueStr, sqlparser.IsNotTrueStr, sqlparser.IsFalseStr, sqlparser.IsNotFalseStr:
	default:
		return nil, notSupportedWhere(strings.ToUpper(e.Operator))
	}
	if x.kind == notLiteral {
		return Truth{X: x.expr, Test: e.Operator}, nil
	}
	truth := x.kind == litValue && MySQLNumber(x.lit.Text) != 0
	falsity := x.kind == litValue && !truth
	switch e.Operator {
	case sqlparser.IsTrueStr:
		return Const{Value: truth}, nil
	case sqlparser.IsNotTrueStr:
		return Const{Value: !truth}, nil
	case sqlparser.IsFalseStr:
		return Const{Value: falsity}, nil
	}
	return Const{Value: !falsity}, nil
}

// likePattern restores what MySQL keeps of a LIKE pattern's escapes. In a
// string literal MySQL keeps \% and \_ as two characters, so that LIKE
// matches a literal % or _; vitess decodes them to % and _. The raw
// literal is found among the statement's string tokens by its decoded
// value.
func (b *selectBuilder) likePattern(decoded string) string {
	for _, t := range lex(b.c.text) {
		if t.kind != tokString || !strings.Contains(t.text, `\`) {
			continue
		}
		if unescape(t.text, false) == decoded {
			return unescape(t.text, true)
		}
	}
	return decoded
}

// unescape decodes MySQL's backslash escapes in a string body (doubled
// quotes already collapsed); keepLike keeps \% and \_ as MySQL does.
func unescape(raw string, keepLike bool) string {
	var out strings.Builder
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' || i+1 == len(raw) {
			out.WriteByte(c)
			continue
		}
		i++
		switch n := raw[i]; n {
		case '0':
			out.WriteByte(0)
		case 'b':
			out.WriteByte('\b')
		case 'n':
			out.WriteByte('\n')
		case 'r':
			out.WriteByte('\r')
		case 't':
			out.WriteByte('\t')
		case 'Z':
			out.WriteByte(26)
		case '%', '_':
			if keepLike {
				out.WriteByte('\\')
			}
			out.WriteByte(n)
		default:
			out.WriteByte(n)
		}
	}
	return out.String()
}
