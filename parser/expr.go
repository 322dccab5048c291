package parser

// Expr is a scalar expression over the protected table's domain columns:
// columns, constants, arithmetic, deterministic functions, CASE and
// predicates used as values. compile/ evaluates it on every domain cell's
// declared values — never on the data — so any deterministic function of a
// row's domain values becomes a vector over the histogram (a truth table, a
// weight, a group label).
//
// Expressions are values (no pointers), so they compare with == semantics
// under reflect.DeepEqual and print deterministically with %#v.
type Expr interface{ isExpr() }

type (
	// Col is a domain column (lower-case, unqualified).
	Col struct{ Name string }
	// Value is a constant: a number or a quoted string as written, or NULL.
	Value struct {
		Lit  Literal
		Null bool
	}
	// Arith is Left Op Right with Op one of + - * / div % (MOD is %).
	Arith struct {
		Op          string
		Left, Right Expr
	}
	// Neg is unary minus.
	Neg struct{ X Expr }
	// Call is a deterministic scalar function (lower-case name, aliases
	// resolved: CEILING is ceil, POW is power, SUBSTR and MID are
	// substring, LCASE lower, UCASE upper, CHARACTER_LENGTH char_length).
	// CAST(x AS t) and CONVERT(x, t) are Call{"cast_<t>", x}.
	Call struct {
		Name string
		Args []Expr
	}
	// Case is CASE [Operand] WHEN ... THEN ... [ELSE ...] END; a missing
	// ELSE is NULL. IF(p, a, b) is a Case with one searched WHEN.
	Case struct {
		Operand Expr // nil for a searched CASE
		Whens   []When
		Else    Expr // nil: NULL
	}
	// Cond is a predicate used as a value: 1, 0 or NULL (SUM(age > 30)).
	Cond struct{ P Pred }
)

// When is one branch of a Case: Cond for a searched CASE (CASE WHEN p
// THEN ...), Value for a simple one (CASE x WHEN v THEN ...).
type When struct {
	Cond  Pred
	Value Expr
	Then  Expr
}

func (Col) isExpr()   {}
func (Value) isExpr() {}
func (Arith) isExpr() {}
func (Neg) isExpr()   {}
func (Call) isExpr()  {}
func (Case) isExpr()  {}
func (Cond) isExpr()  {}

// General predicate atoms: comparisons and tests of expressions, evaluated
// on each cell's declared values. The parser keeps the simple forms
// (Compare, In, Between, IsNull: a bare column against literals) for what
// they cover, and uses these for everything else.
type (
	// ExprCompare is `Left op Right`; Op may also be OpNullSafeEq (<=>).
	ExprCompare struct {
		Left  Expr
		Op    CompareOp
		Right Expr
	}
	// ExprIn is `X [NOT] IN (List)`.
	ExprIn struct {
		X       Expr
		List    []Expr
		Negated bool
	}
	// ExprBetween is `X [NOT] BETWEEN Lo AND Hi`.
	ExprBetween struct {
		X, Lo, Hi Expr
		Negated   bool
	}
	// ExprIsNull is `X IS [NOT] NULL`.
	ExprIsNull struct {
		X       Expr
		Negated bool
	}
	// Like is `X [NOT] LIKE Pattern [ESCAPE Escape]`; Escape is one
	// character, `\` by default.
	Like struct {
		X, Pattern Expr
		Escape     string
		Negated    bool
	}
	// Regexp is `X [NOT] REGEXP Pattern` (RLIKE is REGEXP).
	Regexp struct {
		X, Pattern Expr
		Negated    bool
	}
	// Truth is an expression used as a condition: TRUE when it is a
	// non-zero number (WHERE age, WHERE x IS TRUE). Test is "" for a bare
	// expression, else one of "is true", "is not true", "is false", "is
	// not false".
	Truth struct {
		X    Expr
		Test string
	}
)

