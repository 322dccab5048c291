package engine

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
)

// Live is an Engine whose catalog budgets can be changed while it serves:
// the Backend that the MySQL front is given. Reload builds a new Engine
// over the same ledger and sources and swaps it in.
//
// A reload waits for the batches in progress (each holds a read lock for
// the whole of Answer, charge included) and holds back new ones until the
// changed limits are recorded in the ledger, so that in this process every
// charge made under the old limits precedes their KindLimits entries on the
// hash chain and every later charge is checked against the new limits.
// (Processes sharing a ledger reload separately: each on its own signal.)
type Live struct {
	mu  sync.RWMutex
	eng *Engine
}

// NewLive wraps e.
func NewLive(e *Engine) *Live { return &Live{eng: e} }

// Intercepts is Engine.Intercepts of the current engine.
func (l *Live) Intercepts(stmt string) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.eng.Intercepts(stmt)
}

// Answer is Engine.Answer of the current engine; a reload waits for it.
func (l *Live) Answer(ctx context.Context, s *Session, stmts []string) ([]*Result, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.eng.Answer(ctx, s, stmts)
}

// Catalog returns the catalog in force. It must not be modified.
func (l *Live) Catalog() *catalog.Catalog {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.eng.cat
}

// Limits lists a catalog's budget rules as the ledger records them (see
// budget.RecordLimits): for each privacy unit space, its total over all
// users (ScopeSpace) and its per-user budget (ScopeUserSpace with User "":
// every user in the space separately), each with the space's δ. The
// catalog makes the tables of a space agree on these, so the first table
// gives them. They are the rules behind the limits Engine passes to each
// charge.
func Limits(cat *catalog.Catalog) []budget.Limit {
	out := make([]budget.Limit, 0, 2*len(cat.Tables))
	for _, sp := range cat.Spaces() {
		t := cat.SpaceTables(sp)[0]
		out = append(out,
			budget.Limit{Scope: budget.ScopeSpace, Space: sp, Epsilon: t.Budget.Total, Delta: t.Budget.Delta, MaxDelta: t.Budget.Delta},
			budget.Limit{Scope: budget.ScopeUserSpace, Space: sp, Epsilon: t.Budget.PerUser, Delta: t.Budget.Delta, MaxDelta: t.Budget.Delta})
	}
	return out
}

// ReloadResult says what a Reload did.
type ReloadResult struct {
	// Changes are the limits that changed, as recorded in the ledger.
	Changes []budget.LimitChange
	// Ignored lists the differences of the new catalog that a reload does
	// not apply (they need a restart): the database name, sources, tables
	// added or removed, a table's source, noise, columns or private
	// columns, the public tables, users added or removed or whose password
	// or role changed, the server section.
	Ignored []string
}

// SyncLimits records, at start-up, the limits of the catalog in force that
// differ from those the ledger last recorded for the same scopes (a catalog
// edited while no proxy ran), and the first value of every scope the
// ledger has no record of (see budget.RecordLimits). First it maps the
// tables of charges written before privacy unit spaces into their spaces
// in this catalog (see budget.Ledger.MapSpaces), so that the spaces'
// budgets count those charges.
func (l *Live) SyncLimits(ctx context.Context) ([]budget.LimitChange, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	mapped, err := l.eng.ledger.MapSpaces(ctx, l.eng.cat.SpaceOf())
	if err != nil {
		return nil, err
	}
	for _, m := range mapped {
		l.eng.log.Info("charges written before privacy unit spaces now count in their table's space", "table", m.Table, "space", m.Space)
	}
	return l.eng.ledger.RecordLimits(ctx, Limits(l.eng.cat), nil)
}

// Reload applies next's budgets: each table's budget block (total,
// per_user, default_per_query, max_per_query, delta, top-k share), the
// users' default_epsilon and max_epsilon, and the ledger section. Other
// differences are listed in ReloadResult.Ignored and left as they are. Each
// changed limit (see Limits) is recorded in the ledger as a KindLimits entry
// before any batch runs under it; if recording fails nothing changes.
func (l *Live) Reload(ctx context.Context, next *catalog.Catalog) (ReloadResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.eng
	merged, ignored := mergeBudgets(old.cat, next)
	changes, err := old.ledger.RecordLimits(ctx, Limits(merged), Limits(old.cat))
	if err != nil {
		return ReloadResult{Ignored: ignored}, fmt.Errorf("reload: %w", err)
	}
	// The old engine's stores go in through Config, so New opens no
	// throwaway in-memory store that nothing would close.
	l.eng = New(Config{Catalog: merged, Ledger: old.ledger, Histograms: old.hist, Logger: old.log, Measurements: old.measures, PostProcess: old.post})
	// Released answers stay released: a repeat after a reload is still free.
	// (A changed ε default gives repeats other options, so they are measured anew.)
	l.eng.stored = old.stored
	l.eng.planner = old.planner // strategies depend on workload shapes, not on budgets
	// Measurements (old.measures, above) are keyed by table definition
	// and data version, and so are released keys.
	l.eng.keys = old.keys
	old.log.Info("catalog reloaded", "path", next.Path, "limits_changed", len(changes), "ignored", len(ignored))
	for _, c := range changes {
		old.log.Info("limit changed", "scope", c.Limit.Scope, "space", c.Limit.Space, "user", c.Limit.User,
			"epsilon", c.Limit.Epsilon, "previous_epsilon", c.Previous.Epsilon, "delta", c.Limit.Delta)
	}
	for _, s := range ignored {
		old.log.Warn("catalog change not applied until restart", "change", s)
	}
	return ReloadResult{Changes: changes, Ignored: ignored}, nil
}

