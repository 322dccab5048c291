package compile

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/parser"
)

// Workload is a batch of queries over one protected table, as linear queries
// over the product domain of Columns.
type Workload struct {
	Table   *catalog.Table
	Columns []*catalog.Column // the batch's columns, in table order; the product domain's axes
	Queries []*Query
}

// Sizes returns each column's number of cells.
func (w *Workload) Sizes() []int {
	s := make([]int, len(w.Columns))
	for j, c := range w.Columns {
		s[j] = c.Size()
	}
	return s
}

// Cells is the size of the product domain.
func (w *Workload) Cells() int {
	n := 1
	for _, s := range w.Sizes() {
		n *= s
	}
	return n
}

// Query is one compiled statement. Its workload rows are Aggregates[a] ∘ e_g
// for every aggregate a and every group g of the product of GroupCols' domains
// (one group when GroupCols is empty).
type Query struct {
	Source     *parser.Query
	Text       string
	GroupCols  []int    // indexes into Workload.Columns
	Aggregates []Linear // distinct measured linear functionals
	Items      []Item   // output columns, then hidden ones
	// Visible is how many of Items are output columns; the rest are
	// aggregates HAVING or ORDER BY use without selecting them.
	Visible int
	// Having is Source.Having with every aggregate resolved to an item.
	Having Condition
	// Order resolves Source.OrderBy to items.
	Order []OrderKey
}

// Condition is a HAVING predicate over items: post-processing on noisy values.
type Condition interface{ isCondition() }

type (
	// CondAnd, CondOr, CondNot combine conditions.
	CondAnd struct{ Terms []Condition }
	CondOr  struct{ Terms []Condition }
	CondNot struct{ Term Condition }
	// CondCompare is Items[Item] op Value.
	CondCompare struct {
		Item  int
		Op    parser.CompareOp
		Value float64
	}
)

func (CondAnd) isCondition()     {}
func (CondOr) isCondition()      {}
func (CondNot) isCondition()     {}
func (CondCompare) isCondition() {}

// OrderKey sorts output rows by Items[Item].
type OrderKey struct {
	Item int
	Desc bool
}

// Groups is the number of groups (rows of output before HAVING/ORDER/LIMIT).
func (q *Query) Groups(w *Workload) int {
	n := 1
	for _, j := range q.GroupCols {
		n *= w.Columns[j].Size()
	}
	return n
}

// GroupCells decodes group g (row-major over GroupCols) into one cell
// index per group column, written to cells (len(GroupCols)).
func (q *Query) GroupCells(w *Workload, g int, cells []int) {
	for i := len(q.GroupCols) - 1; i >= 0; i-- {
		size := w.Columns[q.GroupCols[i]].Size()
		cells[i] = g % size
		g /= size
	}
}

// ItemKind says how an output column is computed from the measured aggregates.
type ItemKind int

const (
	ItemGroup ItemKind = iota // the group's cell label of GroupCols[Group]
	ItemAgg                   // Aggregates[Agg]
	ItemRatio                 // Aggregates[Agg] / Aggregates[Den] (AVG)
	ItemExpr                  // arithmetic over other items (Expr)
)

// ExprNode is arithmetic over items: post-processing of noisy values.
type ExprNode struct {
	Op          byte // '+', '-', '*', '/'; 0 for a leaf
	Left, Right *ExprNode
	Item        int     // leaf: index into Query.Items; -1 for a number
	Number      float64 // number leaf
}

// Item is one output column of a query.
type Item struct {
	Kind    ItemKind
	Group   int // ItemGroup: index into GroupCols
	Agg     int // ItemAgg, ItemRatio: numerator aggregate
	Den     int // ItemRatio: denominator aggregate
	Bar     parser.ErrorBar
	Name    string
	IsCount bool // a count: rounded to an integer and clamped at zero as post-processing
	// Lo, Hi bound an AVG: the smallest and largest value its cells stand
	// for. The true average lies between them, so clamping the noisy one
	// into [Lo, Hi] is free post-processing that only reduces error.
	Lo, Hi float64
	// Expr is the arithmetic of an ItemExpr.
	Expr *ExprNode
}

