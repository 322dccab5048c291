// Package catalog holds dpproxy's configuration: data sources, protected
// tables and the public, finite domains of their columns, users and roles,
// and privacy budgets. It never reads protected data.
package catalog

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Catalog is a loaded, validated configuration.
type Catalog struct {
	// Database is the schema name clients see (e.g. "demo").
	Database string
	Sources  map[string]*Source
	Tables   []*Table
	// PublicTables are small public dimension tables (public_tables):
	// analysts read them freely and join protected tables to them.
	PublicTables []*PublicTable
	Users        []*User
	// Path is the file the catalog was loaded from ("<embedded demo>" for the default).
	Path string
	// Ledger configures the privacy ledger's optional signing.
	Ledger Ledger
	// TLS is the certificate the MySQL front offers (empty: the demo's
	// self-signed one, or none for a file catalog).
	TLS TLS
	// AuthPlugin is the authentication plugin the handshake announces:
	// "mysql_native_password" (default) or "caching_sha2_password".
	AuthPlugin string
	// Server bounds what clients may hold of the MySQL front (the "server"
	// section; defaults filled in).
	Server Server
	// Cache bounds the in-memory caches in bytes.
	Cache Cache
	// State is where the proxy keeps its ledger, stored answers and
	// measurements (the "state" section; Driver StateSQLite by default).
	State State
}

// TLS is the catalog's "tls" section.
type TLS struct {
	Cert, Key string // PEM files; relative paths are relative to the data directory
	Require   bool   // refuse clients that stay in clear text
}

// Ledger is the catalog's "ledger" section.
type Ledger struct {
	// SigningKey is the file holding the Ed25519 private key that signs the
	// ledger's head ("" for none): a 32-byte seed in hex or base64, or a PEM
	// PKCS #8 key. A relative path is relative to the data directory.
	SigningKey string
	// PublicKey is the Ed25519 public key (hex, base64 or PEM) that audit
	// verify checks signed heads with; "" derives it from SigningKey.
	PublicKey string
}

// Source drivers.
const (
	DriverSQLite   = "sqlite"   // an SQLite file, embedded (modernc.org/sqlite)
	DriverPostgres = "postgres" // PostgreSQL and what speaks its protocol (github.com/jackc/pgx/v5)
	DriverMySQL    = "mysql"    // MySQL, MariaDB and what speaks their protocol (github.com/go-sql-driver/mysql)
	// DriverClickHouse is ClickHouse over its native protocol
	// (github.com/ClickHouse/clickhouse-go/v2), a Distributed table too.
	DriverClickHouse = "clickhouse"
)

// Source is a database holding protected tables.
type Source struct {
	Name   string
	Driver string // DriverSQLite, DriverPostgres, DriverMySQL or DriverClickHouse
	Path   string // file path for sqlite (relative paths are relative to the data directory)
	// DSN is a server's connection string (postgres, mysql). It may hold a
	// password: it is never logged, printed or put in an error message.
	DSN string
	// DSNEnv names the environment variable holding the DSN instead, so
	// secrets stay out of the catalog file; read when the source is opened.
	DSNEnv string
	// MaxConnections bounds the source's connection pool: at most this many
	// histograms are built from it at once (0: the driver's default, see
	// package sources).
	MaxConnections int
	// VersionQuery is a query returning one value that changes whenever the
	// source's data changes; cached histograms are rebuilt when it does. ""
	// uses the driver's default (see package sources).
	VersionQuery string
	// CacheTTL is how long a cached histogram is reused without asking the
	// source's data version, when CacheTTLSet (else the driver's default,
	// see package sources); 0 asks every time.
	CacheTTL    time.Duration
	CacheTTLSet bool
}

// DefaultMaxCells is a table's max_cells unless the catalog sets it.
const DefaultMaxCells = 10_000_000

