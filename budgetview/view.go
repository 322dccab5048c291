package budgetview

import (
	"context"
	"math"
	"sort"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
)

// Ledger is what the views read from the ledger.
type Ledger interface {
	// Spent is one scope's spend (see budget.Ledger.Spent).
	Spent(ctx context.Context, user, table string) (budget.Cost, error)
}

// CanSeeAll reports whether user may see every user's spending and the
// whole ledger: the catalog's auditors.
func CanSeeAll(cat *catalog.Catalog, user string) bool {
	u := cat.User(user)
	return user != "" && u != nil && u.Role == catalog.RoleAuditor
}

// Scope is one row of the auditor's view: a table's total over all users
// (User "") or one user's budget on a table.
type Scope struct {
	Scope string `json:"scope"` // budget.ScopeTable or budget.ScopeUserTable
	User  string `json:"user,omitempty"`
	Table string `json:"table"`
	// Limit is the catalog's limit in ε; nil when the table is no longer
	// in the catalog.
	Limit *float64 `json:"limit_epsilon"`
	Delta float64  `json:"delta"`
	// Spent is the spend as ε at Delta (the largest float64 for a ρ spend
	// with no δ, which MySQL clients can read).
	Spent float64 `json:"spent_epsilon"`
	// Remaining is Limit − Spent, negative if a limit was lowered below the
	// spend; nil with Limit.
	Remaining *float64    `json:"remaining_epsilon"`
	Cost      budget.Cost `json:"spent"` // the spend's pure-ε and ρ parts
}

// All is the auditor's view: for each table (of the catalog or spent on),
// its total, then for each analyst of the catalog and each user who spent
// on it, their per-user budget, by table then user. spent is every scope's
// spend (budget.Ledger.Budgets recomputes it from the entries,
// budget.Ledger.SpentRows reads the aggregate); user totals across tables
// are left out (the catalog has no such limit).
func All(cat *catalog.Catalog, spent []budget.SpentRow) []Scope {
	type key struct{ user, table string }
	by := map[key]budget.Cost{}
	users := map[string]map[string]bool{} // table → users with a spend or a budget
	addUser := func(table, user string) {
		if users[table] == nil {
			users[table] = map[string]bool{}
		}
		users[table][user] = true
	}
	for _, r := range spent {
		if r.Table == "" {
			continue
		}
		by[key{r.User, r.Table}] = r.Cost
		if r.User != "" {
			addUser(r.Table, r.User)
		}
	}
	tables := map[string]bool{}
	for _, t := range cat.Tables {
		tables[t.Name] = true
		for _, u := range cat.Users {
			if u.Role == catalog.RoleAnalyst {
				addUser(t.Name, u.Name)
			}
		}
	}
	for k := range by {
		tables[k.table] = true
	}
	names := make([]string, 0, len(tables))
	for n := range tables {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []Scope
	row := func(scope, user, table string, limit *float64, delta float64, c budget.Cost) Scope {
		s := Finite(budget.EpsilonFor(c, delta))
		r := Scope{Scope: scope, User: user, Table: table, Limit: limit, Delta: delta, Spent: s, Cost: c}
		if limit != nil {
			rem := *limit - s
			r.Remaining = &rem
		}
		return r
	}
	for _, name := range names {
		var total, perUser *float64
		var delta float64
		if t := cat.Table(name); t != nil {
			total, perUser, delta = ptr(t.Budget.Total), ptr(t.Budget.PerUser), t.Budget.Delta
		}
		out = append(out, row(budget.ScopeTable, "", name, total, delta, by[key{"", name}]))
		us := make([]string, 0, len(users[name]))
		for u := range users[name] {
			us = append(us, u)
		}
		sort.Strings(us)
		for _, u := range us {
			out = append(out, row(budget.ScopeUserTable, u, name, perUser, delta, by[key{u, name}]))
		}
	}
	return out
}

func ptr(f float64) *float64 { return &f }

// Own is one row of an analyst's view: their budget on one table.
type Own struct {
	Table     string  `json:"table"`
	Limit     float64 `json:"limit_epsilon"` // the table's per-user budget
	Delta     float64 `json:"delta"`
	Spent     float64 `json:"spent_epsilon"`     // ε at Delta
	Remaining float64 `json:"remaining_epsilon"` // Limit − Spent, never negative
	// Default is the ε of a batch when the session sets none; Max the most
	// one batch may spend (0: no cap beyond the budgets).
	Default float64     `json:"default_epsilon"`
	Max     float64     `json:"max_epsilon,omitempty"`
	Cost    budget.Cost `json:"spent"`
	// RemainingDelta is the δ budget (Delta) less the δ partition
	// selection spent (Cost.Delta), never negative; DeltaPerQuery the δ of
	// one selection unless the session sets @dp_delta.
	RemainingDelta float64 `json:"remaining_delta"`
	DeltaPerQuery  float64 `json:"delta_per_query"`
}

// Mine is the analyst's view: user's own budget on every table of the
// catalog, from the ledger's spent aggregate (which every charge checks).
// It shows nothing of what other users spent, and is empty for a user who
// is not an analyst.
func Mine(ctx context.Context, cat *catalog.Catalog, l Ledger, user string) ([]Own, error) {
	u := cat.User(user)
	if u == nil || u.Role != catalog.RoleAnalyst {
		return nil, nil
	}
	var out []Own
	for _, t := range cat.Tables {
		c, err := l.Spent(ctx, user, t.Name)
		if err != nil {
			return nil, err
		}
		s := Finite(budget.EpsilonFor(c, t.Budget.Delta))
		def := t.Budget.DefaultPerQuery
		if u.DefaultEpsilon > 0 {
			def = u.DefaultEpsilon
		}
		m := t.Budget.MaxPerQuery
		if u.MaxEpsilon > 0 && (m == 0 || u.MaxEpsilon < m) {
			m = u.MaxEpsilon
		}
		out = append(out, Own{Table: t.Name, Limit: t.Budget.PerUser, Delta: t.Budget.Delta, Spent: s,
			Remaining: math.Max(0, t.Budget.PerUser-s), Default: def, Max: m, Cost: c,
			RemainingDelta: math.Max(0, t.Budget.Delta-c.Delta), DeltaPerQuery: t.Budget.DeltaPerQuery})
	}
	return out, nil
}

// Finite maps +Inf (a ρ spend with no δ) to the largest float64, which
// MySQL clients and JSON can carry.
func Finite(f float64) float64 {
	if math.IsInf(f, 1) {
		return math.MaxFloat64
	}
	return f
}
