package compile

import (
	"fmt"
	"math"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/parser"
)

// tri is SQL's three-valued logic.
type tri uint8

const (
	tFalse tri = iota
	tTrue
	tUnknown
)

func triOf(b bool) tri {
	if b {
		return tTrue
	}
	return tFalse
}

func (t tri) not() tri {
	switch t {
	case tTrue:
		return tFalse
	case tFalse:
		return tTrue
	}
	return tUnknown
}

// splitError is a decision (a comparison, a group label, a branch) that
// differs between the rows of one cell: the histogram cannot answer it.
type splitError struct {
	col  string
	cell int
	what string // the predicate that splits, once known
}

func (e *splitError) Error() string { return fmt.Sprintf("splits cell %d of %s", e.cell, e.col) }

// env is one cell tuple: each referenced column's value on its cell.
type env map[string]val

// evaluator evaluates expressions and predicates on domain cells with
// MySQL's semantics (NULL propagation, three-valued logic, the default
// collation), never on data.
type evaluator struct {
	t        *catalog.Table
	co       *collation
	literals map[parser.Literal]val // literals read once per compilation
	// joinKeys indexes each join's public keys (by the Lookup's first
	// key), built on first use (join.go).
	joinKeys map[*parser.Value]*keyIndex
}

func newEvaluator(t *catalog.Table) *evaluator {
	return &evaluator{t: t, co: newCollation(), literals: map[parser.Literal]val{}}
}

// cellVal is what a column's cell stands for.
func cellVal(c *catalog.Column, i int, cell catalog.Cell) val {
	if c.OpenCopy {
		switch cell.Kind {
		case catalog.CellValue:
			v := strVal(cell.Value)
			v.open = openValue
			return v
		case catalog.CellOther:
			return val{kind: vStr, typ: tString, open: openOther}
		case catalog.CellMatch:
			return val{kind: vStr, typ: tString, open: openMatch, match: cell.Match}
		}
	}
	switch cell.Kind {
	case catalog.CellValue:
		return strVal(cell.Value)
	case catalog.CellOther:
		// Values outside the declared ones (binned by exact text, so a
		// case variant of a declared value may be among them): unknown.
		return val{kind: vOther}
	case catalog.CellBin:
		v := val{kind: vNum, mid: c.Midpoint(cell), splitCol: c.Name, splitCell: i}
		if c.Kind == catalog.TimeRange {
			// Whole seconds [Lo, Hi − 1]; a date column's values are days.
			v.lo, v.hi, v.integral, v.typ = cell.Lo, cell.Hi-1, true, tDatetime
			if c.DateOnly {
				v.hi, v.typ = cell.Hi-86400, tDate
			}
			v.mid = (v.lo + v.hi) / 2
			return v
		}
		if c.Kind == catalog.IntegerRange {
			v.lo, v.hi, v.integral, v.typ = cell.Lo, cell.Hi-1, true, tInt
		} else {
			v.lo, v.hi, v.typ = cell.Lo, cell.Hi, tDouble
			if cell.Hi != c.Edges[len(c.Edges)-1] {
				v.hi = math.Nextafter(cell.Hi, math.Inf(-1)) // [lo, hi): the largest value inside
			}
		}
		return v
	}
	return nullVal // NULL, and the dropped cell (weighed 0 by the queries that see it)
}

