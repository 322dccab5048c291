package mysqlfront

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"

	"github.com/dolthub/go-mysql-server/memory"
	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/mysql_db"
	"github.com/dolthub/go-mysql-server/sql/types"
	"github.com/dolthub/vitess/go/mysql"
	"github.com/dolthub/vitess/go/sqltypes"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/budgetview"
	"github.com/dpproxy/dpproxy/catalog"
)

// The audit schema: read-only virtual tables over the privacy ledger,
// answered by GMS (so WHERE, ORDER BY, LIMIT, aggregates and joins among
// them all work) from rows read from the ledger when a query runs.
//
//	dpproxy.dp_ledger   every ledger entry            role auditor
//	dpproxy.dp_budgets  every scope's limit and spend  role auditor
//	dpproxy.my_budget   the session user's own budget  any catalog user
//
// Every catalog user has SELECT on the schema in GMS (GMS reports its own
// privilege failures as error 1105, not MySQL's codes); the tables enforce
// the roles themselves, when rows are asked for, and refuse with MySQL's
// 1142 "SELECT command denied" (SQLSTATE 42000). Roles and limits come from
// Audit.Catalog at query time, so a reloaded catalog's limits show at once.
// Analysts see only my_budget in SHOW TABLES and information_schema.

// AuditDatabase is the schema of the audit tables.
const AuditDatabase = "dpproxy"

// Audit tables' names.
const (
	TableLedger   = "dp_ledger"
	TableBudgets  = "dp_budgets"
	TableMyBudget = "my_budget"
)

// Audit configures the audit tables (Config.Audit).
type Audit struct {
	Ledger *budget.Ledger
	// Catalog returns the catalog in force (roles and limits); nil means
	// Config.Catalog.
	Catalog func() *catalog.Catalog
}

// erTableAccessDenied is MySQL's ER_TABLEACCESS_DENIED_ERROR.
const erTableAccessDenied = 1142

// addAuditDatabase adds the audit schema to the provider.
func addAuditDatabase(pro *memory.DbProvider, cat *catalog.Catalog, a *Audit) error {
	if a == nil {
		return nil
	}
	if a.Ledger == nil {
		return fmt.Errorf("mysqlfront: audit tables without a ledger")
	}
	if strings.EqualFold(cat.Database, AuditDatabase) {
		return fmt.Errorf("mysqlfront: the catalog database may not be named %q: that schema holds the audit tables", AuditDatabase)
	}
	cur := a.Catalog
	if cur == nil {
		cur = func() *catalog.Catalog { return cat }
	}
	db := &auditDB{Database: memory.NewDatabase(AuditDatabase), ledger: a.Ledger, catalog: cur}
	pro.WithOption(memory.WithDbsOption(append(pro.AllDatabases(sql.NewEmptyContext()), db)))
	return nil
}

// auditGrants gives u SELECT on the audit schema; the tables check roles.
func auditGrants(privs mysql_db.PrivilegeSet, u *catalog.User) {
	privs.AddDatabase(AuditDatabase, sql.PrivilegeType_Select)
}

type auditDB struct {
	// The embedded empty database answers what GMS asks of every database
	// (triggers, stored procedures, events) that the audit schema does not
	// define; its own tables and views are overridden below.
	*memory.Database
	ledger  *budget.Ledger
	catalog func() *catalog.Catalog
}

var (
	_ sql.Database     = (*auditDB)(nil)
	_ sql.ViewDatabase = (*auditDB)(nil)
)

func (d *auditDB) Name() string { return AuditDatabase }

// The audit schema has no views (GMS asks, e.g. for any SELECT).
func (d *auditDB) CreateView(*sql.Context, string, string, string) error {
	return sql.ErrReadOnly.New()
}
func (d *auditDB) DropView(*sql.Context, string) error                 { return sql.ErrReadOnly.New() }
func (d *auditDB) AllViews(*sql.Context) ([]sql.ViewDefinition, error) { return nil, nil }
func (d *auditDB) GetViewDefinition(*sql.Context, string) (sql.ViewDefinition, bool, error) {
	return sql.ViewDefinition{}, false, nil
}

