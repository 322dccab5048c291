package compile

import (
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/parser"
)

// ExprSQL prints an expression as SQL, for messages and EXPLAIN.
func ExprSQL(e parser.Expr) string { return exprSQL(e, false) }

// exprSQL parenthesises arithmetic inside arithmetic.
func exprSQL(e parser.Expr, nested bool) string {
	switch e := e.(type) {
	case nil:
		return "NULL"
	case parser.Col:
		return e.Name
	case parser.Value:
		if e.Null {
			return "NULL"
		}
		return litSQL(e.Lit)
	case parser.Neg:
		return "-" + exprSQL(e.X, true)
	case parser.Arith:
		op := e.Op
		if op == "div" {
			op = "DIV"
		}
		s := exprSQL(e.Left, true) + " " + op + " " + exprSQL(e.Right, true)
		if nested {
			return "(" + s + ")"
		}
		return s
	case parser.Call:
		var args []string
		for _, a := range e.Args {
			args = append(args, ExprSQL(a))
		}
		name := strings.ToUpper(e.Name)
		if strings.HasPrefix(e.Name, "cast_") {
			return "CAST(" + args[0] + " AS " + strings.ToUpper(strings.TrimPrefix(e.Name, "cast_")) + ")"
		}
		return name + "(" + strings.Join(args, ", ") + ")"
	case parser.Case:
		var b strings.Builder
		b.WriteString("CASE")
		if e.Operand != nil {
			b.WriteString(" " + ExprSQL(e.Operand))
		}
		for _, w := range e.Whens {
			b.WriteString(" WHEN ")
			if w.Cond != nil {
				b.WriteString(PredSQL(w.Cond))
			} else {
				b.WriteString(ExprSQL(w.Value))
			}
			b.WriteString(" THEN " + ExprSQL(w.Then))
		}
		if e.Else != nil {
			b.WriteString(" ELSE " + ExprSQL(e.Else))
		}
		b.WriteString(" END")
		return b.String()
	case parser.Cond:
		return "(" + PredSQL(e.P) + ")"
	case parser.Lookup:
		if e.Column == "" {
			// An inner join's condition.
			return ExprSQL(e.Key) + " IN (SELECT " + e.KeyColumn + " FROM " + e.Table + ")"
		}
		return e.Name()
	}
	return "?"
}

func litSQL(l parser.Literal) string {
	if l.Quoted {
		return "'" + strings.ReplaceAll(l.Text, "'", "''") + "'"
	}
	return l.Text
}

// PredSQL prints a predicate as SQL, for messages and EXPLAIN.
func PredSQL(p parser.Pred) string {
	join := func(terms []parser.Pred, op string) string {
		var parts []string
		for _, t := range terms {
			parts = append(parts, PredSQL(t))
		}
		return "(" + strings.Join(parts, " "+op+" ") + ")"
	}
	lits := func(ls []parser.Literal) string {
		var parts []string
		for _, l := range ls {
			parts = append(parts, litSQL(l))
		}
		return strings.Join(parts, ", ")
	}
	exprs := func(es []parser.Expr) string {
		var parts []string
		for _, e := range es {
			parts = append(parts, ExprSQL(e))
		}
		return strings.Join(parts, ", ")
	}
	not := func(n bool) string {
		if n {
			return "NOT "
		}
		return ""
	}
	switch p := p.(type) {
	case nil:
		return "TRUE"
	case parser.Const:
		if p.Value {
			return "TRUE"
		}
		return "FALSE"
	case parser.And:
		return join(p.Terms, "AND")
	case parser.Or:
		return join(p.Terms, "OR")
	case parser.Not:
		return "NOT " + PredSQL(p.Term)
	case parser.Compare:
		return p.Column + " " + p.Op.String() + " " + litSQL(p.Value)
	case parser.In:
		return p.Column + " " + not(p.Negated) + "IN (" + lits(p.Values) + ")"
	case parser.Between:
		return p.Column + " " + not(p.Negated) + "BETWEEN " + litSQL(p.Lo) + " AND " + litSQL(p.Hi)
	case parser.IsNull:
		return p.Column + " IS " + not(p.Negated) + "NULL"
	case parser.ExprCompare:
		return ExprSQL(p.Left) + " " + p.Op.String() + " " + ExprSQL(p.Right)
	case parser.ExprIn:
		return ExprSQL(p.X) + " " + not(p.Negated) + "IN (" + exprs(p.List) + ")"
	case parser.ExprBetween:
		return ExprSQL(p.X) + " " + not(p.Negated) + "BETWEEN " + ExprSQL(p.Lo) + " AND " + ExprSQL(p.Hi)
	case parser.ExprIsNull:
		return ExprSQL(p.X) + " IS " + not(p.Negated) + "NULL"
	case parser.Like:
		s := ExprSQL(p.X) + " " + not(p.Negated) + "LIKE " + ExprSQL(p.Pattern)
		if p.Escape != `\` {
			s += " ESCAPE " + strconv.Quote(p.Escape)
		}
		return s
	case parser.Regexp:
		return ExprSQL(p.X) + " " + not(p.Negated) + "REGEXP " + ExprSQL(p.Pattern)
	case parser.Truth:
		if p.Test != "" {
			return ExprSQL(p.X) + " " + strings.ToUpper(p.Test)
		}
		return ExprSQL(p.X)
	case parser.AggCompare:
		return p.Item.Alias + " " + p.Op.String() + " " + strconv.FormatFloat(p.Value, 'g', -1, 64)
	}
	return "?"
}