// Compile turns parsed aggregate queries over one table into a workload.
// Errors are *parser.Error values whose messages depend only on the query
// and the public catalog.
func Compile(t *catalog.Table, qs []*parser.Statement) (*Workload, error) {
	w := &Workload{Table: t}
	// The batch's columns: every column any query references, in table order.
	used := map[string]bool{}
	for _, st := range qs {
		if err := collectColumns(t, st.Query, used); err != nil {
			return nil, err
		}
	}
	index := map[string]int{}
	for _, c := range t.Columns {
		if used[c.Name] {
			index[c.Name] = len(w.Columns)
			w.Columns = append(w.Columns, c)
		}
	}
	for _, st := range qs {
		var grouped []*catalog.Column
		for _, name := range st.Query.GroupBy {
			if c := t.Column(name); c != nil {
				grouped = append(grouped, c)
			}
		}
		if err := CheckCells(t, grouped); err != nil {
			return nil, err
		}
		q, err := compileQuery(w, index, st)
		if err != nil {
			return nil, err
		}
		w.Queries = append(w.Queries, q)
	}
	return w, nil
}

// CheckCells refuses a set of columns whose product domain exceeds the
// table's max_cells: a GROUP BY over more groups (or a listed domain over
// more combinations) than that would size its result, and everything
// behind it, by the product. It runs before anything is sized by it and
// before any charge; the product is public (the catalog's domains), so the
// refusal says the numbers. (A batch's whole product domain may exceed
// max_cells when its plan is measured in marginal space: the planner
// bounds the histograms it counts by the same limit.)
func CheckCells(t *catalog.Table, cols []*catalog.Column) error {
	limit := t.MaxCells
	if limit <= 0 {
		limit = catalog.DefaultMaxCells
	}
	cells := 1.0
	var dims []string
	for _, c := range cols {
		cells *= float64(c.Size())
		dims = append(dims, fmt.Sprintf("%s %d", c.Name, c.Size()))
	}
	if cells <= float64(limit) {
		return nil
	}
	return parser.Errorf(parser.CodeDPRefused, "the grouped columns span %s cells (%s), more than the cell limit of table %s (max_cells %d); group by fewer or coarser columns",
		formatCells(cells), strings.Join(dims, " × "), t.Name, limit)
}

// formatCells writes a cell count exactly when it fits an integer, else in
// scientific notation.
func formatCells(x float64) string {
	if x < 1e18 {
		return strconv.FormatInt(int64(x), 10)
	}
	return strconv.FormatFloat(x, 'e', 3, 64)
}

func collectColumns(t *catalog.Table, q *parser.Query, used map[string]bool) error {
	add := func(name, clause string) error {
		c := t.Column(name)
		if c == nil {
			return parser.Errorf(parser.CodeBadField, "Unknown column '%s' in '%s'", name, clause)
		}
		used[c.Name] = true
		return nil
	}
	var leaves func(e *parser.AggExpr) error
	leaves = func(e *parser.AggExpr) error {
		if e == nil {
			return nil
		}
		if e.Leaf != nil && e.Leaf.Column != "" {
			if err := add(e.Leaf.Column, "field list"); err != nil {
				return err
			}
		}
		if err := leaves(e.Left); err != nil {
			return err
		}
		return leaves(e.Right)
	}
	for _, it := range q.Select {
		if it.Column != "" {
			if err := add(it.Column, "field list"); err != nil {
				return err
			}
		}
		if err := leaves(it.Expr); err != nil {
			return err
		}
	}
	for _, g := range q.GroupBy {
		if err := add(g, "group statement"); err != nil {
			return err
		}
	}
	var walk func(p parser.Pred, clause string) error
	walk = func(p parser.Pred, clause string) error {
		switch p := p.(type) {
		case nil, parser.Const:
			return nil
		case parser.AggCompare:
			if p.Item.Column != "" {
				return add(p.Item.Column, clause)
			}
		case parser.And:
			for _, x := range p.Terms {
				if err := walk(x, clause); err != nil {
					return err
				}
			}
		case parser.Or:
			for _, x := range p.Terms {
				if err := walk(x, clause); err != nil {
					return err
				}
			}
		case parser.Not:
			return walk(p.Term, clause)
		case parser.Compare:
			return add(p.Column, clause)
		case parser.In:
			return add(p.Column, clause)
		case parser.Between:
			return add(p.Column, clause)
		case parser.IsNull:
			return add(p.Column, clause)
		default:
			return parser.Errorf(parser.CodeNotSupported, "unsupported predicate %T", p)
		}
		return nil
	}
	for _, o := range q.OrderBy {
		if o.SelectIndex < 0 && o.Column != "" {
			if err := add(o.Column, "order clause"); err != nil {
				return err
			}
		}
	}
	if err := walk(q.Having, "having clause"); err != nil {
		return err
	}
	return walk(q.Where, "where clause")
}

