// Package budgetview is the one place that says who may see which budgets:
// it pairs what the ledger says was spent with the limits of the catalog in
// force, for the two views dpproxy offers.
//
//   - All (role auditor): every table's total and every user's budget on
//     every table — the audit table dpproxy.dp_budgets and the web
//     console's auditor view.
//   - Mine (any analyst): the user's own budget on each table, and nothing
//     of what other users spent — the audit table dpproxy.my_budget and the
//     web console's analyst view.
//
// CanSeeAll decides between them. The package reads the ledger through a
// small interface and never writes to it.
package budgetview
