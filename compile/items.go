package compile

import (
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/parser"
)

// itemKey is a select item's definition (its output name left out), for
// finding an item again when HAVING or ORDER BY names it.
func itemKey(si parser.SelectItem) string {
	return fmt.Sprintf("%d|%s|%#v|%#v|%s|%d|%v", si.Agg, si.Column, si.Arg, si.Key, aggExprKey(si.Expr), si.Bar, si.Quantile)
}

func aggExprKey(e *parser.AggExpr) string {
	if e == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "(%c %q %v %q %v %v ", e.Op, e.Func, e.Number, e.Str, e.IsStr, e.Null)
	if e.Leaf != nil {
		b.WriteString(itemKey(*e.Leaf))
	}
	b.WriteString(aggExprKey(e.Left))
	b.WriteString(aggExprKey(e.Right))
	for _, a := range e.Args {
		b.WriteString(aggExprKey(a))
	}
	b.WriteString(")")
	return b.String()
}

// hidden returns the item a HAVING or ORDER BY term names: a select item
// with the same definition, else a new hidden item.
func (qc *queryCompiler) hidden(si parser.SelectItem) (int, error) {
	k := itemKey(si)
	if i, ok := qc.items[k]; ok {
		return i, nil
	}
	if si.Alias == "" {
		si.Alias = k
	}
	it, err := qc.item(si)
	if err != nil {
		return 0, err
	}
	qc.q.Items = append(qc.q.Items, it)
	qc.items[k] = len(qc.q.Items) - 1
	return len(qc.q.Items) - 1, nil
}

// item compiles one output column.
func (qc *queryCompiler) item(si parser.SelectItem) (Item, error) {
	switch {
	case si.Expr != nil:
		if si.Bar != parser.BarNone {
			return Item{}, parser.Errorf(parser.CodeNotSupported, "error bars of expressions are not supported: select DP_STDERR of each aggregate")
		}
		node, err := qc.post(si.Expr)
		if err != nil {
			return Item{}, err
		}
		if !hasLeaf(si.Expr) {
			return Item{Kind: ItemConst, Name: si.Alias, Const: constValue(si.Expr, node)}, nil
		}
		return Item{Kind: ItemExpr, Name: si.Alias, Expr: node, Integral: qc.postIsInt(si.Expr)}, nil
	case si.Agg == parser.AggNone:
		if si.Bar != parser.BarNone {
			return Item{}, parser.Errorf(parser.CodeDPRefused, "error bars apply to aggregates, not to the group key '%s'", si.Alias)
		}
		if si.Key != nil {
			for k, g := range qc.exprKeys {
				if reflect.DeepEqual(g, si.Key) {
					return Item{Kind: ItemGroup, Name: si.Alias, Plain: -1, ExprKey: k, LabelType: qc.exprKeyType(k)}, nil
				}
			}
			vs, err := qc.rowLabels(si.Key)
			if err != nil {
				return Item{}, err
			}
			labels, typ := labelsOf(vs)
			return Item{Kind: ItemGroup, Name: si.Alias, Plain: -1, ExprKey: -1, Labels: labels, LabelType: typ}, nil
		}
		pos, typ, err := qc.plainKey(strings.ToLower(si.Column))
		if err != nil {
			return Item{}, err
		}
		return Item{Kind: ItemGroup, Name: si.Alias, Plain: pos, ExprKey: -1, LabelType: typ}, nil
	}
	it, err := qc.aggregate(si)
	it.Name, it.Bar = si.Alias, si.Bar
	return it, err
}

// aggName is an aggregate's SQL name.
func aggName(a parser.AggFunc) string {
	return map[parser.AggFunc]string{parser.AggCount: "COUNT", parser.AggCountCol: "COUNT", parser.AggCountDistinct: "COUNT", parser.AggSum: "SUM",
		parser.AggAvg: "AVG", parser.AggVarPop: "VAR_POP", parser.AggVarSamp: "VAR_SAMP",
		parser.AggStdPop: "STDDEV_POP", parser.AggStdSamp: "STDDEV_SAMP", parser.AggQuantile: "DP_QUANTILE"}[a]
}