func (d *auditDB) GetTableInsensitive(ctx *sql.Context, name string) (sql.Table, bool, error) {
	switch strings.ToLower(name) {
	case TableLedger:
		return &auditTable{db: d, name: TableLedger, auditorOnly: true, schema: ledgerSchema, rows: d.ledgerRows}, true, nil
	case TableBudgets:
		return &auditTable{db: d, name: TableBudgets, auditorOnly: true, schema: budgetsSchema, rows: d.budgetRows}, true, nil
	case TableMyBudget:
		return &auditTable{db: d, name: TableMyBudget, schema: myBudgetSchema, rows: d.myBudgetRows}, true, nil
	}
	return nil, false, nil
}

// GetTableNames lists the tables the session's user may read.
func (d *auditDB) GetTableNames(ctx *sql.Context) ([]string, error) {
	if d.isAuditor(ctx) {
		return []string{TableBudgets, TableLedger, TableMyBudget}, nil
	}
	return []string{TableMyBudget}, nil
}

func sessionUser(ctx *sql.Context) (user, host string) {
	if ctx == nil || ctx.Session == nil {
		return "", ""
	}
	c := ctx.Session.Client()
	host = c.Address
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return c.User, host
}

func (d *auditDB) isAuditor(ctx *sql.Context) bool {
	user, _ := sessionUser(ctx)
	return budgetview.CanSeeAll(d.catalog(), user)
}

type auditTable struct {
	db          *auditDB
	name        string
	auditorOnly bool
	schema      sql.Schema
	rows        func(ctx *sql.Context) ([]sql.Row, error)
}

var _ sql.Table = (*auditTable)(nil)

func (t *auditTable) Name() string               { return t.name }
func (t *auditTable) String() string             { return AuditDatabase + "." + t.name }
func (t *auditTable) Schema() sql.Schema         { return t.schema }
func (t *auditTable) Collation() sql.CollationID { return sql.Collation_Default }

// allowed refuses, as MySQL does, a user whose role may not read the table.
func (t *auditTable) allowed(ctx *sql.Context) error {
	if !t.auditorOnly || t.db.isAuditor(ctx) {
		return nil
	}
	user, host := sessionUser(ctx)
	return mysql.NewSQLError(erTableAccessDenied, mysql.SSClientError,
		"SELECT command denied to user '%s'@'%s' for table '%s'", user, host, t.name)
}

func (t *auditTable) Partitions(ctx *sql.Context) (sql.PartitionIter, error) {
	if err := t.allowed(ctx); err != nil {
		return nil, err
	}
	return sql.PartitionsToPartitionIter(auditPartition{}), nil
}

func (t *auditTable) PartitionRows(ctx *sql.Context, _ sql.Partition) (sql.RowIter, error) {
	if err := t.allowed(ctx); err != nil {
		return nil, err
	}
	rows, err := t.rows(ctx)
	if err != nil {
		return nil, err
	}
	return sql.RowsToRowIter(rows...), nil
}

type auditPartition struct{}

func (auditPartition) Key() []byte { return []byte("all") }

func column(table, name string, typ sql.Type, nullable bool) *sql.Column {
	return &sql.Column{Name: name, Type: typ, Nullable: nullable, Source: table, DatabaseSource: AuditDatabase}
}