func compileQuery(w *Workload, index map[string]int, st *parser.Statement) (*Query, error) {
	src := st.Query
	d := len(w.Columns)
	q := &Query{Source: src, Text: st.Text}
	for _, g := range src.GroupBy {
		q.GroupCols = append(q.GroupCols, index[w.Table.Column(g).Name])
	}
	where, err := truth(w, index, src.Where)
	if err != nil {
		return nil, err
	}
	aggIndex := func(l Linear) int {
		for i, a := range q.Aggregates {
			if linearEqual(a, l) {
				return i
			}
		}
		q.Aggregates = append(q.Aggregates, l)
		return len(q.Aggregates) - 1
	}
	countOf := func(col string) (int, error) {
		if col == "" {
			return aggIndex(where), nil
		}
		j := index[w.Table.Column(col).Name]
		return aggIndex(Mul(where, single(d, j, notNull(w.Columns[j])))), nil
	}
	for _, it := range src.Select {
		item := Item{Bar: it.Bar, Name: it.Alias}
		if it.Expr != nil {
			item.Kind = ItemExpr // resolved below, once hidden items can be added
			q.Items = append(q.Items, item)
			continue
		}
		switch it.Agg {
		case parser.AggNone:
			pos := slices.Index(q.GroupCols, index[w.Table.Column(it.Column).Name])
			if pos < 0 {
				return nil, parser.Errorf(parser.CodeDPRefused, "column '%s' must appear in GROUP BY: dpproxy returns aggregates per group, never row values", it.Column)
			}
			if it.Bar != parser.BarNone {
				return nil, parser.Errorf(parser.CodeDPRefused, "error bars apply to aggregates, not to the group column '%s'", it.Column)
			}
			item.Kind, item.Group = ItemGroup, pos
		case parser.AggCount:
			item.Kind, item.IsCount = ItemAgg, true
			item.Agg, _ = countOf("")
		case parser.AggCountCol:
			item.Kind, item.IsCount = ItemAgg, true
			item.Agg, _ = countOf(it.Column)
		case parser.AggSum, parser.AggAvg:
			j := index[w.Table.Column(it.Column).Name]
			col := w.Columns[j]
			weights, err := sumWeights(col, it.Agg)
			if err != nil {
				return nil, err
			}
			item.Kind = ItemAgg
			item.Agg = aggIndex(Mul(where, single(d, j, weights)))
			if it.Agg == parser.AggAvg {
				item.Kind = ItemRatio
				item.Den, _ = countOf(it.Column)
				item.Lo, item.Hi = math.Inf(1), math.Inf(-1)
				for i, cell := range col.Cells() {
					if cell.Kind == catalog.CellBin {
						item.Lo, item.Hi = math.Min(item.Lo, weights[i]), math.Max(item.Hi, weights[i])
					}
				}
			}
		default:
			return nil, parser.Errorf(parser.CodeNotSupported, "unsupported aggregate")
		}
		q.Items = append(q.Items, item)
	}
	q.Visible = len(q.Items)
	// Aggregates HAVING and ORDER BY name are items too, hidden when not selected.
	itemFor := func(it parser.SelectItem) (int, error) {
		for i, x := range q.Source.Select {
			if x.Expr == nil && x.Agg == it.Agg && x.Column == it.Column && x.Bar == parser.BarNone && it.Agg != parser.AggNone {
				return i, nil
			}
		}
		if it.Agg == parser.AggNone {
			for i, x := range q.Source.Select {
				if x.Expr == nil && x.Agg == parser.AggNone && x.Column == it.Column {
					return i, nil
				}
			}
			return 0, parser.Errorf(parser.CodeDPRefused, "ORDER BY %s: order by a column of the select list or by an aggregate", it.Column)
		}
		// Compile the aggregate on its own: without HAVING and ORDER BY, which
		// would otherwise ask for their own hidden items again.
		hidden := *src
		hidden.Select = []parser.SelectItem{it}
		hidden.Having, hidden.OrderBy = nil, nil
		hq, err := compileQuery(w, index, &parser.Statement{Query: &hidden, Text: st.Text})
		if err != nil {
			return 0, err
		}
		item := hq.Items[0]
		remap := func(k int) int {
			for i, a := range q.Aggregates {
				if linearEqual(a, hq.Aggregates[k]) {
					return i
				}
			}
			q.Aggregates = append(q.Aggregates, hq.Aggregates[k])
			return len(q.Aggregates) - 1
		}
		item.Agg = remap(item.Agg)
		if item.Kind == ItemRatio {
			item.Den = remap(item.Den)
		}
		q.Items = append(q.Items, item)
		return len(q.Items) - 1, nil
	}
	var expr func(e *parser.AggExpr) (*ExprNode, error)
	expr = func(e *parser.AggExpr) (*ExprNode, error) {
		if e.Op == 0 {
			if e.Leaf == nil {
				return &ExprNode{Item: -1, Number: e.Number}, nil
			}
			i, err := itemFor(*e.Leaf)
			return &ExprNode{Item: i}, err
		}
		l, err := expr(e.Left)
		if err != nil {
			return nil, err
		}
		r, err := expr(e.Right)
		return &ExprNode{Op: e.Op, Left: l, Right: r}, err
	}
	for i, it := range src.Select {
		if it.Expr != nil {
			n, err := expr(it.Expr)
			if err != nil {
				return nil, err
			}
			q.Items[i].Expr = n
		}
	}
	var cond func(p parser.Pred) (Condition, error)
	cond = func(p parser.Pred) (Condition, error) {
		switch p := p.(type) {
		case parser.AggCompare:
			i, err := itemFor(p.Item)
			return CondCompare{Item: i, Op: p.Op, Value: p.Value}, err
		case parser.Not:
			c, err := cond(p.Term)
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
				c, err := cond(x)
				if err != nil {
					return nil, err
				}
				cs = append(cs, c)
			}
			if _, ok := p.(parser.And); ok {
				return CondAnd{Terms: cs}, nil
			}
			return CondOr{Terms: cs}, nil
		}
		return nil, parser.Errorf(parser.CodeDPRefused, "HAVING compares aggregates with numbers, e.g. HAVING COUNT(*) > 100")
	}
	if src.Having != nil {
		c, err := cond(src.Having)
		if err != nil {
			return nil, err
		}
		q.Having = c
	}
	for _, o := range src.OrderBy {
		if o.SelectIndex >= 0 && o.SelectIndex < q.Visible {
			q.Order = append(q.Order, OrderKey{Item: o.SelectIndex, Desc: o.Desc})
			continue
		}
		i, err := itemFor(parser.SelectItem{Agg: o.Agg, Column: o.Column})
		if err != nil {
			return nil, err
		}
		q.Order = append(q.Order, OrderKey{Item: i, Desc: o.Desc})
	}
	return q, nil
}

