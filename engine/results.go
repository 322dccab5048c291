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
	res := &Result{}
	for _, it := range q.Items[:q.Visible] {
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
		res.Columns = append(res.Columns, col)
	}
	// Each label item's labels and their rank in MySQL's ORDER BY order;
	// index(i, r) is row r's label index for item i.
	labels := make([][]Value, len(q.Items))
	ranks := make([][]int, len(q.Items))
	strides := make([]int, len(q.GroupCols))
	stride := 1
	for k := len(q.GroupCols) - 1; k >= 0; k-- {
		strides[k] = stride
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
		labels[i] = ls
		order := make([]int, len(ls))
		for k := range order {
			order[k] = k
		}
		sort.SliceStable(order, func(a, b int) bool { return compareLabels(ls[order[a]].Any(), ls[order[b]].Any()) < 0 })
		ranks[i] = make([]int, len(ls))
		for rank, k := range order {
			ranks[i][k] = rank
		}
	}
	index := func(i, r int) int {
		it := q.Items[i]
		switch {
		case it.Kind == compile.ItemConst:
			return 0
		case it.Plain >= 0:
			return (int(q.RowAt(r).Plain) / strides[it.Plain]) % len(labels[i])
		case it.ExprKey >= 0:
			return int(q.RowAt(r).Expr)
		}
		return r
	}

	n := len(only)
	if only == nil {
		n = q.RowCount(w)
	}
	rowOf := func(p int) int { // the query's row at position p
		if only == nil {
			return p
		}
		return only[p]
	}
	keys := make([][]float64, len(q.Items)) // per numeric item, per kept row
	for i := range q.Items {
		if labels[i] == nil {
			keys[i] = make([]float64, 0, n)
		}
	}
	rowKeys := make([]float64, len(q.Items))
	// kept lists the positions that pass HAVING; nil while every one so
	// far has.
	var kept []int32
	for p := 0; p < n; p++ {
		r := rowOf(p)
		for i, it := range q.Items {
			rowKeys[i] = itemKey(q, it, r, m)
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
			if kept == nil {
				kept = make([]int32, p, n)
				for k := range kept {
					kept[k] = int32(k)
				}
			}
			continue
		}
		for i := range q.Items {
			if keys[i] != nil {
				keys[i] = append(keys[i], rowKeys[i])
			}
		}
		if kept != nil {
			kept = append(kept, int32(p))
		}
	}
	count := n
	if kept != nil {
		count = len(kept)
	}
	at := func(k int32) int { // the position of kept row k
		if kept == nil {
			return int(k)
		}
		return int(kept[k])
	}
	// rows are kept-row numbers in output order; nil while that is
	// 0..count-1.
	var rows []int32
	row := func(j int) int32 {
		if rows == nil {
			return int32(j)
		}
		return rows[j]
	}
	// A top-k selection without measured values keeps the mechanism's order;
	// otherwise ORDER BY sorts on the noisy values (post-processing).
	if len(q.Order) > 0 && (only == nil || m != nil) {
		rows = make([]int32, count)
		for k := range rows {
			rows[k] = int32(k)
		}
		sort.SliceStable(rows, func(a, b int) bool {
			ka, kb := rows[a], rows[b]
			for _, o := range q.Order {
				if labels[o.Item] != nil { // labels sort by value, as MySQL does
					x := ranks[o.Item][index(o.Item, rowOf(at(ka)))]
					y := ranks[o.Item][index(o.Item, rowOf(at(kb)))]
					if x != y {
						return (x < y) != o.Desc
					}
					continue
				}
				x, y := keys[o.Item][ka], keys[o.Item][kb]
				if x != y && !(math.IsNaN(x) && math.IsNaN(y)) {
					return (x < y || math.IsNaN(x)) != o.Desc // NULL first ascending, as in MySQL
				}
			}
			return false
		})
	}
	out := count
	if lim := q.Source.Limit; lim != nil && int64(out) > *lim {
		out = int(*lim)
	}
	value := func(i int, k int32) Value {
		if labels[i] != nil {
			return labels[i][index(i, rowOf(at(k)))]
		}
		x := keys[i][k]
		switch {
		case math.IsNaN(x) || math.IsInf(x, 0):
			return Value{}
		case res.Columns[i].Type == TypeInt64:
			return Value{Kind: KindInt, Int: int64(x)}
		case res.Columns[i].Type == TypeDate || res.Columns[i].Type == TypeDatetime:
			return timeValue(x, res.Columns[i].Type)
		}
		return Value{Kind: KindFloat, Float: x}
	}
	if out <= smallResult {
		for j := 0; j < out; j++ {
			k := row(j)
			vals := make([]any, q.Visible)
			for i := range vals {
				vals[i] = value(i, k).Any()
			}
			res.Rows = append(res.Rows, vals)
		}
		return res
	}
	// Large: a plain column's labels store nothing per row when the rows are
	// every plain group in domain order, else one shared group index per
	// row; other labels one index per row.
	identity := rows == nil && kept == nil && only == nil && q.Rows == nil
	var groupOf []int32
	if !identity {
		groupOf = make([]int32, out)
		for j := range groupOf {
			groupOf[j] = q.RowAt(rowOf(at(row(j)))).Plain
		}
	}
	t := &table{n: out, cols: make([]tableColumn, q.Visible)}
	for i := range t.cols {
		c := &t.cols[i]
		it := q.Items[i]
		switch {
		case labels[i] != nil && it.Kind == compile.ItemGroup && it.Plain >= 0:
			c.labels, c.groups, c.stride = labels[i], groupOf, strides[it.Plain]
		case labels[i] != nil:
			c.labels = labels[i]
			c.cells = make([]uint32, out)
			for j := range c.cells {
				c.cells[j] = uint32(index(i, rowOf(at(row(j)))))
			}
		default:
			c.isInt = res.Columns[i].Type == TypeInt64
			if typ := res.Columns[i].Type; typ == TypeDate || typ == TypeDatetime {
				c.time = typ
			}
			if rows == nil {
				c.numbers = keys[i][:out:out] // the kept rows in order: no copy
				continue
			}
			c.numbers = make([]float64, out)
			for j := range c.numbers {
				c.numbers[j] = keys[i][row(j)]
			}
		}
	}
	res.table = t
	return res
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
