// The query IR: statements, select items, predicates.

package parser

// StatementKind says what the proxy must do with a statement.
type StatementKind int

const (
	// KindPassthrough is not about a protected table (SHOW, SET, SELECT
	// @@var, information_schema ...): the MySQL front answers it from the
	// schema-only catalog database.
	KindPassthrough StatementKind = iota
	// KindAggregate is a DP aggregate query (COUNT/SUM/AVG, GROUP BY, top-k).
	KindAggregate
	// KindDomainList is `SELECT c[, d] FROM t GROUP BY c[, d]` with no
	// aggregate: the declared domain values, answered at no cost.
	KindDomainList
	// KindEmpty can return no row by construction (LIMIT 0, WHERE 1 <> 1):
	// the empty result with the right columns, at no cost.
	KindEmpty
	// KindExplain is EXPLAIN over a DP query: plan only, nothing spent.
	KindExplain
	// KindPostProcess reads only the released rows of other DP statements
	// (Statement.Post): an aggregate derived table or CTE under an outer
	// query, or a UNION of aggregate queries. Its parts are measured as
	// usual; the outer query is post-processing and costs nothing more.
	KindPostProcess
)

// Statement is one parsed SQL statement.
type Statement struct {
	Kind  StatementKind
	Text  string // the statement's own text, as sent (comments stripped)
	Query *Query // nil for KindPassthrough and KindPostProcess
	// Post is the statement's DP parts and the SQL over their released
	// rows, for KindPostProcess (and KindExplain over one); else nil.
	Post *PostProcess
}

// PostProcess is a query over the released rows of DP statements (see
// derived.go).
type PostProcess struct {
	// Parts are the DP statements whose released rows SQL reads, each
	// KindAggregate, KindDomainList or KindEmpty; part i is the table
	// Tables[i].
	Parts  []Statement
	Tables []string
	// SQL is the outer query in MySQL's dialect. It reads only Tables and
	// calls no function that reaches outside its own rows.
	SQL string
	// Limited is true when SQL has a LIMIT of its own, so that the
	// session's sql_select_limit does not apply.
	Limited bool
}

// AggFunc is an aggregate in the select list.
type AggFunc int

const (
	AggNone     AggFunc = iota // a plain group column
	AggCount                   // COUNT(*)
	AggCountCol                // COUNT(c): non-NULL values of c
	AggSum                     // SUM(c)
	AggAvg                     // AVG(c)
	AggVarPop                  // VAR_POP(c), VARIANCE(c)
	AggVarSamp                 // VAR_SAMP(c)
	AggStdPop                  // STDDEV_POP(c), STDDEV(c), STD(c)
	AggStdSamp                 // STDDEV_SAMP(c)
	AggQuantile                // DP_QUANTILE(c, q), DP_MEDIAN(c): from a noisy CDF of a numeric column
	// AggCountDistinct is COUNT(DISTINCT c) of one plain column: compile
	// answers it for a table's privacy unit column only (the number of
	// units) and refuses it for any other column.
	AggCountDistinct
)

// ErrorBar wraps an aggregate to ask for its error instead of its value.
type ErrorBar int

const (
	BarNone   ErrorBar = iota
	BarStderr          // DP_STDERR(agg)
	BarCILow           // DP_CI_LOW(agg): 95% interval, lower end
	BarCIHigh          // DP_CI_HIGH(agg)
)

// SelectItem is one output column.
type SelectItem struct {
	Agg    AggFunc
	Column string // the column for AggNone, AggCountCol, AggSum, AggAvg ... (lower-case, unqualified)
	// Arg is the aggregate's argument when it is an expression rather than
	// a bare column (COUNT(CASE ...), SUM(1), AVG(age * 2)); Column is then
	// empty.
	Arg   Expr
	Bar   ErrorBar // error bar requested around Agg
	Alias string   // output name: the alias, else the expression as written (MySQL style)
	// Expr, when not nil, is post-processing over aggregates and constants
	// (SUM(c) / COUNT(*), POWER(AVG(c), 2), 3): computed from the noisy
	// aggregates, so free. Agg is then AggNone and Column empty.
	Expr *AggExpr
	// Key, when not nil (Agg AggNone), is an expression of domain columns
	// that is a GROUP BY key or a function of the keys (FLOOR(age / 10) * 10).
	Key Expr
	// Quantile is AggQuantile's q, in [0, 1] (0.5 for DP_MEDIAN).
	Quantile float64
}