// Cache bounds the proxy's in-memory caches, in bytes (least recently used
// entries go first). Zero fields take the defaults below.
type Cache struct {
	Histograms int64 // cached histograms (8 bytes per cell)
	Answers    int64 // released answers kept in memory (all stay on disk)
	Plans      int64 // planned strategies
	// Measurements bounds the stored measurements (on disk, beside the
	// ledger): past it the oldest are forgotten.
	Measurements int64
}

// Default cache bounds.
const (
	DefaultHistogramCacheBytes = 512 << 20
	DefaultAnswerCacheBytes    = 128 << 20
	DefaultPlanCacheBytes      = 256 << 20
	DefaultMeasurementBytes    = 256 << 20
)

// HistogramBytes is the histogram cache's bound.
func (c Cache) HistogramBytes() int64 { return orDefault(c.Histograms, DefaultHistogramCacheBytes) }

// AnswerBytes is the in-memory answer cache's bound.
func (c Cache) AnswerBytes() int64 { return orDefault(c.Answers, DefaultAnswerCacheBytes) }

// PlanBytes is the plan cache's bound.
func (c Cache) PlanBytes() int64 { return orDefault(c.Plans, DefaultPlanCacheBytes) }

// MeasurementBytes is the measurement store's bound.
func (c Cache) MeasurementBytes() int64 { return orDefault(c.Measurements, DefaultMeasurementBytes) }

func orDefault(v, def int64) int64 {
	if v > 0 {
		return v
	}
	return def
}

// NoiseFamily chooses how a table's measurements are perturbed.
type NoiseFamily string

const (
	// Laplace is discrete Laplace noise: pure ε-DP, calibrated to L1 sensitivity.
	Laplace NoiseFamily = "laplace"
	// Gaussian is discrete Gaussian noise: ρ-zCDP, calibrated to L2 sensitivity.
	Gaussian NoiseFamily = "gaussian"
)

// Budget is a table's privacy budgets, in ε (with δ for Gaussian tables).
type Budget struct {
	Total           float64 // ε over all users for the table
	PerUser         float64 // ε per (user, table)
	DefaultPerQuery float64 // ε one batch spends unless the session sets @dp_epsilon
	MaxPerQuery     float64 // largest ε one batch may spend (0: no limit beyond the budgets)
	// Delta is the table's δ budget: the most δ that partition selection
	// (GROUP BY an open column) may spend on the table, over all users and
	// for each user. On Gaussian tables it is also the δ at which ρ-zCDP
	// is converted to (ε, δ); that δ is never spent, so a Gaussian table's
	// guarantee is (total, 2·delta) at most. DefaultDelta unless set.
	Delta float64
	// DeltaPerQuery is the δ one partition selection spends unless the
	// session sets @dp_delta (min(DefaultDeltaPerQuery, Delta) unless set).
	DeltaPerQuery float64
	// SelectionShare is the share of a batch's ε that partition selection
	// spends when the batch groups by an open column whose keys are not
	// yet released; the rest measures the released keys' aggregates.
	SelectionShare float64
	// TopKSelectionShare is the share of a top-k query's ε spent on
	// selecting the groups (exponential mechanism); the rest measures the
	// selected groups' aggregates when the query selects them.
	TopKSelectionShare float64
}

// Defaults of the δ budget (budget.delta), of one selection's δ
// (budget.delta_per_query) and of the selection's share of ε
// (budget.selection_share).
const (
	DefaultDelta          = 1e-5
	DefaultDeltaPerQuery  = 1e-6
	DefaultSelectionShare = 0.5
)

// DefaultTopKSelectionShare splits a top-k query's ε evenly between
// selection and counting.
const DefaultTopKSelectionShare = 0.5

