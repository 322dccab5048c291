package compile

import (
	"fmt"
	"reflect"
	"slices"
	"sort"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/parser"
)

// queryCompiler compiles one statement of a batch.
type queryCompiler struct {
	*compiler
	q    *Query
	src  *parser.Query
	base Linear // the query's mask times its WHERE: the rows it counts
	// bases are the base aggregates; groups the expression groups'
	// indicators, with groupVals their labels per expression key.
	bases     []Linear
	groups    []Linear
	groupVals [][]val
	// inGroup[e] is base times groups[e] (rows computes them; expand
	// reuses them for a base aggregate equal to base, COUNT(*)'s).
	inGroup  []Linear
	exprKeys []parser.Expr
	items    map[string]int // item definitions already compiled → index
}

// maxGroups bounds the groups of the GROUP BY expressions of one query.
const maxGroups = 4096

// query compiles one statement; rows are the columns that decide which
// rows it counts (rowColumns), whose dropped cells none of its aggregates
// counts. An aggregate whose argument reads a column leaves its dropped
// cell out by itself.
func (c *compiler) query(st *parser.Statement, rows map[string]bool) (*Query, error) {
	src := st.Query
	q := &Query{Source: src, Text: st.Text}
	qc := &queryCompiler{compiler: c, q: q, src: src, items: map[string]int{}}
	// Conditions of HAVING on the group keys alone filter whole groups by
	// their public labels: they are a WHERE.
	where, having := splitHaving(src.Where, src.Having)
	tr, err := c.truth(where)
	if err != nil {
		return nil, err
	}
	qc.base = Mul(c.mask(rows), tr)
	if err := qc.keys(); err != nil {
		return nil, err
	}
	qc.rows()
	// The output columns first (hidden items go after them): aggregates
	// and keys, then post-processing, which may name the aggregates.
	q.Items = make([]Item, len(src.Select))
	q.Visible = len(src.Select)
	for pass := 0; pass < 2; pass++ {
		for i, si := range src.Select {
			if (si.Expr != nil) != (pass == 1) {
				continue
			}
			it, err := qc.item(si)
			if err != nil {
				return nil, err
			}
			q.Items[i] = it
			if _, dup := qc.items[itemKey(si)]; !dup {
				qc.items[itemKey(si)] = i
			}
		}
	}
	if having != nil {
		cond, err := qc.cond(having)
		if err != nil {
			return nil, err
		}
		q.Having = cond
	}
	for _, o := range src.OrderBy {
		i, err := qc.orderItem(o)
		if err != nil {
			return nil, err
		}
		q.Order = append(q.Order, OrderKey{Item: i, Desc: o.Desc})
	}
	qc.expand()
	if !q.Measured() {
		switch {
		case q.Rows != nil && len(q.Rows) == 0:
			q.Why = "no group: the WHERE admits no cell of the declared domain"
		case len(qc.base) == 0:
			q.Why = "the WHERE admits no cell of the declared domain"
		default:
			q.Why = "every aggregate is zero on the cells the WHERE admits"
		}
	}
	return q, nil
}

// splitHaving moves the top-level conjuncts of HAVING that test no
// aggregate (conditions on the group keys: the parser checked that they
// read keys only) into the WHERE.
func splitHaving(where, having parser.Pred) (parser.Pred, parser.Pred) {
	if having == nil {
		return where, nil
	}
	terms := []parser.Pred{having}
	if a, ok := having.(parser.And); ok {
		terms = a.Terms
	}
	var keep []parser.Pred
	w := []parser.Pred{}
	if where != nil {
		w = append(w, where)
	}
	for _, t := range terms {
		if hasAggCompare(t) {
			keep = append(keep, t)
		} else {
			w = append(w, t)
		}
	}
	var outW, outH parser.Pred
	switch len(w) {
	case 0:
	case 1:
		outW = w[0]
	default:
		outW = parser.And{Terms: w}
	}
	switch len(keep) {
	case 0:
	case 1:
		outH = keep[0]
	default:
		outH = parser.And{Terms: keep}
	}
	return outW, outH
}