// aggregate compiles an aggregate of a column or an expression: each is a
// weight vector over the domain, evaluated per cell (a cell's value is its
// bin's midpoint), times the query's WHERE.
func (qc *queryCompiler) aggregate(si parser.SelectItem) (Item, error) {
	if si.Agg == parser.AggCount {
		return Item{Kind: ItemAgg, Agg: qc.addBase(qc.base), IsCount: true, Integral: true, NonNeg: true}, nil
	}
	if si.Agg == parser.AggCountDistinct {
		t := qc.w.Table
		if !t.IsUnitColumn(si.Column) {
			if t.Unit != nil {
				return Item{}, parser.Errorf(parser.CodeNotSupported, "COUNT(DISTINCT %s) is not supported: only COUNT(DISTINCT %s), the number of units, is; count rows with COUNT(*) or COUNT(%s)", si.Column, t.Unit.Column, si.Column)
			}
			return Item{}, parser.Errorf(parser.CodeNotSupported, "COUNT(DISTINCT %s) is not supported: count rows with COUNT(*) or COUNT(%s), or list the declared values with SELECT %s FROM %s GROUP BY %s; COUNT(DISTINCT) counts people only on a table that declares a privacy_unit", si.Column, si.Column, si.Column, t.Name, si.Column)
		}
		return Item{Kind: ItemAgg, Agg: qc.addBase(qc.base), IsCount: true, Integral: true, NonNeg: true, Distinct: true, Arg: "DISTINCT " + t.Unit.Column}, nil
	}
	if si.Agg == parser.AggQuantile {
		return qc.quantile(si)
	}
	var arg parser.Expr = si.Arg
	if si.Column != "" {
		c := qc.w.Table.Column(si.Column)
		if c == nil {
			return Item{}, parser.Errorf(parser.CodeBadField, "Unknown column '%s' in 'field list'", si.Column)
		}
		arg = parser.Col{Name: c.Name}
	}
	if arg == nil {
		return Item{}, fmt.Errorf("compile: %s without an argument", aggName(si.Agg))
	}
	name := aggName(si.Agg)
	what := name + "(" + ExprSQL(arg) + ")"
	t, err := qc.argTables(arg, si.Agg != parser.AggCountCol, name, what)
	if err != nil {
		return Item{}, err
	}
	nn := Mul(qc.base, t.notNull)
	if si.Agg == parser.AggCountCol {
		return Item{Kind: ItemAgg, Agg: qc.addBase(nn), IsCount: true, Integral: true, NonNeg: true, Arg: ExprSQL(arg)}, nil
	}
	sum := Mul(qc.base, t.weights)
	null := qc.nullRows(nn)
	switch si.Agg {
	case parser.AggSum:
		return Item{Kind: ItemAgg, Agg: qc.addBase(sum), Integral: t.integral, NonNeg: t.lo >= 0, NonPos: t.hi <= 0,
			Null: null, Arg: ExprSQL(arg)}, nil
	case parser.AggAvg:
		return Item{Kind: ItemRatio, Agg: qc.addBase(sum), Den: qc.addBase(nn), Lo: t.lo, Hi: t.hi, Null: null, Arg: ExprSQL(arg)}, nil
	case parser.AggVarPop, parser.AggVarSamp, parser.AggStdPop, parser.AggStdSamp:
		squares, err := t.sq()
		if err != nil {
			return Item{}, err
		}
		sq := Mul(qc.base, squares)
		return Item{Kind: ItemVariance, Agg: qc.addBase(sum), Den: qc.addBase(nn), Sq: qc.addBase(sq),
			Samp: si.Agg == parser.AggVarSamp || si.Agg == parser.AggStdSamp,
			Sqrt: si.Agg == parser.AggStdPop || si.Agg == parser.AggStdSamp,
			Lo:   t.lo, Hi: t.hi, Null: null, Arg: ExprSQL(arg)}, nil
	}
	return Item{}, parser.Errorf(parser.CodeNotSupported, "unsupported aggregate")
}

