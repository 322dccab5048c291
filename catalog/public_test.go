package catalog

import (
	"fmt"
	"strings"
	"testing"
)

const publicBase = `database: d
sources:
  main: {driver: sqlite, path: p.sqlite}
tables:
  t:
    budget: {total: 1, per_user: 1, default_per_query: 0.1}
    %s
    columns:
      c: {type: categorical, values: [a, b]}
public_tables:
%s`

func TestPublicTables(t *testing.T) {
	cat, err := Parse("catalog.yaml", []byte(fmt.Sprintf(publicBase, "private_columns: [User_ID]", `  dims:
    columns: {code: text, n: integer, x: numeric}
    rows:
      - [a, 1, 2.5]
      - [b, ~, 1e3]
  src: {source: main, source_table: s.dims, columns: {code: text}}
`)))
	if err != nil {
		t.Fatal(err)
	}
	d := cat.PublicTable("DIMS")
	if d == nil || len(d.Rows) != 2 || d.Column("x") != 2 || d.Columns[1].SQLType() != "bigint" {
		t.Fatalf("dims: %+v", d)
	}
	if got := d.Rows[1]; got[1] != (PublicValue{Null: true}) || got[2].Text != "1000" {
		t.Errorf("row 2: %+v", got)
	}
	if s := cat.PublicTable("src"); s == nil || s.Source != "main" || s.SourceTable != "s.dims" || s.Rows != nil {
		t.Errorf("src: %+v", s)
	}
	if tb := cat.Table("t"); !tb.IsPrivate("user_id") || tb.IsPrivate("c") {
		t.Errorf("private columns: %v", tb.Private)
	}

	for _, tc := range []struct{ name, private, public, want string }{
		{"rows and source", "", "  x: {columns: {a: text}, rows: [[1]], source: main}\n",
			"catalog.yaml:11: public_tables.x: give rows (inline) or source (rows read from a source table), not both"},
		{"neither", "", "  x: {columns: {a: text}}\n",
			"catalog.yaml:11: public_tables.x.rows: required (or source: the source holding the rows)"},
		{"arity", "", "  x: {columns: {a: text, b: text}, rows: [[1]]}\n",
			"catalog.yaml:11: public_tables.x.rows[0]: has 1 values for 2 columns"},
		{"integer", "", "  x: {columns: {a: integer}, rows: [[one]]}\n",
			`catalog.yaml:11: public_tables.x.rows[0][0]: column a: "one" is not an integer`},
		{"type", "", "  x: {columns: {a: date}, rows: [[1]]}\n",
			`catalog.yaml:11: public_tables.x.columns.a: must be one of text, integer, numeric (got "date")`},
		{"name clash", "", "  t: {columns: {a: text}, rows: [[1]]}\n",
			"catalog.yaml:11: public_tables.t: a protected table is already called t"},
		{"unknown source", "", "  x: {columns: {a: text}, source: other}\n",
			`catalog.yaml:11: public_tables.x.source: unknown source "other" (declared: main)`},
		{"too many rows", "", "  x: {columns: {a: text}, rows: [" + strings.Repeat("[1], ", MaxPublicRows) + "[1]]}\n",
			fmt.Sprintf("catalog.yaml:11: public_tables.x.rows: %d rows: a public table holds at most %d", MaxPublicRows+1, MaxPublicRows)},
		{"private domain column", "private_columns: [c]", "  x: {columns: {a: text}, rows: [[1]]}\n",
			"catalog.yaml:7: tables.t.private_columns[0]: c is a domain column; a private column is one queries may never read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("catalog.yaml", []byte(fmt.Sprintf(publicBase, tc.private, tc.public)))
			if err == nil || err.Error() != tc.want {
				t.Errorf("got\n%v\nwant\n%s", err, tc.want)
			}
		})
	}
}
