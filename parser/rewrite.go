package parser

// RewriteExpr rebuilds e bottom-up, replacing each subexpression x for
// which f returns (y, true) by y (without descending into it).
func RewriteExpr(e Expr, f func(Expr) (Expr, bool)) Expr {
	if e == nil {
		return nil
	}
	if y, ok := f(e); ok {
		return y
	}
	switch x := e.(type) {
	case Arith:
		return Arith{Op: x.Op, Left: RewriteExpr(x.Left, f), Right: RewriteExpr(x.Right, f)}
	case Neg:
		return Neg{X: RewriteExpr(x.X, f)}
	case Call:
		args := make([]Expr, len(x.Args))
		for i, a := range x.Args {
			args[i] = RewriteExpr(a, f)
		}
		return Call{Name: x.Name, Args: args}
	case Case:
		out := Case{Operand: RewriteExpr(x.Operand, f), Else: RewriteExpr(x.Else, f)}
		for _, w := range x.Whens {
			out.Whens = append(out.Whens, When{Cond: RewritePred(w.Cond, f), Value: RewriteExpr(w.Value, f), Then: RewriteExpr(w.Then, f)})
		}
		return out
	case Cond:
		return Cond{P: RewritePred(x.P, f)}
	case Lookup:
		x.Key = RewriteExpr(x.Key, f)
		return x
	}
	return e
}

// RewritePred applies RewriteExpr to every expression in p; a simple atom
// on a bare column becomes its general form when its column is replaced,
// and so does an aggregate of HAVING over a bare column.
func RewritePred(p Pred, f func(Expr) (Expr, bool)) Pred {
	rw := func(e Expr) Expr { return RewriteExpr(e, f) }
	lit := func(l Literal) Expr { return Value{Lit: l} }
	switch x := p.(type) {
	case nil:
		return nil
	case And:
		out := And{}
		for _, t := range x.Terms {
			out.Terms = append(out.Terms, RewritePred(t, f))
		}
		return out
	case Or:
		out := Or{}
		for _, t := range x.Terms {
			out.Terms = append(out.Terms, RewritePred(t, f))
		}
		return out
	case Not:
		return Not{Term: RewritePred(x.Term, f)}
	case Compare:
		if y, ok := f(Col{Name: x.Column}); ok {
			return ExprCompare{Left: y, Op: x.Op, Right: lit(x.Value)}
		}
	case In:
		if y, ok := f(Col{Name: x.Column}); ok {
			var list []Expr
			for _, v := range x.Values {
				list = append(list, lit(v))
			}
			return ExprIn{X: y, List: list, Negated: x.Negated}
		}
	case Between:
		if y, ok := f(Col{Name: x.Column}); ok {
			return ExprBetween{X: y, Lo: lit(x.Lo), Hi: lit(x.Hi), Negated: x.Negated}
		}
	case IsNull:
		if y, ok := f(Col{Name: x.Column}); ok {
			return ExprIsNull{X: y, Negated: x.Negated}
		}
	case ExprCompare:
		return ExprCompare{Left: rw(x.Left), Op: x.Op, Right: rw(x.Right)}
	case ExprIn:
		list := make([]Expr, len(x.List))
		for i, e := range x.List {
			list[i] = rw(e)
		}
		return ExprIn{X: rw(x.X), List: list, Negated: x.Negated}
	case ExprBetween:
		return ExprBetween{X: rw(x.X), Lo: rw(x.Lo), Hi: rw(x.Hi), Negated: x.Negated}
	case ExprIsNull:
		return ExprIsNull{X: rw(x.X), Negated: x.Negated}
	case Like:
		return Like{X: rw(x.X), Pattern: rw(x.Pattern), Escape: x.Escape, Negated: x.Negated}
	case Regexp:
		return Regexp{X: rw(x.X), Pattern: rw(x.Pattern), Negated: x.Negated}
	case Truth:
		return Truth{X: rw(x.X), Test: x.Test}
	case AggCompare:
		it := x.Item
		if it.Column != "" && it.Column != "*" {
			if y, ok := f(Col{Name: it.Column}); ok {
				if it.Agg == AggNone {
					it.Key = y
				} else {
					it.Arg = y
				}
				it.Column = ""
			}
		}
		it.Arg, it.Key = rw(it.Arg), rw(it.Key)
		rewriteAggExpr(it.Expr, f)
		return AggCompare{Item: it, Op: x.Op, Value: x.Value}
	}
	return p
}
