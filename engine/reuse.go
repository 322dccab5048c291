package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/planner"
)

// maxStored bounds the answers kept for reuse; the oldest go first.
const maxStored = 10000

// answerStore keeps released answers so that a repeated query (same
// table, same parsed query, same privacy options) returns the identical
// noisy answer for free: re-releasing a released value is post-processing.
// Dashboards refreshing and BI tools syncing then cost nothing after the
// first time. Stored answers are not invalidated when the data changes:
// a repeat shows the answer as first released.
type answerStore struct {
	mu    sync.Mutex
	byKey map[string][]*Result
	order []string
}

func newAnswerStore() *answerStore { return &answerStore{byKey: map[string][]*Result{}} }

func (a *answerStore) get(key string) ([]*Result, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.byKey[key]
	return r, ok
}

func (a *answerStore) put(key string, rs []*Result) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.byKey[key]; ok {
		return
	}
	if len(a.order) >= maxStored {
		delete(a.byKey, a.order[0])
		a.order = a.order[1:]
	}
	a.byKey[key] = rs
	a.order = append(a.order, key)
}

// reuseKey identifies a batch by its parsed queries — so comments, case,
// spacing and quoting do not matter — and its privacy options. Output
// names are left out: they are re-applied from the statement on reuse.
func reuseKey(t *catalog.Table, sts []*parser.Statement, opt planner.Options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%s|%v|%v", t.Name, opt.Noise, opt.Epsilon, opt.Rho)
	for _, st := range sts {
		b.WriteString("|")
		canonQuery(&b, st.Query)
	}
	return b.String()
}

func canonQuery(b *strings.Builder, q *parser.Query) {
	b.WriteString("select(")
	for _, it := range q.Select {
		canonItem(b, it)
		b.WriteString(",")
	}
	b.WriteString(")where(")
	canonPred(b, q.Where)
	fmt.Fprintf(b, ")group%q having(", q.GroupBy)
	canonPred(b, q.Having)
	b.WriteString(")order(")
	for _, o := range q.OrderBy {
		fmt.Fprintf(b, "%d/%d/%q/%v,", o.SelectIndex, o.Agg, o.Column, o.Desc)
	}
	b.WriteString(")limit(")
	if q.Limit != nil {
		fmt.Fprint(b, *q.Limit)
	}
	b.WriteString(")")
}

func canonItem(b *strings.Builder, it parser.SelectItem) {
	fmt.Fprintf(b, "item(%d,%q,%d", it.Agg, it.Column, it.Bar)
	if it.Expr != nil {
		canonExpr(b, it.Expr)
	}
	b.WriteString(")")
}

func canonExpr(b *strings.Builder, e *parser.AggExpr) {
	switch {
	case e.Op != 0:
		fmt.Fprintf(b, "(%c ", e.Op)
		canonExpr(b, e.Left)
		b.WriteString(" ")
		canonExpr(b, e.Right)
		b.WriteString(")")
	case e.Leaf != nil:
		canonItem(b, *e.Leaf)
	default:
		fmt.Fprintf(b, "%v", e.Number)
	}
}

func canonLit(b *strings.Builder, l parser.Literal) { fmt.Fprintf(b, "%q", strings.ToLower(l.Text)) }

func canonPred(b *strings.Builder, p parser.Pred) {
	switch p := p.(type) {
	case nil:
		b.WriteString("true")
	case parser.And:
		b.WriteString("and(")
		for _, x := range p.Terms {
			canonPred(b, x)
			b.WriteString(",")
		}
		b.WriteString(")")
	case parser.Or:
		b.WriteString("or(")
		for _, x := range p.Terms {
			canonPred(b, x)
			b.WriteString(",")
		}
		b.WriteString(")")
	case parser.Not:
		b.WriteString("not(")
		canonPred(b, p.Term)
		b.WriteString(")")
	case parser.Const:
		fmt.Fprintf(b, "const(%v)", p.Value)
	case parser.Compare:
		fmt.Fprintf(b, "cmp(%q,%d,", p.Column, p.Op)
		canonLit(b, p.Value)
		b.WriteString(")")
	case parser.In:
		fmt.Fprintf(b, "in(%q,%v,", p.Column, p.Negated)
		for _, v := range p.Values {
			canonLit(b, v)
			b.WriteString(",")
		}
		b.WriteString(")")
	case parser.Between:
		fmt.Fprintf(b, "between(%q,%v,", p.Column, p.Negated)
		canonLit(b, p.Lo)
		b.WriteString(",")
		canonLit(b, p.Hi)
		b.WriteString(")")
	case parser.IsNull:
		fmt.Fprintf(b, "isnull(%q,%v)", p.Column, p.Negated)
	case parser.AggCompare:
		b.WriteString("aggcmp(")
		canonItem(b, p.Item)
		fmt.Fprintf(b, ",%d,%v)", p.Op, p.Value)
	default:
		fmt.Fprintf(b, "%T(%+v)", p, p)
	}
}

// reuse returns the stored answers of an identical earlier batch, renamed
// as this batch's statements name their columns, and records the zero-cost
// re-release in the ledger.
func (e *Engine) reuse(ctx context.Context, s *Session, t *catalog.Table, sts []*parser.Statement, key string) ([]*Result, bool, error) {
	stored, ok := e.stored.get(key)
	if !ok {
		return nil, false, nil
	}
	if _, err := e.ledger.Record(ctx, budget.KindReuse, budget.Charge{
		User: s.User, ConnID: s.ConnID, Tables: []string{t.Name},
		Mechanism: "reuse", Strategy: "stored answer", QueryDigest: digest(sts),
	}); err != nil {
		return nil, false, e.internal("ledger record", err)
	}
	out := make([]*Result, len(stored))
	for i, r := range stored {
		cp := &Result{Columns: append([]Column(nil), r.Columns...), Rows: r.Rows}
		for c := range cp.Columns {
			if c < len(sts[i].Query.Select) {
				cp.Columns[c].Name = sts[i].Query.Select[c].Alias
			}
		}
		out[i] = cp
	}
	return out, true, nil
}
