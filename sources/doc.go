// Package sources connects to the databases that hold protected tables and
// counts a table's rows over the product domain of some of its columns: the
// histogram the matrix mechanism measures. It never sees a strategy or
// releases anything; everything it returns stays inside the proxy.
//
// One Set holds every source of a catalog, each with its engine:
//
//   - sqlite.go: the embedded default (modernc.org/sqlite, read-only). The
//     histogram is counted in Go in one pass, without sorting: straight from
//     the table's b-tree in the file (sqlitefile.go), or, for layouts that
//     reader leaves to SQL (WAL databases, views, WITHOUT ROWID tables), by
//     a Go aggregate function over a plain scan.
//   - postgres.go: PostgreSQL (github.com/jackc/pgx/v5), and what speaks its
//     protocol (Citus and other distributed PostgreSQL).
//   - mysql.go: MySQL and MariaDB (github.com/go-sql-driver/mysql), and what
//     speaks their protocol (Vitess, TiDB).
//   - clickhouse.go: ClickHouse over its native protocol
//     (github.com/ClickHouse/clickhouse-go/v2), a Distributed table over a
//     cluster's shards too; times read through toDateTime(…, 'UTC').
//
// Server engines get one pushed-down GROUP BY over binned columns
// (dialect.go builds it from the catalog's binning rules, so every engine
// implements catalog.Column.CellOf: categorical values match by exact bytes,
// ranges bin by ⌊(x − min) / width⌋, time columns by whole seconds or
// calendar months since min in UTC — every session's time zone is UTC —,
// NULLs and out-of-domain values go where the column's policy says). Sessions are read-only (PostgreSQL's
// default_transaction_read_only, a READ ONLY transaction on both), every
// query is cancelled when its context ends (PostgreSQL's cancel request,
// MySQL's KILL QUERY), pools are bounded by the source's max_connections,
// and a DSN's password never appears in a log or an error (dsn.go).
//
// sources.go caches histograms (cache.go: bounded in bytes, least recently
// used first) per data version — SQLite's data_version, PostgreSQL's WAL
// position, MariaDB's InnoDB log sequence number, or the catalog's
// version_query; a source whose version cannot be known reuses a histogram
// for its cache_ttl. Identical requests share one build, different ones
// build concurrently, a cached histogram answers while others build, and a
// histogram over some of a cached histogram's columns is summed from it in
// memory (marginal.go).
//
// A table with a privacy unit is counted truncated per unit (units.go): each
// unit keeps its max_rows rows of least keyed hash, and with max_groups /
// max_rows_per_group its cells and rows per cell likewise, with the key
// generated once into the data directory. SQLite bounds inside the file
// scan (sqlite_bound.go, keyed SipHash: unithash.go), in as many passes as
// a byte cap on its state needs (decided from the file's size alone), and
// by window functions in SQL for what the scan leaves (sqlite_units.go);
// the servers in one pushed-down statement that hashes and ranks only the
// rows of units over max_rows, and ranks (unit, cell) aggregates, not
// rows, for max_groups / max_rows_per_group; ClickHouse, without window
// functions in 18.16, by LIMIT … BY, on each shard when the table is
// declared sharded by its unit (clickhouse.go).
// profile.go gives the data owner the exact rows-per-unit distribution.
package sources