// Table is a protected table.
type Table struct {
	Name        string // name clients use, lower-case
	Source      string
	SourceTable string // name in the source database
	Noise       NoiseFamily
	Budget      Budget
	Columns     []*Column
	// MaxCells bounds a batch's product domain: a batch over more cells is
	// refused before any histogram, plan or charge (DefaultMaxCells unless
	// the catalog says otherwise).
	MaxCells int64
	// NoMeasurementReuse (reuse_measurements: false) measures every batch
	// anew instead of answering it from the table's stored measurements:
	// each analyst then pays for every answer they get that is not a
	// repeat.
	NoMeasurementReuse bool
	// Private lists columns of the source table that exist but are never
	// read, selected, grouped or filtered on (lower-case; "private_columns"
	// in the catalog), such as a user id: a query naming one is refused
	// with a message rather than told the column does not exist.
	Private []string
	// Unit is the table's privacy unit with its contribution bounds; nil
	// means each row is its own unit (row-level privacy).
	Unit *PrivacyUnit
	// Join, on a table built by JoinTables (never one the catalog
	// declares), is the join of protected tables on their unit it reads.
	Join *UnitJoin
	// ShardKey is the column a ClickHouse Distributed table is sharded by
	// (lower-case; "" when it is not declared). When it is the privacy
	// unit's column, every unit's rows are on one shard and contribution
	// bounding runs on each shard; otherwise it is global (package
	// sources). The declaration is trusted, not checked against the data.
	ShardKey string
}

// IsPrivate reports whether name (case-insensitive) is a private column.
func (t *Table) IsPrivate(name string) bool {
	for _, c := range t.Private {
		if strings.EqualFold(c, name) {
			return true
		}
	}
	return false
}

// IsUnitColumn reports whether name (case-insensitive) is t's privacy unit
// column.
func (t *Table) IsUnitColumn(name string) bool {
	return t.Unit != nil && strings.EqualFold(t.Unit.Column, name)
}

// Column returns the named column (case-insensitive), or nil.
func (t *Table) Column(name string) *Column {
	for _, c := range t.Columns {
		if strings.EqualFold(c.Name, name) {
			return c
		}
	}
	return nil
}

// Table returns the named protected table (case-insensitive), or nil.
func (c *Catalog) Table(name string) *Table {
	for _, t := range c.Tables {
		if strings.EqualFold(t.Name, name) {
			return t
		}
	}
	return nil
}

// User returns the named user, or nil.
func (c *Catalog) User(name string) *User {
	for _, u := range c.Users {
		if u.Name == name {
			return u
		}
	}
	return nil
}

// Role is what a user may do.
type Role string

const (
	RoleAnalyst Role = "analyst" // runs DP queries
	RoleAuditor Role = "auditor" // reads the ledger; runs no DP query
)

// User is a login.
type User struct {
	Name string
	// PasswordHash is the MySQL native password hash "*" + upper(hex(SHA1(SHA1(password)))).
	PasswordHash string
	Role         Role
	// DefaultEpsilon, if set, is the ε of this user's batches unless the
	// session sets @dp_epsilon; it overrides the tables' default_per_query.
	DefaultEpsilon float64
	// MaxEpsilon, if set, caps one batch's ε for this user (on top of the
	// tables' max_per_query).
	MaxEpsilon float64
	// MaxUserConnections, if set, replaces the server's max_user_connections
	// for this user (as MySQL's CREATE USER … WITH MAX_USER_CONNECTIONS).
	MaxUserConnections int
}

// ColumnKind is how a column's domain is declared.
type ColumnKind int

const (
	Categorical  ColumnKind = iota // a list of values
	IntegerRange                   // Min..Max inclusive, bins of Width integers
	Binned                         // explicit bin edges over numbers
	TimeRange                      // date or datetime: Min..Max Unix seconds, bins of Width seconds or Months months
)

// Policy says where a NULL or an out-of-domain value goes.
type Policy string

const (
	PolicyDrop  Policy = "drop"  // the row does not count in what reads the column (compile/drop.go)
	PolicyClamp Policy = "clamp" // to the nearest bin (ranges only; not for NULL)
	PolicyOther Policy = "other" // an explicit "other" cell
	PolicyCell  Policy = "cell"  // NULL only: an explicit NULL cell
)

