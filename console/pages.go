package console

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/budgetview"
	"github.com/dpproxy/dpproxy/catalog"
)

// The HTML pages: server-rendered with html/template from templates/,
// styled by static/console.css, both embedded in the binary. They need no
// JavaScript: filters are GET forms, pages are links, plots are <img>s of
// server-drawn SVG, bars are <meter>s.

//go:embed templates/*.html static/*
var assets embed.FS

var pageNames = []string{"login", "budgets", "ledger", "verify", "catalog", "explain"}

type pages struct{ t map[string]*template.Template }

func loadPages() (*pages, error) {
	funcs := template.FuncMap{
		"num":   format,
		"short": func(s string) string { return shorten(s, 12) },
		"time":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000") },
		"free":  free,
		"deref": func(f *float64) float64 { return *f },
		"high":  func(limit float64) float64 { return 0.8 * limit },
		"pct": func(spent, limit float64) string {
			if limit <= 0 {
				return "—"
			}
			return fmt.Sprintf("%.1f%%", 100*spent/limit)
		},
	}
	p := &pages{t: map[string]*template.Template{}}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		p.t[name] = t
	}
	return p, nil
}

func staticHandler() http.Handler {
	sub, _ := fs.Sub(assets, "static") // a constant path in the embedded tree
	fsrv := http.StripPrefix("/static/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=3600")
		fsrv.ServeHTTP(w, r)
	})
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// pageData is what every page's layout gets.
type pageData struct {
	Page    string
	Title   string
	Viewer  *viewer
	Explain bool // the EXPLAIN box is available
	Body    any
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, v *viewer, body any) {
	var buf bytes.Buffer
	title := strings.ToUpper(name[:1]) + name[1:]
	err := s.pages.t[name].ExecuteTemplate(&buf, "layout", pageData{Page: name, Title: title, Viewer: v,
		Explain: s.cfg.Explainer != nil, Body: body})
	if err != nil {
		s.fail(w, r, err, false)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes()) //nolint:errcheck // the client went away
}

// tableCard is one table on the budgets page.
type tableCard struct {
	Name, Noise string
	// Space is the table's privacy unit space; Shared its other tables,
	// which spend from the same budgets.
	Space       string
	Shared      []string
	Delta       float64
	Gaussian    bool
	Total       *budgetview.Scope  // auditor: the table's total
	Users       []budgetview.Scope // auditor: each user's budget
	Own         *budgetview.Own    // analyst: their own budget
	PlotEpsilon string
	PlotRho     string
}

func (s *Server) budgetsPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	cat := s.cfg.Catalog()
	b, err := s.budgets(r.Context(), cat, v)
	if err != nil {
		s.fail(w, r, err, false)
		return
	}
	var cards []*tableCard
	byName := map[string]*tableCard{}
	card := func(name string) *tableCard {
		if c, ok := byName[name]; ok {
			return c
		}
		c := &tableCard{Name: name, Space: name}
		if t := cat.Table(name); t != nil {
			c.Space = t.Space()
			for _, o := range cat.SpaceTables(c.Space) {
				if o != t {
					c.Shared = append(c.Shared, o.Name)
				}
			}
			c.Noise, c.Delta, c.Gaussian = string(t.Noise), t.Budget.Delta, t.Noise == catalog.Gaussian
			c.PlotEpsilon = "/plot/" + url.PathEscape(t.Name) + "/epsilon.svg"
			if c.Gaussian {
				c.PlotRho = "/plot/" + url.PathEscape(t.Name) + "/rho.svg"
			}
		}
		byName[name] = c
		cards = append(cards, c)
		return c
	}
	// A table's card shows its space's budgets (each table of a shared
	// space shows them); a space no longer in the catalog has a card of
	// its own.
	for _, t := range cat.Tables {
		card(t.Name)
	}
	for i := range b.Scopes {
		sc := &b.Scopes[i]
		cs := []*tableCard{}
		for _, t := range cat.SpaceTables(sc.Space) {
			cs = append(cs, card(t.Name))
		}
		if len(cs) == 0 {
			cs = append(cs, card(sc.Space))
		}
		for _, c := range cs {
			if sc.Scope == budget.ScopeSpace {
				c.Total = sc
			} else {
				c.Users = append(c.Users, *sc)
			}
		}
	}
	for i := range b.Budgets {
		card(b.Budgets[i].Table).Own = &b.Budgets[i]
	}
	s.render(w, r, http.StatusOK, "budgets", v, cards)
}

