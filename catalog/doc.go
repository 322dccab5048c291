// # Catalog file format
//
// A catalog is one YAML document (see demo.yaml for the embedded demo):
//
//	database: demo                      # schema name clients see
//	sources:
//	  main: {driver: sqlite, path: demo.sqlite}
//	tables:
//	  adult:
//	    source: main                    # optional when there is one source
//	    source_table: adult             # optional, defaults to the table name
//	    noise: laplace                  # laplace (default) or gaussian
//	    budget: {total: 10, per_user: 5, default_per_query: 0.1, max_per_query: 1}
//	    columns:                        # order is kept
//	      age: {type: integer, min: 17, max: 90, width: 1}
//	      sex: {type: categorical, values: [Female, Male]}
//	      capital: {type: numeric, edges: [0, 1000, 5000, 100000], out_of_domain: clamp}
//	      workclass: {type: categorical, values: [Private, State-gov], null: cell, out_of_domain: other}
//	users:
//	  analyst: {password: analyst, role: analyst}
//	  auditor: {password_hash: "*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19", role: auditor}
//
// Top-level keys: database (required), sources (required, at least one),
// tables (required, at least one), users, and the optional public_tables,
// ledger, tls, auth_plugin and server sections. Only the keys listed here are
// accepted anywhere; an unknown key is an error.
//
// Database, source, table and column names are lower-cased and must then be
// identifiers: up to 64 letters, digits and underscores, not starting with a
// digit. Two names that differ only in case are duplicates. User names are
// kept as written (MySQL user names are case-sensitive).
//
// Sources: driver (required): sqlite with path (required; relative paths
// are relative to the data directory), or postgres / mysql / clickhouse
// (native protocol, clickhouse://host:9000/db) with exactly one of dsn (the connection string; its value never appears in an error) and
// dsn_env (the environment variable holding it). Optional: max_connections
// (1–1000, the pool and the number of concurrent histogram builds),
// version_query (a query whose value changes with the data) and cache_ttl
// (a duration such as 30s: how long a histogram is reused before the version
// is asked again; postgres and mysql only).
//
// Tables:
//   - source: a declared source; may be left out when exactly one is declared.
//   - source_table: the table in the source database, optionally qualified
//     as schema.table; defaults to the table's name.
//   - noise: laplace (pure ε-DP, the default) or gaussian (ρ-zCDP, reported
//     as (ε, δ)).
//   - budget, in ε: total (over all users), per_user (per user and table)
//     and default_per_query (what one batch spends unless the session sets
//     @dp_epsilon) are required; max_per_query is optional (no limit beyond
//     the budgets when left out). All are > 0, with
//     default_per_query ≤ max_per_query ≤ per_user ≤ total. delta is
//     required, in (0, 1), for gaussian tables and refused for laplace ones.
//   - columns: at least one, in the order clients will see them.
//   - max_cells: the largest product domain one batch may span
//     (DefaultMaxCells unless set; ≥ 1).
//   - privacy_unit: {column, max_rows, max_groups, max_rows_per_group}
//     (unit.go): the guarantee covers all rows of one value of column
//     instead of one row. column is not a domain column; max_rows (k) is
//     required, 1 to MaxUnitRows; max_groups (g) and max_rows_per_group (r)
//     are optional and at most k. Rows with a NULL unit are not counted.
//     It must not also be listed in private_columns.
//   - shard_key: for a clickhouse source, the column its Distributed table
//     is sharded by. When it is the privacy unit's column, contribution
//     bounding runs on each shard; otherwise it runs over the whole table
//     (package sources). Trusted as declared.
//   - private_columns: names of source columns that exist but are never
//     read, selected, grouped, filtered or joined on (a user id); a query
//     naming one is refused with a message (Table.Private). They must not
//     be domain columns.
//
// Public tables (public_tables, optional; public.go): small dimension
// tables that analysts read freely and join protected tables to, keyed by
// name like tables:
//
//	public_tables:
//	  countries:
//	    columns: {code: text, name: text, region: text}   # text, integer or numeric
//	    rows:                                             # inline rows, or:
//	      - [US, United States, North America]
//	      - [FR, France, ~]                               # ~ is NULL
//	  calendar: {source: main, source_table: dim_date, columns: {day: text, holiday: integer}}
//
// Give rows (inline, one value per column) or source (the rows are read
// at startup, by package sources, from source_table, default the table's
// name), not both. A public table holds at most MaxPublicRows rows, and
// its name must not be a protected table's.
//
// Columns, by type:
//   - integer: min and max (integers, min ≤ max, inclusive) and width (≥ 1,
//     default 1): bins [min, min+width), [min+width, min+2·width), ..., the
//     last one ending at max.
//   - numeric: edges, at least 2 numbers, strictly increasing: bins
//     [e0, e1), [e1, e2), ..., [e(k-1), ek].
//   - categorical: values, a non-empty list of distinct values. Stored data
//     matches a value when its text is equal byte for byte (see binning.go).
//   - date, datetime (timestamp is datetime): min and max (times in UTC;
//     dates for a date column) and width (1h, 1d, 7d, 1mo, ...; default
//     1d): bins of width from min, the last one cut at max. See timecol.go
//     for the time rule (UTC, whole seconds) and the units.
//
// Each column also says where NULLs and values outside its domain go:
//   - null: drop (the default: the row does not count in what reads the
//     column), cell (an explicit NULL cell) or other
//     (counted with out-of-domain values; requires out_of_domain: other).
//   - out_of_domain: clamp (to the nearest bin; integer, numeric and time
//     columns only, and their default), drop (the categorical default) or other (an
//     explicit cell labelled "other", which a categorical value may then not
//     be called).
//
// A dropped value drops its row only from what reads the column: every
// aggregate of a query whose WHERE or GROUP BY reads it, and otherwise the
// aggregates whose argument reads it (COUNT(*) beside COUNT(c) still counts
// the row). In a batch where some aggregate counts the dropped rows, the
// histogram counts dropped values in a hidden trailing cell of the column
// (Column.WithDroppedCell), which that aggregate counts and everything
// that reads the column weighs 0 (compile/drop.go). NullCell and OtherCell say which cell a
// NULL or an out-of-domain value goes to, for every source dialect.
//
// A column may declare at most MaxColumnCells cells.
//
// Cache (optional): histograms, answers and plans, each a size in bytes
// (a number, or with a unit: 512MiB, 1GiB, 100MB) bounding that in-memory
// cache; defaults DefaultHistogramCacheBytes, DefaultAnswerCacheBytes,
// DefaultPlanCacheBytes.
//
// Users: role (analyst or auditor, required) and exactly one of password
// (plain text, for demos; hashed on load) or password_hash (the
// mysql_native_password hash, "*" and 40 hex digits, as NativePasswordHash
// computes and MySQL's mysql.user table stores). Empty passwords are refused.
// Optional: default_epsilon, max_epsilon, and max_user_connections (1 to the
// server's max_connections), which replaces the server's
// max_user_connections for that user (a reload applies it).
//
// Server (optional; server.go): what clients may hold of the MySQL front,
// with MySQL's defaults where MySQL has the setting.
//   - max_connections (1–100000, default 151) bounds the sessions
//     (authenticated connections), plus one place kept for auditors, as
//     MySQL keeps one for SUPER; an analyst over it gets 1040.
//   - max_user_connections (1 to max_connections; default two thirds of
//     max_connections, 100 of 151) bounds one user's sessions; one more
//     gets 1226. The default is below max_connections, so one user holding
//     all they may leaves places for the others.
//   - max_unauthenticated (1–100000, default 256) bounds the connections
//     still connecting (greeting, TLS, authentication), apart from the
//     sessions, and max_unauthenticated_per_host (1 to max_unauthenticated,
//     default 64 or max_unauthenticated if smaller) those of one client
//     address (IPv4 address, IPv6 /64). A connection over either cap is
//     taken and the oldest connecting one (of that address, or of all) is
//     closed at once, so idle sockets neither hold descriptors nor block
//     logins.
//   - handshake_timeout (default 10s, at least 2s; MySQL's connect_timeout)
//     bounds the connection phase.
//   - wait_timeout and interactive_timeout (default 8h each) bound a
//     session's idle time between commands, the latter for clients that
//     connect with CLIENT_INTERACTIVE.
//
// Timeouts are whole seconds, written as a number (28800) or a duration
// (30s, 10m, 8h), at most one year.
//
// YAML anchors and aliases may be used to share blocks (for example one
// budget between tables); merge keys (<<) are not supported.
//
// Load and Parse report every problem found, in document order, as Errors;
// each line names the file, the line and the field:
//
//	catalog.yaml:12: tables.adult.columns.age.width: must be ≥ 1
package catalog
