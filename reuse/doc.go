// Package reuse decides whether the stored measurements answer a batch,
// and with what: its one job is the reuse policy.
//
// Every measurement a batch makes is stored (package measure) under the
// table's definition and the source's data version. A later batch over
// the same version is first answered by generalised least squares over
// every stored measurement that joins its columns (planner.GLS, one
// system per estimation domain: domains.go), with each answer's exact
// variance. If every answer meets the batch's accuracy — the session's
// @dp_max_stderr, or without one the variance the batch's own plan would
// give at the session's ε — the batch is answered from them alone, free.
// Otherwise, over domains of at most CombineCells cells (for a blocked
// domain: whose largest block with the candidate is), candidate new
// measurements (the batch's plan, the planner's best alternatives, a
// plan for only the queries the store does not already answer) are each
// scored by the least ε (ρ) at which, combined with the stored ones,
// they meet that accuracy; the cheapest is measured at that ε, and every
// answer comes from the combined estimate (decide.go). A larger domain
// is measured by the batch's plan and answered from that measurement
// alone, as with reuse off: combining there would only add accuracy
// beyond what was asked, for an O(n³) solve on the request path.
//
// The decision reads only public things: the workload, the plans, the
// stored measurements' structure and noise variances, and the session's
// options; never their noisy answers or the data. Every estimate is a
// fixed linear map of released answers: post-processing, which costs
// nothing.
//
// What is stored (records.go): Kronecker plans; plans of marginal and
// residual blocks (one measurement per block); direct plans whose
// aggregates are products of per-column vectors (COUNT, SUM, a WHERE
// that is a conjunction of per-column conditions); a top-k query's value
// measurement. A measurement joins a domain over other columns when the
// columns it sums out count every row and its factors there have full
// column rank.
//
// Cost (cache.go, bound.go, fold.go): solving a domain's system is
// O(n³) over its n ≤ 1,024 cells, or, over a domain of up to 65,536 cells
// solved block by block (planner.MaxBlockedCells), O(Σ|B|³) over blocks
// of at most 1,024: a year of hourly bins with daily counts is 365 blocks
// of 24. A public bound shows most batches the
// stored measurements cannot answer without solving them. The solved
// stored-only system is cached per domain and measurement set, and a
// system missing from the cache is built from the cached one of the
// longest prefix of its measurements; the system combined with a new
// measurement seeds the cache for the next batch, which will find that
// measurement stored, and a batch measured alone has that system built
// and solved in the background (Fold). What is released never depends
// on what the cache holds or when the background work finishes.
//
// The engine loads the stored measurements, calls Policy.Decide, and
// releases, charges, measures and stores; this package does none of
// those.
package reuse
