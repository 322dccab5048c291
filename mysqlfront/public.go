package mysqlfront

import (
	"fmt"
	"strconv"

	"github.com/dolthub/go-mysql-server/sql"

	"github.com/dpproxy/dpproxy/catalog"
)

// publicTable serves a public table of the catalog (public_tables) with its
// rows: they are public, so any statement that reads only public tables
// (SELECT * FROM countries, joins between public tables, information_schema)
// is answered by go-mysql-server from memory like a table of a real
// database. A statement that also reads a protected table is the engine's
// (a DP query with a join) and never reaches these rows. Read-only: writes
// fail, as on every table of the schema database.
type publicTable struct {
	name   string
	schema sql.PrimaryKeySchema
	rows   []sql.Row
}

var (
	_ sql.Table           = (*publicTable)(nil)
	_ sql.PrimaryKeyTable = (*publicTable)(nil)
)

func newPublicTable(database string, t *catalog.PublicTable) (*publicTable, error) {
	var schema sql.Schema
	for _, c := range t.Columns {
		typ, err := columnType(c.SQLType())
		if err != nil {
			return nil, fmt.Errorf("mysqlfront: %s.%s: %w", t.Name, c.Name, err)
		}
		schema = append(schema, &sql.Column{Name: c.Name, Type: typ, Nullable: true, Source: t.Name, DatabaseSource: database})
	}
	pt := &publicTable{name: t.Name, schema: sql.NewPrimaryKeySchema(schema)}
	for _, r := range t.Rows {
		row := make(sql.Row, len(r))
		for i, v := range r {
			if v.Null {
				continue
			}
			switch t.Columns[i].Type {
			case catalog.PublicInteger:
				n, err := strconv.ParseInt(v.Text, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("mysqlfront: %s.%s: %w", t.Name, t.Columns[i].Name, err)
				}
				row[i] = n
			case catalog.PublicNumeric:
				f, err := strconv.ParseFloat(v.Text, 64)
				if err != nil {
					return nil, fmt.Errorf("mysqlfront: %s.%s: %w", t.Name, t.Columns[i].Name, err)
				}
				row[i] = f
			default:
				row[i] = v.Text
			}
		}
		pt.rows = append(pt.rows, row)
	}
	return pt, nil
}

func (t *publicTable) Name() string                           { return t.name }
func (t *publicTable) String() string                         { return t.name }
func (t *publicTable) Schema() sql.Schema                     { return t.schema.Schema }
func (t *publicTable) PrimaryKeySchema() sql.PrimaryKeySchema { return t.schema }
func (t *publicTable) Collation() sql.CollationID             { return sql.Collation_Default }

func (t *publicTable) Partitions(*sql.Context) (sql.PartitionIter, error) {
	return sql.PartitionsToPartitionIter(schemaPartition{}), nil
}

func (t *publicTable) PartitionRows(*sql.Context, sql.Partition) (sql.RowIter, error) {
	return sql.RowsToRowIter(t.rows...), nil
}
