package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/engine"
	"github.com/dpproxy/dpproxy/parser"
)

// The EXPLAIN box: what a query would cost, before it is run.
//
// The query goes to the engine exactly as the MySQL front sends a client's
// `EXPLAIN <query>`: one statement, answered for the viewer's user, with
// the ε the form sets as the session's @dp_epsilon. The engine plans an
// EXPLAIN and charges nothing; to make sure nothing else reaches it, the
// console parses the text first and sends it only if it is exactly one
// EXPLAIN statement over a protected table (a second statement, a plain
// SELECT or anything else is refused here). A console over a read-only
// ledger (`dpproxy console`) could not charge even if it tried.

type explainRequest struct {
	Query   string  `json:"query"`
	Epsilon float64 `json:"epsilon,omitempty"` // @dp_epsilon for the plan; 0: the user's default
}

type explainResult struct {
	Statement string      `json:"statement"`
	Rows      [][2]string `json:"rows,omitempty"` // property, value
	Code      int         `json:"code,omitempty"` // the MySQL error code of a refusal
	Error     string      `json:"error,omitempty"`
}

var explainPrefix = regexp.MustCompile(`(?i)^\s*(explain|describe|desc)\b`)

func (s *Server) explain(ctx context.Context, cat *catalog.Catalog, v *viewer, req explainRequest) (explainResult, error) {
	if s.cfg.Explainer == nil {
		return explainResult{}, &accessError{status: http.StatusNotFound,
			msg: "EXPLAIN is available when the console runs beside the proxy (dpproxy serve --http) or over a catalog"}
	}
	text := strings.TrimSpace(req.Query)
	for strings.HasSuffix(text, ";") {
		text = strings.TrimSpace(strings.TrimSuffix(text, ";"))
	}
	if text == "" {
		return explainResult{}, badRequest("write a query to explain, e.g. SELECT COUNT(*) FROM t")
	}
	if len(text) > 64<<10 {
		return explainResult{}, badRequest("the query is longer than 64 KiB")
	}
	if req.Epsilon < 0 {
		return explainResult{}, badRequest("epsilon must be positive")
	}
	stmt := text
	if !explainPrefix.MatchString(stmt) {
		stmt = "EXPLAIN " + stmt
	}
	res := explainResult{Statement: stmt}
	protected := func(schema, table string) bool {
		return (schema == "" || strings.EqualFold(schema, cat.Database)) && cat.Table(table) != nil
	}
	sts, err := parser.Parse(stmt, protected)
	if err != nil {
		return refusal(res, err, s)
	}
	if len(sts) != 1 || sts[0].Kind != parser.KindExplain {
		res.Code = parser.CodeNotSupported
		res.Error = "the EXPLAIN box takes one aggregate query over a protected table, e.g. SELECT COUNT(*) FROM " + firstTable(cat)
		return res, nil
	}
	sess := &engine.Session{User: v.Name, UserVar: func(name string) (any, bool) {
		if name == engine.VarEpsilon && req.Epsilon > 0 {
			return req.Epsilon, true
		}
		return nil, false
	}}
	out, err := s.cfg.Explainer.Answer(ctx, sess, []string{stmt})
	if err != nil {
		return refusal(res, err, s)
	}
	if len(out) != 1 {
		return res, fmt.Errorf("console: explain: %d results for one statement", len(out))
	}
	for _, row := range out[0].Rows {
		if len(row) >= 2 {
			res.Rows = append(res.Rows, [2]string{fmt.Sprint(row[0]), fmt.Sprint(row[1])})
		}
	}
	return res, nil
}

// refusal puts a parser or engine refusal (with its MySQL code) into the
// result; any other error is the caller's.
func refusal(res explainResult, err error, s *Server) (explainResult, error) {
	var pe *parser.Error
	if errors.As(err, &pe) && pe.Code > 0 {
		res.Code, res.Error = pe.Code, pe.Message
		return res, nil
	}
	s.log.Error("explain failed", "err", err)
	return res, errors.New("internal error while planning; nothing was charged")
}

func firstTable(cat *catalog.Catalog) string {
	if len(cat.Tables) > 0 {
		return cat.Tables[0].Name
	}
	return "t"
}