func hasAggCompare(p parser.Pred) bool {
	switch p := p.(type) {
	case parser.AggCompare:
		return true
	case parser.And:
		return slices.ContainsFunc(p.Terms, hasAggCompare)
	case parser.Or:
		return slices.ContainsFunc(p.Terms, hasAggCompare)
	case parser.Not:
		return hasAggCompare(p.Term)
	}
	return false
}

// keys resolves the GROUP BY keys: plain columns, and the expression groups
// with their indicators and labels.
func (qc *queryCompiler) keys() error {
	if err := qc.orderKeys(); err != nil {
		return err
	}
	if len(qc.exprKeys) == 0 {
		qc.q.ExprGroups = []ExprGroup{{}}
		qc.groups = []Linear{ones(len(qc.w.Columns))}
		qc.groupVals = [][]val{nil}
		return nil
	}
	var names []string
	for _, e := range qc.exprKeys {
		names = append(names, parser.ExprColumns(e)...)
	}
	cols, err := qc.axes(names, "group statement")
	if err != nil {
		return err
	}
	member, ntuples, err := qc.exprGroups(cols)
	if err != nil {
		return err
	}
	if err := qc.checkCellLimit(); err != nil {
		return err
	}
	if err := qc.groupIndicators(cols, member, ntuples); err != nil {
		return err
	}
	qc.labelExprGroups()
	return nil
}

// orderKeys lists the GROUP BY keys as written: the parser keeps plain
// columns (GroupBy) apart from expressions (GroupExprs, with their
// positions), and they are merged back here.
func (qc *queryCompiler) orderKeys() error {
	src, q := qc.src, qc.q
	n := len(src.GroupBy) + len(src.GroupExprs)
	exprAt := map[int]int{}
	for k, g := range src.GroupExprs {
		exprAt[g.Pos] = k
	}
	plain := 0
	for pos := 0; pos < n; pos++ {
		if k, ok := exprAt[pos]; ok {
			q.Keys = append(q.Keys, Key{Plain: -1, Expr: len(qc.exprKeys), Text: ExprSQL(src.GroupExprs[k].Expr)})
			qc.exprKeys = append(qc.exprKeys, src.GroupExprs[k].Expr)
			continue
		}
		if plain >= len(src.GroupBy) {
			return fmt.Errorf("compile: GROUP BY positions out of order")
		}
		name := src.GroupBy[plain]
		plain++
		j, ok := qc.index[name]
		if !ok {
			return parser.Errorf(parser.CodeBadField, "Unknown column '%s' in 'group statement'", name)
		}
		q.Keys = append(q.Keys, Key{Plain: len(q.GroupCols), Expr: -1, Text: name})
		q.GroupCols = append(q.GroupCols, j)
	}
	return nil
}

// exprGroups evaluates the expression keys on every tuple of cols and
// makes one group per distinct key tuple (qc.groupVals). member maps each
// of the ntuples tuples to its group, -1 for none.
func (qc *queryCompiler) exprGroups(cols []int) (member []int, ntuples int, err error) {
	what := "GROUP BY " + qc.q.Keys[0].Text
	byKey := map[string]int{}
	tuple := make([]val, len(qc.exprKeys))
	// Only the tuples the WHERE admits make groups: a group the WHERE
	// excludes by construction is not returned, so it neither counts
	// towards maxGroups nor needs an indicator (a Grafana time filter
	// around an hourly bucket over a year of bins admits one week's).
	admitted := countPerGroup(qc.base, qc.w.Sizes(), cols)
	ntuples, err = qc.enumerate(cols, what, func(i int, en env, dropped bool) error {
		member = append(member, -1)
		if dropped || admitted[i] < 0.5 {
			return nil
		}
		key := ""
		for k, e := range qc.exprKeys {
			v, err := qc.ev.exprOnPieces(e, en)
			if err != nil {
				return err
			}
			if v.wide() {
				return &splitError{col: v.splitCol, cell: v.splitCell}
			}
			tuple[k] = v
			if v.kind == vStr {
				key += "s" + fold(v.str) + "\x01" // one group per collation-equal text, as in MySQL
			} else {
				key += v.key() + "\x01"
			}
		}
		g, ok := byKey[key]
		if !ok {
			g = len(qc.groupVals)
			if g >= maxGroups {
				return parser.Errorf(parser.CodeDPRefused, "%s has more than %d groups over the declared domain; group more coarsely", what, maxGroups)
			}
			byKey[key] = g
			qc.groupVals = append(qc.groupVals, slices.Clone(tuple))
		}
		member[i] = g
		return nil
	})
	return member, ntuples, err
}

