package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/internal/cache"
	"github.com/dpproxy/dpproxy/internal/flight"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/planner"
)

// answerStore keeps released answers so that a repeated query (same
// table definition, same parsed query, same privacy options) returns the
// identical noisy answer for free: re-releasing a released value is
// post-processing. Dashboards refreshing and BI tools syncing then cost
// nothing after the first time. Stored answers are not invalidated when
// the data changes: a repeat shows the answer as first released.
//
// In memory the store is bounded in bytes (the catalog's cache.answers),
// least recently used first; the backend keeps every answer. It also
// merges requests in flight (flight.go): the first request for a key
// measures, the others wait for its answer.
type answerStore struct {
	mem     *cache.LRU[string, []*Result]
	flights flight.Group[string, answered] // keys being answered in this process
	backend AnswerBackend                  // nil: memory only
	log     *slog.Logger
}

func newAnswerStore(backend AnswerBackend, limit int64, log *slog.Logger) *answerStore {
	return &answerStore{mem: cache.New[string, []*Result](limit), backend: backend, log: log}
}

// remember keeps rs in memory under key: the first answer stays, and one
// larger than the bound lives in the backend only.
func (a *answerStore) remember(key string, rs []*Result) {
	var n int64 = 128 + int64(len(key))
	for _, r := range rs {
		n += r.bytes()
	}
	a.mem.Add(key, rs, n)
}

// answerSemantics versions what a stored answer means. 2: a query's
// answer no longer depends on the other queries of its batch (dropped
// values), and sets empty by construction are answered exactly; answers
// stored under version 1 are not re-released.
const answerSemantics = 2

// reuseKey identifies a batch by its parsed queries — so comments, case,
// spacing and quoting do not matter — and its privacy options. Output
// names are left out: they are re-applied from the statement on reuse.
//
// The table's definition (source, noise, top-k share, every column's
// domain and policies) is part of the key, so a stored answer never
// outlives the catalog it was computed under. The key is a SHA-256 of
// that canonical text.
func reuseKey(t *catalog.Table, sts []*parser.Statement, opt planner.Options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "semantics %d|%s|%s|%v|%v", answerSemantics, t.Name, opt.Noise, opt.Epsilon, opt.Rho)
	fmt.Fprintf(&b, "|def(%q,%q,%v", t.Source, t.Noise, t.Budget.TopKSelectionShare)
	if t.Unit != nil { // another unit or bound is another truncated table
		fmt.Fprintf(&b, ",unit %s", t.Unit)
	}
	for _, c := range t.Columns {
		fmt.Fprintf(&b, ",%+v", *c)
	}
	b.WriteString(")")
	for _, st := range sts {
		b.WriteString("|")
		canonQuery(&b, st.Query)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}

func canonQuery(b *strings.Builder, q *parser.Query) {
	b.WriteString("select(")
	for _, it := range q.Select {
		canonItem(b, it)
		b.WriteString(",")
	}
	b.WriteString(")where(")
	canonPred(b, q.Where)
	fmt.Fprintf(b, ")group%q%s having(", q.GroupBy, canonAny(q.GroupExprs))
	canonPred(b, q.Having)
	b.WriteString(")order(")
	for _, o := range q.OrderBy {
		fmt.Fprintf(b, "%d/%d/%q/%v/%s/%s/", o.SelectIndex, o.Agg, o.Column, o.Desc, canonAny(o.Arg), canonAny(o.Key))
		if o.Expr != nil {
			canonExpr(b, o.Expr)
		}
		b.WriteString(",")
	}
	b.WriteString(")limit(")
	if q.Limit != nil {
		fmt.Fprint(b, *q.Limit)
	}
	b.WriteString(")")
}

func canonItem(b *strings.Builder, it parser.SelectItem) {
	fmt.Fprintf(b, "item(%d,%q,%d,%s,%s", it.Agg, it.Column, it.Bar, canonAny(it.Arg), canonAny(it.Key))
	if it.Agg == parser.AggQuantile {
		fmt.Fprintf(b, ",q=%v", it.Quantile)
	}
	if it.Expr != nil {
		canonExpr(b, it.Expr)
	}
	b.WriteString(")")
}

// canonAny prints expressions and predicates of columns: they are values
// (no pointers), so %#v is canonical; literals keep their case (a
// difference only costs a repeat its reuse).
func canonAny(v any) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%#v", v)
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
	case e.Func != "":
		fmt.Fprintf(b, "%s(", e.Func)
		for _, a := range e.Args {
			canonExpr(b, a)
			b.WriteString(",")
		}
		b.WriteString(")")
	case e.IsStr:
		fmt.Fprintf(b, "%q", e.Str)
	case e.Null:
		b.WriteString("NULL")
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
		b.WriteString(canonAny(p))
	}
}

// named returns the answers of a batch as these statements name their
// columns: a stored answer may have been released under other aliases.
// Rows are shared, never modified.
func named(stored []*Result, sts []*parser.Statement) []*Result {
	out := make([]*Result, len(stored))
	for i, r := range stored {
		cp := &Result{Columns: append([]Column(nil), r.Columns...), Rows: r.Rows, table: r.table}
		for c := range cp.Columns {
			if c < len(sts[i].Query.Select) {
				cp.Columns[c].Name = sts[i].Query.Select[c].Alias
			}
		}
		out[i] = cp
	}
	return out
}

// recordReuse puts a zero-cost reuse entry for a re-released answer on the
// ledger, group-committed in the background (budget.Ledger.RecordReuse):
// it costs nothing, so a crash that loses it loses no accounting.
func (e *Engine) recordReuse(ctx context.Context, s *Session, t *catalog.Table, sts []*parser.Statement) error {
	if err := e.ledger.RecordReuse(ctx, budget.Charge{
		User: s.User, ConnID: s.ConnID, Tables: t.JoinedTables(),
		Mechanism: "reuse", Strategy: "stored answer", QueryDigest: digest(sts),
	}); err != nil {
		return e.internal("ledger record", err)
	}
	return nil
}