// argTables are an aggregate argument's vectors over the domain: 1 where
// it is not NULL, its value (the cell's midpoint where it varies within the
// cell), its square, and the range and integrality of its values.
type argTables struct {
	notNull, weights Linear
	sq               func() (Linear, error) // the squares, built when a variance needs them
	lo, hi           float64
	integral         bool
}

func (qc *queryCompiler) argTables(arg parser.Expr, weighted bool, name, what string) (argTables, error) {
	out := argTables{lo: math.Inf(1), hi: math.Inf(-1), integral: true}
	cols, err := qc.axes(parser.ExprColumns(arg), "field list")
	if err != nil {
		return out, err
	}
	n := 1
	for _, j := range cols {
		n *= qc.w.Columns[j].Size()
	}
	if n > maxTabulate {
		n = 0
	}
	nn, ws, sq := make([]float64, n), make([]float64, n), make([]float64, n)
	_, err = qc.enumerate(cols, what, func(i int, en env, dropped bool) error {
		if dropped {
			return nil
		}
		v, err := qc.ev.expr(arg, en)
		if err != nil {
			return err
		}
		switch v.kind {
		case vNull:
			return nil
		case vAny:
			if !weighted {
				return &splitError{col: v.splitCol, cell: v.splitCell}
			}
			return parser.Errorf(parser.CodeDPRefused, "%s is unbounded over the domain: %s varies without bound within a cell of %s (a division by values near 0), so no sensitivity bounds its weights; exclude that cell with CASE WHEN ... THEN ... END", what, ExprSQL(arg), v.splitCol)
		case vOther:
			nn[i] = 1
			if weighted {
				return qc.unknownWeights(arg, name, what, en)
			}
			return nil
		case vStr:
			nn[i] = 1
			if weighted {
				if c, ok := arg.(parser.Col); ok {
					return parser.Errorf(parser.CodeDPRefused, "%s: %s is categorical; %s needs a numeric column (use COUNT(*) ... GROUP BY %s instead)", what, c.Name, name, c.Name)
				}
				return parser.Errorf(parser.CodeDPRefused, "%s: the expression is text on some cells of the domain; %s needs numbers (to count matches write SUM(CASE WHEN ... THEN 1 ELSE 0 END))", what, name)
			}
			return nil
		}
		if weighted && v.isTime() {
			return parser.Errorf(parser.CodeDPRefused, "%s: %s is a %s; %s needs numbers: count per time bucket (COUNT(*) ... GROUP BY DATE(ts)), or aggregate UNIX_TIMESTAMP(ts) for seconds", what, ExprSQL(arg), typeName(v), name)
		}
		if !finiteWeight(v.mid) || (weighted && !finiteWeight(v.mid*v.mid)) {
			return parser.Errorf(parser.CodeDPRefused, "%s is too large on some cells of the domain (beyond 2^53) to be measured exactly; scale the expression down", what)
		}
		nn[i], ws[i], sq[i] = 1, v.mid, v.mid*v.mid
		out.lo, out.hi = math.Min(out.lo, v.mid), math.Max(out.hi, v.mid)
		out.integral = out.integral && v.mid == math.Trunc(v.mid)
		return nil
	})
	if err != nil {
		return out, err
	}
	if out.lo > out.hi {
		out.lo, out.hi = 0, 0
	}
	if out.notNull, err = qc.toLinear(cols, nn); err != nil {
		return out, err
	}
	if !weighted {
		return out, nil
	}
	if out.weights, err = qc.toLinear(cols, ws); err != nil {
		return out, err
	}
	out.sq = func() (Linear, error) { return qc.toLinear(cols, sq) }
	return out, nil
}