var (
	varchar = func(n int64) sql.Type { return types.MustCreateStringWithDefaults(sqltypes.VarChar, n) }

	ledgerSchema = sql.Schema{
		column(TableLedger, "seq", types.Int64, false),
		column(TableLedger, "time", types.DatetimeMaxPrecision, false),
		column(TableLedger, "kind", varchar(16), false),
		column(TableLedger, "user_name", varchar(255), false),
		column(TableLedger, "conn_id", types.Uint32, false),
		column(TableLedger, "table_names", varchar(1024), false), // comma-separated, sorted
		column(TableLedger, "mechanism", varchar(64), false),
		column(TableLedger, "strategy", varchar(4096), false),
		column(TableLedger, "epsilon", types.Float64, false),
		column(TableLedger, "rho", types.Float64, false),
		column(TableLedger, "query_digest", varchar(64), false),
		column(TableLedger, "prev_hash", varchar(64), false),
		column(TableLedger, "hash", varchar(64), false),
		// The privacy unit, bounds and row-level calibration of a charge on
		// a table with a privacy unit (budget.UnitBound as JSON); NULL for
		// row privacy.
		column(TableLedger, "unit", varchar(1024), true),
		// The privacy unit spaces a charge spent in, comma-separated; NULL
		// for entries that name none (those written before spaces, and
		// zero-cost entries).
		column(TableLedger, "space_names", varchar(1024), true),
	}
	budgetsSchema = sql.Schema{
		column(TableBudgets, "scope", varchar(16), false), // space or user_space
		column(TableBudgets, "user_name", varchar(255), true),
		column(TableBudgets, "space_name", varchar(255), false),
		column(TableBudgets, "table_name", varchar(1024), false),   // the space's tables, comma-separated
		column(TableBudgets, "limit_epsilon", types.Float64, true), // NULL: the space is no longer in the catalog
		column(TableBudgets, "delta", types.Float64, false),
		column(TableBudgets, "spent_epsilon", types.Float64, false), // ε of the spend at delta
		column(TableBudgets, "remaining_epsilon", types.Float64, true),
		column(TableBudgets, "spent_pure_epsilon", types.Float64, false),
		column(TableBudgets, "spent_rho", types.Float64, false),
	}
	myBudgetSchema = sql.Schema{
		column(TableMyBudget, "table_name", varchar(255), false),
		column(TableMyBudget, "space_name", varchar(255), false), // the budget is the space's, shared by its tables
		column(TableMyBudget, "limit_epsilon", types.Float64, false),
		column(TableMyBudget, "delta", types.Float64, false),
		column(TableMyBudget, "spent_epsilon", types.Float64, false),
		column(TableMyBudget, "remaining_epsilon", types.Float64, false),
		column(TableMyBudget, "default_epsilon", types.Float64, false),
		column(TableMyBudget, "max_epsilon", types.Float64, true),
		column(TableMyBudget, "spent_delta", types.Float64, false),
		column(TableMyBudget, "remaining_delta", types.Float64, false),
		column(TableMyBudget, "delta_per_query", types.Float64, false),
	}
)

// ledgerRows reads every entry; GMS filters, sorts and limits them.
func (d *auditDB) ledgerRows(ctx *sql.Context) ([]sql.Row, error) {
	es, err := d.ledger.Entries(ctx, budget.Filter{})
	if err != nil {
		return nil, err
	}
	rows := make([]sql.Row, len(es))
	for i, e := range es {
		var unit any
		if e.Unit != nil {
			b, err := json.Marshal(e.Unit)
			if err != nil {
				return nil, err
			}
			unit = string(b)
		}
		var spaces any
		if len(e.Spaces) > 0 {
			spaces = strings.Join(e.Spaces, ",")
		}
		rows[i] = sql.Row{e.Seq, e.Time.UTC(), e.Kind, e.User, e.ConnID, strings.Join(e.Tables, ","),
			e.Mechanism, e.Strategy, e.Cost.Epsilon, e.Cost.Rho, e.QueryDigest, e.PrevHash, e.Hash, unit, spaces}
	}
	return rows, nil
}

// budgetRows is the auditor's view of budgetview.All over the spends
// recomputed from the entries: one row per privacy unit space and per
// user in it. Spaces spent in but no longer in the catalog have a NULL
// limit; remaining_epsilon is limit − spent, negative
// if a limit was lowered below the spend.
func (d *auditDB) budgetRows(ctx *sql.Context) ([]sql.Row, error) {
	spent, err := d.ledger.Budgets(ctx)
	if err != nil {
		return nil, err
	}
	var rows []sql.Row
	for _, r := range budgetview.All(d.catalog(), spent) {
		var user, limit, rem any
		if r.User != "" {
			user = r.User
		}
		if r.Limit != nil {
			limit, rem = *r.Limit, *r.Remaining
		}
		rows = append(rows, sql.Row{r.Scope, user, r.Space, r.Table, limit, r.Delta, r.Spent, rem, r.Cost.Epsilon, r.Cost.Rho})
	}
	return rows, nil
}

// myBudgetRows is budgetview.Mine for the session user: their own budget
// on every table, nothing of what other users spent.
func (d *auditDB) myBudgetRows(ctx *sql.Context) ([]sql.Row, error) {
	name, _ := sessionUser(ctx)
	own, err := budgetview.Mine(ctx, d.catalog(), d.ledger, name)
	if err != nil {
		return nil, err
	}
	var rows []sql.Row
	for _, r := range own {
		var maxEps any
		if r.Max > 0 {
			maxEps = r.Max
		}
		rows = append(rows, sql.Row{r.Table, r.Space, r.Limit, r.Delta, r.Spent, r.Remaining, r.Default, maxEps,
			r.Cost.Delta, r.RemainingDelta, r.DeltaPerQuery})
	}
	return rows, nil
}