// checkCellLimit refuses keys whose groups (plain groups times expression
// groups) exceed the table's max_cells.
func (qc *queryCompiler) checkCellLimit() error {
	limit := qc.w.Table.MaxCells
	if limit <= 0 {
		limit = catalog.DefaultMaxCells
	}
	if groups := float64(qc.q.Groups(qc.w)) * float64(len(qc.groupVals)); groups > float64(limit) {
		return parser.Errorf(parser.CodeDPRefused, "the GROUP BY keys have %.0f groups over the declared domain, more than the cell limit of table %s (max_cells %d); group by fewer or coarser keys", groups, qc.w.Table.Name, limit)
	}
	return nil
}

// groupIndicators makes each expression group's indicator over the
// domain (qc.groups) from the tuples of cols it holds.
func (qc *queryCompiler) groupIndicators(cols, member []int, ntuples int) error {
	// Public sizes only: the groups over the declared domain, the cells.
	qc.indicators += int64(len(qc.groupVals)) * int64(ntuples)
	if qc.indicators > maxIndicators {
		return parser.Errorf(parser.CodeDPRefused, "the batch's GROUP BY expressions need %d groups × %d cells of factors over the declared domain, more than %d in all (%d MiB); group by fewer or coarser keys, or declare a coarser width for the columns they read",
			len(qc.groupVals), ntuples, maxIndicators, maxIndicators*8>>20)
	}
	members := make([][]int, len(qc.groupVals))
	for i, m := range member {
		if m >= 0 {
			members[m] = append(members[m], i)
		}
	}
	for g := range qc.groupVals {
		ind := make([]float64, ntuples)
		for _, i := range members[g] {
			ind[i] = 1
		}
		if len(cols) == 1 && len(members[g]) > 0 {
			// What toLinear makes of it, without its copy: a long
			// column's groups are many vectors of its length.
			qc.groups = append(qc.groups, single(len(qc.w.Columns), cols[0], ind))
			continue
		}
		l, err := qc.toLinear(cols, ind)
		if err != nil {
			return err
		}
		qc.groups = append(qc.groups, l)
	}
	return nil
}

// labelExprGroups gives each expression group its output labels. A key
// whose values mix text and numbers is text, as in MySQL.
func (qc *queryCompiler) labelExprGroups() {
	for k := range qc.exprKeys {
		text := false
		for _, vs := range qc.groupVals {
			text = text || vs[k].kind == vStr
		}
		if text {
			for _, vs := range qc.groupVals {
				if vs[k].kind == vNum {
					vs[k] = strVal(formatNumber(vs[k]))
				}
			}
		}
	}
	for _, vs := range qc.groupVals {
		var labels []any
		for _, v := range vs {
			labels = append(labels, v.label())
		}
		qc.q.ExprGroups = append(qc.q.ExprGroups, ExprGroup{Labels: labels})
	}
}

