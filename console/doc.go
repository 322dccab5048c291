// Package console is dpproxy's read-only web console: privacy budgets and
// the ledger as pages and pictures, and the JSON API behind them.
//
// A data owner asks how fast a table's budget burns, who spends it, on
// which queries, how much is left, and whether the ledger is intact; the
// console answers with plots and tables instead of SQL over the audit
// tables. It reads the ledger through budget's read APIs only (paging by
// sequence number, sums per time bucket, the spent aggregate, the audit
// report), so pages cost the same on a ledger of 10 entries or 10⁵, and its
// Ledger interface has no method that writes.
//
// Access follows the audit tables' rule (package budgetview): auditors see
// every budget and entry and may verify the ledger; an analyst sees their
// own budget on each table, their own entries and spending, never another
// user's. Users log in with the catalog's users and passwords (auth.go).
//
// Files:
//
//	server.go   Config, Server, routes, security headers, Serve (HTTP or HTTPS)
//	auth.go     passwords, HTTP Basic, browser sessions, CSRF
//	sessions.go where sessions live: memory, or the shared state database
//	data.go     the data behind pages and API, with the access rule applied
//	api.go      the JSON endpoints
//	pages.go    the HTML pages (templates/, static/, embedded)
//	plot.go     spending over time as SVG, drawn with gonum/plot
//	catalog.go  the catalog's tables and domains as shown
//	explain.go  the EXPLAIN box: plans through the engine, charges nothing
package console
