// Package noise has one job: exact samplers for differential-privacy noise
// and selection, reading randomness only from crypto/rand.
//
// Every sampling decision is made with exact integer or rational
// arithmetic (uint64, 128-bit via math/bits, or math/big on rare slow
// paths); floating point is never consulted when deciding an outcome. The
// samplers follow Canonne, Kamath and Steinke, "The Discrete Gaussian for
// Differential Privacy" (NeurIPS 2020):
//
//   - [Rand.BernoulliExp] is their Algorithm 1, Bernoulli(exp(-γ)) for
//     rational γ ≥ 0;
//   - [Rand.DiscreteLaplace] is Algorithm 2;
//   - [Rand.DiscreteGaussian] is Algorithm 3.
//
// [Rand.ExponentialMechanism] and [Rand.TopK] select indices with the
// exponential mechanism (weights exp(ε·u/Δ), for monotone utilities),
// sampled exactly as a chain of Bernoulli trials, each decided by one
// binary digit of its probability at a random position drawn from the
// random bits alone, with interval arithmetic on fixed-point integers
// (expmech.go, expmech_digits.go): the randomness read and the work done
// do not depend on the utilities.
//
// The float64 helpers ([DiscreteLaplaceVariance], [DiscreteGaussianVariance],
// [RationalAtLeast]) are for planning only: they compute error forecasts and
// turn a planned noise scale into the exact rational parameter the samplers
// take. They never make a sampling decision.
//
// A [Rand] is not safe for concurrent use; create one per goroutine or
// per measurement with [NewRand].
package noise
