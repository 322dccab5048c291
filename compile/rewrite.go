package compile

import "github.com/dpproxy/dpproxy/parser"

// rewriteExpr rebuilds e bottom-up, replacing each subexpression x for
// which f returns (y, true) by y (without descending into it).
func rewriteExpr(e parser.Expr, f func(parser.Expr) (parser.Expr, bool)) parser.Expr {
	if e == nil {
		return nil
	}
	if y, ok := f(e); ok {
		return y
	}
	switch x := e.(type) {
	case parser.Arith:
		return parser.Arith{Op: x.Op, Left: rewriteExpr(x.Left, f), Right: rewriteExpr(x.Right, f)}
	case parser.Neg:
		return parser.Neg{X: rewriteExpr(x.X, f)}
	case parser.Call:
		args := make([]parser.Expr, len(x.Args))
		for i, a := range x.Args {
			args[i] = rewriteExpr(a, f)
		}
		return parser.Call{Name: x.Name, Args: args}
	case parser.Case:
		out := parser.Case{Operand: rewriteExpr(x.Operand, f), Else: rewriteExpr(x.Else, f)}
		for _, w := range x.Whens {
			out.Whens = append(out.Whens, parser.When{Cond: rewritePred(w.Cond, f), Value: rewriteExpr(w.Value, f), Then: rewriteExpr(w.Then, f)})
		}
		return out
	case parser.Cond:
		return parser.Cond{P: rewritePred(x.P, f)}
	case parser.Lookup:
		x.Key = rewriteExpr(x.Key, f)
		return x
	}
	return e
}

// rewritePred applies rewriteExpr to every expression in p; a simple atom
// on a bare column becomes its general form when its column is replaced.
func rewritePred(p parser.Pred, f func(parser.Expr) (parser.Expr, bool)) parser.Pred {
	rw := func(e parser.Expr) parser.Expr { return rewriteExpr(e, f) }
	lit := func(l parser.Literal) parser.Expr { return parser.Value{Lit: l} }
	switch x := p.(type) {
	case nil:
		return nil
	case parser.And:
		out := parser.And{}
		for _, t := range x.Terms {
			out.Terms = append(out.Terms, rewritePred(t, f))
		}
		return out
	case parser.Or:
		out := parser.Or{}
		for _, t := range x.Terms {
			out.Terms = append(out.Terms, rewritePred(t, f))
		}
		return out
	case parser.Not:
		return parser.Not{Term: rewritePred(x.Term, f)}
	case parser.Compare:
		if y, ok := f(parser.Col{Name: x.Column}); ok {
			return parser.ExprCompare{Left: y, Op: x.Op, Right: lit(x.Value)}
		}
	case parser.In:
		if y, ok := f(parser.Col{Name: x.Column}); ok {
			var list []parser.Expr
			for _, v := range x.Values {
				list = append(list, lit(v))
			}
			return parser.ExprIn{X: y, List: list, Negated: x.Negated}
		}
	case parser.Between:
		if y, ok := f(parser.Col{Name: x.Column}); ok {
			return parser.ExprBetween{X: y, Lo: lit(x.Lo), Hi: lit(x.Hi), Negated: x.Negated}
		}
	case parser.IsNull:
		if y, ok := f(parser.Col{Name: x.Column}); ok {
			return parser.ExprIsNull{X: y, Negated: x.Negated}
		}
	case parser.ExprCompare:
		return parser.ExprCompare{Left: rw(x.Left), Op: x.Op, Right: rw(x.Right)}
	case parser.ExprIn:
		list := make([]parser.Expr, len(x.List))
		for i, e := range x.List {
			list[i] = rw(e)
		}
		return parser.ExprIn{X: rw(x.X), List: list, Negated: x.Negated}
	case parser.ExprBetween:
		return parser.ExprBetween{X: rw(x.X), Lo: rw(x.Lo), Hi: rw(x.Hi), Negated: x.Negated}
	case parser.ExprIsNull:
		return parser.ExprIsNull{X: rw(x.X), Negated: x.Negated}
	case parser.Like:
		return parser.Like{X: rw(x.X), Pattern: rw(x.Pattern), Escape: x.Escape, Negated: x.Negated}
	case parser.Regexp:
		return parser.Regexp{X: rw(x.X), Pattern: rw(x.Pattern), Negated: x.Negated}
	case parser.Truth:
		return parser.Truth{X: rw(x.X), Test: x.Test}
	}
	return p
}