// Column is a protected column with a public, finite domain.
type Column struct {
	Name   string
	Kind   ColumnKind
	Values []string  // Categorical
	Min    int64     // IntegerRange
	Max    int64     // IntegerRange, inclusive
	Width  int64     // IntegerRange, ≥ 1
	Edges  []float64 // Binned: bins [e0,e1), [e1,e2), ..., [e(k-1), ek]
	// TimeRange (see timecol.go): Min and Max are Unix seconds (UTC, Max
	// the last second inclusive), Width the bin width in seconds, or
	// Months > 0 calendar months per bin (Width 0); DateOnly for type date.
	Months   int64
	DateOnly bool
	// Null is PolicyDrop, PolicyCell or PolicyOther (requires OutOfDomain = other).
	Null Policy
	// OutOfDomain is PolicyDrop, PolicyClamp (ranges only) or PolicyOther.
	OutOfDomain Policy
	// Open marks a column with no public list of values (type: text, or
	// type: integer with open: true; open.go). Its Kind is Categorical with
	// no Values: a batch sees it only through a copy whose Values are
	// public (released keys, or the literals a predicate names).
	Open bool
	// OpenInteger is an open column of integers (ids): keys are their
	// decimal text.
	OpenInteger bool
	// OpenCopy marks a batch's copy of an open column (Table.WithValues):
	// its values are public, but its rows were binned by exact text, so
	// its other cell holds values that differ from every declared one.
	OpenCopy bool
	// Patterns, on a batch's copy of an open column only
	// (Table.WithPatterns), are the LIKE patterns the batch tests it
	// against: the values other than the declared ones are split into
	// 2^len(Patterns) match cells by which patterns they match (open.go).
	Patterns []Pattern
	// DroppedCell, set on a batch's copy of the column (WithDroppedCell),
	// counts the values the policies drop in a trailing hidden cell instead
	// of leaving their rows out of the histogram, so that an aggregate of
	// the batch that does not read the column (COUNT(*) beside COUNT(c), or
	// another query) still counts those rows.
	DroppedCell bool
}

// CellKind is what a domain cell stands for.
type CellKind int

const (
	CellValue CellKind = iota // one categorical value
	CellBin                   // a numeric bin [Lo, Hi)
	CellOther                 // values outside the declared domain
	CellNull                  // NULL
	// CellDropped holds the values the column's policies drop (NULL under
	// null: drop, out-of-domain values under out_of_domain: drop). It exists
	// only on a batch's copy of the column (DroppedCell); every query that
	// references the column weighs it 0, so it is never a group, never
	// matches a predicate and never counts in COUNT(c) or SUM(c).
	CellDropped
	// CellMatch holds the values of a column with Patterns, other than its
	// declared ones, that match exactly the patterns of Cell.Match's bits.
	CellMatch
)

// Cell is one entry of a column's domain. Cells are ordered: the declared
// values or bins first, then the other cell, then the NULL cell, then the
// dropped cell.
type Cell struct {
	Kind  CellKind
	Value string  // CellValue
	Lo    float64 // CellBin: lower edge, inclusive
	Hi    float64 // CellBin: upper edge, exclusive (inclusive for the last bin)
	Match uint64  // CellMatch: bit i set when the values match Patterns[i]
}