// rows lists the output groups: every (plain group, expression group) on
// which the query's WHERE (and mask) admits a cell of the domain, in the
// order of the keys as written, each key in declared order. An aggregate
// without GROUP BY has its one row whatever the WHERE, as in MySQL.
func (qc *queryCompiler) rows() {
	q := qc.q
	if len(q.Keys) == 0 {
		q.Rows = []Row{{}}
		return
	}
	sizes := qc.w.Sizes()
	if len(qc.exprKeys) == 0 && everywhere(qc.base, sizes, q.GroupCols) {
		q.Rows = nil // every plain group, in declared order: nothing stored per row
		return
	}
	q.Rows = []Row{}
	qc.inGroup = make([]Linear, len(qc.groups))
	for e, ind := range qc.groups {
		qc.inGroup[e] = Mul(qc.base, ind)
		cnt := countPerGroup(qc.inGroup[e], sizes, q.GroupCols)
		for g, n := range cnt {
			if n > 0.5 {
				q.Rows = append(q.Rows, Row{Plain: int32(g), Expr: int32(e)})
			}
		}
	}
	// Ordinal of each expression key's label, in first-seen (declared) order.
	ord := make([]map[string]int, len(qc.exprKeys))
	for k := range qc.exprKeys {
		ord[k] = map[string]int{}
		for _, vs := range qc.groupVals {
			if _, ok := ord[k][vs[k].key()]; !ok {
				ord[k][vs[k].key()] = len(ord[k])
			}
		}
	}
	cells := make([]int, len(q.GroupCols))
	keyOf := func(r Row) []int {
		q.GroupCells(qc.w, int(r.Plain), cells)
		out := make([]int, len(q.Keys))
		for i, k := range q.Keys {
			if k.Plain >= 0 {
				out[i] = cells[k.Plain]
			} else {
				out[i] = ord[k.Expr][qc.groupVals[r.Expr][k.Expr].key()]
			}
		}
		return out
	}
	sort.SliceStable(q.Rows, func(a, b int) bool {
		return slices.Compare(keyOf(q.Rows[a]), keyOf(q.Rows[b])) < 0
	})
}

// everywhere reports, without enumerating the groups, that l (a 0/1 table)
// admits a cell of every plain group: one term, whose factors on the group
// columns are positive everywhere and whose others are not all zero.
func everywhere(l Linear, sizes []int, groupCols []int) bool {
	if len(l) != 1 || !(l[0].Coef > 0) {
		return false
	}
	grouped := make([]bool, len(sizes))
	for _, j := range groupCols {
		grouped[j] = true
	}
	for j, f := range l[0].Factors {
		if f == nil {
			continue
		}
		any := false
		for _, x := range f {
			if x < 0 || (grouped[j] && x == 0) {
				return false
			}
			any = any || x > 0
		}
		if !any {
			return false
		}
	}
	return true
}

// countPerGroup sums l over the cells of each plain group (row-major over
// groupCols): with l a 0/1 table, the number of cells of the group it
// admits.
func countPerGroup(l Linear, sizes []int, groupCols []int) []float64 {
	n := 1
	for _, j := range groupCols {
		n *= sizes[j]
	}
	out := make([]float64, n)
	grouped := make([]bool, len(sizes))
	for _, j := range groupCols {
		grouped[j] = true
	}
	idx := make([]int, len(groupCols))
	for _, t := range l {
		s := t.Coef
		for j, f := range t.Factors {
			if grouped[j] {
				continue
			}
			if f == nil {
				s *= float64(sizes[j])
				continue
			}
			sum := 0.0
			for _, x := range f {
				sum += x
			}
			s *= sum
		}
		if s == 0 {
			continue
		}
		clear(idx)
		for g := 0; g < n; g++ {
			v := s
			for k, j := range groupCols {
				if f := t.Factors[j]; f != nil {
					v *= f[idx[k]]
				}
			}
			out[g] += v
			for k := len(groupCols) - 1; k >= 0; k-- {
				idx[k]++
				if idx[k] < sizes[groupCols[k]] {
					break
				}
				idx[k] = 0
			}
		}
	}
	return out
}

// addBase registers a base aggregate (deduplicated) and returns its index.
func (qc *queryCompiler) addBase(l Linear) int {
	for i, b := range qc.bases {
		if linearEqual(b, l) {
			return i
		}
	}
	qc.bases = append(qc.bases, l)
	return len(qc.bases) - 1
}