func sumWeights(c *catalog.Column, agg parser.AggFunc) ([]float64, error) {
	name := map[parser.AggFunc]string{parser.AggSum: "SUM", parser.AggAvg: "AVG"}[agg]
	if !c.IsNumeric() {
		return nil, parser.Errorf(parser.CodeDPRefused, "%s(%s): %s is categorical; %s needs a numeric column (use COUNT(*) ... GROUP BY %s instead)", name, c.Name, c.Name, name, c.Name)
	}
	if c.OutOfDomain == catalog.PolicyOther {
		return nil, parser.Errorf(parser.CodeDPRefused, "%s(%s): %s keeps out-of-domain values in an 'other' cell whose values are unknown; declare out_of_domain: clamp to sum it", name, c.Name, c.Name)
	}
	cells := c.Cells()
	v := make([]float64, len(cells))
	for i, cell := range cells {
		if cell.Kind == catalog.CellBin {
			v[i] = c.Midpoint(cell)
		}
	}
	return v, nil
}

func notNull(c *catalog.Column) []float64 {
	cells := c.Cells()
	v := make([]float64, len(cells))
	for i, cell := range cells {
		if cell.Kind != catalog.CellNull {
			v[i] = 1
		}
	}
	return v
}

func linearEqual(a, b Linear) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Coef != b[i].Coef || len(a[i].Factors) != len(b[i].Factors) {
			return false
		}
		for j := range a[i].Factors {
			if !factorEqual(a[i].Factors[j], b[i].Factors[j]) {
				return false
			}
		}
	}
	return true
}

// truth returns the predicate's truth table: 1 where SQL's three-valued
// WHERE evaluates to TRUE, 0 where FALSE or UNKNOWN.
func truth(w *Workload, index map[string]int, p parser.Pred) (Linear, error) {
	tr, _, err := tv(w, index, p)
	if err != nil {
		return nil, err
	}
	if len(tr) > maxTerms {
		return nil, parser.Errorf(parser.CodeDPRefused, "the WHERE clause is too complex (more than %d product terms across columns); split it into simpler queries", maxTerms)
	}
	return tr, nil
}

