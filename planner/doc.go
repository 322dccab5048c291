// Package planner chooses how to measure a workload under differential
// privacy: the matrix mechanism. For a candidate strategy A it computes the
// exact expected squared error of every answer, σ²·w(AᵀA)⁺wᵀ, and the
// sensitivity (largest column L1 norm for Laplace, L2 for Gaussian), and
// picks the candidate that best meets the plan's objective before anything
// is spent.
// The planner never touches data.
//
// Strategies over several columns are Kronecker products of per-column
// strategies, so planning cost grows with the sum of the column sizes, not
// their product: a candidate's error factors into per-column bilinear and
// diagonal forms (space.kronError), and a column's part of it is
// trace(G_j^eff·(A_jᵀA_j)⁻¹) for an effective Gram matrix G_j^eff
// (space.effectiveGram). Per column the planner tries the integer families
// (identity, hierarchical, Haar wavelet, the column's own rows) and
// optimised strategies for G_j^eff:
//
//   - Laplace: p-Identity strategies [I; Θ]·D (HDMM's OPT_0 family), by a
//     projected L-BFGS on Θ ≥ 0 with Woodbury-form objective and gradient
//     (opt_laplace.go), from multi-level "tent" starts that reach HDMM's
//     figures within tens of evaluations (optimize.go);
//   - Gaussian: the convex optimum of trace(GX⁻¹) s.t. diag(X) ≤ 1, by a
//     dual fixed point whose every iterate certifies a lower bound
//     (opt_gauss.go), in O(n) per iteration when G⁻¹ is tridiagonal (all
//     ranges, prefixes).
//
// Optimised strategies are real-valued; they are rounded to an integer grid
// with no increase in sensitivity, and their error is computed from the
// rounded matrix (grid.go).
//
// When the queries touch different column sets, strategies of marginal and
// residual blocks (ResidualPlanner) are planned in the algebra of E_T
// projections over the downward closure of those sets (residual.go), each
// block with its own noise and share of ε (blocks.go), for compiled
// workloads (marginal_plan.go) and for marginal workloads of any width
// (marginals.go); such plans count one histogram per column set, never
// the product domain. The workload itself may also be measured with one
// noise per aggregate (direct_split.go).
//
// What is minimised is the plan's Objective (objective.go): by default
// every answer's variance relative to the variance it would have measured
// alone; for accuracy targets the largest per-answer variance (ForTarget).
// A Planner caches optimised strategies by workload shape and whole plans
// by workload (cache.go).
//
// Every optimiser stops at its tolerance or at a budget of counted work,
// never at the clock (effort.go), so a plan is a deterministic function of
// the workload and the options, whatever the machine's load or the
// Planner's caches; Plan.StrategyDigest fingerprints it for auditors
// (digest.go). Planning takes a context, which only cancels.
//
// Stored measurements (package measure) are combined by generalised least
// squares over a batch's own columns, with their exact covariance
// (known.go): package reuse decides from them what a batch gets for
// free, or combines with a new measurement at a smaller ε.
//
// # Files
//
// Plans and the choice:
//
//   - plan.go: what a plan is — Plan, Options, Candidate, Kind; a plan's
//     per-answer Variance; its noise calibration (calibrate, calibratable,
//     ErrScale) and Recalibrated for another ε or ρ.
//   - choose.go: the choice — Choose, Alternatives, ForTarget; chooseWith
//     collects every family's candidates in a candidateSet (addDirect,
//     addKronecker with optimiseColumns, addMarginals), ranks them and
//     builds the winner.
//   - objective.go: what is minimised — Objective, the answers' weights,
//     chooseMinMax's reweighting for the largest variance, plans' largest
//     variances.
//   - cells.go: the cell limit — CountedCells, the queries' own tables,
//     CellsError.
//   - cache.go: Planner, its caches of optimised column strategies and of
//     plans (keyed by fingerprint), bounded in bytes.
//   - effort.go: optimisation budgets as counted work; cancellation.
//   - digest.go: Plan.StrategyDigest.
//   - contribution.go: Contribution, a privacy unit's bounds, and the
//     sensitivities they scale.
//
// Strategy families over a compiled workload:
//
//   - space.go: the workload seen per column — distinct factor vectors and
//     the candidate column strategies with their bilinear and diagonal
//     error forms, shared by the families.
//   - kronecker.go: Kronecker products — the search over per-column
//     choices, their exact error and sensitivity, a column's effective
//     Gram, per-answer forms, the plan a product makes.
//   - direct.go: the workload as its own strategy — integer row scales,
//     exact sensitivity, Dense.
//   - direct_split.go: the workload with one noise per aggregate
//     (DirectNoise).
//   - marginal_plan.go: marginal and residual blocks for compiled
//     workloads.
//   - marginals.go: marginal workloads of any width (ChooseMarginals).
//   - residual.go: the E_T algebra over a family of column sets and the
//     blocks' weights; blocks.go: MarginalStrategy and its blocks'
//     calibration; colset.go: column sets.
//
// Column strategies and their optimisers:
//
//   - strategy.go: ColumnStrategy and the integer families (Identity,
//     Hierarchical, Wavelet, Rows).
//   - options.go: colOpt, a column candidate as the planner evaluates it,
//     its matrices built only when chosen.
//   - gram.go: structured Gram matrices; plan_gram.go: planning from Grams
//     (ChooseKronecker, GramPlan).
//   - optimize.go: the optimisers' drivers (Laplace starts, Gaussian
//     solves); opt_laplace.go: p-Identity objective and gradient;
//     opt_gauss.go: the Gaussian dual and its certificate; projlbfgs.go:
//     projected L-BFGS; compress.go: optimising over classes of alike
//     cells; grid.go: rounding to an integer grid; trinv.go: triangular
//     inversion.
//
// Long columns, kept structured (never n×n):
//
//   - tree.go: Tree, the b-ary hierarchical strategy as a tree, its
//     sensitivity and least squares in O(n) (Hay et al.'s consistency);
//     PlanTree and TreePlan, a long column's CDF with its noise (the
//     engine's DP_QUANTILE past compile.MaxQuantileCells).
//   - tree_error.go: Tree.PrefixError, the exact prefix-workload error of
//     a weighted tree in O(n·depth).
//   - tree_plan.go: ChooseKronecker's options for prefix columns past
//     longColumn: weighted trees and the square-root factorisation.
//   - tree_blocks.go: BlockPrefix, blocks measured by one optimised
//     strategy and their totals by another, its exact error in O(M²) per
//     weighting (tridiagonal reduction, Sherman–Morrison) and its least
//     squares; tree_blocks_gram.go: the centred prefix Gram its blocks'
//     strategy is optimised for.
//   - reduce.go: a compiled batch's long columns planned over the
//     classes of cells it tells apart (a week of hours, a year of days
//     out of five years of hours), the plan restored over its cells.
//
// Stored measurements: known.go (GLS, Estimate), known_blocks.go and
// known_factors.go (domains over MaxKnownCells solved block by block,
// factors read by column) and classes.go (Classes, solving over classes
// of cells).
package planner
