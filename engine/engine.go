package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/exec"
	"github.com/dpproxy/dpproxy/measure"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/planner"
	"github.com/dpproxy/dpproxy/postproc"
	"github.com/dpproxy/dpproxy/reuse"
)

// Counter builds a table's histogram over the product domain of some of its
// columns (row-major, last column fastest; package sources). The engine
// only reads the slice.
type Counter interface {
	Histogram(ctx context.Context, t *catalog.Table, cols []*catalog.Column) ([]float64, error)
}

// Config wires an Engine.
type Config struct {
	Catalog    *catalog.Catalog
	Ledger     *budget.Ledger
	Histograms Counter
	Logger     *slog.Logger
	// Answers persists released answers for reuse across restarts and
	// processes; nil keeps them in memory only.
	Answers AnswerBackend
	// Measurements stores every measurement for answering later batches
	// from them (known.go); nil keeps them in memory only.
	Measurements *measure.Store
	// PostProcess evaluates outer queries over released parts; nil builds
	// one. Building one resets go-mysql-server's process-wide status
	// counters (see postproc.Evaluator), so it is built with the engine,
	// before a front serves clients, and a reload passes the old engine's.
	PostProcess *postproc.Evaluator
}

// Engine answers DP statements. It is safe for concurrent use.
type Engine struct {
	cat    *catalog.Catalog
	ledger *budget.Ledger
	hist   Counter
	log    *slog.Logger

	stored *answerStore // released answers, re-released for free on an identical batch
	// planner caches optimised strategies by workload shape, so a repeated
	// dashboard query, or the accuracy target's search over ε, plans in
	// microseconds after the first time.
	planner *planner.Planner
	// public are the catalog's public tables as the parser joins them.
	public map[string]*parser.PublicTable
	// measures holds the measurements released so far (known.go); nil
	// when no store could be opened.
	measures *measure.Store
	// reuse decides how a batch is answered given the stored
	// measurements, and caches their solved systems.
	reuse *reuse.Policy
	// sampler, when not nil, replaces noise.NewRand as the source of every
	// measurement's noise and selection. Only the package's tests set it
	// (export_test.go, compiled into test binaries alone), to measure
	// without noise; production engines always draw from crypto/rand.
	sampler func() sampler
	// selectionRand, when not nil, replaces noise.NewRand as the source of
	// partition selection's decisions; only the package's tests set it
	// (export_test.go), to seed them.
	selectionRand func() *noise.Rand
	// keys are the keys partition selection released (open.go), kept
	// beside the measurements.
	keys *keyStore
	// post evaluates the outer queries of derived tables, CTEs and
	// UNIONs over their released parts (Config.PostProcess).
	post *postproc.Evaluator
}

// sampler is what a release draws from: measurement noise and the
// exponential mechanism's top-k (noise.Rand).
type sampler interface {
	exec.Sampler
	TopK(utilities []int64, k int, epsNum, epsDen uint64, sensitivity int64) []int
}

// newSampler returns the source of one release's randomness: a fresh
// noise.Rand over crypto/rand.
func (e *Engine) newSampler() sampler {
	if e.sampler != nil {
		return e.sampler()
	}
	return noise.NewRand()
}

// New returns an Engine.
func New(cfg Config) *Engine {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	pl := planner.New()
	pl.MaxBytes = cfg.Catalog.Cache.PlanBytes()
	ms := cfg.Measurements
	if ms == nil {
		var err error
		if ms, err = measure.Open(context.Background(), "", cfg.Catalog.Cache.MeasurementBytes()); err != nil {
			log.Warn("no measurement store; every batch is measured anew", "err", err)
			ms = nil
		}
	}
	post := cfg.PostProcess
	if post == nil {
		post = postproc.NewEvaluator()
	}
	return &Engine{cat: cfg.Catalog, ledger: cfg.Ledger, hist: cfg.Histograms, log: log, stored: newAnswerStore(cfg.Answers, cfg.Catalog.Cache.AnswerBytes(), log), planner: pl, measures: ms,
		reuse:  reuse.New(pl, EpsilonRange.Min, RhoRange.Min, solvedCacheBytes),
		public: parserPublicTables(cfg.Catalog), keys: &keyStore{store: ms},
		post: post}
}

