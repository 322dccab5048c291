package engine

import (
	"cmp"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/exec"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/planner"
)

// z95 is the two-sided 95% normal quantile (for intervals of ratios).
const z95 = 1.959963984540054

func columnType(c *catalog.Column) ColumnType {
	switch c.Kind {
	case catalog.IntegerRange:
		return TypeInt64
	case catalog.Binned:
		return TypeFloat64
	case catalog.TimeRange:
		if c.DateOnly {
			return TypeDate
		}
		return TypeDatetime
	}
	return TypeString
}

func labelType(t compile.LabelType) ColumnType {
	switch t {
	case compile.LabelInt:
		return TypeInt64
	case compile.LabelFloat:
		return TypeFloat64
	case compile.LabelDate:
		return TypeDate
	case compile.LabelDatetime:
		return TypeDatetime
	}
	return TypeString
}

// measured is one query's noisy aggregates: per aggregate, per group, the
// value, its exact variance and the half-width of its 95% interval.
type measured struct {
	vals, vars, half [][]float64
	// cdf is a tree quantile's consistent cell counts (routeTree), in the
	// order of its Item.Cells; nil otherwise.
	cdf []float64
}

func measuredFrom(p *planner.Plan, ans *exec.Answers, q int) *measured {
	m := &measured{vals: ans.Values[q], vars: ans.Variance[q]}
	for a, vs := range m.vars {
		h := make([]float64, len(vs))
		for g, v := range vs {
			h[g] = exec.HalfWidth95(p, q, a, v)
		}
		m.half = append(m.half, h)
	}
	return m
}

// answer is one aggregate row's answer: exact (variance 0) where the row is
// zero by construction, else the noisy value.
type answer struct {
	v, variance, half float64
	known             bool // measured or exact; false when nothing was measured for it
}

func aggAnswer(q *compile.Query, m *measured, base int, r compile.Row) answer {
	a, g := q.Agg(base, int(r.Expr)), int(r.Plain)
	if !q.IsLive(a, g) {
		return answer{known: true} // zero on every cell: exactly 0
	}
	if m == nil {
		return answer{}
	}
	return answer{v: m.vals[a][g], variance: m.vars[a][g], half: m.half[a][g], known: true}
}

// assemble turns noisy aggregates into rows: labels per group, exact
// answers for rows that are zero by construction, rounding, ratios,
// variances, error bars, then HAVING, ORDER BY and LIMIT, all
// post-processing on noisy values. only, if not nil, lists the output rows
// (indexes into the query's rows) to show, in that order (a top-k
// selection); m is nil when nothing was measured.
//
// It works by column: one float64 per row and item (the value HAVING and
// ORDER BY see, which is also the value shown), group labels as indexes
// into each key's labels (a plain column's from the row's group index), so
// a million groups never become a million boxed rows; results above
// smallResult rows stay that way (see table).
func assemble(w *compile.Workload, q *compile.Query, m *measured, only []int) *Result {
	as := &assembly{w: w, q: q, m: m, only: only, res: &Result{}}
	as.columns()
	as.labelRanks()
	as.evaluate()
	as.order()
	out := as.count
	if lim := q.Source.Limit; lim != nil && int64(out) > *lim {
		out = int(*lim)
	}
	if out <= smallResult {
		as.smallRows(out)
	} else {
		as.largeTable(out)
	}
	return as.res
}

// assembly is one query's result being assembled, stage by stage: its
// columns, its label items' labels in MySQL's order, every row's values
// and HAVING, ORDER BY, then the rows sent (LIMIT) in a small or a large
// result.
type assembly struct {
	w    *compile.Workload
	q    *compile.Query
	m    *measured
	only []int // the query's rows to show (a top-k's selection); nil: all
	res  *Result

	// labels are each label item's labels and ranks their rank in MySQL's
	// ORDER BY order; strides step through a plain group's cells.
	labels  [][]Value
	ranks   [][]int
	strides []int
	// n rows are evaluated; keys holds each numeric item's value per kept
	// row; kept lists the positions that pass HAVING (nil while all do);
	// count rows are kept; rows are kept-row numbers in output order (nil
	// while that is 0..count-1).
	n     int
	keys  [][]float64
	kept  []int32
	count int
	rows  []int32
}