// expand restricts every base aggregate to every expression group, and
// finds the rows that are zero by construction.
func (qc *queryCompiler) expand() {
	q := qc.q
	q.Bases = len(qc.bases)
	sizes := qc.w.Sizes()
	for _, b := range qc.bases {
		reuse := qc.inGroup != nil && linearEqual(b, qc.base)
		for e, ind := range qc.groups {
			if reuse {
				q.Aggregates = append(q.Aggregates, qc.inGroup[e])
				continue
			}
			q.Aggregates = append(q.Aggregates, Mul(b, ind))
		}
	}
	for _, a := range q.Aggregates {
		q.Live = append(q.Live, nonZero(a, sizes, q.GroupCols))
	}
}

// nonZeroEverywhere reports, without enumerating the groups, that a
// single-term l is non-zero in every plain group: its factors on the group
// columns have no zero, and the others are not all zero.
func nonZeroEverywhere(l Linear, groupCols []int) bool {
	if len(l) != 1 || l[0].Coef == 0 {
		return false
	}
	for j, f := range l[0].Factors {
		if f == nil {
			continue
		}
		if slices.Contains(groupCols, j) {
			if slices.Contains(f, 0) {
				return false
			}
			continue
		}
		if !slices.ContainsFunc(f, func(x float64) bool { return x != 0 }) {
			return false
		}
	}
	return true
}

// nonZero reports, per plain group, whether l is non-zero on some cell of
// it: Σ l² > 0; nil when it is in every group (or that is too costly to
// check: then it is taken to be).
func nonZero(l Linear, sizes []int, groupCols []int) []bool {
	n := 1
	for _, j := range groupCols {
		n *= sizes[j]
	}
	if len(l) == 0 {
		return make([]bool, n)
	}
	if len(l)*len(l) > 4096 || nonZeroEverywhere(l, groupCols) {
		return nil // (conservatively) live in every group
	}
	out := make([]bool, n)
	for g, s := range countPerGroup(Mul(l, l), sizes, groupCols) {
		out[g] = s > 1e-9
	}
	return out
}

// nullRows reports, per output row, whether count (a 0/1 table of the
// rows with a non-NULL argument) admits no cell: a SUM or AVG over no
// value, NULL by construction. nil when no row is.
func (qc *queryCompiler) nullRows(count Linear) []bool {
	q := qc.q
	sizes := qc.w.Sizes()
	if len(qc.exprKeys) == 0 && everywhere(count, sizes, q.GroupCols) {
		return nil
	}
	per := make([][]float64, len(qc.groups))
	var out []bool
	n := q.RowCount(qc.w)
	for r := 0; r < n; r++ {
		row := q.RowAt(r)
		if per[row.Expr] == nil {
			per[row.Expr] = countPerGroup(Mul(count, qc.groups[row.Expr]), sizes, q.GroupCols)
		}
		if per[row.Expr][row.Plain] < 0.5 {
			if out == nil {
				out = make([]bool, n)
			}
			out[r] = true
		}
	}
	return out
}

// rowEnv is what an output row fixes: the plain group columns' cells and
// the expression keys' labels (as reserved names, see substitute).
func (qc *queryCompiler) rowEnv(r Row) env {
	en := env{}
	cells := make([]int, len(qc.q.GroupCols))
	qc.q.GroupCells(qc.w, int(r.Plain), cells)
	for k, j := range qc.q.GroupCols {
		en[qc.w.Columns[j].Name] = qc.vals[j][cells[k]]
	}
	for k, v := range qc.groupVals[r.Expr] {
		en[keyName(k)] = v
	}
	return en
}

func keyName(k int) string { return fmt.Sprintf("\x00key%d", k) }

// substitute replaces every subexpression equal to a GROUP BY expression
// with a reference to that key, so that a function of the keys can be
// evaluated from a row's labels.
func (qc *queryCompiler) substitute(e parser.Expr) parser.Expr {
	return parser.RewriteExpr(e, func(x parser.Expr) (parser.Expr, bool) {
		for k, g := range qc.exprKeys {
			if reflect.DeepEqual(g, x) {
				return parser.Col{Name: keyName(k)}, true
			}
		}
		return nil, false
	})
}