// solvedCacheBytes bounds the solved stored-measurement systems kept in
// memory: a 1,024-cell domain's is about 16 MB.
const solvedCacheBytes = 64 << 20

// parserPublicTables converts the catalog's public tables for the parser.
func parserPublicTables(cat *catalog.Catalog) map[string]*parser.PublicTable {
	out := map[string]*parser.PublicTable{}
	for _, t := range cat.PublicTables {
		pt := &parser.PublicTable{Name: t.Name}
		for _, c := range t.Columns {
			pt.Columns = append(pt.Columns, c.Name)
			pt.Text = append(pt.Text, c.Type == catalog.PublicText)
		}
		for _, r := range t.Rows {
			row := make([]parser.Value, len(r))
			for i, v := range r {
				if v.Null {
					row[i] = parser.Value{Null: true}
				} else {
					row[i] = parser.Value{Lit: parser.Literal{Text: v.Text, Quoted: pt.Text[i]}}
				}
			}
			pt.Rows = append(pt.Rows, row)
		}
		out[t.Name] = pt
	}
	return out
}

// env is what the parser needs to know of the catalog.
func (e *Engine) env() parser.Env { return e.envAt(time.Time{}) }

// envAt is env with the request's time (NOW() is one time per request).
func (e *Engine) envAt(now time.Time) parser.Env {
	return parser.Env{Protected: e.protected, Columns: e.hasColumn, Private: e.isPrivate, Public: e.publicTable, Units: e.unitColumn, Now: now}
}

// isPrivate reports whether a column is one queries never read: a
// private column, or the privacy unit (which only COUNT(DISTINCT) names).
func (e *Engine) isPrivate(table, column string) bool {
	t := e.cat.Table(table)
	return t != nil && (t.IsPrivate(column) || t.IsUnitColumn(column))
}

func (e *Engine) publicTable(schema, table string) *parser.PublicTable {
	if schema != "" && !strings.EqualFold(schema, e.cat.Database) {
		return nil
	}
	return e.public[strings.ToLower(table)]
}

func (e *Engine) protected(schema, table string) bool {
	if schema != "" && !strings.EqualFold(schema, e.cat.Database) {
		return false
	}
	return e.cat.Table(table) != nil
}

// hasColumn reports whether a protected table declares the column; the
// parser resolves names with it so that an unknown column is 1054 before any
// refusal, as in MySQL. The privacy unit column exists (compile refuses it
// with 3900).
func (e *Engine) hasColumn(table, column string) bool {
	t := e.cat.Table(table)
	return t != nil && (t.Column(column) != nil || t.IsUnitColumn(column))
}

// unitBound is what the ledger records with a charge on t under opt (nil
// for row privacy): the unit, its bounds and the row-level calibration of
// the noise, and a top-k selection's ε and Δ.
func unitBound(t *catalog.Table, opt planner.Options, selEps float64, selSens int64) *budget.UnitBound {
	if t.Unit == nil {
		return nil
	}
	u := &budget.UnitBound{Column: t.Unit.Column, MaxRows: t.Unit.MaxRows, MaxGroups: t.Unit.MaxGroups, MaxRowsPerGroup: t.Unit.MaxRowsPerGroup,
		SelectionEpsilon: selEps, SelectionSensitivity: selSens}
	if opt.Noise != "" {
		cal := opt.Calibration()
		u.RowEpsilon, u.RowRho = cal.Epsilon, cal.Rho
	}
	if selEps == 0 {
		u.SelectionSensitivity = 0
	}
	return u
}

// Intercepts reports whether stmt references a protected table, so that the
// engine (not the schema-only database) must answer or refuse it.
func (e *Engine) Intercepts(stmt string) bool {
	sts, err := parser.ParseEnv(stmt, e.env())
	if err != nil {
		return true // a refusal about a protected table: the engine reports it
	}
	for _, s := range sts {
		if s.Kind != parser.KindPassthrough {
			return true
		}
	}
	return false
}

