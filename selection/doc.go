// Package selection releases the keys of a column that has no public list
// of values (an open column) by differentially private partition
// selection: per key, the number of distinct privacy units that hold it
// after contribution bounding (each unit in at most MaxGroups keys) is
// tested with noise, and only the keys that pass are released.
//
// Files:
//   - mechanism.go: the [Mechanism] value, [Choose] (which mechanism for
//     which bounds and noise family, as Google's differential-privacy
//     library chooses), [Mechanism.Keep] and the planning figures that
//     EXPLAIN shows ([Mechanism.UnitsFor]);
//   - geometric.go: the truncated geometric mechanism, optimal for a unit
//     in at most 3 keys (Desfontaines, Voss, Gipson, Mandayam,
//     "Differentially private partition selection", PoPETs 2022), with its
//     release probabilities computed in exact integer arithmetic;
//   - threshold.go: the Laplace and Gaussian thresholds for larger bounds.
//
// Every release decision is drawn from a noise.Rand (crypto/rand in
// production) by the exact samplers of package noise; floating point is
// used only for the planning figures. The package knows no SQL and charges
// nothing: the caller charges the [Mechanism.Cost] in the ledger before it
// releases any key, and the released keys are public from then on
// (post-processing).
package selection
