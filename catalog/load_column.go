package catalog

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// The columns: section of a table: each column's type and domain.

func (p *yamlReader) column(e entry) *Column {
	nameOK := p.name(e.val, e.key)
	f, ok := p.fields(e.val, "type", "min", "max", "width", "edges", "values", "null", "out_of_domain", "open")
	if !ok {
		return nil
	}
	c := &Column{Name: e.key}
	tn, ok := f["type"]
	if !ok {
		p.required(e.val, "type")
		return nil
	}
	typ, ok := p.word(tn, "integer", "numeric", "categorical", "date", "datetime", "timestamp", "text")
	if !ok {
		return nil
	}
	if on, has := f["open"]; has {
		w, good := p.word(on, "true", "false")
		b := w == "true"
		switch {
		case !good:
			return nil
		case typ != "integer" && typ != "text":
			p.errorf(on.line, on.path, "only integer columns are opened (a text column is open already)")
			return nil
		case b && typ == "integer":
			typ = "open integer"
		}
	}
	notFor := func(keys ...string) {
		for _, k := range keys {
			if n, ok := f[k]; ok {
				p.errorf(n.line, n.path, "not allowed for type %s", typ)
			}
		}
	}
	valid := true
	switch typ {
	case "text", "open integer":
		// An open column (open.go): no public list of values.
		c.Kind, c.Open, c.OpenInteger = Categorical, true, typ == "open integer"
		notFor("min", "max", "width", "edges", "values", "out_of_domain")
	case "integer":
		c.Kind = IntegerRange
		notFor("edges", "values")
		valid = p.intRange(e.val, f, c)
	case "numeric":
		c.Kind = Binned
		notFor("min", "max", "width", "values")
		valid = p.edges(e.val, f, c)
	case "categorical":
		c.Kind = Categorical
		notFor("min", "max", "width", "edges")
		valid = p.values(e.val, f, c)
	case "date", "datetime", "timestamp":
		c.Kind = TimeRange
		c.DateOnly = typ == "date"
		notFor("edges", "values")
		valid = p.timeRange(e.val, f, c)
	}

	c.Null = PolicyDrop
	nullN, hasNull := f["null"]
	if hasNull {
		w, ok := p.word(nullN, string(PolicyDrop), string(PolicyCell), string(PolicyOther))
		valid = valid && ok
		c.Null = Policy(w)
	}
	c.OutOfDomain = PolicyClamp
	if c.Kind == Categorical {
		c.OutOfDomain = PolicyDrop
	}
	if n, ok := f["out_of_domain"]; ok {
		w, ok := p.word(n, string(PolicyDrop), string(PolicyClamp), string(PolicyOther))
		if ok && w == string(PolicyClamp) && c.Kind == Categorical {
			p.errorf(n.line, n.path, "clamp is only allowed for integer, numeric, date and datetime columns (use drop or other)")
			ok = false
		}
		valid = valid && ok
		c.OutOfDomain = Policy(w)
	}
	if hasNull && c.Null == PolicyOther && c.OutOfDomain != PolicyOther {
		p.errorf(nullN.line, nullN.path, "other requires out_of_domain: other")
		valid = false
	}
	if c.Kind == Categorical && c.OutOfDomain == PolicyOther {
		for i, v := range c.Values {
			if v == "other" {
				p.errorf(e.val.line, fmt.Sprintf("%s.values[%d]", e.val.path, i), `"other" is the label of the out_of_domain cell; rename the value or use out_of_domain: drop`)
				valid = false
			}
		}
	}
	if valid && c.Size() > MaxColumnCells {
		p.errorf(e.val.line, e.val.path, "domain has %d cells; at most %d are allowed per column", c.Size(), MaxColumnCells)
		valid = false
	}
	if !valid || !nameOK {
		return nil
	}
	return c
}

func (p *yamlReader) intRange(col node, f map[string]node, c *Column) bool {
	minN, hasMin := f["min"]
	maxN, hasMax := f["max"]
	ok := true
	if !hasMin {
		p.required(col, "min")
		ok = false
	} else if c.Min, hasMin = p.integer(minN); !hasMin {
		ok = false
	}
	if !hasMax {
		p.required(col, "max")
		ok = false
	} else if c.Max, hasMax = p.integer(maxN); !hasMax {
		ok = false
	}
	if ok && c.Min > c.Max {
		p.errorf(minN.line, minN.path, "must be ≤ max (%d)", c.Max)
		ok = false
	}
	c.Width = 1
	if n, has := f["width"]; has {
		w, good := p.integer(n)
		switch {
		case !good:
			ok = false
		case w < 1:
			p.errorf(n.line, n.path, "must be ≥ 1")
			ok = false
		default:
			c.Width = w
		}
	}
	if ok && (c.Max-c.Min)/c.Width >= MaxColumnCells {
		p.errorf(col.line, col.path, "domain has more than %d bins; use a larger width", MaxColumnCells)
		ok = false
	}
	return ok
}