// Answer answers consecutive intercepted statements of one request. Runs of
// aggregate statements over the same table form one batch: one histogram,
// one measurement, one ledger charge.
func (e *Engine) Answer(ctx context.Context, s *Session, stmts []string) ([]*Result, error) {
	var parsed []*parser.Statement
	now := time.Now() // NOW() is one time for the whole request
	for _, text := range stmts {
		sts, err := parser.ParseEnv(text, e.envAt(now))
		if err != nil {
			return nil, err
		}
		for i := range sts {
			parsed = append(parsed, &sts[i])
		}
	}
	user := e.cat.User(s.User)
	if user == nil {
		return nil, parser.Errorf(parser.CodeAccessDenied, "Access denied for user '%s'", s.User)
	}
	parsed, comps, parts := expandParts(parsed)
	limit := func(st *parser.Statement, r *Result) *Result {
		if parts[st] {
			return r
		}
		return selectLimit(s, st, r)
	}
	var out []*Result
	for i := 0; i < len(parsed); {
		st := parsed[i]
		if st.Kind == parser.KindPassthrough {
			return nil, parser.Errorf(parser.CodeNotSupported, "a statement that does not read a protected table cannot share a request with DP queries; send it separately")
		}
		t, err := e.queryTable(ctx, st.Query)
		if err != nil {
			return nil, err
		}
		if err := compile.CheckUnit(t, st.Query); err != nil {
			return nil, err
		}
		switch st.Kind {
		case parser.KindEmpty:
			r, err := emptyResult(t, st.Query)
			if err != nil {
				return nil, err
			}
			out = append(out, limit(st, r))
			i++
			continue
		case parser.KindDomainList:
			to, err := e.openDomainList(ctx, s, user, t, st)
			if err != nil {
				return nil, err
			}
			r, err := domainList(to, st)
			if err != nil {
				return nil, err
			}
			out = append(out, limit(st, r))
			i++
			continue
		}
		if user.Role != catalog.RoleAnalyst {
			return nil, parser.Errorf(parser.CodeDPRefused, "user '%s' has role %s; only analysts run DP queries", user.Name, user.Role)
		}
		// A run of consecutive statements over one table is one batch
		// (never a top-k, which is measured alone); a run of EXPLAINs
		// explains the batch the same statements would form if run: one
		// plan, one cost, the explanation the result of each.
		explain := st.Kind == parser.KindExplain
		j := i + 1
		for j < len(parsed) && parsed[j].Kind == st.Kind && strings.EqualFold(parsed[j].Query.Table, t.Name) &&
			!looksTopK(st.Query) && !looksTopK(parsed[j].Query) {
			j++
		}
		run := parsed[i:j]
		tb, sb, err := e.openTable(ctx, s, t, run, explain)
		var sx *selectionExplain
		switch {
		case explain && errors.As(err, &sx):
			for r := sx.result(); i < j; i++ {
				out = append(out, r)
			}
			continue
		case err != nil:
			return nil, err
		case explain:
			r, err := e.explain(ctx, s, tb, run)
			if err != nil {
				return nil, err
			}
			for ; i < j; i++ {
				out = append(out, r)
			}
			continue
		}
		rs, err := e.batch(ctx, sb, tb, run)
		if err != nil {
			return nil, err
		}
		if len(rs) != len(run) {
			return nil, e.internal("batch", fmt.Errorf("%d results for %d statements", len(rs), len(run)))
		}
		for k, r := range rs {
			out = append(out, limit(run[k], r))
		}
		i = j
	}
	return e.foldParts(ctx, s, out, comps)
}

// selectLimit applies the session's sql_select_limit to the result of a
// SELECT without a LIMIT of its own, as MySQL does: last, after HAVING and
// ORDER BY, to the rows sent. An explicit LIMIT wins, even a larger one;
// EXPLAIN is not limited. Dropping rows of a released answer is
// post-processing: the charge is unchanged, and the stored answer (for
// reuse) keeps every row, so r is copied, never modified.
func selectLimit(s *Session, st *parser.Statement, r *Result) *Result {
	if s.SelectLimit == nil || st.Kind == parser.KindExplain || st.Query == nil || st.Query.Limit != nil {
		return r
	}
	n, ok := s.SelectLimit()
	if !ok || uint64(r.Len()) <= n {
		return r
	}
	return r.limited(int(n))
}