// ledgerData is the ledger browser.
type ledgerData struct {
	Query     budget.Query
	Filter    url.Values // the filters as given, to refill the form
	Page      budget.Page
	Users     []string // auditor: users to filter by
	Tables    []string
	Kinds     []string
	Mark      int64  // the entry to highlight (from the verify page)
	OlderURL  string // "" on the last page
	NewestURL string // "" on the first page
	Error     string
}

func (s *Server) ledgerPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	cat := s.cfg.Catalog()
	q := r.URL.Query()
	d := ledgerData{Filter: q, Kinds: entryKinds}
	for _, t := range cat.Tables {
		d.Tables = append(d.Tables, t.Name)
	}
	if v.Auditor {
		for _, u := range cat.Users {
			d.Users = append(d.Users, u.Name)
		}
	}
	d.Mark, _ = strconv.ParseInt(q.Get("mark"), 10, 64)
	lq, err := ledgerQuery(q, v)
	if err != nil {
		d.Error = err.Error()
		s.render(w, r, statusOf(err), "ledger", v, d)
		return
	}
	lq.Count = true
	d.Query = lq
	if d.Page, err = s.cfg.Ledger.Page(r.Context(), lq); err != nil {
		s.fail(w, r, err, false)
		return
	}
	filters := url.Values{}
	for k, vs := range q {
		if k != "before" && k != "mark" {
			filters[k] = vs
		}
	}
	if lq.Before > 0 {
		d.NewestURL = "/ledger?" + filters.Encode()
	}
	if d.Page.Next > 0 {
		filters.Set("before", strconv.FormatInt(d.Page.Next, 10))
		d.OlderURL = "/ledger?" + filters.Encode()
	}
	s.render(w, r, http.StatusOK, "ledger", v, d)
}

func statusOf(err error) int {
	if ae, ok := err.(*accessError); ok {
		return ae.status
	}
	return http.StatusInternalServerError
}

// verifyData is the verify page.
type verifyData struct {
	Report  budget.Report
	Elapsed time.Duration
	BadURL  string // the ledger page around the first bad entry
}

func (s *Server) verifyPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	start := time.Now()
	rep, err := s.report(r.Context(), s.cfg.Catalog(), v)
	if err != nil {
		if ae, ok := err.(*accessError); ok {
			s.render(w, r, ae.status, "verify", v, nil)
			return
		}
		s.fail(w, r, err, false)
		return
	}
	d := verifyData{Report: rep, Elapsed: time.Since(start).Round(time.Millisecond)}
	bad := rep.BadSeq
	if bad == 0 && rep.Heads != nil {
		bad = rep.Heads.BadSeq
	}
	if bad > 0 {
		d.BadURL = fmt.Sprintf("/ledger?before=%d&mark=%d#e%d", bad+10, bad, bad)
	}
	s.render(w, r, http.StatusOK, "verify", v, d)
}

func (s *Server) catalogPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	cat := s.cfg.Catalog()
	s.render(w, r, http.StatusOK, "catalog", v, struct {
		Database string
		Tables   []tableView
	}{cat.Database, catalogView(cat)})
}

// explainData is the EXPLAIN box.
type explainData struct {
	Query   string
	Epsilon string
	Tables  []string
	Result  *explainResult
	Error   string
}

func (s *Server) explainPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	cat := s.cfg.Catalog()
	d := explainData{}
	for _, t := range cat.Tables {
		d.Tables = append(d.Tables, t.Name)
	}
	if len(d.Tables) > 0 {
		d.Query = "SELECT COUNT(*) FROM " + d.Tables[0]
	}
	status := http.StatusOK
	if r.Method == http.MethodPost {
		d.Query, d.Epsilon = r.PostFormValue("query"), strings.TrimSpace(r.PostFormValue("epsilon"))
		req := explainRequest{Query: d.Query}
		if d.Epsilon != "" {
			f, err := strconv.ParseFloat(d.Epsilon, 64)
			if err != nil || !(f > 0) || math.IsInf(f, 0) {
				d.Error, status = "ε must be a positive number", http.StatusBadRequest
			}
			req.Epsilon = f
		}
		if d.Error == "" {
			res, err := s.explain(r.Context(), cat, v, req)
			switch {
			case err != nil:
				d.Error, status = err.Error(), statusOf(err)
			default:
				d.Result = &res
				if res.Code != 0 {
					status = http.StatusUnprocessableEntity
				}
			}
		}
	}
	s.render(w, r, status, "explain", v, d)
}