// unknownWeights refuses a SUM-like aggregate over the other cell, whose
// values are unknown.
func (qc *queryCompiler) unknownWeights(arg parser.Expr, name, what string, en env) error {
	if c, ok := arg.(parser.Col); ok {
		return parser.Errorf(parser.CodeDPRefused, "%s: %s keeps out-of-domain values in an 'other' cell whose values are unknown; declare out_of_domain: clamp to %s it", what, c.Name, strings.ToLower(name))
	}
	col := ""
	for _, c := range parser.ExprColumns(arg) {
		if en[c].kind == vOther {
			col = c
			break
		}
	}
	return parser.Errorf(parser.CodeDPRefused, "%s is unknown on the 'other' cell of %s (values outside the declared domain), so its weights are unbounded; declare out_of_domain: clamp for %s, or give that cell a value with CASE WHEN %s IN (...) THEN ... ELSE 0 END", what, col, col, col)
}

// post compiles post-processing over aggregates.
func (qc *queryCompiler) post(e *parser.AggExpr) (*ExprNode, error) {
	switch {
	case e.Leaf != nil:
		i, err := qc.hidden(*e.Leaf)
		return &ExprNode{Item: i}, err
	case e.Op != 0:
		l, err := qc.post(e.Left)
		if err != nil {
			return nil, err
		}
		r, err := qc.post(e.Right)
		return &ExprNode{Op: e.Op, Left: l, Right: r, Item: -1}, err
	case e.Func != "":
		n := &ExprNode{Func: e.Func, Item: -1}
		for _, a := range e.Args {
			x, err := qc.post(a)
			if err != nil {
				return nil, err
			}
			n.Args = append(n.Args, x)
		}
		return n, nil
	case e.Null:
		return &ExprNode{Item: -1, Number: math.NaN()}, nil
	case e.IsStr:
		return &ExprNode{Item: -1, Number: parser.MySQLNumber(e.Str)}, nil
	}
	return &ExprNode{Item: -1, Number: e.Number}, nil
}

func hasLeaf(e *parser.AggExpr) bool {
	if e == nil {
		return false
	}
	if e.Leaf != nil || hasLeaf(e.Left) || hasLeaf(e.Right) {
		return true
	}
	for _, a := range e.Args {
		if hasLeaf(a) {
			return true
		}
	}
	return false
}

// constValue is a constant select item's value, typed as MySQL types it.
func constValue(e *parser.AggExpr, n *ExprNode) any {
	switch {
	case e.IsStr:
		return e.Str
	case e.Null:
		return nil
	}
	v := EvalPost(n, nil)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	if constIsInt(e) && v == math.Trunc(v) && math.Abs(v) < 1<<62 {
		return int64(v)
	}
	return v
}

func constIsInt(e *parser.AggExpr) bool {
	switch {
	case e.Leaf != nil, e.Null, e.IsStr:
		return false
	case e.Op == 'd':
		return true
	case e.Op != 0:
		return e.Op != '/' && constIsInt(e.Left) && constIsInt(e.Right)
	case e.Func != "":
		switch e.Func {
		case "floor", "ceil", "sign":
			return true
		case "round", "truncate", "abs", "mod", "greatest", "least":
			for i, a := range e.Args {
				if (e.Func == "round" || e.Func == "truncate") && i == 1 {
					continue
				}
				if !constIsInt(a) {
					return false
				}
			}
			return true
		}
		return false
	}
	return e.Number == math.Trunc(e.Number)
}

