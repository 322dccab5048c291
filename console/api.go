package console

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/dpproxy/dpproxy/budget"
)

// The JSON API behind the pages, under the same access rules. Every
// endpoint answers 401 with a Basic challenge to a request without valid
// credentials, 403 to a request the viewer's role may not make, and
// {"error": "..."} with the status on any failure.
//
//	GET  /api/budgets                 budgets: every scope (auditor) or the user's own (analyst)
//	GET  /api/ledger?user=&table=&kind=&since=&until=&before=&limit=
//	                                  a page of entries, newest first; "next" is the before= of the next page
//	GET  /api/spending?table=&user=   a table's charges per user and time bucket
//	GET  /api/verify                  audit verify as JSON (auditor)
//	GET  /api/catalog                 tables, domains, budgets
//	POST /api/explain                 {"query": "...", "epsilon": 0.5}: the plan and its cost; charges nothing

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v) //nolint:errcheck // the client went away
}

func writeJSONError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// fail answers an error: an accessError with its status and message, any
// other error as a logged 500 whose details stay in the log.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error, asJSON bool) {
	status, msg := http.StatusInternalServerError, "internal error"
	var ae *accessError
	if errors.As(err, &ae) {
		status, msg = ae.status, ae.msg
	} else {
		s.log.Error("console request failed", "path", r.URL.Path, "err", err)
	}
	if asJSON {
		writeJSONError(w, status, msg)
		return
	}
	http.Error(w, msg, status)
}

func (s *Server) apiBudgets(w http.ResponseWriter, r *http.Request, v *viewer) {
	b, err := s.budgets(r.Context(), s.cfg.Catalog(), v)
	if err != nil {
		s.fail(w, r, err, true)
		return
	}
	writeJSON(w, http.StatusOK, b)
}

func (s *Server) apiLedger(w http.ResponseWriter, r *http.Request, v *viewer) {
	q, err := ledgerQuery(r.URL.Query(), v)
	if err != nil {
		s.fail(w, r, err, true)
		return
	}
	q.Count = true
	p, err := s.cfg.Ledger.Page(r.Context(), q)
	if err != nil {
		s.fail(w, r, err, true)
		return
	}
	if p.Entries == nil {
		p.Entries = []budget.Entry{}
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) apiSpending(w http.ResponseWriter, r *http.Request, v *viewer) {
	q := r.URL.Query()
	sr, err := s.spending(r.Context(), s.cfg.Catalog(), v, q.Get("table"), q.Get("user"))
	if err != nil {
		s.fail(w, r, err, true)
		return
	}
	if sr.Points == nil {
		sr.Points = []budget.SpendPoint{}
	}
	writeJSON(w, http.StatusOK, sr)
}

func (s *Server) apiVerify(w http.ResponseWriter, r *http.Request, v *viewer) {
	rep, err := s.report(r.Context(), s.cfg.Catalog(), v)
	if err != nil {
		s.fail(w, r, err, true)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

func (s *Server) apiCatalog(w http.ResponseWriter, r *http.Request, v *viewer) {
	cat := s.cfg.Catalog()
	writeJSON(w, http.StatusOK, map[string]any{"database": cat.Database, "tables": catalogView(cat)})
}

func (s *Server) apiExplain(w http.ResponseWriter, r *http.Request, v *viewer) {
	var req explainRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 128<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeJSONError(w, http.StatusBadRequest, "the body must be a JSON object {\"query\": \"...\", \"epsilon\": 0.5}")
		return
	}
	res, err := s.explain(r.Context(), s.cfg.Catalog(), v, req)
	if err != nil {
		s.fail(w, r, err, true)
		return
	}
	status := http.StatusOK
	if res.Code != 0 {
		status = http.StatusUnprocessableEntity
	}
	writeJSON(w, status, res)
}
