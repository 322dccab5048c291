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
// tables (required, at least one), users, and the optional ledger, tls,
// auth_plugin and server sections. Only the keys listed here are
// accepted anywhere; an unknown key is an error.
//
// Database, source, table and column names are lower-cased and must then be
// identifiers: up to 64 letters, digits and underscores, not starting with a
// digit. Two names that differ only in case are duplicates. User names are
// kept as written (MySQL user names are case-sensitive).
//
// Sources: driver (required; sqlite is the only driver so far) and path
// (required; relative paths are relative to the data directory).
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
//
// Columns, by type:
//   - integer: min and max (integers, min ≤ max, inclusive) and width (≥ 1,
//     default 1): bins [min, min+width), [min+width, min+2·width), ..., the
//     last one ending at max.
//   - numeric: edges, at least 2 numbers, strictly increasing: bins
//     [e0, e1), [e1, e2), ..., [e(k-1), ek].
//   - categorical: values, a non-empty list of distinct values (compared as
//     text, case-sensitively).
//
// Each column also says where NULLs and values outside its domain go:
//   - null: drop (the default: the row does not count in this column's
//     histogram), cell (an explicit NULL cell) or other (counted with
//     out-of-domain values; requires out_of_domain: other).
//   - out_of_domain: clamp (to the nearest bin; integer and numeric columns
//     only, and their default), drop (the categorical default) or other (an
//     explicit cell labelled "other", which a categorical value may then not
//     be called).
//
// A column may declare at most MaxColumnCells cells.
//
// Users: role (analyst or auditor, required) and exactly one of password
// (plain text, for demos; hashed on load) or password_hash (the
// mysql_native_password hash, "*" and 40 hex digits, as NativePasswordHash
// computes and MySQL's mysql.user table stores). Empty passwords are refused.
//
// Server (optional): what clients may hold of the MySQL front, with MySQL's
// defaults. max_connections (1–100000, default 151) bounds the open client
// connections, authenticated or not; handshake_timeout (default 10s, at
// least 2s; MySQL's connect_timeout) bounds the connection phase;
// wait_timeout and interactive_timeout (default 8h each) bound a session's
// idle time between commands, the latter for clients that connect with
// CLIENT_INTERACTIVE. Timeouts are whole seconds, written as a number (28800)
// or a duration (30s, 10m, 8h), at most one year.
//
// YAML anchors and aliases may be used to share blocks (for example one
// budget between tables); merge keys (<<) are not supported.
//
// Load and Parse report every problem found, in document order, as Errors;
// each line names the file, the line and the field:
//
//	catalog.yaml:12: tables.adult.columns.age.width: must be ≥ 1
package catalog
