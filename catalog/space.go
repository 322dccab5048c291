package catalog

import (
	"fmt"
	"slices"
	"strings"
)

// Space is the table's privacy unit space: the unit's Space if it names
// one, else the table's name. Budgets belong to spaces: every table of a
// space charges one budget over all analysts and one per analyst, so one
// person's loss adds up across the tables that hold rows about them. A
// row-privacy table (no unit) and a unit table that names no space are
// each a space of their own.
func (t *Table) Space() string {
	if t.Unit != nil && t.Unit.Space != "" {
		return t.Unit.Space
	}
	return t.Name
}

// SpaceTables returns the tables of the space, in catalog order.
func (c *Catalog) SpaceTables(space string) []*Table {
	var out []*Table
	for _, t := range c.Tables {
		if t.Space() == space {
			out = append(out, t)
		}
	}
	return out
}

// Spaces returns every table's space, once each, in the order of their
// first table.
func (c *Catalog) Spaces() []string {
	var out []string
	for _, t := range c.Tables {
		if !slices.Contains(out, t.Space()) {
			out = append(out, t.Space())
		}
	}
	return out
}

// SpaceOf maps every table to its space.
func (c *Catalog) SpaceOf() map[string]string {
	m := make(map[string]string, len(c.Tables))
	for _, t := range c.Tables {
		m[t.Name] = t.Space()
	}
	return m
}

// checkSpaces refuses a catalog whose spaces are ambiguous. A space's
// budget is its tables' budget block: their total, per_user and delta (the
// budgets of the space, over all analysts, per analyst, and in δ) must be
// equal, or which one holds would depend on the table a query names. (The
// per-query keys may differ: they say what one batch on that table
// spends.) A space can not hold a row-privacy table: its neighbouring
// datasets differ by one row, not one unit. And a table's name can only be
// the name of its own space: a unit table naming another table as its
// space would join that table's space by a name that says otherwise.
func (p *yamlReader) checkSpaces(tables []*Table) {
	first := map[string]*Table{}
	byName := map[string]*Table{}
	for _, t := range tables {
		byName[t.Name] = t
	}
	for _, t := range tables {
		sp := t.Space()
		n := p.spaceNodes[t]
		if o := byName[sp]; o != nil && o != t {
			if o.Unit == nil {
				p.errorf(n.line, n.path, "space %q is table %s, which has row privacy (no privacy_unit): a space holds units, so a row-privacy table is a space of its own; name another space", sp, o.Name)
				continue
			}
			if o.Space() != sp {
				p.errorf(n.line, n.path, "space %q is the name of table %s, which is in space %q: a table's name can only name its own space", sp, o.Name, o.Space())
				continue
			}
		}
		f, ok := first[sp]
		if !ok {
			first[sp] = t
			continue
		}
		var diff []string
		for _, d := range []struct {
			key  string
			a, b float64
		}{{"total", f.Budget.Total, t.Budget.Total}, {"per_user", f.Budget.PerUser, t.Budget.PerUser}, {"delta", f.Budget.Delta, t.Budget.Delta}} {
			if d.a != d.b {
				diff = append(diff, fmt.Sprintf("%s %s here, %s on %s", d.key, num(d.b), num(d.a), f.Name))
			}
		}
		if len(diff) > 0 {
			p.errorf(n.line, n.path, "tables %s and %s are in privacy unit space %q, which has one budget: their budget's total, per_user and delta must be equal (%s)",
				f.Name, t.Name, sp, strings.Join(diff, "; "))
		}
	}
}