// mergeBudgets returns a copy of cur with next's budgets, and the
// differences it leaves out.
func mergeBudgets(cur, next *catalog.Catalog) (*catalog.Catalog, []string) {
	var ignored []string
	out := *cur
	out.Path = next.Path
	out.Ledger = next.Ledger
	if cur.Database != next.Database {
		ignored = append(ignored, fmt.Sprintf("database name %s → %s", cur.Database, next.Database))
	}
	if !reflect.DeepEqual(cur.Sources, next.Sources) {
		ignored = append(ignored, "sources")
	}
	if cur.Server != next.Server {
		ignored = append(ignored, "server settings")
	}
	if cur.State != next.State {
		ignored = append(ignored, "state (where the ledger, answers and measurements are kept)")
	}
	if !samePublicTables(cur.PublicTables, next.PublicTables) {
		ignored = append(ignored, "public tables")
	}
	out.Tables = make([]*catalog.Table, len(cur.Tables))
	for i, t := range cur.Tables {
		c := *t
		out.Tables[i] = &c
		nt := next.Table(t.Name)
		switch {
		case nt == nil:
			ignored = append(ignored, "table "+t.Name+" removed")
		case nt.Source != t.Source || nt.SourceTable != t.SourceTable || nt.Noise != t.Noise || !reflect.DeepEqual(nt.Columns, t.Columns) || !slices.Equal(nt.Private, t.Private):
			ignored = append(ignored, "table "+t.Name+": source, noise, columns or private columns (its budget is not changed either)")
		case nt.Space() != t.Space():
			ignored = append(ignored, "table "+t.Name+": privacy unit space "+t.Space()+" → "+nt.Space()+" (its budget is not changed either)")
		default:
			c.Budget = nt.Budget
		}
	}
	// A space has one budget: if the changes applied leave its tables
	// disagreeing (some of them were not applied), none is.
	for _, sp := range out.Spaces() {
		ts := out.SpaceTables(sp)
		for _, x := range ts[1:] {
			if x.Budget.Total != ts[0].Budget.Total || x.Budget.PerUser != ts[0].Budget.PerUser || x.Budget.Delta != ts[0].Budget.Delta {
				for _, y := range ts {
					y.Budget = cur.Table(y.Name).Budget
				}
				ignored = append(ignored, "space "+sp+": budget (not every table of the space could take the new one)")
				break
			}
		}
	}
	for _, nt := range next.Tables {
		if cur.Table(nt.Name) == nil {
			ignored = append(ignored, "table "+nt.Name+" added")
		}
	}
	out.Users = make([]*catalog.User, len(cur.Users))
	for i, u := range cur.Users {
		c := *u
		out.Users[i] = &c
		nu := next.User(u.Name)
		switch {
		case nu == nil:
			ignored = append(ignored, "user "+u.Name+" removed")
		case nu.PasswordHash != u.PasswordHash || nu.Role != u.Role:
			ignored = append(ignored, "user "+u.Name+": password or role")
		default:
			c.DefaultEpsilon, c.MaxEpsilon = nu.DefaultEpsilon, nu.MaxEpsilon
			// Read at each login (mysqlfront/admission.go).
			c.MaxUserConnections = nu.MaxUserConnections
		}
	}
	for _, nu := range next.Users {
		if cur.User(nu.Name) == nil {
			ignored = append(ignored, "user "+nu.Name+" added")
		}
	}
	return &out, ignored
}

// samePublicTables compares two catalogs' public tables as declared: the
// rows of a table read from a source are not compared (next's are not
// loaded).
func samePublicTables(a, b []*catalog.PublicTable) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := *a[i], *b[i]
		if x.Source != "" {
			x.Rows, y.Rows = nil, nil
		}
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}