// Cells lists the column's domain cells in order.
func (c *Column) Cells() []Cell {
	cells := make([]Cell, 0, c.Size())
	switch c.Kind {
	case Categorical:
		for _, v := range c.Values {
			cells = append(cells, Cell{Kind: CellValue, Value: v})
		}
		if len(c.Patterns) > 0 {
			for m := range uint64(1) << len(c.Patterns) {
				cells = append(cells, Cell{Kind: CellMatch, Match: m})
			}
		}
	case IntegerRange:
		for lo := c.Min; lo <= c.Max; lo += c.Width {
			hi := lo + c.Width
			if hi > c.Max+1 {
				hi = c.Max + 1
			}
			cells = append(cells, Cell{Kind: CellBin, Lo: float64(lo), Hi: float64(hi)})
		}
	case Binned:
		for i := 0; i+1 < len(c.Edges); i++ {
			cells = append(cells, Cell{Kind: CellBin, Lo: c.Edges[i], Hi: c.Edges[i+1]})
		}
	case TimeRange:
		n := c.timeBins()
		for i := 0; i < n; i++ {
			hi := min(c.BinStart(i+1), c.Max+1)
			cells = append(cells, Cell{Kind: CellBin, Lo: float64(c.BinStart(i)), Hi: float64(hi)})
		}
	}
	if c.OutOfDomain == PolicyOther {
		cells = append(cells, Cell{Kind: CellOther})
	}
	if c.Null == PolicyCell {
		cells = append(cells, Cell{Kind: CellNull})
	}
	if c.hasDroppedCell() {
		cells = append(cells, Cell{Kind: CellDropped})
	}
	return cells
}

// Drops reports whether the column's policies drop some values: NULL under
// null: drop, out-of-domain values under out_of_domain: drop.
func (c *Column) Drops() bool { return c.Null == PolicyDrop || c.OutOfDomain == PolicyDrop }

func (c *Column) hasDroppedCell() bool { return c.DroppedCell && c.Drops() }

// WithDroppedCell returns a copy of the column whose dropped values are
// counted in a trailing CellDropped cell (see DroppedCell); c itself when
// its policies drop nothing.
func (c *Column) WithDroppedCell() *Column {
	if !c.Drops() || c.DroppedCell {
		return c
	}
	cp := *c
	cp.DroppedCell = true
	return &cp
}

// DroppedCellIndex is the index of the dropped cell, or -1 when the column
// has none.
func (c *Column) DroppedCellIndex() int {
	if !c.hasDroppedCell() {
		return -1
	}
	return c.Size() - 1
}

// Size is the number of domain cells.
func (c *Column) Size() int {
	n := c.Declared()
	if c.OutOfDomain == PolicyOther {
		n++
	}
	if c.Null == PolicyCell {
		n++
	}
	if c.hasDroppedCell() {
		n++
	}
	return n
}

// IsNumeric reports whether the column's values are numbers (ranges and bins).
func (c *Column) IsNumeric() bool { return c.Kind == IntegerRange || c.Kind == Binned }

// IsTime reports whether the column is a date or datetime column.
func (c *Column) IsTime() bool { return c.Kind == TimeRange }

// Label is the value a cell shows in a result row: the categorical value,
// the bin's lower edge for numeric bins (so an integer column of width 1 shows
// its values), "other" for the other cell and NULL (ok=false) for the NULL cell.
func (cell Cell) Label() (string, bool) {
	switch cell.Kind {
	case CellValue:
		return cell.Value, true
	case CellBin:
		return strconv.FormatFloat(cell.Lo, 'f', -1, 64), true
	case CellOther:
		return "other", true
	default: // NULL; the dropped cell is never shown
		return "", false
	}
}

// Midpoint is the value that represents a numeric bin in SUM and AVG: the
// mean of the integers in an integer bin, the middle of a real bin.
func (c *Column) Midpoint(cell Cell) float64 {
	if cell.Kind != CellBin {
		return math.NaN()
	}
	if c.Kind == IntegerRange || c.Kind == TimeRange {
		return (cell.Lo + cell.Hi - 1) / 2
	}
	return (cell.Lo + cell.Hi) / 2
}

// SQLType is the MySQL column type clients see in the schema-only table.
func (c *Column) SQLType() string {
	switch c.Kind {
	case Categorical:
		return "varchar(255)"
	case IntegerRange:
		return "bigint"
	case TimeRange:
		return c.TimeUnit()
	default:
		return "double"
	}
}

func (c *Column) String() string { return fmt.Sprintf("%s(%d cells)", c.Name, c.Size()) }
