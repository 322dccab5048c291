// Package exec runs plans on histograms: it measures the plan's strategy
// with exact discrete noise, reconstructs by least squares and returns noisy
// answers, with the exponential mechanism's helpers and interval widths
// beside. It never reads data (package sources builds the histograms) and
// never decides budgets: the caller charges the ledger before calling
// Measure.
package exec
