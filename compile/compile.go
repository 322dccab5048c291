package compile

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/parser"
)

// Workload is a batch of queries over one protected table, as linear queries
// over the product domain of Columns.
type Workload struct {
	Table *catalog.Table
	// Columns are the batch's columns, in table order: the product domain's
	// axes. A column that drops values (null: drop, out_of_domain: drop)
	// whose dropped rows some aggregate of the batch counts (one that does
	// not read the column, in a query whose rows it does not decide: see
	// drop.go) is the batch's copy with a dropped cell
	// (catalog.Column.WithDroppedCell), so that aggregate still counts the
	// rows the others drop.
	Columns []*catalog.Column
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

// Measured reports whether some answer of the batch needs a measurement:
// false when every aggregate of every query is zero by construction (a
// fact about the declared domain), so the batch is answered exactly at no
// privacy cost.
func (w *Workload) Measured() bool {
	for _, q := range w.Queries {
		if q.Measured() {
			return true
		}
	}
	return false
}

// Query is one compiled statement.
//
// Its groups: GroupCols are the GROUP BY columns grouped cell by cell (a
// plain group g is a cell of their product, row-major), and ExprGroups are
// the distinct label tuples that the GROUP BY expressions take over the
// domain (one empty group when there are none), each a set of cells. An
// output row is a pair (plain group, expression group) that the query's
// WHERE admits on some cell of the domain: groups excluded by construction
// are not returned.
//
// Its workload rows are Aggregates[a] ∘ e_g for every aggregate a and plain
// group g, where Aggregates[b*len(ExprGroups)+e] is base aggregate b
// restricted to expression group e (see Agg).
type Query struct {
	Source    *parser.Query
	Text      string
	GroupCols []int // indexes into Workload.Columns, grouped cell by cell
	// Keys are the GROUP BY keys in written order.
	Keys       []Key
	ExprGroups []ExprGroup
	Aggregates []Linear
	// Bases is the number of base aggregates.
	Bases int
	// Rows are the output groups, in declared order (see RowCount, RowAt);
	// nil means every plain group, in order, with no expression group.
	Rows []Row
	// Live[a][g] reports whether aggregate a's row at plain group g is
	// non-zero over the domain (Live[a] nil: every row is). A zero row is
	// known exactly without measuring it (0; or NULL for a SUM or AVG over
	// no value).
	Live  [][]bool
	Items []Item // output columns, then hidden ones
	// Visible is how many of Items are output columns; the rest are
	// aggregates or keys HAVING or ORDER BY use without selecting them.
	Visible int
	// Having is what remains of Source.Having once its conditions on the
	// group keys alone have joined the WHERE: post-processing per row.
	Having Condition
	// Order resolves Source.OrderBy to items.
	Order []OrderKey
	// Why says, for EXPLAIN, why nothing of the query is measured ("" when
	// something is).
	Why string
}

// Key is one GROUP BY key: a plain column (Plain, an index into
// GroupCols) or an expression (Expr, an index into a group's Labels).
type Key struct {
	Plain, Expr int // -1 when not that kind
	Text        string
}

// ExprGroup is one group of the GROUP BY expressions: its label per
// expression key.
type ExprGroup struct {
	Labels []any
}

// Row is one output group.
type Row struct {
	Plain int32 // the plain group, row-major over GroupCols
	Expr  int32 // index into ExprGroups
}

// RowCount is the number of output rows.
func (q *Query) RowCount(w *Workload) int {
	if q.Rows == nil {
		return q.Groups(w)
	}
	return len(q.Rows)
}

// Label is ItemGroup it's label on output row r (int64, float64, string
// or nil). It looks the cell up each time: the engine keeps the labels of
// a plain column's cells instead.
func (q *Query) Label(w *Workload, it Item, r int) any {
	row := q.RowAt(r)
	switch {
	case it.Plain >= 0:
		cells := make([]int, len(q.GroupCols))
		q.GroupCells(w, int(row.Plain), cells)
		c := w.Columns[q.GroupCols[it.Plain]]
		return CellLabel(c, c.Cells()[cells[it.Plain]])
	case it.ExprKey >= 0:
		return q.ExprGroups[row.Expr].Labels[it.ExprKey]
	}
	return it.Labels[r]
}

// RowAt is output row r.
func (q *Query) RowAt(r int) Row {
	if q.Rows == nil {
		return Row{Plain: int32(r)}
	}
	return q.Rows[r]
}

// Agg is the index in Aggregates of base aggregate b restricted to
// expression group e.
func (q *Query) Agg(b, e int) int { return b*q.ExprCount() + e }

// ExprCount is the number of expression groups (1 when the query has no
// GROUP BY expression).
func (q *Query) ExprCount() int { return max(1, len(q.ExprGroups)) }

// IsLive reports whether aggregate a's row at plain group g is not zero by
// construction (every row is, in a Query built without Live).
func (q *Query) IsLive(a, g int) bool { return q.Live == nil || q.Live[a] == nil || q.Live[a][g] }

// Measured reports whether some aggregate row of q is not zero by
// construction.
func (q *Query) Measured() bool {
	if q.Live == nil {
		return len(q.Aggregates) > 0
	}
	for _, l := range q.Live {
		if l == nil {
			return true
		}
		for _, v := range l {
			if v {
				return true
			}
		}
	}
	return false
}

// LiveRows is the number of plain groups where aggregate a is not zero by
// construction: the rows a direct measurement must answer.
func (q *Query) LiveRows(w *Workload, a int) int {
	if q.Live == nil || q.Live[a] == nil {
		return q.Groups(w)
	}
	n := 0
	for _, v := range q.Live[a] {
		if v {
			n++
		}
	}
	return n
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
	// CondKeys is a condition on the group keys: its truth per output row
	// (a public fact), inside a HAVING that also tests aggregates.
	CondKeys struct{ Rows []bool }
)

func (CondAnd) isCondition()     {}
func (CondOr) isCondition()      {}
func (CondNot) isCondition()     {}
func (CondCompare) isCondition() {}
func (CondKeys) isCondition()    {}

// OrderKey sorts output rows by Items[Item].
type OrderKey struct {
	Item int
	Desc bool
}

// Support is the ascending list of the batch columns q depends on: its
// group columns and every column where some aggregate's factor is not all
// ones (nil). A query reads nothing of the others.
func (q *Query) Support(w *Workload) []int {
	in := make([]bool, len(w.Columns))
	for _, j := range q.GroupCols {
		in[j] = true
	}
	for _, agg := range q.Aggregates {
		for _, t := range agg {
			for j, f := range t.Factors {
				if f != nil {
					in[j] = true
				}
			}
		}
	}
	var out []int
	for j, b := range in {
		if b {
			out = append(out, j)
		}
	}
	return out
}

// Groups is the number of plain groups (the product of GroupCols' domains).
func (q *Query) Groups(w *Workload) int {
	n := 1
	for _, j := range q.GroupCols {
		n *= w.Columns[j].Size()
	}
	return n
}

// GroupCells decodes plain group g (row-major over GroupCols) into one
// cell index per group column, written to cells (len(GroupCols)).
func (q *Query) GroupCells(w *Workload, g int, cells []int) {
	for i := len(q.GroupCols) - 1; i >= 0; i-- {
		size := w.Columns[q.GroupCols[i]].Size()
		cells[i] = g % size
		g /= size
	}
}

// ItemKind says how an output column is computed.
type ItemKind int

const (
	ItemGroup    ItemKind = iota // a group label: Labels[row]
	ItemAgg                      // Aggregates[Agg] (a COUNT or SUM)
	ItemRatio                    // Aggregates[Agg] / Aggregates[Den] (AVG)
	ItemExpr                     // post-processing over other items (Expr)
	ItemConst                    // a constant (Const)
	ItemVariance                 // VAR_POP/VAR_SAMP/STDDEV... from COUNT (Den), SUM (Agg) and SUM of squares (Sq)
	ItemQuantile                 // DP_QUANTILE/DP_MEDIAN from the noisy CDF: the counts Prefix[k] of values up to Values[k]
)

// LabelType is the SQL type of a group label column.
type LabelType int

const (
	LabelString LabelType = iota
	LabelInt
	LabelFloat
	LabelDate     // 'YYYY-MM-DD' strings, a DATE column
	LabelDatetime // 'YYYY-MM-DD HH:MM:SS' strings, a DATETIME column
)

// ExprNode is post-processing over items: arithmetic and numeric functions
// of noisy values, computed after the measurement, so free.
type ExprNode struct {
	Op          byte // '+', '-', '*', '/', 'd' (DIV), '%'; 0 for a leaf or a call
	Left, Right *ExprNode
	Item        int     // leaf: index into Query.Items; -1 for a constant
	Number      float64 // number leaf (NaN: NULL)
	Func        string  // a function of Args
	Args        []*ExprNode
}

// Item is one output column of a query.
type Item struct {
	Kind ItemKind
	// An ItemGroup's label: the cell of the plain GROUP BY column
	// GroupCols[Plain] (CellLabel), or the expression key ExprKey's label
	// (ExprGroups[row.Expr].Labels[ExprKey]), or else Labels[row] (a
	// function of the keys); -1 when not that kind. Values are int64,
	// float64, string or nil, of type LabelType.
	Plain, ExprKey int
	Labels         []any
	LabelType      LabelType
	// Agg, Den, Sq are base aggregates (see Query.Agg): the numerator of a
	// ratio or the SUM of a variance, the denominator COUNT, the SUM of
	// squares.
	Agg, Den, Sq int
	Bar          parser.ErrorBar
	Name         string
	IsCount      bool // a count: rounded to an integer and clamped at zero as post-processing
	// Distinct marks COUNT(DISTINCT <privacy unit>): the number of units
	// with a row in the group (Agg's weights are the WHERE, 0 or 1 per
	// cell), measured by exec.CountDistinct, not by the planner.
	Distinct bool
	// Integral reports that every weight is an integer, so the exact
	// answer is one: the noisy value is rounded (post-processing).
	Integral bool
	// NonNeg, NonPos report that every weight is ≥ 0 (≤ 0): the noisy SUM
	// is clamped at zero (post-processing).
	NonNeg, NonPos bool
	// Lo, Hi bound an AVG's or a variance's argument: the smallest and
	// largest value its cells stand for. The true average lies between
	// them, so clamping the noisy one into [Lo, Hi] is free post-processing
	// that only reduces error; a variance lies in [0, ((Hi − Lo)/2)²].
	Lo, Hi float64
	// Samp and Sqrt make a variance the sample variance (N − 1) and a
	// standard deviation.
	Samp, Sqrt bool
	// Null[row] reports a SUM, AVG or variance over no value by
	// construction: NULL, as in MySQL (nil: never).
	Null []bool
	// Expr is the post-processing of an ItemExpr.
	Expr *ExprNode
	// Const is an ItemConst's value (int64, float64, string or nil).
	Const any
	// Arg describes the aggregate's argument for EXPLAIN ("" for COUNT(*)).
	Arg string
	// An ItemQuantile's CDF: Prefix[k] is the base aggregate counting the
	// rows whose value is at most Values[k] (a cell's value: its
	// midpoint), Values increasing; Quantile is q.
	Prefix   []int
	Values   []float64
	Quantile float64
	// Tree marks a quantile over a column of more than MaxQuantileCells
	// bins: Prefix holds one base aggregate, the WHERE's weights on the
	// column's value cells, whose histogram over column TreeCol the engine
	// measures with a tree strategy; Cells[k] is the column cell of
	// Values[k].
	Tree    bool
	TreeCol int
	Cells   []int
}

// Compile turns parsed aggregate queries over one table into a workload.
// Errors are *parser.Error values whose messages depend only on the query
// and the public catalog.
//
// A query whose every answer is known from the declared domain (see
// Measured) takes no part in the measurement: the others are compiled
// again over the columns they read, and it stays in the workload detached
// (no group columns, empty aggregates), answered exactly.
func Compile(t *catalog.Table, qs []*parser.Statement) (*Workload, error) {
	w, err := compileBatch(t, qs)
	if err != nil {
		return nil, err
	}
	var live []*parser.Statement
	for i, q := range w.Queries {
		if q.Measured() {
			live = append(live, qs[i])
		}
	}
	if len(live) == 0 || len(live) == len(qs) {
		return w, nil
	}
	lw, err := compileBatch(t, live)
	if err != nil {
		return nil, err
	}
	out := &Workload{Table: t, Columns: lw.Columns}
	k := 0
	for _, q := range w.Queries {
		if q.Measured() {
			out.Queries = append(out.Queries, lw.Queries[k])
			k++
			continue
		}
		out.Queries = append(out.Queries, detach(q, w))
	}
	return out, nil
}

// detach turns a query known from the domain into one that reads no
// column of the batch: one plain group, aggregates that are empty (zero)
// Linears, its rows listed and the labels of its plain GROUP BY columns
// written out (w is the workload it was compiled in).
func detach(q *Query, w *Workload) *Query {
	cp := *q
	n := q.RowCount(w)
	rows := make([]Row, n)
	for r := range rows {
		rows[r] = Row{Plain: 0, Expr: q.RowAt(r).Expr}
	}
	cp.Items = append([]Item(nil), q.Items...)
	cells := make([]int, len(q.GroupCols))
	for i, it := range cp.Items {
		if it.Kind == ItemGroup && it.Plain >= 0 {
			c := w.Columns[q.GroupCols[it.Plain]]
			cellLabels := c.Cells()
			labels := make([]any, n)
			for r := range labels {
				q.GroupCells(w, int(q.RowAt(r).Plain), cells)
				labels[r] = CellLabel(c, cellLabels[cells[it.Plain]])
			}
			cp.Items[i].Plain, cp.Items[i].Labels = -1, labels
		}
	}
	cp.Rows = rows
	cp.GroupCols = nil
	if len(cp.ExprGroups) == 0 {
		// GROUP BY expressions of which the WHERE admits no group: one
		// placeholder group, so that every base aggregate keeps its (zero)
		// aggregate row, as ExprCount and Agg expect; no output row reads it.
		cp.ExprGroups = []ExprGroup{{Labels: make([]any, len(q.Keys))}}
	}
	cp.Aggregates = make([]Linear, q.Bases*cp.ExprCount())
	cp.Live = make([][]bool, len(cp.Aggregates))
	for a := range cp.Live {
		cp.Live[a] = []bool{false}
	}
	return &cp
}

func compileBatch(t *catalog.Table, qs []*parser.Statement) (*Workload, error) {
	w := &Workload{Table: t}
	// The batch's columns: every column any query reads, in table order.
	// A column's dropped rows leave only what reads it (see drop.go): rows
	// are the columns that decide a statement's rows, dropped the columns
	// whose dropped rows none of its aggregates counts.
	rows := make([]map[string]bool, len(qs))
	dropped := make([]map[string]bool, len(qs))
	used := map[string]bool{}
	for i, st := range qs {
		if err := checkJoins(t, st.Query.Joins); err != nil {
			return nil, err
		}
		r, err := references(t, st.Query)
		if err != nil {
			return nil, err
		}
		for c := range r {
			used[c] = true
		}
		rows[i] = columnNames(t, rowColumns(st.Query))
		dropped[i] = columnNames(t, dropsEverywhere(st.Query, r))
	}
	index := map[string]int{}
	for _, c := range t.Columns {
		if !used[c.Name] {
			continue
		}
		all := true
		for _, d := range dropped {
			all = all && d[c.Name]
		}
		if !all {
			c = c.WithDroppedCell() // some aggregate counts the rows c drops
		}
		index[c.Name] = len(w.Columns)
		w.Columns = append(w.Columns, c)
	}
	c := newCompiler(w, index)
	for i, st := range qs {
		var grouped []*catalog.Column
		for _, name := range st.Query.GroupBy {
			if c := t.Column(name); c != nil {
				grouped = append(grouped, c)
			}
		}
		if err := CheckCells(t, grouped); err != nil {
			return nil, err
		}
		q, err := c.query(st, rows[i])
		if err != nil {
			return nil, err
		}
		w.Queries = append(w.Queries, q)
	}
	if err := w.checkDistinct(); err != nil {
		return nil, err
	}
	return w, nil
}

// CountsUnits reports whether the batch counts units (COUNT(DISTINCT
// <privacy unit>)): then every aggregate of it does (checkDistinct), and
// exec.CountDistinct measures it instead of the planner's strategies.
func (w *Workload) CountsUnits() bool {
	for _, q := range w.Queries {
		for _, it := range q.Items {
			if it.Distinct {
				return true
			}
		}
	}
	return false
}

// checkDistinct refuses a batch mixing COUNT(DISTINCT <unit>) with other
// aggregates: the number of units is measured by its own mechanism, with
// the whole batch's ε.
func (w *Workload) checkDistinct() error {
	if !w.CountsUnits() {
		return nil
	}
	for _, q := range w.Queries {
		for _, it := range q.Items {
			switch it.Kind {
			case ItemGroup, ItemExpr, ItemConst:
			default:
				if !it.Distinct {
					return parser.Errorf(parser.CodeNotSupported, "COUNT(DISTINCT %s) is measured on its own: send it without other aggregates (COUNT(*), SUM, AVG, ...) in its statement and request", w.Table.Unit.Column)
				}
			}
		}
	}
	return nil
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

// UnitColumnError refuses a query that selects, groups by, filters on or
// otherwise reads t's privacy unit column.
func UnitColumnError(t *catalog.Table) error {
	return parser.Errorf(parser.CodeDPRefused, "column %s is the privacy unit of table %s: it is never selected, grouped by or filtered on, and no value of it leaves the proxy; count rows with COUNT(*) over domain columns (each %s contributes at most %d rows)",
		t.Unit.Column, t.Name, t.Unit.Column, t.Unit.MaxRows)
}

// CheckUnit refuses q (3900) when it reads t's privacy unit column
// anywhere, whatever else it asks; nil otherwise (other names are judged
// later, by Compile).
func CheckUnit(t *catalog.Table, q *parser.Query) error {
	if t.Unit == nil || q == nil {
		return nil
	}
	_, err := references(t, q)
	var pe *parser.Error
	if errors.As(err, &pe) && pe.Code == parser.CodeDPRefused {
		return err
	}
	return nil
}

// references lists the columns a query reads (1054 for unknown ones).
func references(t *catalog.Table, q *parser.Query) (map[string]bool, error) {
	out := map[string]bool{}
	add := func(clause string, names ...string) error {
		for _, name := range names {
			if name == "" || name == "*" {
				continue
			}
			if t.IsUnitColumn(name) {
				return UnitColumnError(t)
			}
			c := t.Column(name)
			if c == nil {
				return parser.Errorf(parser.CodeBadField, "Unknown column '%s' in '%s'", name, clause)
			}
			out[c.Name] = true
		}
		return nil
	}
	for _, it := range q.Select {
		if it.Agg == parser.AggCountDistinct && t.IsUnitColumn(it.Column) {
			continue // the number of units: the one use of the unit column
		}
		if err := add("field list", parser.ItemColumns(it)...); err != nil {
			return nil, err
		}
	}
	if err := add("where clause", parser.PredColumns(q.Where)...); err != nil {
		return nil, err
	}
	if err := add("group statement", q.GroupBy...); err != nil {
		return nil, err
	}
	for _, g := range q.GroupExprs {
		if err := add("group statement", parser.ExprColumns(g.Expr)...); err != nil {
			return nil, err
		}
	}
	if err := add("having clause", parser.PredColumns(q.Having)...); err != nil {
		return nil, err
	}
	for _, o := range q.OrderBy {
		if o.Agg == parser.AggCountDistinct && t.IsUnitColumn(o.Column) {
			continue
		}
		cols := []string{o.Column}
		cols = append(cols, parser.ItemColumns(parser.SelectItem{Arg: o.Arg, Key: o.Key, Expr: o.Expr})...)
		if err := add("order clause", cols...); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// compiler compiles the queries of one batch.
type compiler struct {
	w     *Workload
	index map[string]int // column name → axis
	ev    *evaluator
	cells [][]catalog.Cell // per axis
	vals  [][]val          // per axis, per cell: what the cell stands for
	work  int              // cell tuples evaluated so far (bounded by maxWork)
	// indicators is the entries of expression-group indicators compiled
	// so far (bounded by maxIndicators).
	indicators int64
}

func newCompiler(w *Workload, index map[string]int) *compiler {
	c := &compiler{w: w, index: index, ev: newEvaluator(w.Table)}
	for _, col := range w.Columns {
		cells := col.Cells()
		vs := make([]val, len(cells))
		for i, cell := range cells {
			vs[i] = cellVal(col, i, cell)
		}
		c.cells = append(c.cells, cells)
		c.vals = append(c.vals, vs)
	}
	return c
}

// mask is the query's view of the batch: 0 on the dropped cell of every
// column that decides its rows (rowColumns: those rows count in none of its
// aggregates), 1 elsewhere.
func (c *compiler) mask(refs map[string]bool) Linear {
	l := ones(len(c.w.Columns))
	for j, col := range c.w.Columns {
		if !refs[col.Name] {
			continue
		}
		if k := col.DroppedCellIndex(); k >= 0 {
			keep := make([]float64, col.Size())
			for i := range keep {
				keep[i] = 1
			}
			keep[k] = 0
			l = Mul(l, single(len(c.w.Columns), j, keep))
		}
	}
	return l
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

func fmtNum(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

func edgeMax(c *catalog.Column) float64 {
	if c.Kind == catalog.IntegerRange {
		return float64(c.Max + 1)
	}
	return c.Edges[len(c.Edges)-1]
}

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

// finiteWeight reports whether a weight is a usable finite number.
func finiteWeight(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) && math.Abs(x) < 1<<53 }
