package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/postproc"
)

// Statements over released DP results (parser.KindPostProcess): an
// aggregate derived table or CTE under an outer query, a UNION of aggregate
// queries. Their parts take the same path as every other statement of the
// request (expandParts puts them in its place, so parts over one table
// batch with each other and with the request's other statements: one
// measurement, one charge), and the outer query then runs on the parts'
// released rows. That is post-processing, so it charges nothing; EXPLAIN
// over such a statement explains its parts' batch and says so.

// composite is where one post-processing statement's parts sit in the
// expanded request.
type composite struct {
	at, n   int
	post    *parser.PostProcess
	explain bool
}

// expandParts replaces each post-processing statement (or EXPLAIN of one)
// by its parts; parts reports which statements are parts (not limited by
// sql_select_limit: only what the client sees is).
func expandParts(parsed []*parser.Statement) (out []*parser.Statement, comps []composite, parts map[*parser.Statement]bool) {
	for _, st := range parsed {
		if st.Post == nil || (st.Kind != parser.KindPostProcess && st.Kind != parser.KindExplain) {
			out = append(out, st)
			continue
		}
		if parts == nil {
			parts = map[*parser.Statement]bool{}
		}
		explain := st.Kind == parser.KindExplain
		comps = append(comps, composite{at: len(out), n: len(st.Post.Parts), post: st.Post, explain: explain})
		for i := range st.Post.Parts {
			p := st.Post.Parts[i]
			if explain && p.Kind == parser.KindAggregate {
				p.Kind = parser.KindExplain
			}
			parts[&p] = true
			out = append(out, &p)
		}
	}
	return out, comps, parts
}

// foldParts replaces each composite's part results in rs (aligned with the
// expanded request) by the composite's one result, cut to the session's
// sql_select_limit when the outer query has no LIMIT of its own.
func (e *Engine) foldParts(ctx context.Context, s *Session, rs []*Result, comps []composite) ([]*Result, error) {
	if len(comps) == 0 {
		return rs, nil
	}
	var out []*Result
	next := 0
	for _, c := range comps {
		out = append(out, rs[next:c.at]...)
		var r *Result
		var err error
		if c.explain {
			r = explainParts(c, rs[c.at:c.at+c.n])
		} else {
			r, err = e.postProcess(ctx, c.post, rs[c.at:c.at+c.n])
		}
		if err != nil {
			return nil, err
		}
		if !c.explain && !c.post.Limited && s.SelectLimit != nil {
			if n, ok := s.SelectLimit(); ok && uint64(r.Len()) > n {
				r = r.limited(int(n))
			}
		}
		out = append(out, r)
		next = c.at + c.n
	}
	return append(out, rs[next:]...), nil
}

// postProcess runs the outer query on the parts' released rows.
func (e *Engine) postProcess(ctx context.Context, post *parser.PostProcess, parts []*Result) (*Result, error) {
	tables := make([]postproc.Table, len(parts))
	for i, r := range parts {
		t := postproc.Table{Name: post.Tables[i], Columns: make([]postproc.Column, len(r.Columns)), Rows: r.AllRows()}
		for k, c := range r.Columns {
			t.Columns[k] = postproc.Column{Name: c.Name, Type: postprocType(c.Type)}
		}
		tables[i] = t
	}
	res, err := e.post.Eval(ctx, post.SQL, tables)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// The error is about the outer SQL and the released rows, both
		// of which the client has; nothing about the data is in it.
		return nil, parser.Errorf(parser.CodeNotSupported, "the query over the results of its aggregate subqueries failed: %v", err)
	}
	out := &Result{Columns: make([]Column, len(res.Columns)), Rows: res.Rows}
	for k, c := range res.Columns {
		out.Columns[k] = Column{Name: c.Name, Type: resultType(c.Type)}
	}
	return out, nil
}

func postprocType(t ColumnType) postproc.Type {
	switch t {
	case TypeInt64:
		return postproc.Int
	case TypeFloat64:
		return postproc.Float
	case TypeDate:
		return postproc.Date
	case TypeDatetime:
		return postproc.Datetime
	}
	return postproc.Text
}

func resultType(t postproc.Type) ColumnType {
	switch t {
	case postproc.Int:
		return TypeInt64
	case postproc.Float:
		return TypeFloat64
	case postproc.Date:
		return TypeDate
	case postproc.Datetime:
		return TypeDatetime
	}
	return TypeString
}

// explainParts is the EXPLAIN of a post-processing statement: its parts'
// explanations (statements batched together share one, shown once), then
// what is post-processing.
func explainParts(c composite, rs []*Result) *Result {
	res := &Result{Columns: []Column{{Name: "property", Type: TypeString}, {Name: "value", Type: TypeString}}}
	seen := map[*Result]bool{}
	for i, r := range rs {
		p := c.post.Parts[i]
		if p.Kind != parser.KindAggregate {
			res.Rows = append(res.Rows, []any{fmt.Sprintf("part %d", i+1), "answered from the declared domain, nothing measured: " + p.Text})
			continue
		}
		if seen[r] {
			continue
		}
		seen[r] = true
		res.Rows = append(res.Rows, []any{fmt.Sprintf("part %d", i+1), p.Text})
		res.Rows = append(res.Rows, r.AllRows()...)
	}
	res.Rows = append(res.Rows, []any{"post-processing", fmt.Sprintf("%s — computed from the released rows of the %s above, at no further privacy cost", strings.TrimSpace(c.post.SQL), plural(len(rs), "part"))})
	return res
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
