package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/budgetview"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/engine"
)

// The data behind both the pages and the JSON API, with the access rule
// applied once, here: an auditor sees every scope and entry, an analyst
// only their own (budgetview.Mine; entries whose user is theirs).

// accessError is a request the viewer may not make (403) or got wrong (400).
type accessError struct {
	status int
	msg    string
}

func (e *accessError) Error() string { return e.msg }

func forbidden(format string, args ...any) error {
	return &accessError{status: http.StatusForbidden, msg: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) error {
	return &accessError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// budgetsView is /api/budgets: View "all" with Scopes for auditors, "own"
// with Budgets for analysts.
type budgetsView struct {
	User    string             `json:"user"`
	View    string             `json:"view"`
	Scopes  []budgetview.Scope `json:"scopes,omitempty"`
	Budgets []budgetview.Own   `json:"budgets,omitempty"`
}

func (s *Server) budgets(ctx context.Context, cat *catalog.Catalog, v *viewer) (budgetsView, error) {
	if v.Auditor {
		spent, err := s.cfg.Ledger.SpentRows(ctx)
		if err != nil {
			return budgetsView{}, err
		}
		return budgetsView{User: v.Name, View: "all", Scopes: budgetview.All(cat, spent)}, nil
	}
	own, err := budgetview.Mine(ctx, cat, s.cfg.Ledger, v.Name)
	if err != nil {
		return budgetsView{}, err
	}
	if own == nil {
		own = []budgetview.Own{}
	}
	return budgetsView{User: v.Name, View: "own", Budgets: own}, nil
}

// Entry kinds the ledger browser knows. KindDerived entries (answers
// derived from stored measurements) cost nothing, like reuses.
const kindDerived = budget.KindDerived

var entryKinds = []string{budget.KindCharge, budget.KindReuse, kindDerived, budget.KindLimits}

// free reports whether an entry kind never costs budget.
func free(kind string) bool { return kind == budget.KindReuse || kind == kindDerived }

// ledgerQuery reads the ledger browser's filters from a URL query:
// user, table, kind, since, until (RFC 3339, or a date and time as an HTML
// datetime-local field sends it, in UTC), before (a sequence number) and
// limit. An analyst's query is limited to their own entries; asking for
// another user's is refused.
func ledgerQuery(q url.Values, v *viewer) (budget.Query, error) {
	var lq budget.Query
	lq.User, lq.Table, lq.Kind = strings.TrimSpace(q.Get("user")), strings.TrimSpace(q.Get("table")), q.Get("kind")
	if !v.Auditor {
		if lq.User != "" && lq.User != v.Name {
			return lq, forbidden("user %s may see only their own ledger entries", v.Name)
		}
		lq.User = v.Name
	}
	if lq.Kind != "" && !contains(entryKinds, lq.Kind) {
		return lq, badRequest("kind must be one of %s", strings.Join(entryKinds, ", "))
	}
	var err error
	if lq.Since, err = parseTime(q.Get("since")); err != nil {
		return lq, badRequest("since: %v", err)
	}
	if lq.Until, err = parseTime(q.Get("until")); err != nil {
		return lq, badRequest("until: %v", err)
	}
	if s := q.Get("before"); s != "" {
		if lq.Before, err = strconv.ParseInt(s, 10, 64); err != nil || lq.Before < 0 {
			return lq, badRequest("before must be a non-negative integer")
		}
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > budget.MaxPageSize {
			return lq, badRequest("limit must be an integer from 1 to %d", budget.MaxPageSize)
		}
		lq.Limit = n
	}
	return lq, nil
}

func parseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time (use RFC 3339, e.g. 2026-11-21T16:28:21Z)", s)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// spending is the series behind a table's plot: every user's charges for an
// auditor, the analyst's own otherwise.
func (s *Server) spending(ctx context.Context, cat *catalog.Catalog, v *viewer, table, user string) (budget.Series, error) {
	if cat.Table(table) == nil {
		return budget.Series{}, &accessError{status: http.StatusNotFound, msg: fmt.Sprintf("no table %q in the catalog", table)}
	}
	if !v.Auditor {
		if user != "" && user != v.Name {
			return budget.Series{}, forbidden("user %s may see only their own spending", v.Name)
		}
		user = v.Name
	}
	return s.series.get(ctx, s.cfg.Ledger, cat.Table(table).Name, user)
}

// report is `audit verify` for auditors.
func (s *Server) report(ctx context.Context, cat *catalog.Catalog, v *viewer) (budget.Report, error) {
	if !v.Auditor {
		return budget.Report{}, forbidden("only auditors verify the ledger")
	}
	return s.cfg.Ledger.Report(ctx, engine.Limits(cat), s.cfg.PublicKey, s.cfg.HeadsPath)
}