// expr evaluates e on one cell tuple.
func (ev *evaluator) expr(e parser.Expr, en env) (val, error) {
	switch e := e.(type) {
	case parser.Col:
		v, ok := en[e.Name]
		if !ok {
			// Only a function of the group keys is evaluated per group.
			return val{}, parser.Errorf(parser.CodeDPRefused, "column '%s' is not a GROUP BY key: dpproxy returns aggregates per group, never row values; group by it, or aggregate it", e.Name)
		}
		return v, nil
	case parser.Value:
		if e.Null {
			return nullVal, nil
		}
		v, ok := ev.literals[e.Lit]
		if !ok {
			v = literalVal(e.Lit.Text, e.Lit.Quoted)
			ev.literals[e.Lit] = v
		}
		return v, nil
	case parser.Neg:
		x, err := ev.expr(e.X, en)
		if err == nil && x.isTime() {
			return val{}, timeArith(e)
		}
		if err != nil || x.kind != vNum {
			if x.kind == vStr {
				x = toNumber(x)
			} else {
				return x, err
			}
		}
		x.lo, x.hi, x.mid = -x.hi, -x.lo, -x.mid
		return x, nil
	case parser.Arith:
		l, err := ev.expr(e.Left, en)
		if err != nil {
			return val{}, err
		}
		r, err := ev.expr(e.Right, en)
		if err != nil {
			return val{}, err
		}
		if l.isTime() || r.isTime() {
			return val{}, timeArith(e)
		}
		return arith(e.Op, l, r), nil
	case parser.Call:
		args := make([]val, len(e.Args))
		for i, a := range e.Args {
			v, err := ev.expr(a, en)
			if err != nil {
				return val{}, err
			}
			args[i] = v
		}
		return ev.call(e.Name, args)
	case parser.Case:
		var op val
		if e.Operand != nil {
			v, err := ev.expr(e.Operand, en)
			if err != nil {
				return val{}, err
			}
			op = v
		}
		for _, w := range e.Whens {
			var t tri
			if w.Cond != nil {
				x, err := ev.pred(w.Cond, en)
				if err != nil {
					return val{}, err
				}
				t = x
			} else {
				v, err := ev.expr(w.Value, en)
				if err != nil {
					return val{}, err
				}
				x, err := ev.compare(op, parser.OpEq, v)
				if err != nil {
					return val{}, err
				}
				t = x
			}
			if t == tTrue {
				return ev.expr(w.Then, en)
			}
		}
		if e.Else == nil {
			return nullVal, nil
		}
		return ev.expr(e.Else, en)
	case parser.Lookup:
		return ev.lookup(e, en)
	case parser.Cond:
		t, err := ev.pred(e.P, en)
		if err != nil {
			return val{}, err
		}
		switch t {
		case tTrue:
			return numVal(1, tInt), nil
		case tFalse:
			return numVal(0, tInt), nil
		}
		return nullVal, nil
	}
	return val{}, fmt.Errorf("compile: unknown expression %T", e)
}

// arith applies + - * / DIV % (MySQL: NULL in, NULL out; division by zero
// is NULL) to ranges, soundly.
func arith(op string, l, r val) val {
	switch {
	case l.kind == vNull || r.kind == vNull:
		return nullVal
	case l.kind == vOther || r.kind == vOther:
		return val{kind: vOther}
	case l.kind == vAny || r.kind == vAny:
		return widen(val{kind: vAny}, l, r)
	}
	l, r = toNumber(l), toNumber(r)
	typ, scale := resultType(l, r)
	out := val{kind: vNum, typ: typ, scale: scale}
	corners := func(f func(a, b float64) float64) {
		xs := []float64{f(l.lo, r.lo), f(l.lo, r.hi), f(l.hi, r.lo), f(l.hi, r.hi)}
		out.lo, out.hi = xs[0], xs[0]
		for _, x := range xs[1:] {
			out.lo, out.hi = math.Min(out.lo, x), math.Max(out.hi, x)
		}
		out.mid = f(l.mid, r.mid)
	}
	switch op {
	case "+":
		out.lo, out.hi, out.mid = l.lo+r.lo, l.hi+r.hi, l.mid+r.mid
		out.integral = l.integral && r.integral
	case "-":
		out.lo, out.hi, out.mid = l.lo-r.hi, l.hi-r.lo, l.mid-r.mid
		out.integral = l.integral && r.integral
	case "*":
		corners(func(a, b float64) float64 { return a * b })
		out.integral = l.integral && r.integral
		if typ == tDecimal {
			out.scale = l.scale + r.scale
		}
	case "/", "div", "%":
		if r.exact() && r.lo == 0 {
			return nullVal
		}
		if r.lo <= 0 && r.hi >= 0 {
			return widen(val{kind: vAny}, l, r) // some rows divide by zero (NULL), others by tiny numbers
		}
		switch op {
		case "/":
			corners(func(a, b float64) float64 { return a / b })
			if typ != tDouble {
				out.typ, out.scale = tDecimal, l.scale+4 // div_precision_increment
			}
			out.integral = out.lo == out.hi && out.lo == math.Trunc(out.lo)
		case "div":
			corners(func(a, b float64) float64 { return math.Trunc(a / b) })
			out.typ, out.scale, out.integral = tInt, 0, true
		default: // %: the sign of the dividend, like fmod
			if !r.exact() {
				return widen(val{kind: vAny}, l, r)
			}
			q1, q2 := math.Trunc(l.lo/r.lo), math.Trunc(l.hi/r.lo)
			if q1 != q2 || (l.lo < 0) != (l.hi < 0) && l.lo != 0 {
				return widen(val{kind: vAny}, l, r)
			}
			out.lo, out.hi, out.mid = math.Mod(l.lo, r.lo), math.Mod(l.hi, r.lo), math.Mod(l.mid, r.lo)
			if out.lo > out.hi {
				out.lo, out.hi = out.hi, out.lo
			}
			out.integral = l.integral && r.integral
		}
	}
	if math.IsNaN(out.lo) || math.IsNaN(out.hi) || math.IsInf(out.lo, 0) || math.IsInf(out.hi, 0) {
		return widen(val{kind: vAny}, l, r)
	}
	if out.lo == out.hi {
		out.mid = out.lo
	}
	return widen(out, l, r)
}