// rowLabels evaluates a function of the group keys on every output row.
func (qc *queryCompiler) rowLabels(e parser.Expr) ([]val, error) {
	sub := qc.substitute(e)
	var out []val
	n := qc.q.RowCount(qc.w)
	for i := 0; i < n; i++ {
		v, err := qc.ev.expr(sub, qc.rowEnv(qc.q.RowAt(i)))
		if err != nil {
			return nil, qc.explainSplit(ExprSQL(e), err)
		}
		if v.wide() {
			return nil, qc.explainSplit(ExprSQL(e), &splitError{col: v.splitCol, cell: v.splitCell})
		}
		out = append(out, v)
	}
	return out, nil
}

// rowTruth evaluates a condition on the group keys on every output row.
func (qc *queryCompiler) rowTruth(p parser.Pred) ([]bool, error) {
	vs, err := qc.rowLabels(parser.Cond{P: p})
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(vs))
	for i, v := range vs {
		out[i] = v.kind == vNum && v.mid == 1
	}
	return out, nil
}

// plainKey is the position in GroupCols of a plain GROUP BY column, whose
// labels are its cells' (CellLabel): the declared value, or a bin's lower
// edge.
func (qc *queryCompiler) plainKey(name string) (int, LabelType, error) {
	j, ok := qc.index[name]
	pos := slices.Index(qc.q.GroupCols, j)
	if !ok || pos < 0 {
		return 0, 0, parser.Errorf(parser.CodeDPRefused, "column '%s' must appear in GROUP BY: dpproxy returns aggregates per group, never row values", name)
	}
	return pos, ColumnLabelType(qc.w.Columns[j]), nil
}

// exprKeyType is the label type of expression key k.
func (qc *queryCompiler) exprKeyType(k int) LabelType {
	vs := make([]val, len(qc.groupVals))
	for e, g := range qc.groupVals {
		vs[e] = g[k]
	}
	_, typ := labelsOf(vs)
	return typ
}

// CellLabel is the value a cell shows as a group label: the categorical
// value, the bin's lower edge (an integer for integer columns), "other",
// or NULL.
func CellLabel(c *catalog.Column, cell catalog.Cell) any {
	switch cell.Kind {
	case catalog.CellValue:
		return cell.Value
	case catalog.CellOther:
		return "other"
	case catalog.CellBin:
		switch c.Kind {
		case catalog.IntegerRange:
			return int64(cell.Lo)
		case catalog.TimeRange:
			return catalog.FormatTime(int64(cell.Lo), c.DateOnly)
		}
		return cell.Lo
	}
	return nil
}

// ColumnLabelType is the type of a column's labels.
func ColumnLabelType(c *catalog.Column) LabelType {
	switch c.Kind {
	case catalog.IntegerRange:
		return LabelInt
	case catalog.Binned:
		return LabelFloat
	case catalog.TimeRange:
		if c.DateOnly {
			return LabelDate
		}
		return LabelDatetime
	}
	return LabelString
}

// labelsOf turns row values into labels and their column type.
func labelsOf(vs []val) ([]any, LabelType) {
	typ, text := LabelInt, false
	dates, datetimes, numbers := 0, 0, 0
	for _, v := range vs {
		switch {
		case v.kind == vStr:
			text = true
		case v.typ == tDate:
			dates++
		case v.typ == tDatetime:
			datetimes++
		case v.kind == vNum && v.typ != tInt:
			typ = LabelFloat
			numbers++
		case v.kind == vNum:
			numbers++
		}
	}
	// Times label as MySQL types them: DATE, DATETIME (a date among
	// datetimes shows as one), text when mixed with numbers.
	switch {
	case text || (dates+datetimes > 0 && numbers > 0):
		text = true
	case datetimes > 0:
		typ = LabelDatetime
	case dates > 0:
		typ = LabelDate
	}
	out := make([]any, len(vs))
	for i, v := range vs {
		switch {
		case text && v.kind == vNum:
			v = strVal(formatNumber(v))
		case typ == LabelDatetime && v.typ == tDate:
			v.typ = tDatetime
		}
		out[i] = v.label()
	}
	if text {
		return out, LabelString
	}
	return out, typ
}