// tv returns the TRUE and FALSE indicator tables of p. UNKNOWN (from NULL
// and out-of-domain cells) is neither, so NOT swaps them as SQL does.
func tv(w *Workload, index map[string]int, p parser.Pred) (Linear, Linear, error) {
	d := len(w.Columns)
	switch p := p.(type) {
	case nil:
		return ones(d), nil, nil
	case parser.Const:
		if p.Value {
			return ones(d), nil, nil
		}
		return nil, ones(d), nil
	case parser.Not:
		t, f, err := tv(w, index, p.Term)
		return f, t, err
	case parser.And, parser.Or:
		var terms []parser.Pred
		isAnd := false
		switch p := p.(type) {
		case parser.And:
			terms, isAnd = p.Terms, true
		case parser.Or:
			terms = p.Terms
		}
		if len(terms) == 0 {
			return ones(d), nil, nil
		}
		accT, accF, err := tv(w, index, terms[0])
		if err != nil {
			return nil, nil, err
		}
		for _, x := range terms[1:] {
			t, f, err := tv(w, index, x)
			if err != nil {
				return nil, nil, err
			}
			if isAnd { // T = T1·T2, F = F1 ∨ F2
				accT, accF = Mul(accT, t), or(accF, f)
			} else { // T = T1 ∨ T2, F = F1·F2
				accT, accF = or(accT, t), Mul(accF, f)
			}
			if len(accT) > maxTerms || len(accF) > maxTerms {
				return nil, nil, parser.Errorf(parser.CodeDPRefused, "the WHERE clause is too complex (more than %d product terms across columns); split it into simpler queries", maxTerms)
			}
		}
		return accT, accF, nil
	case parser.AggCompare:
		return nil, nil, parser.Errorf(parser.CodeDPRefused, "aggregates belong in HAVING, not WHERE")
	}
	col, t, f, err := atom(w, p)
	if err != nil {
		return nil, nil, err
	}
	j := index[col.Name]
	return single(d, j, t), single(d, j, f), nil
}

// or is a ∨ b = a + b − a·b for 0/1 tables.
func or(a, b Linear) Linear {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	return AddScaled(AddScaled(a, 1, b), -1, Mul(a, b))
}

// atom evaluates a single-column predicate on each of the column's cells.
func atom(w *Workload, p parser.Pred) (*catalog.Column, []float64, []float64, error) {
	var name string
	switch p := p.(type) {
	case parser.Compare:
		name = p.Column
	case parser.In:
		name = p.Column
	case parser.Between:
		name = p.Column
	case parser.IsNull:
		name = p.Column
	}
	c := w.Table.Column(name)
	cells := c.Cells()
	t := make([]float64, len(cells))
	f := make([]float64, len(cells))
	set := func(i int, v bool) {
		if v {
			t[i] = 1
		} else {
			f[i] = 1
		}
	}
	switch p := p.(type) {
	case parser.IsNull:
		for i, cell := range cells {
			set(i, (cell.Kind == catalog.CellNull) != p.Negated)
		}
		return c, t, f, nil
	case parser.Compare:
		for i, cell := range cells {
			v, known, err := compareCell(c, cell, p.Op, p.Value)
			if err != nil {
				return nil, nil, nil, err
			}
			if known {
				set(i, v)
			}
		}
		return c, t, f, nil
	case parser.Between:
		for i, cell := range cells {
			lo, k1, err := compareCell(c, cell, parser.OpGe, p.Lo)
			if err != nil {
				return nil, nil, nil, err
			}
			hi, k2, err := compareCell(c, cell, parser.OpLe, p.Hi)
			if err != nil {
				return nil, nil, nil, err
			}
			switch {
			case k1 && k2:
				set(i, (lo && hi) != p.Negated)
			case (k1 && !lo) || (k2 && !hi): // FALSE AND UNKNOWN is FALSE
				set(i, p.Negated)
			}
		}
		return c, t, f, nil
	case parser.In:
		for i, cell := range cells {
			any, unknown := false, false
			for _, lit := range p.Values {
				v, known, err := compareCell(c, cell, parser.OpEq, lit)
				if err != nil {
					return nil, nil, nil, err
				}
				any = any || (known && v)
				unknown = unknown || !known
			}
			switch {
			case any:
				set(i, !p.Negated)
			case !unknown:
				set(i, p.Negated)
			}
		}
		return c, t, f, nil
	}
	return nil, nil, nil, parser.Errorf(parser.CodeNotSupported, "unsupported predicate")
}

