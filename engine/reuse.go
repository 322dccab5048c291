package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/planner"
)

// maxStored bounds the answers kept in memory for reuse; the oldest go
// first (a persistent backend keeps them all).
const maxStored = 10000

// answerStore keeps released answers so that a repeated query (same
// table definition, same parsed query, same privacy options) returns the
// identical noisy answer for free: re-releasing a released value is
// post-processing. Dashboards refreshing and BI tools syncing then cost
// nothing after the first time. Stored answers are not invalidated when
// the data changes: a repeat shows the answer as first released.
//
// It also merges requests in flight (flight.go): the first request for a
// key measures, the others wait for its answer.
type answerStore struct {
	mu      sync.Mutex
	byKey   map[string][]*Result
	order   []string
	flights map[string]*flight // keys being answered in this process
	backend AnswerBackend      // nil: memory only
	log     *slog.Logger
}

func newAnswerStore(backend AnswerBackend, log *slog.Logger) *answerStore {
	return &answerStore{byKey: map[string][]*Result{}, flights: map[string]*flight{}, backend: backend, log: log}
}

// rememberLocked keeps rs in memory under key (a.mu held).
func (a *answerStore) rememberLocked(key string, rs []*Result) {
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

// storedValue is one row value with its Go type kept: int64, float64,
// string, or NULL (a nil *storedValue).
type storedValue struct {
	I *int64   `json:"i,omitempty"`
	F *float64 `json:"f,omitempty"`
	S *string  `json:"s,omitempty"`
	X *string  `json:"x,omitempty"` // a float64 JSON cannot hold: "NaN", "+Inf", "-Inf"
}

type storedResult struct {
	Columns []Column         `json:"columns"`
	Rows    [][]*storedValue `json:"rows"`
}

// encodeResults encodes result sets for the backend, every value exactly
// (NaN and ±Inf too).
func encodeResults(rs []*Result) ([]byte, error) {
	out := make([]storedResult, len(rs))
	for i, r := range rs {
		out[i].Columns = r.Columns
		for _, row := range r.Rows {
			enc := make([]*storedValue, len(row))
			for c, v := range row {
				switch v := v.(type) {
				case nil:
				case int64:
					enc[c] = &storedValue{I: &v}
				case float64:
					if math.IsNaN(v) || math.IsInf(v, 0) {
						x := strconv.FormatFloat(v, 'g', -1, 64)
						enc[c] = &storedValue{X: &x}
					} else {
						enc[c] = &storedValue{F: &v}
					}
				case string:
					enc[c] = &storedValue{S: &v}
				default:
					return nil, fmt.Errorf("engine: cannot store a %T result value", v)
				}
			}
			out[i].Rows = append(out[i].Rows, enc)
		}
	}
	return json.Marshal(out)
}

func decodeResults(b []byte) ([]*Result, error) {
	var in []storedResult
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("decode stored answer: %w", err)
	}
	out := make([]*Result, len(in))
	for i, r := range in {
		res := &Result{Columns: r.Columns}
		for _, row := range r.Rows {
			vals := make([]any, len(row))
			for c, v := range row {
				switch {
				case v == nil:
				case v.I != nil:
					vals[c] = *v.I
				case v.F != nil:
					vals[c] = *v.F
				case v.S != nil:
					vals[c] = *v.S
				case v.X != nil:
					f, err := strconv.ParseFloat(*v.X, 64)
					if err != nil {
						return nil, fmt.Errorf("decode stored answer: %w", err)
					}
					vals[c] = f
				default:
					return nil, fmt.Errorf("decode stored answer: an empty value")
				}
			}
			res.Rows = append(res.Rows, vals)
		}
		out[i] = res
	}
	return out, nil
}

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
	fmt.Fprintf(&b, "%s|%s|%v|%v", t.Name, opt.Noise, opt.Epsilon, opt.Rho)
	fmt.Fprintf(&b, "|def(%q,%q,%v", t.Source, t.Noise, t.Budget.TopKSelectionShare)
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

// named returns the answers of a batch as these statements name their
// columns: a stored answer may have been released under other aliases.
// Rows are shared, never modified.
func named(stored []*Result, sts []*parser.Statement) []*Result {
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
	return out
}

// recordReuse puts a zero-cost reuse entry for a re-released answer on the
// ledger, group-committed in the background (budget.Ledger.RecordReuse):
// it costs nothing, so a crash that loses it loses no accounting.
func (e *Engine) recordReuse(ctx context.Context, s *Session, t *catalog.Table, sts []*parser.Statement) error {
	if err := e.ledger.RecordReuse(ctx, budget.Charge{
		User: s.User, ConnID: s.ConnID, Tables: []string{t.Name},
		Mechanism: "reuse", Strategy: "stored answer", QueryDigest: digest(sts),
	}); err != nil {
		return e.internal("ledger record", err)
	}
	return nil
}
