package catalog

// OpenColumns lists t's open columns (Column.Open).
func (t *Table) OpenColumns() []*Column {
	var out []*Column
	for _, c := range t.Columns {
		if c.Open {
			out = append(out, c)
		}
	}
	return out
}

// WithValues returns a copy of t in which the open column named col is a
// categorical column over values (public: released keys, or literals a
// query names), with values outside them going where outOfDomain says
// (PolicyDrop or PolicyOther). The copy shares everything else with t.
func (t *Table) WithValues(col string, values []string, outOfDomain Policy) *Table {
	cp := *t
	cp.Columns = make([]*Column, len(t.Columns))
	for i, c := range t.Columns {
		if c.Open && c.Name == col {
			cc := *c
			cc.Open = false
			cc.Values = values
			cc.OutOfDomain = outOfDomain
			c = &cc
		}
		cp.Columns[i] = c
	}
	return &cp
}
