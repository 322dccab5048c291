// Package catalog holds dpproxy's configuration: data sources, protected
// tables and the public, finite domains of their columns, users and roles,
// and privacy budgets. It never reads protected data.
package catalog

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Catalog is a loaded, validated configuration.
type Catalog struct {
	// Database is the schema name clients see (e.g. "demo").
	Database string
	Sources  map[string]*Source
	Tables   []*Table
	Users    []*User
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

// Source is a database holding protected tables.
type Source struct {
	Name   string
	Driver string // "sqlite"
	Path   string // file path for sqlite (relative paths are relative to the data directory)
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
	Delta           float64 // δ for converting ρ-zCDP to (ε, δ) on Gaussian tables
	// TopKSelectionShare is the share of a top-k query's ε spent on
	// selecting the groups (exponential mechanism); the rest measures the
	// selected groups' aggregates when the query selects them.
	TopKSelectionShare float64
}

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
}

// ColumnKind is how a column's domain is declared.
type ColumnKind int

const (
	Categorical  ColumnKind = iota // a list of values
	IntegerRange                   // Min..Max inclusive, bins of Width integers
	Binned                         // explicit bin edges over numbers
)

// Policy says where a NULL or an out-of-domain value goes.
type Policy string

const (
	PolicyDrop  Policy = "drop"  // the row is not counted in this column's histogram
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
	// Null is PolicyDrop, PolicyCell or PolicyOther (requires OutOfDomain = other).
	Null Policy
	// OutOfDomain is PolicyDrop, PolicyClamp (ranges only) or PolicyOther.
	OutOfDomain Policy
}

// CellKind is what a domain cell stands for.
type CellKind int

const (
	CellValue CellKind = iota // one categorical value
	CellBin                   // a numeric bin [Lo, Hi)
	CellOther                 // values outside the declared domain
	CellNull                  // NULL
)

// Cell is one entry of a column's domain. Cells are ordered: the declared
// values or bins first, then the other cell, then the NULL cell.
type Cell struct {
	Kind  CellKind
	Value string  // CellValue
	Lo    float64 // CellBin: lower edge, inclusive
	Hi    float64 // CellBin: upper edge, exclusive (inclusive for the last bin)
}

// Cells lists the column's domain cells in order.
func (c *Column) Cells() []Cell {
	var cells []Cell
	switch c.Kind {
	case Categorical:
		for _, v := range c.Values {
			cells = append(cells, Cell{Kind: CellValue, Value: v})
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
	}
	if c.OutOfDomain == PolicyOther {
		cells = append(cells, Cell{Kind: CellOther})
	}
	if c.Null == PolicyCell {
		cells = append(cells, Cell{Kind: CellNull})
	}
	return cells
}

// Size is the number of domain cells.
func (c *Column) Size() int {
	n := 0
	switch c.Kind {
	case Categorical:
		n = len(c.Values)
	case IntegerRange:
		n = int((c.Max - c.Min + c.Width) / c.Width)
	case Binned:
		n = len(c.Edges) - 1
	}
	if c.OutOfDomain == PolicyOther {
		n++
	}
	if c.Null == PolicyCell {
		n++
	}
	return n
}

// IsNumeric reports whether the column's values are numbers (ranges and bins).
func (c *Column) IsNumeric() bool { return c.Kind != Categorical }

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
	default:
		return "", false
	}
}

// Midpoint is the value that represents a numeric bin in SUM and AVG: the
// mean of the integers in an integer bin, the middle of a real bin.
func (c *Column) Midpoint(cell Cell) float64 {
	if cell.Kind != CellBin {
		return math.NaN()
	}
	if c.Kind == IntegerRange {
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
	default:
		return "double"
	}
}

func (c *Column) String() string { return fmt.Sprintf("%s(%d cells)", c.Name, c.Size()) }