// compareCell evaluates `column op lit` on every value a cell stands for.
// known is false where SQL yields UNKNOWN (NULL cell, or the other cell of a
// numeric column whose values are unknown). A comparison that is true for
// some values of a bin and false for others cannot be answered from the
// histogram and is refused, naming the bin edges to use instead.
func compareCell(c *catalog.Column, cell catalog.Cell, op parser.CompareOp, lit parser.Literal) (value, known bool, err error) {
	if cell.Kind == catalog.CellNull {
		return false, false, nil
	}
	if c.Kind == catalog.Categorical {
		if op != parser.OpEq && op != parser.OpNe {
			return false, false, parser.Errorf(parser.CodeDPRefused, "%s is categorical: compare it with =, <>, IN or NOT IN, not %s", c.Name, op)
		}
		match := -1
		for i, v := range c.Values {
			if strings.EqualFold(v, lit.Text) {
				match = i
			}
		}
		if match < 0 {
			return false, false, parser.Errorf(parser.CodeDPRefused, "'%s' is not in the declared domain of %s (%s)", lit.Text, c.Name, strings.Join(c.Values, ", "))
		}
		eq := cell.Kind == catalog.CellValue && strings.EqualFold(cell.Value, lit.Text)
		return eq == (op == parser.OpEq), true, nil
	}
	x, perr := strconv.ParseFloat(strings.TrimSpace(lit.Text), 64)
	if perr != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		return false, false, parser.Errorf(parser.CodeDPRefused, "%s is numeric: '%s' is not a number", c.Name, lit.Text)
	}
	if cell.Kind == catalog.CellOther {
		return false, false, nil
	}
	// The values a bin stands for: integers lo..hi-1, or reals in [lo, hi) ([lo, hi] for the last bin).
	lo, hi := cell.Lo, cell.Hi
	last := cell.Hi == edgeMax(c)
	allTrue, allFalse := false, false
	if c.Kind == catalog.IntegerRange {
		maxV := hi - 1
		test := func(v float64) bool { return cmp(v, op, x) }
		if op == parser.OpEq || op == parser.OpNe {
			in := x >= lo && x <= maxV && x == math.Trunc(x)
			if !in {
				return op == parser.OpNe, true, nil
			}
			if lo == maxV {
				return op == parser.OpEq, true, nil
			}
		} else {
			a, b := test(lo), test(maxV)
			allTrue, allFalse = a && b, !a && !b
		}
	} else {
		closedHi := last
		switch op {
		case parser.OpLt:
			allTrue, allFalse = hi < x || (!closedHi && hi <= x), lo >= x
		case parser.OpLe:
			allTrue, allFalse = hi <= x, lo > x
		case parser.OpGt:
			allTrue, allFalse = lo > x, hi <= x
		case parser.OpGe:
			allTrue, allFalse = lo >= x, hi < x || (!closedHi && hi <= x)
		case parser.OpEq, parser.OpNe:
			outside := x < lo || x > hi || (!closedHi && x == hi)
			if outside {
				return op == parser.OpNe, true, nil
			}
		}
	}
	switch {
	case allTrue:
		return true, true, nil
	case allFalse:
		return false, true, nil
	}
	return false, false, parser.Errorf(parser.CodeDPRefused, "%s %s %s splits the bin [%s, %s) of %s; the histogram cannot answer it. Use bin edges (%s)", c.Name, op, lit.Text, fmtNum(lo), fmtNum(hi), c.Name, edgeList(c))
}

func cmp(v float64, op parser.CompareOp, x float64) bool {
	switch op {
	case parser.OpLt:
		return v < x
	case parser.OpLe:
		return v <= x
	case parser.OpGt:
		return v > x
	case parser.OpGe:
		return v >= x
	case parser.OpEq:
		return v == x
	}
	return v != x
}

func edgeMax(c *catalog.Column) float64 {
	if c.Kind == catalog.IntegerRange {
		return float64(c.Max + 1)
	}
	return c.Edges[len(c.Edges)-1]
}

func fmtNum(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

func edgeList(c *catalog.Column) string {
	var parts []string
	for _, cell := range c.Cells() {
		if cell.Kind == catalog.CellBin {
			parts = append(parts, fmtNum(cell.Lo))
		}
	}
	if len(parts) > 12 {
		parts = append(parts[:6], append([]string{"..."}, parts[len(parts)-3:]...)...)
	}
	return strings.Join(parts, ", ") + fmt.Sprintf(", upper end %s", fmtNum(edgeMax(c)))
}