// columns names and types the result's columns.
func (as *assembly) columns() {
	for _, it := range as.q.Items[:as.q.Visible] {
		col := Column{Name: it.Name, Type: TypeFloat64}
		switch {
		case it.Kind == compile.ItemGroup:
			col.Type = labelType(it.LabelType)
		case it.Kind == compile.ItemQuantile && (it.LabelType == compile.LabelDate || it.LabelType == compile.LabelDatetime):
			col.Type = labelType(it.LabelType) // a quantile of a date or datetime column
		case it.Kind == compile.ItemConst:
			switch it.Const.(type) {
			case int64:
				col.Type = TypeInt64
			case string, nil:
				col.Type = TypeString
			}
		case (it.IsCount || it.Integral) && it.Bar == parser.BarNone && (it.Kind == compile.ItemAgg || it.Kind == compile.ItemExpr):
			col.Type = TypeInt64
		}
		as.res.Columns = append(as.res.Columns, col)
	}
}

// labelRanks lists each label item's labels and their rank in MySQL's
// ORDER BY order.
func (as *assembly) labelRanks() {
	w, q := as.w, as.q
	as.labels = make([][]Value, len(q.Items))
	as.ranks = make([][]int, len(q.Items))
	as.strides = make([]int, len(q.GroupCols))
	stride := 1
	for k := len(q.GroupCols) - 1; k >= 0; k-- {
		as.strides[k] = stride
		stride *= w.Columns[q.GroupCols[k]].Size()
	}
	for i, it := range q.Items {
		var ls []Value
		switch {
		case it.Kind == compile.ItemConst:
			if _, ok := it.Const.(string); ok || it.Const == nil {
				ls = []Value{valueOf(it.Const)}
			}
		case it.Kind != compile.ItemGroup:
		case it.Plain >= 0:
			c := w.Columns[q.GroupCols[it.Plain]]
			for _, cell := range c.Cells() {
				ls = append(ls, valueOf(compile.CellLabel(c, cell)))
			}
		case it.ExprKey >= 0:
			for _, g := range q.ExprGroups {
				ls = append(ls, valueOf(g.Labels[it.ExprKey]))
			}
		default:
			for _, l := range it.Labels {
				ls = append(ls, valueOf(l))
			}
		}
		if ls == nil {
			continue
		}
		as.labels[i] = ls
		order := make([]int, len(ls))
		for k := range order {
			order[k] = k
		}
		sort.SliceStable(order, func(a, b int) bool { return compareLabels(ls[order[a]].Any(), ls[order[b]].Any()) < 0 })
		as.ranks[i] = make([]int, len(ls))
		for rank, k := range order {
			as.ranks[i][k] = rank
		}
	}
}

// index is row r's label index for label item i.
func (as *assembly) index(i, r int) int {
	it := as.q.Items[i]
	switch {
	case it.Kind == compile.ItemConst:
		return 0
	case it.Plain >= 0:
		return (int(as.q.RowAt(r).Plain) / as.strides[it.Plain]) % len(as.labels[i])
	case it.ExprKey >= 0:
		return int(as.q.RowAt(r).Expr)
	}
	return r
}

// rowOf is the query's row at position p.
func (as *assembly) rowOf(p int) int {
	if as.only == nil {
		return p
	}
	return as.only[p]
}

// at is the position of kept row k.
func (as *assembly) at(k int32) int {
	if as.kept == nil {
		return int(k)
	}
	return int(as.kept[k])
}

// row is the kept row shown j-th.
func (as *assembly) row(j int) int32 {
	if as.rows == nil {
		return int32(j)
	}
	return as.rows[j]
}

