package engine

import (
	"context"
	"errors"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/parser"
)

// unitColumn is a protected table's privacy unit column for the parser
// ("" for none), which joins protected tables on it.
func (e *Engine) unitColumn(table string) string {
	t := e.cat.Table(table)
	if t == nil || t.Unit == nil {
		return ""
	}
	return t.Unit.Column
}

// unitJoinChecker is what a Counter may also do: check, in the source's
// schema, that a joined table's unit columns have one type (sources.Set
// does). An error with a Refused method is a refusal.
type unitJoinChecker interface {
	CheckUnitJoin(ctx context.Context, t *catalog.Table) error
}

// queryTable is the protected table q reads: a catalog table, or for a join
// of protected tables on their unit the joined table catalog.JoinTables
// builds (refused with 3900 across spaces, sources, noise families or unit
// types). Its bounds are the first table's; a charge on it is a charge on
// every joined table (limits, charge), which is the space's once budgets
// are per space.
func (e *Engine) queryTable(ctx context.Context, q *parser.Query) (*catalog.Table, error) {
	if q.UnitJoin == nil {
		t := e.cat.Table(q.Table)
		if t == nil {
			return nil, parser.Errorf(parser.CodeNoSuchTable, "Table '%s.%s' doesn't exist", e.cat.Database, q.Table)
		}
		return t, nil
	}
	j := &catalog.UnitJoin{}
	for _, jt := range q.UnitJoin.Tables {
		j.Tables = append(j.Tables, catalog.JoinedTable{Table: jt.Table, Left: jt.Left, On: jt.On})
	}
	t, err := catalog.JoinTables(e.cat, j)
	var je *catalog.JoinError
	if errors.As(err, &je) {
		return nil, parser.Errorf(parser.CodeDPRefused, "%s", je.Error())
	}
	if err != nil {
		return nil, e.internal("join", err)
	}
	if c, ok := e.hist.(unitJoinChecker); ok {
		if err := c.CheckUnitJoin(ctx, t); err != nil {
			var r interface{ Refused() bool }
			if errors.As(err, &r) && r.Refused() {
				return nil, parser.Errorf(parser.CodeDPRefused, "%s", err.Error())
			}
			return nil, e.internal("join", err)
		}
	}
	return t, nil
}