// timeRange reads a date or datetime column's min, max (times in UTC, as
// ParseTime reads them; a date column's are dates) and width (ParseWidth;
// default 1d; whole days or months for a date column, and a month width
// needs a min at the start of a month).
func (p *yamlReader) timeRange(col node, f map[string]node, c *Column) bool {
	ok := true
	var maxDateOnly bool
	read := func(key string) (int64, node, bool) {
		n, has := f[key]
		if !has {
			p.required(col, key)
			return 0, n, false
		}
		s, good := p.scalar(n)
		if !good {
			return 0, n, false
		}
		_, maxDateOnly, _ = ParseTime(s)
		sec, dateOnly, good := ParseTime(s)
		switch {
		case !good:
			p.errorf(n.line, n.path, "must be a time in UTC between the years 1000 and 9999, such as 2025-01-01 or 2025-01-01 00:00:00 (got %q)", s)
			return 0, n, false
		case c.DateOnly && !dateOnly:
			p.errorf(n.line, n.path, "must be a date such as 2025-01-01 for a date column (got %q)", s)
			return 0, n, false
		}
		return sec, n, true
	}
	var minN node
	var good bool
	if c.Min, minN, good = read("min"); !good {
		ok = false
	}
	if c.Max, _, good = read("max"); !good {
		ok = false
	} else if maxDateOnly {
		c.Max += 86400 - 1 // a max written as a date covers that day
	}
	if ok && c.Min > c.Max {
		p.errorf(minN.line, minN.path, "must be before max")
		ok = false
	}
	c.Width = 86400
	if n, has := f["width"]; has {
		s, good := p.scalar(n)
		if !good {
			return false
		}
		w, m, err := ParseWidth(s)
		switch {
		case err != nil:
			p.errorf(n.line, n.path, "%s", err.Error())
			return false
		case c.DateOnly && w%86400 != 0:
			p.errorf(n.line, n.path, "a date column's width is whole days or months (got %q)", s)
			return false
		}
		c.Width, c.Months = w, m
	}
	if !ok {
		return false
	}
	if c.Months > 0 {
		if t := time.Unix(c.Min, 0).UTC(); t.Day() != 1 || t.Hour() != 0 || t.Minute() != 0 || t.Second() != 0 {
			p.errorf(minN.line, minN.path, "a width in months needs a min at the start of a month (such as %s)", t.Format("2006-01")+"-01")
			return false
		}
	}
	if c.Months == 0 && (c.Max-c.Min)/c.Width >= MaxColumnCells {
		p.errorf(col.line, col.path, "domain has more than %d bins; use a larger width", MaxColumnCells)
		return false
	}
	return true
}

func (p *yamlReader) edges(col node, f map[string]node, c *Column) bool {
	n, has := f["edges"]
	if !has {
		p.required(col, "edges")
		return false
	}
	items, ok := p.list(n)
	if !ok {
		return false
	}
	if len(items) < 2 {
		p.errorf(n.line, n.path, "must have at least 2 entries (one bin needs two edges)")
		return false
	}
	if len(items) > MaxColumnCells+1 {
		p.errorf(n.line, n.path, "must have at most %d entries", MaxColumnCells+1)
		return false
	}
	for i, it := range items {
		x, good := p.number(it)
		if !good {
			ok = false
			continue
		}
		if i > 0 && ok && x <= c.Edges[i-1] {
			p.errorf(it.line, it.path, "must be greater than the previous edge (%s): edges must increase strictly", num(c.Edges[i-1]))
			ok = false
		}
		c.Edges = append(c.Edges, x)
	}
	return ok
}

func (p *yamlReader) values(col node, f map[string]node, c *Column) bool {
	n, has := f["values"]
	if !has {
		p.required(col, "values")
		return false
	}
	items, ok := p.list(n)
	if !ok {
		return false
	}
	if len(items) == 0 {
		p.errorf(n.line, n.path, "must not be empty")
		return false
	}
	if len(items) > MaxColumnCells {
		p.errorf(n.line, n.path, "must have at most %d entries", MaxColumnCells)
		return false
	}
	seen := make(map[string]int, len(items))
	for i, it := range items {
		if it.y.Kind == yaml.ScalarNode && it.y.ShortTag() == "!!null" {
			p.errorf(it.line, it.path, "must not be null (use null: cell to give NULL its own cell)")
			ok = false
			continue
		}
		v, good := p.scalar(it)
		if !good {
			ok = false
			continue
		}
		if j, dup := seen[v]; dup {
			p.errorf(it.line, it.path, "duplicate value %q (also values[%d])", v, j)
			ok = false
			continue
		}
		seen[v] = i
		c.Values = append(c.Values, v)
	}
	return ok
}
