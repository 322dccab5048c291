package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/measure"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/selection"
)

// Open columns (catalog.Column.Open) have no public list of values. A
// batch sees one only through a copy of the table in which the column is
// categorical over public values (catalog.Table.WithValues):
//
//   - grouped by (GROUP BY c, or c in the select list): the keys released
//     by DP partition selection (package selection) on this column and
//     data version, selected on first use and charged in the ledger before
//     any key leaves; values outside them are dropped. Released keys are
//     public from then on and reused for free (openKeys), across restarts
//     and proxies that share the measurement store (keyStore);
//   - only compared (c = 'v', c <> 'v', c [NOT] IN (…), c [NOT] LIKE 'p'):
//     the literals the batch names, with every other value in an "other"
//     cell, or, when the batch has LIKE patterns, in the cell of the
//     patterns it matches (catalog.Table.WithPatterns), so that each
//     predicate's domain is {matches, does not match}, evaluated on the
//     data by the pushed-down histogram. Matching is exact (case counts),
//     as the values are binned; NULL follows the column's null policy;
//   - joined to a public table (ON t.c = p.k): p's keys, as literals;
//   - listed (SELECT c FROM t GROUP BY c, SELECT DISTINCT c): the
//     released keys, selected first when there are none (openDomainList).
//
// Any other use (in an aggregate, an expression, REGEXP, HAVING, ORDER BY)
// would need values that are not public and is refused with 3900.

// VarDelta is the session variable setting the δ of a partition selection.
const VarDelta = "dp_delta"

// DeltaRange is @dp_delta's range (selection.MinDelta … MaxDelta).
var DeltaRange = OptionRange{selection.MinDelta, selection.MaxDelta}

func init() { optionRanges[VarDelta] = DeltaRange }

// KeyCounter is what the engine asks a Counter that can run partition
// selection's pushed-down count (sources.Set does).
type KeyCounter interface {
	KeyUnits(ctx context.Context, t *catalog.Table, column string, fn func(key string, units int64) error) error
}

// keyStore holds released keys per table, column and data version: in
// memory, and in the measurement store when there is one (measure/keys.go),
// so that they survive a restart and are shared by the proxies that share
// the store.
type keyStore struct {
	mu    sync.Mutex
	keys  map[keyID][]string
	store *measure.Store // nil: memory only
}

// keyID names one released key set. def digests what the keys depend on:
// the table's source and source table and the column's definition, not
// its budgets or unit bounds (released keys are public whatever bounds
// selected them).
type keyID struct{ table, def, column, version string }

func openKeyID(t *catalog.Table, c, version string) keyID {
	col := t.Column(c)
	def := digestString(fmt.Sprintf("keys 1|%s|%s|%+v", t.Source, t.SourceTable, *col))
	return keyID{t.Name, def, col.Name, version}
}

func (k *keyStore) get(ctx context.Context, id keyID) ([]string, bool, error) {
	k.mu.Lock()
	v, ok := k.keys[id]
	k.mu.Unlock()
	if ok || k.store == nil {
		return v, ok, nil
	}
	v, ok, err := k.store.Keys(ctx, id.table, id.def, id.column, id.version)
	if err != nil || !ok {
		return nil, false, err
	}
	k.remember(id, v)
	return v, true, nil
}

// put stores keys and returns the set to release: the stored one when
// another batch or process stored a set for id first.
func (k *keyStore) put(ctx context.Context, id keyID, seq int64, keys []string) ([]string, error) {
	if k.store != nil {
		var err error
		keys, err = k.store.PutKeys(ctx, measure.KeySet{Table: id.table, Def: id.def, Column: id.column, Version: id.version, LedgerSeq: seq, Keys: keys})
		if err != nil {
			return nil, err
		}
	}
	k.remember(id, keys)
	return keys, nil
}

func (k *keyStore) remember(id keyID, keys []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys == nil {
		k.keys = map[keyID][]string{}
	}
	k.keys[id] = keys
}

// openUse is how a batch uses one open column.
type openUse struct {
	grouped  bool
	literals []string
	patterns []catalog.Pattern
}

