package sources

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/stdlib"
)

// postgres is PostgreSQL's dialect (and that of engines speaking its
// protocol: Citus, other distributed PostgreSQL).
type postgres struct{}

var _ dialect = postgres{}

// pgUnitsSince is the first PostgreSQL (server_version_num) with
// hash_record_extended, which keyedHash ranks a unit's rows by.
const pgUnitsSince = 140000

func (postgres) ident(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

func (postgres) param(n int) string { return "$" + strconv.Itoa(n) }

// exactText compares under the "C" collation: byte order and byte
// equality, whatever the column's or database's collation.
func (postgres) exactText(col string) string { return "(" + col + ")::text COLLATE \"C\"" }

// like matches under the "C" collation: character by character (the
// database's encoding decides what a character is), case counting.
func (postgres) like(col string, p catalog.Pattern, bind func(any) string) string {
	pat := bind(sqlPattern(p))
	return "(" + col + ")::text COLLATE \"C\" LIKE " + pat + "::text ESCAPE " + bind(p.Escape) + "::text"
}

// keyedHash is hash_record_extended (a bigint, PostgreSQL 14+) of the
// values as a row, each hashed by its own type's extended hash with a seed
// derived from the key: PostgresUnitHash, unithash.go, which says why this
// hash. A quoted literal is typed text (a row of unknown-typed values has
// no hash function).
func (postgres) keyedHash(key string, vals []string) string {
	elems := make([]string, len(vals))
	for i, v := range vals {
		if strings.HasPrefix(v, "'") {
			v += "::text"
		}
		elems[i] = v
	}
	return "hash_record_extended(ROW(" + strings.Join(elems, ", ") + "), hashtextextended(CAST(" + key + " AS text), 0))"
}

// materializeCTE: PostgreSQL 12+ otherwise inlines a WITH table referenced
// once, and a parallel plan then aggregates the heavy units in every
// worker.
func (postgres) materializeCTE() string { return "MATERIALIZED " }

// pgBoundedWorkMem is the work_mem, in kB, a bounded query may use per
// sort or hash table: PostgreSQL's default 4MB spills the per-unit
// aggregate of a million rows to disk.
const pgBoundedWorkMem = 64 << 10

// boundedSession raises work_mem for the bounded query's transaction only
// (set_config(…, true) is SET LOCAL), never lowering a larger setting, and
// turns JIT compilation off for it: the bounded query's estimated cost is
// past jit_above_cost where the plain GROUP BY's is not, and compiling its
// many expressions took longer (0.1–0.2 s) than it saved on a million rows.
// (pg_settings has no jit before PostgreSQL 11: nothing is set then.)
func (postgres) boundedSession() []string {
	return []string{
		fmt.Sprintf("SELECT set_config('work_mem', '%[1]dkB', true) FROM pg_settings WHERE name = 'work_mem' AND setting::bigint < %[1]d", pgBoundedWorkMem),
		"SELECT set_config('jit', 'off', true) FROM pg_settings WHERE name = 'jit'",
	}
}

// floorDiv: integer columns divide as integers (exact), float8 as IEEE.
func (postgres) floorDiv(col string, min, width int64) string {
	return fmt.Sprintf("floor((%s - %d) / %d)::bigint", col, min, width)
}

// timeBin: seconds since the epoch (a timestamp without time zone read as
// UTC, a timestamptz in UTC, a date at midnight), or calendar months.
func (postgres) timeBin(col string, c *catalog.Column) string {
	if c.Months > 0 {
		t := time.Unix(c.Min, 0).UTC()
		return fmt.Sprintf("(((extract(year from %s)::bigint - %d) * 12 + extract(month from %s)::bigint - %d) / %d)",
			col, t.Year(), col, int(t.Month()), c.Months)
	}
	return fmt.Sprintf("floor((extract(epoch from %s) - %d) / %d)::bigint", col, c.Min, c.Width)
}

// defaultVersion is the write-ahead log position (the replay position on a
// standby): every committed change to a logged table moves it, so a
// histogram cached at one position is current while the position holds.
// It also moves for writes elsewhere in the cluster, which only costs a
// rebuild. Unlogged tables do not move it: give them a version_query or a
// cache_ttl.
func (postgres) defaultVersion() string {
	return "SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END)::text"
}

// pgDefaultConnections is a PostgreSQL source's pool size unless the
// catalog sets max_connections.
const pgDefaultConnections = 4

func openPostgres(ctx context.Context, dsn string, maxConns int) (*server, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("cannot parse the dsn (%s)", redact(err.Error(), dsn))
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	// Every session reads only: the histogram cannot write, whatever the
	// role may do.
	cfg.RuntimeParams["default_transaction_read_only"] = "on"
	// Time columns are binned in UTC (see package catalog's time rule).
	cfg.RuntimeParams["TimeZone"] = "UTC"
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = "dpproxy"
	}
	// A cancelled context sends PostgreSQL's cancel request, so the server
	// stops the query instead of running it to the end.
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, CancelRequestDelay: 0, DeadlineDelay: 2 * time.Second}
	}
	db := stdlib.OpenDB(*cfg)
	if maxConns == 0 {
		maxConns = pgDefaultConnections
	}
	db.SetMaxOpenConns(maxConns + 1) // + one for data-version queries
	db.SetMaxIdleConns(maxConns + 1)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect: %s", redact(err.Error(), dsn, cfg.Password))
	}
	s := &server{db: db, d: postgres{}}
	var version int
	if err := db.QueryRowContext(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		db.Close()
		return nil, fmt.Errorf("server version: %w", err)
	}
	if version < pgUnitsSince {
		// Tables without a privacy unit still work; bounding needs the hash.
		s.unitsErr = fmt.Errorf("privacy units on PostgreSQL need version 14 or later (their rows are ranked by hash_record_extended); this server is %d.%d", version/10000, version%10000/100)
	}
	return s, nil
}
