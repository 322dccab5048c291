package budgetview

import (
	"context"
	"math"
	"sort"
	"strings"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
)

// Ledger is what the views read from the ledger.
type Ledger interface {
	// SpentSpace is one space's spend (see budget.Ledger.SpentSpace).
	SpentSpace(ctx context.Context, user, space string) (budget.Cost, error)
}

// CanSeeAll reports whether user may see every user's spending and the
// whole ledger: the catalog's auditors.
func CanSeeAll(cat *catalog.Catalog, user string) bool {
	u := cat.User(user)
	return user != "" && u != nil && u.Role == catalog.RoleAuditor
}

// Scope is one row of the auditor's view: a privacy unit space's total
// over all users (User "") or one user's budget in a space.
type Scope struct {
	Scope string `json:"scope"` // budget.ScopeSpace or budget.ScopeUserSpace
	User  string `json:"user,omitempty"`
	Space string `json:"space"`
	// Table lists the space's tables in the catalog, comma-separated (""
	// when the space is no longer in the catalog).
	Table string `json:"table"`
	// Limit is the catalog's limit in ε; nil when the space is no longer
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

// All is the auditor's view: for each privacy unit space (of the catalog
// or spent in), its total, then for each analyst of the catalog and each
// user who spent in it, their per-user budget, by space then user. spent
// is every scope's spend (budget.Ledger.Budgets recomputes it from the
// entries, budget.Ledger.SpentRows reads the aggregate); only its space
// rows are used (the catalog's budgets are per space).
func All(cat *catalog.Catalog, spent []budget.SpentRow) []Scope {
	type key struct{ user, space string }
	by := map[key]budget.Cost{}
	users := map[string]map[string]bool{} // space → users with a spend or a budget
	addUser := func(space, user string) {
		if users[space] == nil {
			users[space] = map[string]bool{}
		}
		users[space][user] = true
	}
	for _, r := range spent {
		if r.Space == "" {
			continue
		}
		by[key{r.User, r.Space}] = r.Cost
		if r.User != "" {
			addUser(r.Space, r.User)
		}
	}
	spaces := map[string]bool{}
	for _, sp := range cat.Spaces() {
		spaces[sp] = true
		for _, u := range cat.Users {
			if u.Role == catalog.RoleAnalyst {
				addUser(sp, u.Name)
			}
		}
	}
	for k := range by {
		spaces[k.space] = true
	}
	names := make([]string, 0, len(spaces))
	for n := range spaces {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []Scope
	row := func(scope, user, space, tables string, limit *float64, delta float64, c budget.Cost) Scope {
		s := Finite(budget.EpsilonFor(c, delta))
		r := Scope{Scope: scope, User: user, Space: space, Table: tables, Limit: limit, Delta: delta, Spent: s, Cost: c}
		if limit != nil {
			rem := *limit - s
			r.Remaining = &rem
		}
		return r
	}
	for _, name := range names {
		var total, perUser *float64
		var delta float64
		var tables []string
		if ts := cat.SpaceTables(name); len(ts) > 0 {
			t := ts[0] // the catalog makes a space's tables agree on its budgets
			total, perUser, delta = ptr(t.Budget.Total), ptr(t.Budget.PerUser), t.Budget.Delta
			for _, t := range ts {
				tables = append(tables, t.Name)
			}
		}
		list := strings.Join(tables, ",")
		out = append(out, row(budget.ScopeSpace, "", name, list, total, delta, by[key{"", name}]))
		us := make([]string, 0, len(users[name]))
		for u := range users[name] {
			us = append(us, u)
		}
		sort.Strings(us)
		for _, u := range us {
			out = append(out, row(budget.ScopeUserSpace, u, name, list, perUser, delta, by[key{u, name}]))
		}
	}
	return out
}

func ptr(f float64) *float64 { return &f }

// Own is one row of an analyst's view: their budget on one table, which
// is their budget in the table's privacy unit space (shared with the
// space's other tables).
type Own struct {
	Table     string  `json:"table"`
	Space     string  `json:"space"`
	Limit     float64 `json:"limit_epsilon"` // the space's per-user budget
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
		c, err := l.SpentSpace(ctx, user, t.Space())
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
		out = append(out, Own{Table: t.Name, Space: t.Space(), Limit: t.Budget.PerUser, Delta: t.Budget.Delta, Spent: s,
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
