// Package statedb opens the SQL database that holds dpproxy's shared state
// (ledger, stored answers, measurements, key sets, the unit-hash key and
// console sessions) when a catalog's state section puts it in PostgreSQL,
// so that several proxies on several hosts share one budget.
//
// The stores write their SQL once, with "?" placeholders, for SQLite and
// PostgreSQL alike; a PostgreSQL handle from [OpenPostgres] rewrites the
// placeholders to PostgreSQL's "$1, $2, …" on the way to pgx, so that no
// store keeps a second copy of its queries. What really differs between
// the two (column types, how a writer takes the lock that serialises
// charges, which errors are worth a retry) is asked of the [DB]'s Dialect.
package statedb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// Dialect names the SQL engine behind a DB.
type Dialect string

const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// DB is a state database: a database/sql handle whose queries take "?"
// placeholders, and its dialect.
type DB struct {
	*sql.DB
	Dialect Dialect
	// Where names the database for messages (host, port and database
	// name; never a password).
	Where string
}

// OpenPostgres connects to the PostgreSQL database at dsn (a pgx
// connection string or URL) with at most maxConns connections, and checks
// that it answers. Errors name the host and database, never the password.
func OpenPostgres(ctx context.Context, dsn string, maxConns int) (*DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, errors.New("state: the PostgreSQL connection string does not parse") // never echo a DSN: it may hold a password
	}
	where := fmt.Sprintf("postgres://%s:%d/%s", cfg.Host, cfg.Port, cfg.Database)
	db := sql.OpenDB(rebindConnector{stdlib.GetConnector(*cfg)})
	if maxConns > 0 {
		db.SetMaxOpenConns(maxConns)
		db.SetMaxIdleConns(maxConns)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("state: connect to %s: %w", where, err)
	}
	return &DB{DB: db, Dialect: Postgres, Where: where}, nil
}

// IsRetryable reports whether err is PostgreSQL's report that a
// transaction lost a race it may simply run again: a serialization
// failure (40001) or a deadlock (40P01).
func IsRetryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// IsUniqueViolation reports whether err is PostgreSQL's 23505.
func IsUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// Rebind rewrites the "?" placeholders of q as "$1, $2, …", leaving those
// inside quoted strings, quoted identifiers and comments alone.
func Rebind(q string) string {
	if !strings.ContainsRune(q, '?') {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 8)
	n := 0
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(q) {
				if q[j] == c {
					if j+1 < len(q) && q[j+1] == c { // doubled quote
						j += 2
						continue
					}
					break
				}
				j++
			}
			b.WriteString(q[i:min(j+1, len(q))])
			i = j
		case c == '-' && i+1 < len(q) && q[i+1] == '-':
			j := strings.IndexByte(q[i:], '\n')
			if j < 0 {
				j = len(q) - i - 1
			}
			b.WriteString(q[i : i+j+1])
			i += j
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			j := strings.Index(q[i+2:], "*/")
			end := len(q)
			if j >= 0 {
				end = i + 2 + j + 2
			}
			b.WriteString(q[i:end])
			i = end - 1
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// rebindConnector hands out pgx connections whose queries are rebound.
type rebindConnector struct{ driver.Connector }

func (c rebindConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &rebindConn{conn.(*stdlib.Conn)}, nil
}

// rebindConn is a pgx stdlib connection that rebinds each query's
// placeholders; everything else is pgx's own.
type rebindConn struct{ c *stdlib.Conn }

var (
	_ driver.Conn               = (*rebindConn)(nil)
	_ driver.ConnBeginTx        = (*rebindConn)(nil)
	_ driver.ConnPrepareContext = (*rebindConn)(nil)
	_ driver.ExecerContext      = (*rebindConn)(nil)
	_ driver.QueryerContext     = (*rebindConn)(nil)
	_ driver.Pinger             = (*rebindConn)(nil)
	_ driver.SessionResetter    = (*rebindConn)(nil)
	_ driver.NamedValueChecker  = (*rebindConn)(nil)
)

func (r *rebindConn) Prepare(q string) (driver.Stmt, error) { return r.c.Prepare(Rebind(q)) }
func (r *rebindConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	return r.c.PrepareContext(ctx, Rebind(q))
}
func (r *rebindConn) Close() error              { return r.c.Close() }
func (r *rebindConn) Begin() (driver.Tx, error) { return r.c.Begin() } //nolint:staticcheck // the interface's
func (r *rebindConn) BeginTx(ctx context.Context, o driver.TxOptions) (driver.Tx, error) {
	return r.c.BeginTx(ctx, o)
}
func (r *rebindConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	return r.c.ExecContext(ctx, Rebind(q), args)
}
func (r *rebindConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	return r.c.QueryContext(ctx, Rebind(q), args)
}
func (r *rebindConn) Ping(ctx context.Context) error             { return r.c.Ping(ctx) }
func (r *rebindConn) ResetSession(ctx context.Context) error     { return r.c.ResetSession(ctx) }
func (r *rebindConn) CheckNamedValue(v *driver.NamedValue) error { return r.c.CheckNamedValue(v) }

// PgxConn returns the pgx connection under a database/sql driver
// connection of a DB opened by OpenPostgres (for sql.Conn.Raw), or nil.
func PgxConn(driverConn any) *pgx.Conn {
	if r, ok := driverConn.(*rebindConn); ok {
		return r.c.Conn()
	}
	return nil
}