// pred evaluates a predicate on one cell tuple.
func (ev *evaluator) pred(p parser.Pred, en env) (tri, error) {
	switch p := p.(type) {
	case nil:
		return tTrue, nil
	case parser.Const:
		return triOf(p.Value), nil
	case parser.Not:
		t, err := ev.pred(p.Term, en)
		return t.not(), err
	case parser.And:
		var ts []tri
		var errs []error
		for _, x := range p.Terms {
			t, err := ev.pred(x, en)
			ts, errs = append(ts, t), append(errs, err)
		}
		return combine3(ts, errs, true)
	case parser.Or:
		var ts []tri
		var errs []error
		for _, x := range p.Terms {
			t, err := ev.pred(x, en)
			ts, errs = append(ts, t), append(errs, err)
		}
		return combine3(ts, errs, false)
	case parser.Compare, parser.In, parser.Between, parser.IsNull:
		g, err := ev.general(p)
		if err != nil {
			return 0, err
		}
		return ev.pred(g, en)
	case parser.ExprCompare:
		l, err := ev.expr(p.Left, en)
		if err != nil {
			return 0, err
		}
		r, err := ev.expr(p.Right, en)
		if err != nil {
			return 0, err
		}
		return ev.compare(l, p.Op, r)
	case parser.ExprIn:
		x, err := ev.expr(p.X, en)
		if err != nil {
			return 0, err
		}
		var ts []tri
		var errs []error
		for _, e := range p.List {
			v, err := ev.expr(e, en)
			if err != nil {
				return 0, err
			}
			t, err := ev.compare(x, parser.OpEq, v)
			ts, errs = append(ts, t), append(errs, err)
		}
		out, err := combine3(ts, errs, false)
		if p.Negated {
			return out.not(), err
		}
		return out, err
	case parser.ExprBetween:
		x, err := ev.expr(p.X, en)
		if err != nil {
			return 0, err
		}
		lo, err := ev.expr(p.Lo, en)
		if err != nil {
			return 0, err
		}
		hi, err := ev.expr(p.Hi, en)
		if err != nil {
			return 0, err
		}
		a, errA := ev.compare(x, parser.OpGe, lo)
		b, errB := ev.compare(x, parser.OpLe, hi)
		out, err := combine3([]tri{a, b}, []error{errA, errB}, true)
		if p.Negated {
			return out.not(), err
		}
		return out, err
	case parser.ExprIsNull:
		x, err := ev.expr(p.X, en)
		if err != nil {
			return 0, err
		}
		if x.kind == vAny {
			return 0, &splitError{col: x.splitCol, cell: x.splitCell}
		}
		return triOf((x.kind == vNull) != p.Negated), nil
	case parser.Like, parser.Regexp:
		return ev.match(p, en)
	case parser.Truth:
		x, err := ev.expr(p.X, en)
		if err != nil {
			return 0, err
		}
		t, err := truthOf(x)
		if err != nil {
			return 0, err
		}
		switch p.Test {
		case "is true":
			return triOf(t == tTrue), nil
		case "is not true":
			return triOf(t != tTrue), nil
		case "is false":
			return triOf(t == tFalse), nil
		case "is not false":
			return triOf(t != tFalse), nil
		}
		return t, nil
	case parser.AggCompare:
		return 0, parser.Errorf(parser.CodeDPRefused, "aggregates belong in HAVING, not WHERE")
	}
	return 0, fmt.Errorf("compile: unknown predicate %T", p)
}