func (ExprCompare) isPred() {}
func (ExprIn) isPred()      {}
func (ExprBetween) isPred() {}
func (ExprIsNull) isPred()  {}
func (Like) isPred()        {}
func (Regexp) isPred()      {}
func (Truth) isPred()       {}

// GroupExpr is a GROUP BY key that is an expression of domain columns
// (FLOOR(age / 10) * 10, age DIV 10, CASE ... END, LEFT(education, 1)).
// Pos is its position in the GROUP BY list, counting the plain columns of
// Query.GroupBy too, so that the written order of keys is kept.
type GroupExpr struct {
	Pos  int
	Expr Expr
}

// ExprColumns lists the columns e references, in first-use order.
func ExprColumns(e Expr) []string {
	var out []string
	seen := map[string]bool{}
	var visitE func(Expr)
	var visitP func(Pred)
	add := func(c string) {
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	visitE = func(e Expr) {
		switch e := e.(type) {
		case Col:
			add(e.Name)
		case Arith:
			visitE(e.Left)
			visitE(e.Right)
		case Neg:
			visitE(e.X)
		case Call:
			for _, a := range e.Args {
				visitE(a)
			}
		case Case:
			if e.Operand != nil {
				visitE(e.Operand)
			}
			for _, w := range e.Whens {
				if w.Cond != nil {
					visitP(w.Cond)
				}
				if w.Value != nil {
					visitE(w.Value)
				}
				visitE(w.Then)
			}
			if e.Else != nil {
				visitE(e.Else)
			}
		case Cond:
			visitP(e.P)
		case Lookup:
			visitE(e.Key)
		}
	}
	visitP = func(p Pred) {
		for _, c := range PredColumns(p) {
			add(c)
		}
	}
	visitE(e)
	return out
}

// PredColumns lists the columns p references (aggregates of HAVING
// included), in first-use order.
func PredColumns(p Pred) []string {
	var out []string
	seen := map[string]bool{}
	add := func(cs ...string) {
		for _, c := range cs {
			if c != "" && !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	exprs := func(es ...Expr) {
		for _, e := range es {
			if e != nil {
				add(ExprColumns(e)...)
			}
		}
	}
	var visit func(Pred)
	visit = func(p Pred) {
		switch p := p.(type) {
		case And:
			for _, t := range p.Terms {
				visit(t)
			}
		case Or:
			for _, t := range p.Terms {
				visit(t)
			}
		case Not:
			visit(p.Term)
		case Compare:
			add(p.Column)
		case In:
			add(p.Column)
		case Between:
			add(p.Column)
		case IsNull:
			add(p.Column)
		case ExprCompare:
			exprs(p.Left, p.Right)
		case ExprIn:
			exprs(p.X)
			exprs(p.List...)
		case ExprBetween:
			exprs(p.X, p.Lo, p.Hi)
		case ExprIsNull:
			exprs(p.X)
		case Like:
			exprs(p.X, p.Pattern)
		case Regexp:
			exprs(p.X, p.Pattern)
		case Truth:
			exprs(p.X)
		case AggCompare:
			add(ItemColumns(p.Item)...)
		}
	}
	visit(p)
	return out
}

// ItemColumns lists the columns a select item references.
func ItemColumns(it SelectItem) []string {
	var out []string
	seen := map[string]bool{}
	add := func(cs ...string) {
		for _, c := range cs {
			if c != "" && c != "*" && !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	add(it.Column)
	if it.Arg != nil {
		add(ExprColumns(it.Arg)...)
	}
	if it.Key != nil {
		add(ExprColumns(it.Key)...)
	}
	var walk func(e *AggExpr)
	walk = func(e *AggExpr) {
		if e == nil {
			return
		}
		if e.Leaf != nil {
			add(ItemColumns(*e.Leaf)...)
		}
		walk(e.Left)
		walk(e.Right)
		for _, a := range e.Args {
			walk(a)
		}
	}
	walk(it.Expr)
	return out
}