// AggExpr is post-processing over aggregates and constants: + - * / DIV %,
// numeric functions, numbers, strings and NULL.
type AggExpr struct {
	Op          byte // '+', '-', '*', '/', 'd' (DIV), '%'; 0 for a leaf or a call
	Left, Right *AggExpr
	Leaf        *SelectItem // an aggregate leaf (Agg and Column or Arg set)
	Number      float64     // a number leaf, when nothing else is set
	// Func is a numeric function of Args (lower-case: power, sqrt, round,
	// truncate, floor, ceil, abs, sign, exp, ln, log, log2, log10, mod,
	// greatest, least, ifnull, coalesce, pi).
	Func string
	Args []*AggExpr
	// Str is a string constant when IsStr; Null is the constant NULL.
	Str   string
	IsStr bool
	Null  bool
}

// Query is a DP query over one protected table.
type Query struct {
	Schema  string // database qualifier as written, "" if none
	Table   string // table name, lower-case
	Select  []SelectItem
	Where   Pred     // nil means TRUE
	GroupBy []string // column names, lower-case; GROUP BY 1 resolved to the select item's column
	// GroupExprs are the GROUP BY keys that are expressions of columns.
	GroupExprs []GroupExpr
	// Having is nil if absent. Its AggCompare terms compare aggregates
	// (post-processing on noisy values); its other terms are conditions on
	// the group keys, with select-list aliases resolved to their
	// expressions (a filter on the public group key: a WHERE).
	Having  Pred
	OrderBy []OrderItem
	Limit   *int64
	// Joins are the public tables joined to Table, in order. Their columns
	// are already Lookups in the other fields; compile/ checks each join's
	// key on the whole domain (Join.Match) even when the query reads none
	// of its columns.
	Joins []Join
	// UnitJoin, when not nil, is the join of protected tables on their unit
	// that Table names (Table is then UnitJoin.Name()).
	UnitJoin *UnitJoin
}

// OrderItem orders the output rows. Exactly one of Column / SelectIndex is meaningful:
// SelectIndex >= 0 refers to a select item (an alias, a position, or an aggregate that appears in the select list);
// Agg != AggNone with SelectIndex < 0 is an aggregate that is not selected (ORDER BY COUNT(*) DESC for top-k),
// with Column or Arg its argument; Key a group key expression and Expr post-processing, neither selected.
type OrderItem struct {
	SelectIndex int
	Agg         AggFunc
	Column      string
	Arg         Expr
	Key         Expr
	Expr        *AggExpr
	Desc        bool
}

// Pred is a structured predicate over domain columns.
type Pred interface{ isPred() }

// And, Or are n-ary; Not negates.
type (
	And struct{ Terms []Pred }
	Or  struct{ Terms []Pred }
	Not struct{ Term Pred }
	// Const is a predicate that does not depend on the row (WHERE 1 <> 1, WHERE TRUE).
	Const struct{ Value bool }
	// Compare is `column op literal` with op one of = <> < <= > >= (normalised so the column is on the left).
	Compare struct {
		Column string
		Op     CompareOp
		Value  Literal
	}
	// In is `column [NOT] IN (literals)`.
	In struct {
		Column  string
		Values  []Literal
		Negated bool
	}
	// Between is `column [NOT] BETWEEN lo AND hi` (inclusive).
	Between struct {
		Column  string
		Lo, Hi  Literal
		Negated bool
	}
	// IsNull is `column IS [NOT] NULL`.
	IsNull struct {
		Column  string
		Negated bool
	}
	// AggCompare is `aggregate op number` in HAVING (post-processing on
	// noisy values); Item is an aggregate (Agg with Column or Arg) or
	// post-processing over aggregates (Expr).
	AggCompare struct {
		Item  SelectItem
		Op    CompareOp
		Value float64
	}
)

func (And) isPred()        {}
func (Or) isPred()         {}
func (Not) isPred()        {}
func (Const) isPred()      {}
func (Compare) isPred()    {}
func (In) isPred()         {}
func (Between) isPred()    {}
func (IsNull) isPred()     {}
func (AggCompare) isPred() {}

// CompareOp is a comparison operator.
type CompareOp int

const (
	OpEq CompareOp = iota
	OpNe
	OpLt
	OpLe
	OpGt
	OpGe
	OpNullSafeEq // <=>: NULL <=> NULL is true, never UNKNOWN (ExprCompare only)
)

func (o CompareOp) String() string {
	return [...]string{"=", "<>", "<", "<=", ">", ">=", "<=>"}[o]
}

// Literal is a constant as written. Clients interpolate parameters as quoted
// strings, so '30' and 30 are the same literal; compile/ interprets it
// against the column's domain.
type Literal struct {
	Text   string // unquoted text
	Quoted bool
}
