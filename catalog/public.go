package catalog

import (
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxPublicRows bounds a public table's rows (inline, or read from its
// source). Public tables are dimensions (countries, categories, calendars)
// held in memory and scanned per domain cell when a join is compiled, so
// they must stay small.
const MaxPublicRows = 10_000

// PublicType is a public column's type.
type PublicType string

// Public column types.
const (
	PublicText    PublicType = "text"
	PublicInteger PublicType = "integer"
	PublicNumeric PublicType = "numeric"
)

// PublicTable is a small public dimension table (public_tables in the
// catalog). Its rows are public: analysts read them freely (SELECT * FROM
// countries), and a protected table may be joined to it on a domain column
// (see package parser), which makes each of its columns a function of the
// key column's cells.
type PublicTable struct {
	Name    string // name clients use, lower-case
	Columns []PublicColumn
	// Rows are the table's rows, each with one value per column. Inline
	// rows come from the catalog; a table with Source has none until
	// LoadPublicRows (package sources) reads them.
	Rows [][]PublicValue
	// Source and SourceTable name where the rows are read from ("" when
	// they are inline).
	Source, SourceTable string
}

// PublicColumn is one column of a public table.
type PublicColumn struct {
	Name string // lower-case
	Type PublicType
}

// PublicValue is one value of a public table: Text is its text (a number
// in decimal for integer and numeric columns) unless Null.
type PublicValue struct {
	Text string
	Null bool
}

// Column returns the index of the named column (case-insensitive), or -1.
func (t *PublicTable) Column(name string) int {
	for i, c := range t.Columns {
		if strings.EqualFold(c.Name, name) {
			return i
		}
	}
	return -1
}

// SQLType is the MySQL type clients see for the column.
func (c PublicColumn) SQLType() string {
	switch c.Type {
	case PublicInteger:
		return "bigint"
	case PublicNumeric:
		return "double"
	}
	return "varchar(255)"
}

// Value checks and normalises one value read for the column: integers and
// numbers must parse. It is used for inline rows and for rows read from a
// source.
func (c PublicColumn) Value(text string) (PublicValue, error) {
	switch c.Type {
	case PublicInteger:
		i, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
		if err != nil {
			return PublicValue{}, fmt.Errorf("%q is not an integer", text)
		}
		return PublicValue{Text: strconv.FormatInt(i, 10)}, nil
	case PublicNumeric:
		f, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
		if err != nil {
			return PublicValue{}, fmt.Errorf("%q is not a number", text)
		}
		return PublicValue{Text: strconv.FormatFloat(f, 'g', -1, 64)}, nil
	}
	return PublicValue{Text: text}, nil
}

// PublicTable returns the named public table (case-insensitive), or nil.
func (c *Catalog) PublicTable(name string) *PublicTable {
	for _, t := range c.PublicTables {
		if strings.EqualFold(t.Name, name) {
			return t
		}
	}
	return nil
}

// publicTables reads the "public_tables" section.
func (p *yamlReader) publicTables(n node, cat *Catalog, sources []string) {
	es, ok := p.entries(n, true)
	if !ok {
		return
	}
	for _, e := range es {
		if cat.Table(e.key) != nil {
			p.errorf(e.val.line, e.val.path, "a protected table is already called %s", e.key)
			continue
		}
		if t := p.publicTable(e, sources); t != nil {
			cat.PublicTables = append(cat.PublicTables, t)
		}
	}
}

func (p *yamlReader) publicTable(e entry, sources []string) *PublicTable {
	nameOK := p.name(e.val, e.key)
	f, ok := p.fields(e.val, "columns", "rows", "source", "source_table")
	if !ok {
		return nil
	}
	t := &PublicTable{Name: e.key}
	columnsOK := false
	if n, ok := f["columns"]; !ok {
		p.required(e.val, "columns")
	} else if ces, ok := p.entries(n, true); ok {
		columnsOK = len(ces) > 0
		if len(ces) == 0 {
			p.errorf(n.line, n.path, "at least one column is required")
		}
		for _, ce := range ces {
			columnsOK = p.name(ce.val, ce.key) && columnsOK
			if w, ok := p.word(ce.val, string(PublicText), string(PublicInteger), string(PublicNumeric)); ok {
				t.Columns = append(t.Columns, PublicColumn{Name: ce.key, Type: PublicType(w)})
			} else {
				columnsOK = false
			}
		}
	}
	rowsN, hasRows := f["rows"]
	srcN, hasSrc := f["source"]
	switch {
	case hasRows && hasSrc:
		p.errorf(e.val.line, e.val.path, "give rows (inline) or source (rows read from a source table), not both")
	case !hasRows && !hasSrc:
		p.errorf(e.val.line, join(e.val.path, "rows"), "required (or source: the source holding the rows)")
	case hasSrc:
		if s, ok := p.scalar(srcN); ok {
			t.Source = strings.ToLower(s)
			known := sources == nil
			for _, name := range sources {
				known = known || name == t.Source
			}
			if !known {
				p.errorf(srcN.line, srcN.path, "unknown source %q (declared: %s)", s, strings.Join(sources, ", "))
			}
		}
		t.SourceTable = t.Name
		if n, ok := f["source_table"]; ok {
			if s, ok := p.scalar(n); ok {
				if !sourceTable.MatchString(s) {
					p.errorf(n.line, n.path, "invalid table name %q: use letters, digits and underscores, optionally qualified as schema.table", s)
				}
				t.SourceTable = s
			}
		}
	case hasRows:
		if n, ok := f["source_table"]; ok {
			p.errorf(n.line, n.path, "only used with source")
		}
		if columnsOK {
			p.publicRows(rowsN, t)
		}
	}
	if !nameOK {
		return nil
	}
	return t
}

// publicRows reads inline rows: lists of scalars, one per column (null or
// ~ for NULL).
func (p *yamlReader) publicRows(n node, t *PublicTable) {
	rows, ok := p.list(n)
	if !ok {
		return
	}
	if len(rows) > MaxPublicRows {
		p.errorf(n.line, n.path, "%d rows: a public table holds at most %d", len(rows), MaxPublicRows)
		return
	}
	for _, r := range rows {
		vals, ok := p.list(r)
		if !ok {
			continue
		}
		if len(vals) != len(t.Columns) {
			p.errorf(r.line, r.path, "has %d values for %d columns", len(vals), len(t.Columns))
			continue
		}
		row := make([]PublicValue, len(vals))
		good := true
		for i, v := range vals {
			if v.y.Kind == yaml.ScalarNode && v.y.ShortTag() == "!!null" {
				row[i] = PublicValue{Null: true}
				continue
			}
			s, ok := p.scalar(v)
			if !ok {
				good = false
				continue
			}
			pv, err := t.Columns[i].Value(s)
			if err != nil {
				p.errorf(v.line, v.path, "column %s: %v", t.Columns[i].Name, err)
				good = false
				continue
			}
			row[i] = pv
		}
		if good {
			t.Rows = append(t.Rows, row)
		}
	}
}

// privateColumns reads a table's private_columns: names that must not also
// be domain columns.
func (p *yamlReader) privateColumns(n node, t *Table) {
	items, ok := p.list(n)
	if !ok {
		return
	}
	for _, it := range items {
		s, ok := p.scalar(it)
		if !ok {
			continue
		}
		name := strings.ToLower(s)
		if !p.name(it, name) {
			continue
		}
		switch {
		case t.Column(name) != nil:
			p.errorf(it.line, it.path, "%s is a domain column; a private column is one queries may never read", name)
		case t.IsPrivate(name):
			p.errorf(it.line, it.path, "duplicate private column %s", name)
		default:
			t.Private = append(t.Private, name)
		}
	}
}