// openUses classifies the batch's uses of t's open columns, refusing any
// use that is not grouping or an equality test against literals.
func openUses(t *catalog.Table, sts []*parser.Statement) (map[string]*openUse, error) {
	if len(t.OpenColumns()) == 0 {
		return nil, nil
	}
	o := &openScan{t: t, uses: map[string]*openUse{}}
	for _, st := range sts {
		if st.Query != nil {
			if err := o.query(st.Query); err != nil {
				return nil, err
			}
		}
	}
	return o.uses, nil
}

// openScan is openUses' walk over one table's statements.
type openScan struct {
	t    *catalog.Table
	uses map[string]*openUse
}

func (o *openScan) isOpen(c string) bool {
	col := o.t.Column(c)
	return col != nil && col.Open
}

func (o *openScan) use(c string) *openUse {
	c = strings.ToLower(c)
	if o.uses[c] == nil {
		o.uses[c] = &openUse{}
	}
	return o.uses[c]
}

func (o *openScan) refuse(c string) error {
	return parser.Errorf(parser.CodeDPRefused, "column %s of table %s has no public list of values (type text or open): it can be grouped by (GROUP BY %s, top-k), compared with literals (=, <>, IN, NOT IN, LIKE) and joined to a public table (ON %s = p.key), not used in expressions, aggregates, HAVING or ORDER BY", c, o.t.Name, c, c)
}

// joined reports a join to a public table on an open column (ON t.c =
// p.k): it names the public keys as literals, the column's cells are then
// the keys and the other values, and the lookups of p's columns are
// decided on them. Elsewhere such a Lookup does not read the column's
// values.
func (o *openScan) joined(e parser.Expr) bool {
	l, ok := e.(parser.Lookup)
	if !ok {
		return false
	}
	c, ok := l.Key.(parser.Col)
	return ok && o.isOpen(c.Name)
}

// hide replaces a joined lookup, which reads no values of the column.
func (o *openScan) hide(e parser.Expr) (parser.Expr, bool) {
	if o.joined(e) {
		return parser.Value{Null: true}, true
	}
	return nil, false
}

func (o *openScan) exprCols(e parser.Expr) []string {
	if e == nil {
		return nil
	}
	return parser.ExprColumns(parser.RewriteExpr(e, o.hide))
}