// combine3 is AND (and true) or OR of three-valued terms, some of which
// may split their cell: FALSE AND anything is FALSE and TRUE OR anything is
// TRUE, so a split in another term does not matter then. Other errors
// (refusals) always propagate.
func combine3(ts []tri, errs []error, and bool) (tri, error) {
	var split error
	for _, err := range errs {
		if err == nil {
			continue
		}
		if _, ok := err.(*splitError); !ok {
			return 0, err
		}
		split = err
	}
	absorbing, identity := tTrue, tFalse
	if and {
		absorbing, identity = tFalse, tTrue
	}
	out := identity
	for i, t := range ts {
		if errs[i] != nil {
			continue
		}
		switch {
		case t == absorbing:
			return absorbing, nil
		case t == tUnknown:
			out = tUnknown
		}
	}
	if split != nil {
		return 0, split
	}
	return out, nil
}

// truthOf is a value used as a condition: a non-zero number is TRUE.
func truthOf(x val) (tri, error) {
	switch x.kind {
	case vNull, vOther:
		return tUnknown, nil
	case vAny:
		return 0, &splitError{col: x.splitCol, cell: x.splitCell}
	}
	x = toNumber(x)
	switch {
	case x.lo > 0 || x.hi < 0:
		return tTrue, nil
	case x.lo == 0 && x.hi == 0:
		return tFalse, nil
	}
	return 0, &splitError{col: x.splitCol, cell: x.splitCell}
}

// normalize rewrites every simple atom of p into its general form (see
// general) once, before p is evaluated on many cells.
func (ev *evaluator) normalize(p parser.Pred) (parser.Pred, error) {
	switch x := p.(type) {
	case parser.Compare, parser.In, parser.Between, parser.IsNull:
		return ev.general(x)
	case parser.And:
		out := parser.And{Terms: make([]parser.Pred, len(x.Terms))}
		for i, t := range x.Terms {
			n, err := ev.normalize(t)
			if err != nil {
				return nil, err
			}
			out.Terms[i] = n
		}
		return out, nil
	case parser.Or:
		out := parser.Or{Terms: make([]parser.Pred, len(x.Terms))}
		for i, t := range x.Terms {
			n, err := ev.normalize(t)
			if err != nil {
				return nil, err
			}
			out.Terms[i] = n
		}
		return out, nil
	case parser.Not:
		n, err := ev.normalize(x.Term)
		return parser.Not{Term: n}, err
	}
	return p, nil
}