// postIsInt reports whether post-processing over aggregates is an integer
// in MySQL: + - * and DIV of counts and integer sums and integer numbers,
// FLOOR, CEIL, ROUND(x) and SIGN.
func (qc *queryCompiler) postIsInt(e *parser.AggExpr) bool {
	switch {
	case e.Leaf != nil:
		i, err := qc.hidden(*e.Leaf)
		return err == nil && qc.q.Items[i].Kind == ItemAgg && qc.q.Items[i].Integral
	case e.Null, e.IsStr:
		return false
	case e.Op == 'd':
		return true
	case e.Op != 0:
		return e.Op != '/' && qc.postIsInt(e.Left) && qc.postIsInt(e.Right)
	case e.Func != "":
		switch e.Func {
		case "floor", "ceil", "sign":
			return true
		case "round", "truncate":
			return len(e.Args) == 1 || (e.Args[1].Leaf == nil && e.Args[1].Number <= 0)
		case "abs", "mod", "greatest", "least":
			for _, a := range e.Args {
				if !qc.postIsInt(a) {
					return false
				}
			}
			return true
		}
		return false
	}
	return e.Number == math.Trunc(e.Number)
}

// cond compiles the part of HAVING left after its key conditions joined
// the WHERE.
func (qc *queryCompiler) cond(p parser.Pred) (Condition, error) {
	switch p := p.(type) {
	case parser.AggCompare:
		i, err := qc.hidden(p.Item)
		return CondCompare{Item: i, Op: p.Op, Value: p.Value}, err
	case parser.Not:
		c, err := qc.cond(p.Term)
		return CondNot{Term: c}, err
	case parser.And, parser.Or:
		var terms []parser.Pred
		if a, ok := p.(parser.And); ok {
			terms = a.Terms
		} else {
			terms = p.(parser.Or).Terms
		}
		var cs []Condition
		for _, x := range terms {
			c, err := qc.cond(x)
			if err != nil {
				return nil, err
			}
			cs = append(cs, c)
		}
		if _, ok := p.(parser.And); ok {
			return CondAnd{Terms: cs}, nil
		}
		return CondOr{Terms: cs}, nil
	case parser.Const:
		rows := make([]bool, qc.q.RowCount(qc.w))
		for i := range rows {
			rows[i] = p.Value
		}
		return CondKeys{Rows: rows}, nil
	}
	rows, err := qc.rowTruth(p)
	return CondKeys{Rows: rows}, err
}

// orderItem resolves one ORDER BY term to an item.
func (qc *queryCompiler) orderItem(o parser.OrderItem) (int, error) {
	switch {
	case o.SelectIndex >= 0 && o.SelectIndex < qc.q.Visible:
		return o.SelectIndex, nil
	case o.Agg != parser.AggNone:
		return qc.hidden(parser.SelectItem{Agg: o.Agg, Column: o.Column, Arg: o.Arg})
	case o.Expr != nil:
		return qc.hidden(parser.SelectItem{Expr: o.Expr})
	case o.Key != nil:
		return qc.hidden(parser.SelectItem{Key: o.Key})
	case o.Column != "":
		i, err := qc.hidden(parser.SelectItem{Column: o.Column})
		if err != nil {
			return 0, parser.Errorf(parser.CodeDPRefused, "ORDER BY %s: order by a GROUP BY key, an alias, a position or an aggregate", o.Column)
		}
		return i, nil
	}
	return 0, parser.Errorf(parser.CodeDPRefused, "ORDER BY: order by a GROUP BY key, an alias, a position or an aggregate")
}

// EvalPost computes post-processing over items' noisy values (keys[i] is
// item i's value, NaN for NULL), with MySQL's semantics: NULL in, NULL
// out; division by zero is NULL.
func EvalPost(e *ExprNode, keys []float64) float64 {
	switch {
	case e.Op != 0:
		l, r := EvalPost(e.Left, keys), EvalPost(e.Right, keys)
		switch e.Op {
		case '+':
			return l + r
		case '-':
			return l - r
		case '*':
			return l * r
		}
		if r == 0 {
			return math.NaN()
		}
		switch e.Op {
		case 'd':
			return math.Trunc(l / r)
		case '%':
			return math.Mod(l, r)
		}
		return l / r
	case e.Func != "":
		args := make([]float64, len(e.Args))
		for i, a := range e.Args {
			args[i] = EvalPost(a, keys)
		}
		return postFunc(e.Func, args)
	case e.Item >= 0:
		return keys[e.Item]
	}
	return e.Number
}