// itemCols are the columns a select item reads, through its aggregate
// expression tree.
func (o *openScan) itemCols(it parser.SelectItem) []string {
	cp := it
	cp.Arg, cp.Key, cp.Expr = nil, nil, nil
	out := append(parser.ItemColumns(cp), o.exprCols(it.Arg)...)
	out = append(out, o.exprCols(it.Key)...)
	var walk func(e *parser.AggExpr)
	walk = func(e *parser.AggExpr) {
		if e == nil {
			return
		}
		if e.Leaf != nil {
			out = append(out, o.itemCols(*e.Leaf)...)
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

// refuseAny refuses the first open column of cs.
func (o *openScan) refuseAny(cs []string) error {
	for _, c := range cs {
		if c != "" && o.isOpen(c) {
			return o.refuse(c)
		}
	}
	return nil
}

// query records one statement's uses: joins and GROUP BY on an open
// column, literals compared with it in WHERE; any other use is refused.
func (o *openScan) query(q *parser.Query) error {
	for _, j := range q.Joins {
		if !o.joined(j.Match) {
			continue
		}
		u := o.use(j.Match.Key.(parser.Col).Name)
		for _, k := range j.Match.Keys {
			if !k.Null {
				u.literals = append(u.literals, k.Lit.Text)
			}
		}
	}
	for _, g := range q.GroupBy {
		if o.isOpen(g) {
			o.use(g).grouped = true
		}
	}
	for _, it := range q.Select {
		if it.Agg == parser.AggNone && it.Key == nil && it.Expr == nil && it.Column != "" && o.isOpen(it.Column) {
			if !slices.Contains(q.GroupBy, it.Column) {
				return o.refuse(it.Column)
			}
			continue
		}
		if err := o.refuseAny(o.itemCols(it)); err != nil {
			return err
		}
	}
	for _, g := range q.GroupExprs {
		if err := o.refuseAny(o.exprCols(g.Expr)); err != nil {
			return err
		}
	}
	if q.Having != nil {
		if err := o.refuseAny(parser.PredColumns(parser.RewritePred(q.Having, o.hide))); err != nil {
			return err
		}
	}
	for _, ob := range q.OrderBy {
		if ob.SelectIndex >= 0 {
			continue
		}
		cs := append([]string{ob.Column}, o.exprCols(ob.Key)...)
		if err := o.refuseAny(append(cs, o.exprCols(ob.Arg)...)); err != nil {
			return err
		}
	}
	if q.Where != nil {
		return literalUses(parser.RewritePred(q.Where, o.hide), o.isOpen, o.use, o.refuse)
	}
	return nil
}

// literalUses collects the literals compared with open columns in p.
func literalUses(p parser.Pred, isOpen func(string) bool, use func(string) *openUse, refuse func(string) error) error {
	switch p := p.(type) {
	case parser.And:
		for _, t := range p.Terms {
			if err := literalUses(t, isOpen, use, refuse); err != nil {
				return err
			}
		}
	case parser.Or:
		for _, t := range p.Terms {
			if err := literalUses(t, isOpen, use, refuse); err != nil {
				return err
			}
		}
	case parser.Not:
		return literalUses(p.Term, isOpen, use, refuse)
	case parser.Compare:
		if isOpen(p.Column) {
			if p.Op != parser.OpEq && p.Op != parser.OpNe {
				return refuse(p.Column)
			}
			u := use(p.Column)
			u.literals = append(u.literals, p.Value.Text)
		}
	case parser.In:
		if isOpen(p.Column) {
			u := use(p.Column)
			for _, v := range p.Values {
				u.literals = append(u.literals, v.Text)
			}
		}
	case parser.Like:
		c, ok := p.X.(parser.Col)
		if !ok || !isOpen(c.Name) {
			for _, c := range parser.PredColumns(p) {
				if isOpen(c) {
					return refuse(c)
				}
			}
			return nil
		}
		pat, ok := p.Pattern.(parser.Value)
		if !ok || pat.Null || !pat.Lit.Quoted || p.Escape == "" {
			return refuse(c.Name)
		}
		u := use(c.Name)
		cp := catalog.Pattern{Text: pat.Lit.Text, Escape: p.Escape}
		if !slices.Contains(u.patterns, cp) {
			u.patterns = append(u.patterns, cp)
		}
	case parser.IsNull:
		// NULL follows the column's null policy; no value is named.
		if isOpen(p.Column) {
			use(p.Column)
		}
	default:
		for _, c := range parser.PredColumns(p) {
			if isOpen(c) {
				return refuse(c)
			}
		}
	}
	return nil
}

// openTable returns t as the batch sees it (see the comment above) and
// the session the batch's measurement runs under: when keys had to be
// selected, at the rest of the batch's ε.
func (e *Engine) openTable(ctx context.Context, s *Session, t *catalog.Table, sts []*parser.Statement, explain bool) (*catalog.Table, *Session, error) {
	uses, err := openUses(t, sts)
	if err != nil || len(uses) == 0 {
		return t, s, err
	}
	names := make([]string, 0, len(uses))
	for c := range uses {
		names = append(names, c)
	}
	slices.Sort(names)
	out := t
	for _, c := range names {
		u := uses[c]
		if !u.grouped {
			vals := slices.Compact(slices.Sorted(slices.Values(u.literals)))
			if len(u.patterns) > catalog.MaxPatterns {
				return nil, nil, parser.Errorf(parser.CodeDPRefused, "a batch tests column %s of table %s against %d LIKE patterns; at most %d are allowed (each doubles its cells)", c, t.Name, len(u.patterns), catalog.MaxPatterns)
			}
			if len(u.patterns) > 0 {
				out = out.WithPatterns(c, vals, u.patterns)
			} else {
				out = out.WithValues(c, vals, catalog.PolicyOther)
			}
			continue
		}
		keys, rest, err := e.openKeys(ctx, s, t, c, sts, explain)
		if err != nil {
			return nil, nil, err
		}
		if rest != nil {
			s = rest
		}
		out = out.WithValues(c, keys, catalog.PolicyDrop)
	}
	return out, s, nil
}

// openDomainList is t as a domain list (SELECT c FROM t GROUP BY c, or
// SELECT DISTINCT c) sees it: an open column's values are its released
// keys, selected first (and charged, at the session's ε and δ) when none
// are released for this data version yet. Released keys are public, so
// any user may list them; only an analyst may have them selected.
func (e *Engine) openDomainList(ctx context.Context, s *Session, user *catalog.User, t *catalog.Table, st *parser.Statement) (*catalog.Table, error) {
	if len(t.OpenColumns()) == 0 {
		return t, nil
	}
	sts := []*parser.Statement{st}
	if user.Role != catalog.RoleAnalyst {
		out, _, err := e.openTable(ctx, s, t, sts, true)
		var sx *selectionExplain
		if errors.As(err, &sx) {
			return nil, parser.Errorf(parser.CodeDPRefused, "the values of %s.%s are not yet released: partition selection releases them, and only analysts run it (user '%s' has role %s)", t.Name, sx.column, user.Name, user.Role)
		}
		return out, err
	}
	out, _, err := e.openTable(ctx, s, t, sts, false)
	return out, err
}

// selectionParams is a selection's mechanism and the ε left for the
// measurement, from the session: ε_sel = selection_share·ε, δ from
// @dp_delta or the table's delta_per_query.
func (e *Engine) selectionParams(s *Session, t *catalog.Table) (*selection.Mechanism, float64, error) {
	// Δ₀, the keys one unit holds after bounding (sources.KeyUnits): one
	// per row without a unit; max_groups; else max_rows, the rows each
	// unit keeps.
	groups := 1
	if t.Unit != nil {
		groups = int(t.Unit.MaxGroups)
		if groups < 1 {
			groups = int(t.Unit.MaxRows)
		}
	}
	eps, hasEps, err := sessionFloat(s, VarEpsilon)
	if err != nil {
		return nil, 0, err
	}
	if !hasEps {
		eps = defaultEpsilon(e.cat.User(s.User), t)
	}
	delta, hasDelta, err := sessionFloat(s, VarDelta)
	if err != nil {
		return nil, 0, err
	}
	if !hasDelta {
		delta = t.Budget.DeltaPerQuery
	}
	share := t.Budget.SelectionShare
	if share <= 0 || share >= 1 {
		share = catalog.DefaultSelectionShare
	}
	sel := eps * share
	rho := 0.0
	if t.Noise == catalog.Gaussian {
		// The selection's ε as zCDP at the table's conversion δ: its ρ
		// converts back to exactly ε_sel (budget.RhoForEpsilon).
		rho = budget.RhoForEpsilon(sel, t.Budget.Delta)
	}
	m, err := selection.Choose(sel, rho, delta, groups)
	if err != nil {
		return nil, 0, parser.Errorf(parser.CodeDPRefused, "partition selection on table %s: %v; set @dp_epsilon or @dp_delta", t.Name, err)
	}
	return m, eps - sel, nil
}

// openKeys returns the released keys of column c of t: stored ones for
// the current data version, else selected now (charged first). rest is
// the session for the measurement when a selection was charged.
func (e *Engine) openKeys(ctx context.Context, s *Session, t *catalog.Table, c string, sts []*parser.Statement, explain bool) ([]string, *Session, error) {
	kc, ok := e.hist.(KeyCounter)
	if !ok {
		return nil, nil, parser.Errorf(parser.CodeDPRefused, "GROUP BY %s needs partition selection, which this proxy's sources do not provide", c)
	}
	version := ""
	if v, ok := e.hist.(dataVersioner); ok {
		ver, known, err := v.DataVersion(ctx, t)
		if err != nil {
			return nil, nil, e.internal("data version", err)
		}
		if known {
			version = ver
		}
	}
	id := openKeyID(t, c, version)
	if version != "" {
		keys, ok, err := e.keys.get(ctx, id)
		if err != nil {
			return nil, nil, e.internal("released keys", err)
		}
		if ok {
			return keys, nil, nil
		}
	}
	m, restEps, err := e.selectionParams(s, t)
	if err != nil {
		return nil, nil, err
	}
	if explain {
		return nil, nil, &selectionExplain{table: t, column: c, m: m, rest: restEps}
	}
	type kn struct {
		k string
		n int64
	}
	var counts []kn
	if err := kc.KeyUnits(ctx, t, c, func(k string, n int64) error {
		counts = append(counts, kn{k, n})
		return nil
	}); err != nil {
		return nil, nil, e.internal("partition selection count", err)
	}
	var unit *budget.UnitBound
	if t.Unit != nil {
		unit = &budget.UnitBound{Column: t.Unit.Column, MaxRows: t.Unit.MaxRows, MaxGroups: t.Unit.MaxGroups, MaxRowsPerGroup: t.Unit.MaxRowsPerGroup}
	}
	strategy := fmt.Sprintf("partition selection on %s: %s", c, m)
	cost := budget.Cost{Epsilon: m.Epsilon, Rho: m.Rho, Delta: m.Delta}
	entry, err := e.charge(ctx, s, t, m.Kind, strategy, cost, sts, unit)
	if err != nil {
		return nil, nil, err
	}
	r := noise.NewRand()
	if e.selectionRand != nil {
		r = e.selectionRand()
	}
	var keys []string
	for _, x := range counts {
		if m.Keep(r, x.n) {
			keys = append(keys, x.k)
		}
	}
	slices.Sort(keys)
	if version != "" {
		// The selection is paid for: should the store fail, its keys are
		// released all the same, and only their reuse is lost.
		if stored, err := e.keys.put(ctx, id, entry.Seq, keys); err != nil {
			e.log.Warn("released keys not stored; a later batch selects anew", "table", t.Name, "column", c, "err", err)
		} else {
			keys = stored
		}
	}
	rest := *s
	outer := s.UserVar
	rest.UserVar = func(name string) (any, bool) {
		if name == VarEpsilon {
			return restEps, true
		}
		if outer == nil {
			return nil, false
		}
		return outer(name)
	}
	return keys, &rest, nil
}

// selectionExplain is what EXPLAIN shows for a batch that must first
// select an open column's keys: the measurement cannot be planned before
// the keys are known, so the explanation is the selection's.
type selectionExplain struct {
	table  *catalog.Table
	column string
	m      *selection.Mechanism
	rest   float64
}

func (x *selectionExplain) Error() string { return "partition selection to explain" }

func (x *selectionExplain) result() *Result {
	res := &Result{Columns: []Column{{Name: "property", Type: TypeString}, {Name: "value", Type: TypeString}}}
	add := func(k, v string) { res.Rows = append(res.Rows, []any{k, v}) }
	m := x.m
	add("table", x.table.Name)
	add("partition selection", fmt.Sprintf("GROUP BY %s: its keys are not yet released, so they are selected first", x.column))
	add("mechanism", m.Kind)
	add("keys per unit", fmt.Sprint(m.MaxGroups))
	add("threshold", fmt.Sprint(m.Threshold()))
	add("units for 50% release", fmt.Sprint(m.UnitsFor(0.5)))
	add("units for 99% release", fmt.Sprint(m.UnitsFor(0.99)))
	eps := m.Epsilon
	if m.Rho > 0 {
		add("selection rho", fmt.Sprintf("%.6g", m.Rho))
		eps = budget.EpsilonFor(budget.Cost{Rho: m.Rho}, x.table.Budget.Delta)
	}
	add("selection epsilon", fmt.Sprintf("%.6g", eps))
	add("selection delta", fmt.Sprintf("%g", m.Delta))
	add("measurement epsilon", fmt.Sprintf("%.6g (the rest of the batch's ε, over the released keys)", x.rest))
	return res
}