func toFloat(v any) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, true
	case int64:
		return float64(v), true
	case int:
		return float64(v), true
	case string:
		// The whole text must be a number: "0.1x" is not 0.1.
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		return f, err == nil
	}
	return 0, false
}

// limits are the budgets a charge on t must meet: those of t's privacy unit
// space, for the user and over all users (the catalog makes every table of
// a space declare the same, so any of them gives the space's; a join on the
// unit reads tables of one space only, unitjoin.go).
func (e *Engine) limits(user string, t *catalog.Table) []budget.Limit {
	return []budget.Limit{
		{Scope: budget.ScopeUserSpace, User: user, Space: t.Space(), Epsilon: t.Budget.PerUser, Delta: t.Budget.Delta, MaxDelta: t.Budget.Delta},
		{Scope: budget.ScopeSpace, Space: t.Space(), Epsilon: t.Budget.Total, Delta: t.Budget.Delta, MaxDelta: t.Budget.Delta},
	}
}

func digest(sts []*parser.Statement) string {
	texts := make([]string, len(sts))
	for i, st := range sts {
		texts[i] = st.Text
	}
	return QueryDigest(texts)
}

// QueryDigest is a ledger entry's query digest of a batch's statement
// texts: a hex SHA-256 of the normalised texts, each followed by a NUL.
// An auditor checks a replay record's texts against the entry with it.
func QueryDigest(texts []string) string {
	h := sha256.New()
	for _, t := range texts {
		h.Write([]byte(normalise(t)))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// normalise makes texts that differ only in case and spacing identical.
func normalise(s string) string {
	return strings.ToLower(strings.Join(strings.Fields(strings.TrimRight(strings.TrimSpace(s), ";")), " "))
}

func (e *Engine) batch(ctx context.Context, s *Session, t *catalog.Table, sts []*parser.Statement) ([]*Result, error) {
	p, err := e.prepare(ctx, s, t, sts)
	if err != nil {
		return nil, err
	}
	w := p.w
	switch p.route {
	case routeKnown:
		// Every answer is a fact about the declared domain (groups the WHERE
		// excludes by construction, COUNT 0, SUM NULL): exact, nothing
		// measured, nothing charged, no ledger entry — like LIMIT 0.
		out := make([]*Result, len(w.Queries))
		for q, qu := range w.Queries {
			out[q] = assemble(w, qu, nil, nil)
		}
		return out, nil
	case routeDistinct:
		return e.distinct(ctx, s, t, p, sts)
	case routeTopK:
		return e.topK(ctx, s, t, p, sts)
	case routeTree:
		return e.treeQuantile(ctx, s, t, p, sts)
	}
	opt, cost, plan := p.opt, p.cost, p.plan
	key := reuseKey(t, sts, opt)
	rs, fresh, err := e.stored.answer(ctx, key, func(ctx context.Context) ([]*Result, error) {
		// What the stored measurements already answer, and what to
		// measure (the accuracy target's plan, if any, or the session ε's;
		// at a smaller ε when stored measurements help).
		d, err := e.decide(ctx, s, t, w, opt, cost, plan)
		if err != nil {
			return nil, err
		}
		if d.Free != nil {
			return e.derive(ctx, s, t, w, d, sts)
		}
		plan := d.Plan
		// The histograms are built before the charge so a source failure
		// costs nothing: over the product domain, or for plans measured in
		// marginal space one per column set.
		counts, err := exec.Fetch(ctx, plan, e.hist)
		if err != nil {
			return nil, e.internal("histogram", err)
		}
		strategy := plan.Name
		if d.Combine {
			strategy = d.Pick.What() + "; answered with " + usedText(d.Joined)
		}
		entry, err := e.charge(ctx, s, t, string(plan.Options.Noise), withDigest(strategy, plan), d.Cost, sts, unitBound(t, plan.Options, 0, 0))
		if err != nil {
			return nil, err
		}
		e.recordReplay(ctx, s, t, sts, entry.Seq, opt, d.Combine, d.StoredIDs)
		ans, err := exec.MeasureCounts(plan, counts, e.newSampler())
		if err != nil {
			// Charged but not released: conservative, and logged as such.
			e.log.Error("measurement failed after charge; nothing released", "seq", entry.Seq, "err", err)
			return nil, e.internal("measure", err)
		}
		recs, _ := reuse.Records(d.Measured, plan, ans)
		var combined *reuse.Estimated
		if d.Combine {
			if es, ok := d.Combined(recs); ok {
				combined = es
			}
			if combined == nil {
				// Planned to combine, so the plan alone may miss the
				// target: measured, released alone, logged. (Unreachable:
				// the combination was solved on the same structure before
				// the charge.) A plan for only some of the queries cannot
				// answer alone: charged, nothing released.
				e.log.Error("combination with stored measurements failed; answering from the new measurement", "seq", entry.Seq)
				if d.Measured != w {
					return nil, e.internal("combine", fmt.Errorf("measurement of %d of %d queries did not combine", len(d.Measured.Queries), len(w.Queries)))
				}
			}
		}
		if e.keep(ctx, t, d.Version, recs, entry.Seq) {
			// The combined systems are the next batch's stored ones; a
			// batch answered alone has them built in the background.
			if combined != nil {
				e.reuse.Remember(d)
			} else {
				e.reuse.Fold(d, recs)
			}
		}
		out := make([]*Result, len(w.Queries))
		for q, qu := range w.Queries {
			if combined != nil {
				out[q] = assemble(w, qu, measuredEstimate(combined, q), nil)
				continue
			}
			out[q] = assemble(w, qu, measuredFrom(plan, ans, q), nil)
		}
		return out, nil
	})
	return e.released(ctx, s, t, sts, rs, fresh, err)
}

// released finishes a batch answered by answerStore.answer: a re-released
// answer gets its reuse entry, and every answer the statements' column
// names. Errors from the store that are not refusals are internal.
func (e *Engine) released(ctx context.Context, s *Session, t *catalog.Table, sts []*parser.Statement, rs []*Result, fresh bool, err error) ([]*Result, error) {
	if err != nil {
		var pe *parser.Error
		if errors.As(err, &pe) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
		return nil, e.internal("stored answers", err)
	}
	if !fresh {
		if err := e.recordReuse(ctx, s, t, sts); err != nil {
			return nil, err
		}
	}
	return named(rs, sts), nil
}

// charge records a batch's cost in the ledger before anything is released.
// An overspend is refused with 3901 and charges nothing.
func (e *Engine) charge(ctx context.Context, s *Session, t *catalog.Table, mechanism, strategy string, cost budget.Cost, sts []*parser.Statement, unit *budget.UnitBound) (budget.Entry, error) {
	entry, err := e.ledger.Charge(ctx, budget.Charge{
		User: s.User, ConnID: s.ConnID, Tables: t.JoinedTables(), Spaces: []string{t.Space()},
		Mechanism: mechanism, Strategy: strategy, Cost: cost, QueryDigest: digest(sts), Unit: unit,
	}, e.limits(s.User, t))
	if err != nil {
		var ex *budget.ExceededError
		if errors.As(err, &ex) {
			return entry, parser.Errorf(parser.CodeBudgetExceeded, "%s", ex.Error())
		}
		return entry, e.internal("ledger charge", err)
	}
	return entry, nil
}

// planError reports a planning failure: a batch too large even in
// marginal space is refused (3900, its message names only public sizes);
// anything else is internal.
func (e *Engine) planError(err error) error {
	var cells *planner.CellsError
	if errors.As(err, &cells) {
		return parser.Errorf(parser.CodeDPRefused, "%s", cells.Error())
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err // the request's context ended planning, as in released
	}
	return e.internal("plan", err)
}

func (e *Engine) internal(stage string, err error) error {
	e.log.Error("internal error; nothing released", "stage", stage, "err", err)
	return parser.Errorf(parser.CodeDPInternal, "dpproxy internal error during %s; nothing was released", stage)
}

// costEpsilon is a spend in the table's ε unit (see budget.EpsilonFor).
func costEpsilon(c budget.Cost, t *catalog.Table) float64 {
	return budget.EpsilonFor(c, t.Budget.Delta)
}