// evaluate computes every row's item values, post-processing over them,
// and HAVING.
func (as *assembly) evaluate() {
	q := as.q
	as.n = len(as.only)
	if as.only == nil {
		as.n = q.RowCount(as.w)
	}
	as.keys = make([][]float64, len(q.Items)) // per numeric item, per kept row
	for i := range q.Items {
		if as.labels[i] == nil {
			as.keys[i] = make([]float64, 0, as.n)
		}
	}
	rowKeys := make([]float64, len(q.Items))
	for p := 0; p < as.n; p++ {
		r := as.rowOf(p)
		for i, it := range q.Items {
			rowKeys[i] = itemKey(q, it, r, as.m)
		}
		// Post-processing over items, once every item it uses has its value.
		for i, it := range q.Items {
			if it.Kind == compile.ItemExpr {
				x := compile.EvalPost(it.Expr, rowKeys)
				switch {
				case math.IsNaN(x) || math.IsInf(x, 0):
					x = math.NaN()
				case it.Integral:
					x = math.Round(x)
				default:
					x = round4(x)
				}
				rowKeys[i] = x
			}
		}
		if q.Having != nil && !holds(q.Having, rowKeys, r) {
			if as.kept == nil {
				as.kept = make([]int32, p, as.n)
				for k := range as.kept {
					as.kept[k] = int32(k)
				}
			}
			continue
		}
		for i := range q.Items {
			if as.keys[i] != nil {
				as.keys[i] = append(as.keys[i], rowKeys[i])
			}
		}
		if as.kept != nil {
			as.kept = append(as.kept, int32(p))
		}
	}
	as.count = as.n
	if as.kept != nil {
		as.count = len(as.kept)
	}
}

// order sorts the kept rows by ORDER BY: labels by value as MySQL does,
// noisy values as post-processing. A top-k selection without measured
// values keeps the mechanism's order.
func (as *assembly) order() {
	q := as.q
	if len(q.Order) == 0 || (as.only != nil && as.m == nil) {
		return
	}
	as.rows = make([]int32, as.count)
	for k := range as.rows {
		as.rows[k] = int32(k)
	}
	sort.SliceStable(as.rows, func(a, b int) bool {
		ka, kb := as.rows[a], as.rows[b]
		for _, o := range q.Order {
			if as.labels[o.Item] != nil { // labels sort by value, as MySQL does
				x := as.ranks[o.Item][as.index(o.Item, as.rowOf(as.at(ka)))]
				y := as.ranks[o.Item][as.index(o.Item, as.rowOf(as.at(kb)))]
				if x != y {
					return (x < y) != o.Desc
				}
				continue
			}
			x, y := as.keys[o.Item][ka], as.keys[o.Item][kb]
			if x != y && !(math.IsNaN(x) && math.IsNaN(y)) {
				return (x < y || math.IsNaN(x)) != o.Desc // NULL first ascending, as in MySQL
			}
		}
		return false
	})
}

// value is item i's value on kept row k.
func (as *assembly) value(i int, k int32) Value {
	if as.labels[i] != nil {
		return as.labels[i][as.index(i, as.rowOf(as.at(k)))]
	}
	x := as.keys[i][k]
	typ := as.res.Columns[i].Type
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		return Value{}
	case typ == TypeInt64:
		return Value{Kind: KindInt, Int: int64(x)}
	case typ == TypeDate || typ == TypeDatetime:
		return timeValue(x, typ)
	}
	return Value{Kind: KindFloat, Float: x}
}

// smallRows sends out rows as values.
func (as *assembly) smallRows(out int) {
	for j := 0; j < out; j++ {
		k := as.row(j)
		vals := make([]any, as.q.Visible)
		for i := range vals {
			vals[i] = as.value(i, k).Any()
		}
		as.res.Rows = append(as.res.Rows, vals)
	}
}