func postFunc(name string, a []float64) float64 {
	switch name {
	case "ifnull", "coalesce":
		for _, x := range a {
			if !math.IsNaN(x) {
				return x
			}
		}
		return math.NaN()
	case "pi":
		return math.Pi
	}
	for _, x := range a {
		if math.IsNaN(x) {
			return math.NaN()
		}
	}
	x := a[0]
	nan := math.NaN()
	switch name {
	case "power":
		v := math.Pow(x, a[1])
		if math.IsInf(v, 0) {
			return nan
		}
		return v
	case "sqrt":
		if x < 0 {
			return nan
		}
		return math.Sqrt(x)
	case "round", "truncate":
		p := 1.0
		if len(a) > 1 {
			p = math.Pow(10, math.Trunc(a[1]))
		}
		if name == "truncate" {
			return math.Trunc(x*p) / p
		}
		return math.Round(x*p) / p
	case "floor":
		return math.Floor(x)
	case "ceil":
		return math.Ceil(x)
	case "abs":
		return math.Abs(x)
	case "sign":
		switch {
		case x > 0:
			return 1
		case x < 0:
			return -1
		}
		return 0
	case "exp":
		return math.Exp(x)
	case "ln":
		if x <= 0 {
			return nan
		}
		return math.Log(x)
	case "log":
		if len(a) == 2 {
			if x <= 0 || x == 1 || a[1] <= 0 {
				return nan
			}
			return math.Log(a[1]) / math.Log(x)
		}
		if x <= 0 {
			return nan
		}
		return math.Log(x)
	case "log2":
		if x <= 0 {
			return nan
		}
		return math.Log2(x)
	case "log10":
		if x <= 0 {
			return nan
		}
		return math.Log10(x)
	case "mod":
		if a[1] == 0 {
			return nan
		}
		return math.Mod(x, a[1])
	case "greatest":
		m := x
		for _, y := range a[1:] {
			m = math.Max(m, y)
		}
		return m
	case "least":
		m := x
		for _, y := range a[1:] {
			m = math.Min(m, y)
		}
		return m
	}
	return nan
}

// quantile compiles DP_QUANTILE(c, q) over a numeric, date or datetime
// column (a time's value is its bin's start): the prefix
// workload over c's value cells (the rows whose value is at most each
// cell's, times the WHERE), which the planner answers near-optimally
// (hierarchical and optimised prefix strategies); the quantile itself is
// post-processing of the noisy CDF (engine: isotonic regression, then the
// first cell whose count reaches q times the total). Values outside the
// domain (an other cell), NULL and dropped rows are not values: they are
// left out, as MySQL's aggregates leave NULL out.
//
// Privacy: the prefix rows are a linear workload like any other. A row of
// the table lies in one cell of c and so in the prefixes of that cell and
// every cell above it: the workload's own sensitivity is up to the number
// of value cells, which is why the planner's strategy (hierarchical,
// optimised prefixes) and its computed sensitivity, not the rows, set the
// noise (exec calibrates to the strategy's largest column norm). The
// isotonic regression and the search for the quantile are
// post-processing.
// MaxQuantileCells bounds the bins of a column whose DP_QUANTILE is
// compiled as a prefix workload (a row per bin) and planned like any
// batch, with hierarchical and optimised strategies whose matrices are
// dense in the bins. A longer column's quantile is a tree CDF item
// (Item.Tree): measured by the engine with a b-ary tree strategy kept as
// a tree (planner.Tree, O(n)), up to MaxTreeQuantileCells bins.
const MaxQuantileCells = 1024

// MaxTreeQuantileCells bounds the bins of a column any DP_QUANTILE reads:
// planner.MaxTreeCells, the longest tree strategy (2²⁰ bins; five years of
// hourly bins are 43,800).
const MaxTreeQuantileCells = 1 << 20

