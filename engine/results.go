package engine

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/exec"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/planner"
)

// z95 is the two-sided 95% normal quantile (for intervals of ratios).
const z95 = 1.959963984540054

func cellValue(c *catalog.Column, cell catalog.Cell) any {
	switch cell.Kind {
	case catalog.CellNull:
		return nil
	case catalog.CellValue:
		return cell.Value
	case catalog.CellOther:
		return "other"
	}
	if c.Kind == catalog.IntegerRange {
		return int64(cell.Lo)
	}
	return cell.Lo
}

func columnType(c *catalog.Column) ColumnType {
	switch c.Kind {
	case catalog.IntegerRange:
		return TypeInt64
	case catalog.Binned:
		return TypeFloat64
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

// assemble turns noisy aggregates into rows: labels per group, rounding
// counts, ratios, error bars, then HAVING, ORDER BY and LIMIT, all
// post-processing on noisy values. only, if not nil, lists the groups to
// show in that order (a top-k selection); m is nil when nothing was measured.
//
// It works by column: one float64 per group and item (the value HAVING and
// ORDER BY see, which is also the value shown), group labels as cell
// indexes, so a million groups never become a million boxed rows; results
// above smallResult rows stay that way (see table).
func assemble(w *compile.Workload, q *compile.Query, m *measured, only []int) *Result {
	res := &Result{}
	for _, it := range q.Items[:q.Visible] {
		col := Column{Name: it.Name, Type: TypeFloat64}
		switch {
		case it.Kind == compile.ItemGroup:
			col.Type = columnType(w.Columns[q.GroupCols[it.Group]])
		case it.IsCount && it.Bar == parser.BarNone:
			col.Type = TypeInt64
		}
		res.Columns = append(res.Columns, col)
	}
	// Each group column's labels, and their rank in MySQL's ORDER BY order.
	labels := make([][]Value, len(q.GroupCols))
	ranks := make([][]int, len(q.GroupCols))
	strides := make([]int, len(q.GroupCols))
	stride := 1
	for i := len(q.GroupCols) - 1; i >= 0; i-- {
		c := w.Columns[q.GroupCols[i]]
		cells := c.Cells()
		labels[i] = make([]Value, len(cells))
		order := make([]int, len(cells))
		for k, cell := range cells {
			labels[i][k] = valueOf(cellValue(c, cell))
			order[k] = k
		}
		sort.SliceStable(order, func(a, b int) bool {
			return compareLabels(labels[i][order[a]].Any(), labels[i][order[b]].Any()) < 0
		})
		ranks[i] = make([]int, len(cells))
		for r, k := range order {
			ranks[i][k] = r
		}
		strides[i] = stride
		stride *= len(cells)
	}
	cellOf := func(g, i int) int { return (g / strides[i]) % len(labels[i]) }

	groups := only
	n := len(only)
	if groups == nil {
		n = q.Groups(w)
	}
	group := func(p int) int {
		if groups == nil {
			return p
		}
		return groups[p]
	}
	keys := make([][]float64, len(q.Items)) // per item, per kept group
	for i, it := range q.Items {
		if it.Kind != compile.ItemGroup {
			keys[i] = make([]float64, 0, n)
		}
	}
	idx := make([]int, len(q.GroupCols))
	rowKeys := make([]float64, len(q.Items))
	// kept lists the groups (positions in 0..n) that pass HAVING; nil while
	// every one so far has.
	var kept []int32
	for p := 0; p < n; p++ {
		g := group(p)
		q.GroupCells(w, g, idx)
		for i, it := range q.Items {
			rowKeys[i] = itemKey(q, it, g, m)
		}
		// Arithmetic over items, once every item it uses has its value.
		for i, it := range q.Items {
			if it.Kind == compile.ItemExpr && m != nil {
				rowKeys[i] = evalExpr(it.Expr, rowKeys)
			}
		}
		if q.Having != nil && !holds(q.Having, rowKeys) {
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
	at := func(r int32) int { // the group position of kept row r
		if kept == nil {
			return int(r)
		}
		return int(kept[r])
	}
	// rows are positions into the kept groups, in output order; nil while
	// that is 0..count-1.
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
		for r := range rows {
			rows[r] = int32(r)
		}
		sort.SliceStable(rows, func(a, b int) bool {
			ra, rb := rows[a], rows[b]
			for _, k := range q.Order {
				it := q.Items[k.Item]
				if it.Kind == compile.ItemGroup { // labels sort by value, as MySQL does
					x := ranks[it.Group][cellOf(group(at(ra)), it.Group)]
					y := ranks[it.Group][cellOf(group(at(rb)), it.Group)]
					if x != y {
						return (x < y) != k.Desc
					}
					continue
				}
				x, y := keys[k.Item][ra], keys[k.Item][rb]
				if x != y && !(math.IsNaN(x) && math.IsNaN(y)) {
					return (x < y || math.IsNaN(x)) != k.Desc // NULL first ascending, as in MySQL
				}
			}
			return false
		})
	}
	out := count
	if lim := q.Source.Limit; lim != nil && int64(out) > *lim {
		out = int(*lim)
	}
	value := func(i int, r int32) Value {
		it := q.Items[i]
		if it.Kind == compile.ItemGroup {
			return labels[it.Group][cellOf(group(at(r)), it.Group)]
		}
		x := keys[i][r]
		switch {
		case math.IsNaN(x) || math.IsInf(x, 0):
			return Value{}
		case res.Columns[i].Type == TypeInt64:
			return Value{Kind: KindInt, Int: int64(x)}
		}
		return Value{Kind: KindFloat, Float: x}
	}
	if out <= smallResult {
		for j := 0; j < out; j++ {
			r := row(j)
			vals := make([]any, q.Visible)
			for i := range vals {
				vals[i] = value(i, r).Any()
			}
			res.Rows = append(res.Rows, vals)
		}
		return res
	}
	// Large: group columns store nothing per row when the rows are every
	// group in domain order, else one shared group index per row.
	var groupOf []int32
	if rows != nil || kept != nil || groups != nil {
		groupOf = make([]int32, out)
		for j := range groupOf {
			groupOf[j] = int32(group(at(row(j))))
		}
	}
	t := &table{n: out, cols: make([]tableColumn, q.Visible)}
	for i := range t.cols {
		c := &t.cols[i]
		it := q.Items[i]
		if it.Kind == compile.ItemGroup {
			c.labels, c.groups, c.stride = labels[it.Group], groupOf, strides[it.Group]
			continue
		}
		c.isInt = res.Columns[i].Type == TypeInt64
		if rows == nil {
			c.numbers = keys[i][:out:out] // the kept groups in order: no copy
			continue
		}
		c.numbers = make([]float64, out)
		for j := range c.numbers {
			c.numbers[j] = keys[i][row(j)]
		}
	}
	res.table = t
	return res
}

// itemKey is an item's value in group g as shown and as HAVING and ORDER BY
// see it (NaN for labels and NULLs): counts rounded and clamped at zero,
// SUM and AVG to four decimals.
func itemKey(q *compile.Query, it compile.Item, g int, m *measured) float64 {
	if it.Kind == compile.ItemGroup || m == nil || it.Kind == compile.ItemExpr {
		return math.NaN()
	}
	if it.Kind == compile.ItemRatio {
		num, den := m.vals[it.Agg][g], m.vals[it.Den][g]
		if den < 1 {
			den = 1 // post-processing: a noisy count below one means too few rows to average
		}
		v := num / den
		// Delta-method standard error of a ratio of noisy estimates.
		sd := math.Sqrt(m.vars[it.Agg][g]/(den*den) + v*v*m.vars[it.Den][g]/(den*den))
		lo, hi := v-z95*sd, v+z95*sd
		// The true average lies in [Lo, Hi]: clamping there is free and only helps.
		clamp := func(x float64) float64 { return math.Min(math.Max(x, it.Lo), it.Hi) }
		return bar(it.Bar, clamp(v), sd, clamp(lo), clamp(hi), false)
	}
	v := m.vals[it.Agg][g]
	sd := math.Sqrt(m.vars[it.Agg][g])
	h := m.half[it.Agg][g]
	return bar(it.Bar, v, sd, v-h, v+h, it.IsCount)
}

func bar(b parser.ErrorBar, v, sd, lo, hi float64, isCount bool) float64 {
	switch b {
	case parser.BarStderr:
		return sd
	case parser.BarCILow:
		return round4(lo)
	case parser.BarCIHigh:
		return round4(hi)
	}
	if isCount {
		return math.Max(0, math.Round(v))
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

// evalExpr computes arithmetic over items' noisy values; division by zero
// is NULL, as in MySQL.
func evalExpr(e *compile.ExprNode, keys []float64) float64 {
	if e.Op == 0 {
		if e.Item < 0 {
			return e.Number
		}
		return keys[e.Item]
	}
	l, r := evalExpr(e.Left, keys), evalExpr(e.Right, keys)
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
	return l / r
}

func holds(c compile.Condition, keys []float64) bool {
	switch c := c.(type) {
	case compile.CondAnd:
		for _, t := range c.Terms {
			if !holds(t, keys) {
				return false
			}
		}
		return true
	case compile.CondOr:
		for _, t := range c.Terms {
			if holds(t, keys) {
				return true
			}
		}
		return false
	case compile.CondNot:
		return !holds(c.Term, keys)
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

// emptyResult answers a query that returns no row by construction with the
// columns it would have had.
func emptyResult(t *catalog.Table, q *parser.Query) (*Result, error) {
	res := &Result{}
	for _, it := range q.Select {
		if it.Column == "*" {
			for _, c := range t.Columns {
				res.Columns = append(res.Columns, Column{Name: c.Name, Type: columnType(c)})
			}
			continue
		}
		typ := TypeInt64
		if it.Column != "" {
			c := t.Column(it.Column)
			if c == nil {
				return nil, parser.Errorf(parser.CodeBadField, "Unknown column '%s' in 'field list'", it.Column)
			}
			if it.Agg == parser.AggNone {
				typ = columnType(c)
			} else if it.Agg != parser.AggCountCol {
				typ = TypeFloat64
			}
		}
		res.Columns = append(res.Columns, Column{Name: it.Alias, Type: typ})
	}
	// An aggregate without GROUP BY over a constant-false WHERE has one row in
	// MySQL: COUNT is 0 and SUM/AVG are NULL, whatever the data, so it is exact and free.
	if len(q.GroupBy) == 0 && (q.Limit == nil || *q.Limit > 0) {
		var row []any
		for _, it := range q.Select {
			switch it.Agg {
			case parser.AggCount, parser.AggCountCol:
				row = append(row, int64(0))
			case parser.AggNone:
				return res, nil
			default:
				row = append(row, nil)
			}
		}
		res.Rows = [][]any{row}
	}
	return res, nil
}

// domainList answers SELECT c FROM t GROUP BY c with the declared domain:
// public, so free.
func domainList(t *catalog.Table, q *parser.Query) (*Result, error) {
	res := &Result{}
	var cols []*catalog.Column
	for _, it := range q.Select {
		c := t.Column(it.Column)
		if c == nil {
			return nil, parser.Errorf(parser.CodeBadField, "Unknown column '%s' in 'field list'", it.Column)
		}
		cols = append(cols, c)
		res.Columns = append(res.Columns, Column{Name: it.Alias, Type: columnType(c)})
	}
	if err := compile.CheckCells(t, cols); err != nil {
		return nil, err
	}
	var rec func(i int, prefix []any)
	rec = func(i int, prefix []any) {
		if i == len(cols) {
			res.Rows = append(res.Rows, append([]any(nil), prefix...))
			return
		}
		for _, cell := range cols[i].Cells() {
			rec(i+1, append(prefix, cellValue(cols[i], cell)))
		}
	}
	rec(0, nil)
	// Without ORDER BY the declared order; with it, by value as MySQL sorts.
	sort.SliceStable(res.Rows, func(a, b int) bool {
		for _, o := range q.OrderBy {
			i := o.SelectIndex
			if i < 0 {
				for k, it := range q.Select {
					if it.Column == o.Column {
						i = k
					}
				}
			}
			if i < 0 || i >= len(cols) {
				continue
			}
			if c := compareLabels(res.Rows[a][i], res.Rows[b][i]); c != 0 {
				return (c < 0) != o.Desc
			}
		}
		return false
	})
	if q.Limit != nil && int64(len(res.Rows)) > *q.Limit {
		res.Rows = res.Rows[:*q.Limit]
	}
	return res, nil
}

// explain plans without measuring or charging: the columns and domain, the
// strategies considered with their expected errors, the privacy cost, each
// answer's standard error, and the budget that would remain.
func (e *Engine) explain(ctx context.Context, s *Session, t *catalog.Table, sts []*parser.Statement) (*Result, error) {
	inner := make([]*parser.Statement, len(sts))
	for i, st := range sts {
		cp := *st
		cp.Kind = parser.KindAggregate
		inner[i] = &cp
	}
	w, err := compile.Compile(t, inner)
	if err != nil {
		return nil, err
	}
	opt, cost, plan, err := e.options(s, t, w)
	if err != nil {
		return nil, err
	}
	var selEps float64
	if len(w.Queries) == 1 && isTopK(w, w.Queries[0]) {
		if opt, cost, selEps, err = e.topKOptions(s, t, w); err != nil {
			return nil, err
		}
		plan = nil
	}
	res := &Result{Columns: []Column{{Name: "property", Type: TypeString}, {Name: "value", Type: TypeString}}}
	add := func(k, v string) { res.Rows = append(res.Rows, []any{k, v}) }
	var dom []string
	for _, c := range w.Columns {
		dom = append(dom, fmt.Sprintf("%s(%d)", c.Name, c.Size()))
	}
	add("table", t.Name)
	if len(sts) > 1 {
		add("batch", fmt.Sprintf("%d statements, measured together", len(sts)))
	}
	add("columns", strings.Join(dom, " × "))
	add("cells", fmt.Sprintf("%.0f", planner.CountedCells(w, opt.MaxCells)))
	switch {
	case opt.Noise == "": // a top-k selection only: no values measured
		add("noise", "none (a selection only)")
	case opt.Noise == catalog.Gaussian:
		add("noise", string(opt.Noise))
		add("rho", fmt.Sprintf("%g", opt.Rho))
		add("epsilon (at delta)", fmt.Sprintf("%g (δ=%g)", costEpsilon(cost, t), t.Budget.Delta))
	default:
		add("noise", string(opt.Noise))
		add("epsilon", fmt.Sprintf("%g", opt.Epsilon))
	}
	add("epsilon charged if run", fmt.Sprintf("%.6g", costEpsilon(cost, t)))
	if selEps > 0 {
		k := *w.Queries[0].Source.Limit
		rounds := "rounds"
		if k == 1 {
			rounds = "round"
		}
		add("top-k selection", fmt.Sprintf("exponential mechanism, %d %s without replacement over %d groups, ε = %g (utility: the group's count, sensitivity 1; weights exp(ε/%d·count))", k, rounds, w.Queries[0].Groups(w), selEps, k))
		if !measuresValues(w.Queries[0]) {
			add("charged", "nothing (EXPLAIN)")
			return res, nil
		}
		add("measurement of the selected groups' values", fmt.Sprintf("ε = %g", opt.Epsilon+costEpsilon(budget.Cost{Rho: opt.Rho}, t)))
	}
	// A top-k without counts measures nothing and returned above: only
	// batches that measure values are planned (with options to plan with).
	if plan == nil {
		if plan, err = e.choose(w, opt); err != nil {
			return nil, err
		}
	}
	add("strategy", plan.Name)
	add("sensitivity", fmt.Sprintf("%g", plan.Sensitivity))
	add("expected total squared error", fmt.Sprintf("%.6g", plan.TotalSquaredError()))
	if plan.Tables != nil {
		var ts []string
		for _, cols := range plan.Tables {
			var names []string
			for _, j := range cols {
				names = append(names, w.Columns[j].Name)
			}
			ts = append(ts, "("+strings.Join(names, ", ")+")")
		}
		add("histograms", "one per column set, each over its own columns: "+strings.Join(ts, " "))
	}
	answers := 0
	for _, qu := range w.Queries {
		for _, it := range qu.Items[:qu.Visible] {
			if it.Kind == compile.ItemAgg || it.Kind == compile.ItemRatio {
				answers++
			}
		}
	}
	switch {
	case plan.Options.Objective == planner.ObjectiveMaxVariance:
		add("objective minimised", fmt.Sprintf("largest variance of one answer, %.6g (the accuracy target's)", plan.MaxVariance))
	case answers > 1:
		add("objective minimised", fmt.Sprintf("%.6g (%s)", plan.Objective(), plan.Options.Objective.Describe()))
	}
	for _, c := range plan.Candidates {
		add("considered "+c.Name, fmt.Sprintf("total squared error %.6g (sensitivity %g)", c.TotalSquaredError, c.Sensitivity))
	}
	for q, qu := range w.Queries {
		for i, it := range qu.Items[:qu.Visible] {
			if it.Kind == compile.ItemGroup {
				continue
			}
			lo, hi := math.Inf(1), math.Inf(-1)
			group := make([]int, len(qu.GroupCols))
			for g := 0; g < qu.Groups(w); g++ {
				qu.GroupCells(w, g, group)
				sd := math.Sqrt(plan.Variance(q, it.Agg, group))
				lo, hi = math.Min(lo, sd), math.Max(hi, sd)
			}
			name := fmt.Sprintf("stderr query %d column %d (%s)", q+1, i+1, it.Name)
			if it.Kind == compile.ItemRatio {
				add(name, fmt.Sprintf("numerator %.4g..%.4g (ratio depends on the noisy denominator)", lo, hi))
			} else if lo == hi {
				add(name, fmt.Sprintf("%.4g", lo))
			} else {
				add(name, fmt.Sprintf("%.4g..%.4g", lo, hi))
			}
		}
	}
	for _, l := range e.limits(s.User, t) {
		spent, err := e.ledger.Spent(ctx, l.User, l.Table)
		if err != nil {
			return nil, e.internal("ledger read", err)
		}
		used := costEpsilon(spent, t)
		after := costEpsilon(spent.Add(cost), t)
		add("budget "+l.Scope, fmt.Sprintf("limit ε=%g, spent ε=%.6g, remaining after this batch ε=%.6g", l.Epsilon, used, l.Epsilon-after))
	}
	add("charged", "nothing (EXPLAIN)")
	return res, nil
}