// largeTable sends out rows by column: a plain column's labels store
// nothing per row when the rows are every plain group in domain order,
// else one shared group index per row; other labels one index per row.
func (as *assembly) largeTable(out int) {
	q := as.q
	identity := as.rows == nil && as.kept == nil && as.only == nil && q.Rows == nil
	var groupOf []int32
	if !identity {
		groupOf = make([]int32, out)
		for j := range groupOf {
			groupOf[j] = q.RowAt(as.rowOf(as.at(as.row(j)))).Plain
		}
	}
	t := &table{n: out, cols: make([]tableColumn, q.Visible)}
	for i := range t.cols {
		c := &t.cols[i]
		it := q.Items[i]
		switch {
		case as.labels[i] != nil && it.Kind == compile.ItemGroup && it.Plain >= 0:
			c.labels, c.groups, c.stride = as.labels[i], groupOf, as.strides[it.Plain]
		case as.labels[i] != nil:
			c.labels = as.labels[i]
			c.cells = make([]uint32, out)
			for j := range c.cells {
				c.cells[j] = uint32(as.index(i, as.rowOf(as.at(as.row(j)))))
			}
		default:
			c.isInt = as.res.Columns[i].Type == TypeInt64
			if typ := as.res.Columns[i].Type; typ == TypeDate || typ == TypeDatetime {
				c.time = typ
			}
			if as.rows == nil {
				c.numbers = as.keys[i][:out:out] // the kept rows in order: no copy
				continue
			}
			c.numbers = make([]float64, out)
			for j := range c.numbers {
				c.numbers[j] = as.keys[i][as.row(j)]
			}
		}
	}
	as.res.table = t
}

// itemKey is an item's value on output row r as shown and as HAVING and
// ORDER BY see it (NaN for labels and NULLs): counts rounded and clamped at
// zero, sums and averages to four decimals, exact where the row is zero by
// construction.
func itemKey(q *compile.Query, it compile.Item, r int, m *measured) float64 {
	switch it.Kind {
	case compile.ItemGroup, compile.ItemExpr:
		return math.NaN()
	case compile.ItemConst:
		switch c := it.Const.(type) {
		case int64:
			return float64(c)
		case float64:
			return c
		}
		return math.NaN()
	}
	if it.Null != nil && it.Null[r] {
		return math.NaN() // over no value by construction: NULL, as in MySQL
	}
	row := q.RowAt(r)
	switch it.Kind {
	case compile.ItemRatio:
		num, den := aggAnswer(q, m, it.Agg, row), aggAnswer(q, m, it.Den, row)
		if !num.known || !den.known {
			return math.NaN()
		}
		d := den.v
		if d < 1 {
			d = 1 // post-processing: a noisy count below one means too few rows to average
		}
		v := num.v / d
		// Delta-method standard error of a ratio of noisy estimates.
		sd := math.Sqrt(num.variance/(d*d) + v*v*den.variance/(d*d))
		lo, hi := v-z95*sd, v+z95*sd
		// The true average lies in [Lo, Hi]: clamping there is free and only helps.
		clamp := func(x float64) float64 { return math.Min(math.Max(x, it.Lo), it.Hi) }
		return bar(it, clamp(v), sd, clamp(lo), clamp(hi))
	case compile.ItemVariance:
		return variance(q, it, row, m)
	case compile.ItemQuantile:
		return quantile(q, it, row, m)
	}
	a := aggAnswer(q, m, it.Agg, row)
	if !a.known {
		return math.NaN()
	}
	return bar(it, a.v, math.Sqrt(a.variance), a.v-a.half, a.v+a.half)
}

