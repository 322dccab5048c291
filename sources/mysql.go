package sources

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/go-sql-driver/mysql"
)

// mysqlDialect is MySQL's and MariaDB's dialect (and that of engines
// speaking their protocol: Vitess, TiDB).
type mysqlDialect struct{}

var _ dialect = mysqlDialect{}

func (mysqlDialect) ident(name string) string { return "`" + strings.ReplaceAll(name, "`", "``") + "`" }

func (mysqlDialect) param(int) string { return "?" }

// exactText converts the column to utf8mb4 and compares it as a binary
// string: byte equality, with no collation and no PAD SPACE (so 'Male ' is
// not 'Male' and 'male' is not 'Male', whatever the column's collation).
func (mysqlDialect) exactText(col string) string {
	return "CAST(CONVERT(" + col + " USING utf8mb4) AS BINARY)"
}

// like matches under utf8mb4_bin: by code point, case and accents
// counting, and LIKE never pads.
func (mysqlDialect) like(col string, p catalog.Pattern, bind func(any) string) string {
	pat := bind(sqlPattern(p))
	return "CONVERT(" + col + " USING utf8mb4) COLLATE utf8mb4_bin LIKE CONVERT(" + pat + " USING utf8mb4) COLLATE utf8mb4_bin ESCAPE " + bind(p.Escape)
}

// keyedHash is SHA2(…, 256), lower-case hex, over the utf8mb4 text.
func (mysqlDialect) keyedHash(key string, vals []string) string {
	parts := []string{"CONVERT(" + key + " USING utf8mb4)"}
	for _, v := range vals {
		parts = append(parts, "CHAR(31 USING utf8mb4)", hashText(v, "CONCAT('V', CONVERT("+v+" USING utf8mb4))"))
	}
	return "CAST(SHA2(CONCAT(" + strings.Join(parts, ", ") + "), 256) AS BINARY)"
}

// materializeCTE: MySQL and MariaDB have no keyword for it (MariaDB
// computes a WITH table once per reference: the bounded queries refer to
// theirs once where they can, units.go).
func (mysqlDialect) materializeCTE() string { return "" }

// mysqlBoundedTmpTable is the size, in bytes, of the in-memory temporary
// tables a bounded query may use before they are converted to on-disk
// ones: the (unit, cell) pairs of max_groups bounding number about as many
// as the table's rows, and the default 16MB sends them to disk.
const mysqlBoundedTmpTable = 256 << 20

// boundedSession raises the session's in-memory temporary table size,
// never lowering a larger setting. MySQL has no per-transaction SET: it
// lasts for the proxy's pooled connection, which only ever runs
// histograms.
func (mysqlDialect) boundedSession() []string {
	return []string{fmt.Sprintf("SET SESSION tmp_table_size = GREATEST(@@tmp_table_size, %[1]d), max_heap_table_size = GREATEST(@@max_heap_table_size, %[1]d)", mysqlBoundedTmpTable)}
}

// floorDiv divides by a double: '/' on integers would round to
// div_precision_increment decimals (29999/30000 shows as 1.0000), and the
// quotient is at most the column's number of bins, so the double is exact
// for integer columns and IEEE for floating ones.
func (mysqlDialect) floorDiv(col string, min, width int64) string {
	return fmt.Sprintf("FLOOR((%s - %d) / %de0)", col, min, width)
}

// timeBin counts whole seconds (or months) from Min with TIMESTAMPDIFF,
// which truncates a fractional second as the catalog's rule does (the
// difference is ≥ 0 here), and reads DATETIME and DATE as they are, a
// TIMESTAMP in the session's UTC.
func (mysqlDialect) timeBin(col string, c *catalog.Column) string {
	if c.Months > 0 {
		return fmt.Sprintf("TIMESTAMPDIFF(MONTH, '%s', %s) DIV %d", catalog.FormatTime(c.Min, false), col, c.Months)
	}
	return fmt.Sprintf("TIMESTAMPDIFF(SECOND, '%s', %s) DIV %d", catalog.FormatTime(c.Min, false), col, c.Width)
}

// defaultVersion is InnoDB's log sequence number (MariaDB's
// Innodb_lsn_current): every committed change to an InnoDB table moves it.
// MySQL 8 and other engines have no such status variable: the query then
// returns no row and cached histograms live the source's cache_ttl.
func (mysqlDialect) defaultVersion() string {
	return "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'INNODB_LSN_CURRENT'"
}

// mysqlDefaultConnections is a MySQL source's pool size unless the catalog
// sets max_connections.
const mysqlDefaultConnections = 4

func openMySQL(ctx context.Context, dsn string, maxConns int) (*server, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("cannot parse the dsn (%s)", redact(err.Error(), dsn))
	}
	cfg.InterpolateParams = false // categorical values travel as bound parameters
	cfg.ParseTime = false
	// Time columns are binned in UTC (see package catalog's time rule):
	// TIMESTAMP values are shown in the session's time zone.
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	// Read-only sessions: every histogram runs in START TRANSACTION READ
	// ONLY (see server.count). (The session variable is transaction_read_only
	// in MySQL but tx_read_only in MariaDB before 11.1, so it is not set.)
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("cannot use the dsn (%s)", redact(err.Error(), dsn, cfg.Passwd))
	}
	db := sql.OpenDB(conn)
	if maxConns == 0 {
		maxConns = mysqlDefaultConnections
	}
	// + one for data-version queries and one for KILL QUERY.
	db.SetMaxOpenConns(maxConns + 2)
	db.SetMaxIdleConns(maxConns + 2)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect: %s", redact(err.Error(), dsn, cfg.Passwd))
	}
	s := &server{db: db, d: mysqlDialect{}}
	s.cancel = func(ctx context.Context, c *sql.Conn) (func(), error) { return killOnCancel(ctx, db, c) }
	return s, nil
}

// killOnCancel makes a cancelled ctx stop the query running on c: the Go
// driver only closes its socket, and the server would go on computing the
// GROUP BY, so another session sends KILL QUERY for c's connection id.
func killOnCancel(ctx context.Context, db *sql.DB, c *sql.Conn) (func(), error) {
	var id int64
	if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case <-done:
		case <-ctx.Done():
			kctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			db.ExecContext(kctx, fmt.Sprintf("KILL QUERY %d", id))
		}
	}()
	return func() { close(done); <-finished }, nil
}