// general turns a simple atom (a bare column against literals) into its
// general form, reading each literal against the column's domain as
// dpproxy always has: text for a categorical column, a number (quoted or
// not, as clients interpolate parameters) for a numeric one.
func (ev *evaluator) general(p parser.Pred) (parser.Pred, error) {
	var name string
	switch p := p.(type) {
	case parser.Compare:
		name = p.Column
	case parser.In:
		name = p.Column
	case parser.Between:
		name = p.Column
	case parser.IsNull:
		return parser.ExprIsNull{X: parser.Col{Name: p.Column}, Negated: p.Negated}, nil
	}
	c := ev.t.Column(name)
	if c == nil {
		return nil, parser.Errorf(parser.CodeBadField, "Unknown column '%s' in 'where clause'", name)
	}
	lit := func(l parser.Literal) (parser.Expr, error) {
		if c.IsTime() && !l.Quoted && isNumeric(l.Text) {
			return parser.Value{Lit: l}, nil // refused in compare: not a time
		}
		if !c.IsNumeric() { // text, or a time read from text
			return parser.Value{Lit: parser.Literal{Text: l.Text, Quoted: true}}, nil
		}
		if !isNumeric(l.Text) {
			return nil, parser.Errorf(parser.CodeDPRefused, "%s is numeric: '%s' is not a number", c.Name, l.Text)
		}
		return parser.Value{Lit: parser.Literal{Text: l.Text}}, nil
	}
	col := parser.Col{Name: c.Name}
	switch p := p.(type) {
	case parser.Compare:
		v, err := lit(p.Value)
		return parser.ExprCompare{Left: col, Op: p.Op, Right: v}, err
	case parser.In:
		var list []parser.Expr
		for _, l := range p.Values {
			v, err := lit(l)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		return parser.ExprIn{X: col, List: list, Negated: p.Negated}, nil
	}
	b := p.(parser.Between)
	lo, err := lit(b.Lo)
	if err != nil {
		return nil, err
	}
	hi, err := lit(b.Hi)
	return parser.ExprBetween{X: col, Lo: lo, Hi: hi, Negated: b.Negated}, err
}

// compare evaluates l op r.
func (ev *evaluator) compare(l val, op parser.CompareOp, r val) (tri, error) {
	if op == parser.OpNullSafeEq {
		switch {
		case l.kind == vNull && r.kind == vNull:
			return tTrue, nil
		case l.kind == vNull || r.kind == vNull:
			if l.kind == vAny || r.kind == vAny {
				return 0, splitOf(l, r)
			}
			return tFalse, nil
		}
		op = parser.OpEq
	}
	switch {
	case l.kind == vNull || r.kind == vNull || l.kind == vOther || r.kind == vOther:
		return tUnknown, nil
	case l.kind == vAny || r.kind == vAny:
		return 0, splitOf(l, r)
	case l.open != openNone || r.open != openNone:
		return openCompare(l, op, r)
	case l.isTime() != r.isTime():
		// A time compares with text read as a time (MySQL converts the
		// constant), never with a bare number.
		var err error
		if l.isTime() {
			r, err = timeOperand(r, l)
		} else {
			l, err = timeOperand(l, r)
		}
		if err != nil {
			return 0, err
		}
	case l.kind == vStr && r.kind == vStr:
		if op == parser.OpEq || op == parser.OpNe {
			return triOf(ev.co.equal(l.str, r.str) == (op == parser.OpEq)), nil
		}
		return triOf(holds(op, ev.co.compare(l.str, r.str))), nil
	}
	l, r = toNumber(l), toNumber(r)
	var c int
	switch {
	case l.exact() && r.exact():
		c = cmpFloat(l.lo, r.lo)
	case l.hi < r.lo:
		c = -1
	case l.lo > r.hi:
		c = 1
	case op == parser.OpEq || op == parser.OpNe:
		// Equal only where a value meets the other side's: an integer
		// range never equals a non-integer.
		if (l.integral && r.exact() && r.lo != math.Trunc(r.lo)) || (r.integral && l.exact() && l.lo != math.Trunc(l.lo)) {
			return triOf(op == parser.OpNe), nil
		}
		return 0, splitOf(l, r)
	default:
		// Overlapping ranges: decided only where every pair agrees.
		switch op {
		case parser.OpLt:
			if l.lo >= r.hi {
				return tFalse, nil
			}
		case parser.OpLe:
			if l.hi <= r.lo {
				return tTrue, nil
			}
		case parser.OpGt:
			if l.hi <= r.lo {
				return tFalse, nil
			}
		case parser.OpGe:
			if l.lo >= r.hi {
				return tTrue, nil
			}
		}
		return 0, splitOf(l, r)
	}
	return triOf(holds(op, c)), nil
}

func splitOf(l, r val) error {
	if l.wide() {
		return &splitError{col: l.splitCol, cell: l.splitCell}
	}
	return &splitError{col: r.splitCol, cell: r.splitCell}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func holds(op parser.CompareOp, c int) bool {
	switch op {
	case parser.OpEq, parser.OpNullSafeEq:
		return c == 0
	case parser.OpNe:
		return c != 0
	case parser.OpLt:
		return c < 0
	case parser.OpLe:
		return c <= 0
	case parser.OpGt:
		return c > 0
	}
	return c >= 0
}

// openCompare is l op r where one side is a cell of an open column: its
// rows were binned by exact text, so equality is exact too (the other and
// match cells equal no literal). Only = and <> reach here (the engine
// refuses other comparisons of open columns).
func openCompare(l val, op parser.CompareOp, r val) (tri, error) {
	if op != parser.OpEq && op != parser.OpNe {
		return 0, parser.Errorf(parser.CodeDPRefused, "a column without a public list of values is compared with literals by =, <>, IN, NOT IN and LIKE only")
	}
	eq := false
	if l.open == openValue || r.open == openValue {
		other := r
		if r.open == openValue {
			other = l
		}
		eq = other.open == openNone && textOf(l) == textOf(r)
	}
	return triOf(eq == (op == parser.OpEq)), nil
}

// openMatch is LIKE on a cell of an open column: exact on a declared
// value (catalog.Like, as the source matched the rest), the pattern's bit
// on a match cell, unknown on the other cell.
func (ev *evaluator) openMatch(xe parser.Expr, x val, pattern, esc string, negated bool) (tri, error) {
	switch x.open {
	case openValue:
		return triOf(catalog.Like(x.str, pattern, esc) != negated), nil
	case openMatch:
		if c, ok := xe.(parser.Col); ok {
			if col := ev.t.Column(c.Name); col != nil {
				for i, p := range col.Patterns {
					if p.Text == pattern && p.Escape == esc {
						return triOf((x.match&(1<<i) != 0) != negated), nil
					}
				}
			}
		}
		return 0, parser.Errorf(parser.CodeDPRefused, "LIKE '%s' on a column without a public list of values: the pattern must be a literal tested against the column itself", pattern)
	}
	return tUnknown, nil
}

// match evaluates LIKE and REGEXP on the declared text of a cell.
func (ev *evaluator) match(p parser.Pred, en env) (tri, error) {
	var xe, pe parser.Expr
	var negated bool
	esc, isLike := "", false
	switch p := p.(type) {
	case parser.Like:
		xe, pe, negated, esc, isLike = p.X, p.Pattern, p.Negated, p.Escape, true
	case parser.Regexp:
		xe, pe, negated = p.X, p.Pattern, p.Negated
	}
	x, err := ev.expr(xe, en)
	if err != nil {
		return 0, err
	}
	pat, err := ev.expr(pe, en)
	if err != nil {
		return 0, err
	}
	switch {
	case x.kind == vNull || pat.kind == vNull || x.kind == vOther || pat.kind == vOther:
		return tUnknown, nil
	case x.wide() || pat.wide():
		return 0, splitOf(x, pat)
	}
	s, ps := textOf(x), textOf(pat)
	if x.open != openNone || pat.open != openNone {
		if !isLike || pat.open != openNone {
			return 0, parser.Errorf(parser.CodeDPRefused, "a column without a public list of values is matched by LIKE with a literal pattern only")
		}
		return ev.openMatch(xe, x, ps, esc, negated)
	}
	var m bool
	if isLike {
		m = like(s, ps, esc)
	} else {
		m, err = ev.co.regexpMatch(s, ps)
		if err != nil {
			return 0, parser.Errorf(parser.CodeDPRefused, "REGEXP '%s' is not a valid regular expression (RE2 syntax): %v", ps, err)
		}
	}
	return triOf(m != negated), nil
}

// textOf is a value in a string context.
func textOf(v val) string {
	if v.kind == vStr {
		return v.str
	}
	return formatNumber(v)
}
