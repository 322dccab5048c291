package budget

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
)

// MechanismSpace is the Mechanism of the KindLimits entries that
// MapSpaces writes.
const MechanismSpace = "space"

// SpaceMapping says that the charges on Table written before the ledger
// knew privacy unit spaces (entries that name no space) count in Space.
type SpaceMapping struct {
	Table string `json:"table"`
	Space string `json:"space"`
}

// spacesOf is the spaces of a charge on tables that names none: each
// table's mapped space, or its own name.
func spacesOf(tables []string, m map[string]string) []string {
	out := make([]string, 0, len(tables))
	for _, t := range tables {
		if s, ok := m[t]; ok {
			t = s
		}
		out = append(out, t)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func spaceStrategy(m SpaceMapping) string { return "table=" + m.Table + " space=" + m.Space }

// ParseSpaceEntry decodes a KindLimits entry written by MapSpaces: Tables
// [table], Spaces [space], Mechanism MechanismSpace, Strategy
// "table=<table> space=<space>", no user, zero cost.
func ParseSpaceEntry(e Entry) (SpaceMapping, bool) {
	if e.Kind != KindLimits || e.Mechanism != MechanismSpace || len(e.Tables) != 1 || len(e.Spaces) != 1 || e.User != "" {
		return SpaceMapping{}, false
	}
	m := SpaceMapping{Table: e.Tables[0], Space: e.Spaces[0]}
	if e.Strategy != spaceStrategy(m) {
		return SpaceMapping{}, false
	}
	return m, true
}

// SpaceMap returns the space that each table mapped by MapSpaces counts
// in, for the entries that name no space. Tables it does not list count
// in a space named after themselves.
func (l *Ledger) SpaceMap(ctx context.Context) (map[string]string, error) {
	// One statement reads one snapshot: no transaction needed (Charge
	// calls this before each charge that names no space).
	m, err := spaceMapTx(ctx, l.db)
	if err != nil {
		return nil, fmt.Errorf("budget: space map: %w", err)
	}
	return m, nil
}

func spaceMapTx(ctx context.Context, tx querier) (map[string]string, error) {
	m := map[string]string{}
	err := scanEntries(ctx, tx, "SELECT "+entryColumns+" FROM entries WHERE kind = ? AND mechanism = ? ORDER BY seq",
		[]any{KindLimits, MechanismSpace}, func(e Entry, _ string) error {
			if sm, ok := ParseSpaceEntry(e); ok {
				if _, seen := m[sm.Table]; !seen { // the first mapping stands
					m[sm.Table] = sm.Space
				}
			}
			return nil
		})
	return m, err
}

// MapSpaces upgrades the accounting of a ledger written before privacy
// unit spaces. Such a ledger's charges name tables only, and each table
// was its own budget; under a catalog where tables share a space, the
// spends of the old entries must count in that space, or the people they
// protect would get a fresh budget. spaces gives each table's space in the
// catalog now in force.
//
// In one write transaction, for each table that appears in a charge naming
// no space, whose space in spaces is not its own name and which the ledger
// has not mapped yet, MapSpaces appends a zero-cost KindLimits entry (see
// ParseSpaceEntry) and then recomputes the spend of every space from the
// entries. The old entries are not touched: their hashes stay as they were,
// and the mapping is on the chain with them, so an auditor needs no catalog
// to recompute the spaces' spends. A table's first mapping stands: a later
// catalog that moves the table elsewhere changes where its new charges
// count, not the old ones. It returns the mappings it recorded.
func (l *Ledger) MapSpaces(ctx context.Context, spaces map[string]string) ([]SpaceMapping, error) {
	var out []SpaceMapping
	err := l.write(ctx, func(tx *sql.Tx) error {
		out = out[:0]
		m, err := spaceMapTx(ctx, tx)
		if err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT DISTINCT j.value FROM entries, `+jsonEach(l.pg(), "entries.tables_json", "j")+`
			WHERE entries.kind = ? AND entries.spaces_json = '' ORDER BY 1`, KindCharge)
		if err != nil {
			return fmt.Errorf("read tables: %w", err)
		}
		var legacy []string
		for rows.Next() {
			var t string
			if err := rows.Scan(&t); err != nil {
				rows.Close()
				return fmt.Errorf("read tables: %w", err)
			}
			legacy = append(legacy, t)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read tables: %w", err)
		}
		for _, t := range legacy {
			s, ok := spaces[t]
			if _, mapped := m[t]; mapped || !ok || s == "" || s == t {
				continue
			}
			sm := SpaceMapping{Table: t, Space: s}
			c, err := normaliseCharge(Charge{Tables: []string{t}, Spaces: []string{s}, Mechanism: MechanismSpace, Strategy: spaceStrategy(sm)}, false)
			if err != nil {
				return err
			}
			if _, err := l.appendEntry(ctx, tx, KindLimits, c); err != nil {
				return err
			}
			m[t] = s
			out = append(out, sm)
		}
		if len(out) == 0 {
			return nil
		}
		return rebuildSpaces(ctx, tx)
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("budget: map spaces: %w", err)
	}
	for _, sm := range out {
		l.log.InfoContext(ctx, "old charges mapped into a privacy unit space", "table", sm.Table, "space", sm.Space)
	}
	return out, nil
}

// replaySpent recomputes every scope's spend from the entries, in Seq order.
func replaySpent(ctx context.Context, tx *sql.Tx) (map[scope]Cost, error) {
	m, err := spaceMapTx(ctx, tx)
	if err != nil {
		return nil, err
	}
	sum := map[scope]Cost{}
	err = scanEntries(ctx, tx, "SELECT "+entryColumns+" FROM entries ORDER BY seq", nil, func(e Entry, _ string) error {
		accumulate(sum, e, m)
		return nil
	})
	return sum, err
}

// rebuildSpaces rewrites spent_spaces from the entries.
func rebuildSpaces(ctx context.Context, tx *sql.Tx) error {
	sum, err := replaySpent(ctx, tx)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM spent_spaces"); err != nil {
		return fmt.Errorf("rebuild spent_spaces: %w", err)
	}
	for k, c := range sum {
		if k.space == "" {
			continue
		}
		if err := writeSpent(ctx, tx, []scope{k}, func(scope) Cost { return c }); err != nil {
			return err
		}
	}
	return nil
}