// variance estimates VAR_POP (VAR_SAMP, STDDEV...) from one measurement of
// COUNT(x) = N, SUM(x) = S and SUM(x²) = Q:
//
//	VAR_POP = (Q − (S² − Var S)/N) / N,
//
// where subtracting Var S (exact, from the plan) removes the bias the noise
// adds to S² (E[Ŝ²] = S² + Var S); the division by the noisy N keeps a
// second-order bias of relative size Var N / N². VAR_SAMP multiplies by
// N/(N − 1) and is NULL while the noisy N is below 2; STDDEV is the square
// root. The estimate is clamped into [0, (max − min)²/4], the range any
// variance of values in the domain lies in (post-processing). Its standard
// error is the delta method's, with the three answers' errors added in
// absolute value (an upper bound whatever their correlation).
func variance(q *compile.Query, it compile.Item, row compile.Row, m *measured) float64 {
	n, s, sq := aggAnswer(q, m, it.Den, row), aggAnswer(q, m, it.Agg, row), aggAnswer(q, m, it.Sq, row)
	if !n.known || !s.known || !sq.known {
		return math.NaN()
	}
	N := math.Max(n.v, 1)
	if it.Samp && n.v < 2 {
		return math.NaN()
	}
	v := (sq.v - (s.v*s.v-s.variance)/N) / N
	dQ, dS, dN := 1/N, -2*s.v/(N*N), -sq.v/(N*N)+2*s.v*s.v/(N*N*N)
	sd := math.Abs(dQ)*math.Sqrt(sq.variance) + math.Abs(dS)*math.Sqrt(s.variance) + math.Abs(dN)*math.Sqrt(n.variance)
	if it.Samp {
		v, sd = v*N/(N-1), sd*N/(N-1)
	}
	half := (it.Hi - it.Lo) / 2
	top := half * half // the largest population variance of values in [Lo, Hi]
	if it.Samp {
		top *= N / (N - 1)
	}
	clamp := func(x float64) float64 { return math.Min(math.Max(x, 0), top) }
	lo, hi := clamp(v-z95*sd), clamp(v+z95*sd)
	v = clamp(v)
	if it.Sqrt {
		// d√V = dV / (2√V); at V near 0 the square root of the bound.
		root := math.Sqrt(v)
		if root > 0 {
			sd = sd / (2 * root)
		} else {
			sd = math.Sqrt(sd)
		}
		v, lo, hi = root, math.Sqrt(lo), math.Sqrt(hi)
	}
	return bar(it, v, sd, lo, hi)
}

// bar is an aggregate's shown value, or the error bar asked for.
func bar(it compile.Item, v, sd, lo, hi float64) float64 {
	switch it.Bar {
	case parser.BarStderr:
		return sd
	case parser.BarCILow:
		return round4(lo)
	case parser.BarCIHigh:
		return round4(hi)
	}
	// A SUM of weights of one sign has that sign (post-processing).
	if it.NonNeg {
		v = math.Max(v, 0)
	}
	if it.NonPos {
		v = math.Min(v, 0)
	}
	if it.IsCount || (it.Integral && it.Kind == compile.ItemAgg) {
		return math.Round(v) + 0 // no -0
	}
	// SUM and AVG are shown to four decimals, as MySQL shows an AVG
	// (div_precision_increment): digits below the noise mean nothing, and
	// least squares leaves float dust such as 602076.9999999997.
	// Post-processing, free. Interval bounds likewise.
	return round4(v)
}

func round4(v float64) float64 { return math.Round(v*1e4) / 1e4 }

// compareLabels orders group labels as MySQL's ORDER BY does: NULL first,
// numbers numerically, strings case-insensitively (the default collation).
func compareLabels(a, b any) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	num := func(v any) (float64, bool) {
		switch v := v.(type) {
		case int64:
			return float64(v), true
		case float64:
			return v, true
		}
		return 0, false
	}
	if x, ok := num(a); ok {
		if y, ok := num(b); ok {
			return cmp.Compare(x, y)
		}
	}
	sa, sb := fmt.Sprint(a), fmt.Sprint(b)
	if c := strings.Compare(strings.ToLower(sa), strings.ToLower(sb)); c != 0 {
		return c
	}
	return strings.Compare(sa, sb)
}

func holds(c compile.Condition, keys []float64, r int) bool {
	switch c := c.(type) {
	case compile.CondAnd:
		for _, t := range c.Terms {
			if !holds(t, keys, r) {
				return false
			}
		}
		return true
	case compile.CondOr:
		for _, t := range c.Terms {
			if holds(t, keys, r) {
				return true
			}
		}
		return false
	case compile.CondNot:
		return !holds(c.Term, keys, r)
	case compile.CondKeys:
		return c.Rows[r]
	case compile.CondCompare:
		x := keys[c.Item]
		switch c.Op {
		case parser.OpEq:
			return x == c.Value
		case parser.OpNe:
			return x != c.Value
		case parser.OpLt:
			return x < c.Value
		case parser.OpLe:
			return x <= c.Value
		case parser.OpGt:
			return x > c.Value
		case parser.OpGe:
			return x >= c.Value
		}
	}
	return false
}