func (qc *queryCompiler) quantile(si parser.SelectItem) (Item, error) {
	c := qc.w.Table.Column(si.Column)
	if c == nil {
		return Item{}, parser.Errorf(parser.CodeBadField, "Unknown column '%s' in 'field list'", si.Column)
	}
	if !c.IsNumeric() && !c.IsTime() {
		return Item{}, parser.Errorf(parser.CodeDPRefused, "DP_QUANTILE needs a numeric, date or datetime column; %s is categorical (count its values with SELECT %s, COUNT(*) ... GROUP BY %s)", c.Name, c.Name, c.Name)
	}
	if si.Bar != parser.BarNone {
		return Item{}, parser.Errorf(parser.CodeNotSupported, "error bars of DP_QUANTILE and DP_MEDIAN are not supported: EXPLAIN shows the standard errors of the CDF they come from")
	}
	if n := c.Declared(); n > MaxTreeQuantileCells {
		return Item{}, parser.Errorf(parser.CodeDPRefused, "DP_QUANTILE over %s needs the CDF over its %d bins, more than the %d a quantile is measured over; declare the column with a coarser width (or min and max closer together) for quantiles", c.Name, n, MaxTreeQuantileCells)
	}
	j := qc.index[c.Name]
	col := qc.w.Columns[j]
	d := len(qc.w.Columns)
	it := Item{Kind: ItemQuantile, Quantile: si.Quantile, Arg: c.Name, Plain: -1, ExprKey: -1}
	if c.Declared() > MaxQuantileCells {
		return qc.treeQuantile(it, c, j)
	}
	if c.IsTime() {
		// A time's quantile is its bin's start, shown as a DATE or
		// DATETIME, as a GROUP BY of the column labels its bins.
		it.LabelType = LabelDatetime
		if c.DateOnly {
			it.LabelType = LabelDate
		}
	}
	prefix := make([]float64, col.Size())
	for k, cell := range col.Cells() {
		if cell.Kind != catalog.CellBin {
			continue
		}
		prefix[k] = 1
		v := col.Midpoint(cell)
		if c.IsTime() {
			v = cell.Lo
		}
		it.Values = append(it.Values, v)
		it.Prefix = append(it.Prefix, qc.addBase(Mul(qc.base, single(d, j, append([]float64(nil), prefix...)))))
	}
	it.Null = qc.nullRows(Mul(qc.base, single(d, j, prefix)))
	return it, nil
}

// treeQuantile compiles DP_QUANTILE over a column of more than
// MaxQuantileCells bins as a tree CDF item: one base aggregate, the rows
// the WHERE admits with a value in the column's value cells (the last
// prefix row, whose cell weights are the histogram's marginal weights),
// and the cells' values. The prefix rows themselves are never built (n of
// them, n cells each); the engine measures the masked column histogram
// with a tree strategy and sums it (engine/quantile_tree.go).
func (qc *queryCompiler) treeQuantile(it Item, c *catalog.Column, j int) (Item, error) {
	col := qc.w.Columns[j]
	d := len(qc.w.Columns)
	if c.IsTime() {
		it.LabelType = LabelDatetime
		if c.DateOnly {
			it.LabelType = LabelDate
		}
	}
	values := make([]float64, col.Size())
	for k, cell := range col.Cells() {
		if cell.Kind != catalog.CellBin {
			continue
		}
		values[k] = 1
		v := col.Midpoint(cell)
		if c.IsTime() {
			v = cell.Lo
		}
		it.Values = append(it.Values, v)
		it.Cells = append(it.Cells, k)
	}
	all := Mul(qc.base, single(d, j, values))
	it.Tree, it.TreeCol = true, j
	it.Prefix = []int{qc.addBase(all)}
	it.Null = qc.nullRows(all)
	return it, nil
}
