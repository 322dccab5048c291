package mysqlfront

import (
	"fmt"
	"strings"

	"github.com/dolthub/go-mysql-server/memory"
	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"
	"github.com/dolthub/vitess/go/mysql"
	"github.com/dolthub/vitess/go/sqltypes"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/parser"
)

// schemaOnlyDatabase is the GMS database clients browse: the protected
// tables' columns and nothing else, and the public tables with their rows
// (see publicTable). Its tables have no rows and refuse to be
// read: a statement that reaches go-mysql-server and scans a protected table
// (one the backend did not recognise as its own, e.g. through a
// classification gap) fails with 3900 instead of answering from an empty
// table, which would be a silently wrong result such as COUNT(*) = 0.
// Schema-level statements (SHOW COLUMNS, SHOW CREATE TABLE,
// information_schema, COM_FIELD_LIST) never read rows and keep working.
func schemaOnlyDatabase(cat *catalog.Catalog) (*memory.DbProvider, error) {
	db := &schemaDatabase{Database: memory.NewDatabase(cat.Database), name: cat.Database}
	for _, t := range cat.Tables {
		if len(t.Columns) == 0 {
			return nil, fmt.Errorf("mysqlfront: table %s has no columns", t.Name)
		}
		var schema sql.Schema
		for _, c := range t.Columns {
			typ, err := columnType(c.SQLType())
			if err != nil {
				return nil, fmt.Errorf("mysqlfront: %s.%s: %w", t.Name, c.Name, err)
			}
			schema = append(schema, &sql.Column{
				Name:           c.Name,
				Type:           typ,
				Nullable:       true,
				Source:         t.Name,
				DatabaseSource: cat.Database,
			})
		}
		db.tables = append(db.tables, &schemaTable{name: t.Name, schema: sql.NewPrimaryKeySchema(schema)})
	}
	for _, t := range cat.PublicTables {
		pt, err := newPublicTable(cat.Database, t)
		if err != nil {
			return nil, err
		}
		db.tables = append(db.tables, pt)
	}
	return memory.NewDBProvider(db), nil
}

func columnType(sqlType string) (sql.Type, error) {
	switch sqlType {
	case "varchar(255)":
		return types.MustCreateStringWithDefaults(sqltypes.VarChar, 255), nil
	case "bigint":
		return types.Int64, nil
	case "double":
		return types.Float64, nil
	case "date":
		return types.Date, nil
	case "datetime":
		return types.Datetime, nil
	}
	return nil, fmt.Errorf("unsupported column type %q", sqlType)
}

// schemaDatabase is a read-only sql.Database of schemaTables. It embeds an
// empty memory.Database only for what GMS asks every database for besides
// tables (no triggers, stored procedures or events: information_schema and
// SHOW TRIGGERS/PROCEDURE STATUS/EVENTS list none); its own methods serve
// the tables and views.
type schemaDatabase struct {
	*memory.Database
	name   string
	tables []sql.Table // schemaTables, then publicTables
}

var (
	_ sql.Database     = (*schemaDatabase)(nil)
	_ sql.ViewDatabase = (*schemaDatabase)(nil)
)

func (d *schemaDatabase) Name() string { return d.name }

func (d *schemaDatabase) GetTableInsensitive(_ *sql.Context, name string) (sql.Table, bool, error) {
	for _, t := range d.tables {
		if strings.EqualFold(t.Name(), name) {
			return t, true, nil
		}
	}
	return nil, false, nil
}

func (d *schemaDatabase) GetTableNames(*sql.Context) ([]string, error) {
	out := make([]string, len(d.tables))
	for i, t := range d.tables {
		out[i] = t.Name()
	}
	return out, nil
}

// The database has no views (GMS asks, e.g. for SHOW FULL TABLES).
func (d *schemaDatabase) CreateView(*sql.Context, string, string, string) error {
	return sql.ErrReadOnly.New()
}

func (d *schemaDatabase) DropView(*sql.Context, string) error {
	return sql.ErrReadOnly.New()
}

func (d *schemaDatabase) GetViewDefinition(*sql.Context, string) (sql.ViewDefinition, bool, error) {
	return sql.ViewDefinition{}, false, nil
}

func (d *schemaDatabase) AllViews(*sql.Context) ([]sql.ViewDefinition, error) { return nil, nil }

// schemaTable has a schema and no readable rows.
type schemaTable struct {
	name   string
	schema sql.PrimaryKeySchema
}

var (
	_ sql.Table           = (*schemaTable)(nil)
	_ sql.PrimaryKeyTable = (*schemaTable)(nil)
)

func (t *schemaTable) Name() string                           { return t.name }
func (t *schemaTable) String() string                         { return t.name }
func (t *schemaTable) Schema() sql.Schema                     { return t.schema.Schema }
func (t *schemaTable) PrimaryKeySchema() sql.PrimaryKeySchema { return t.schema }
func (t *schemaTable) Collation() sql.CollationID             { return sql.Collation_Default }

func (t *schemaTable) Partitions(*sql.Context) (sql.PartitionIter, error) {
	return sql.PartitionsToPartitionIter(schemaPartition{}), nil
}

// PartitionRows refuses: the schema-only table is never a source of rows.
func (t *schemaTable) PartitionRows(*sql.Context, sql.Partition) (sql.RowIter, error) {
	return nil, errUnclassifiedRead(t.name)
}

type schemaPartition struct{}

func (schemaPartition) Key() []byte { return []byte("schema-only") }

// errUnclassifiedRead is the refusal of the schema-only tables' backstop.
func errUnclassifiedRead(table string) error {
	return mysql.NewSQLError(parser.CodeDPRefused, "HY000",
		"dpproxy cannot answer this statement over protected table %s: only aggregate queries (SELECT COUNT(*)|SUM(c)|AVG(c) ... FROM %s [WHERE ...] [GROUP BY ...]) are answered, and raw rows are never returned",
		table, table)
}
