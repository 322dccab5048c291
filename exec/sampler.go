package exec

// Sampler draws a measurement's noise. In production it is always a
// *noise.Rand from noise.NewRand (exact discrete samplers over
// crypto/rand); the interface exists so that the engine's tests can
// measure without noise and compare answers with the truth exactly (see
// the engine's export_test.go), never so that other randomness can be
// used.
type Sampler interface {
	// DiscreteLaplace draws from the discrete Laplace distribution of
	// scale tNum/tDen (noise.Rand.DiscreteLaplace).
	DiscreteLaplace(tNum, tDen uint64) int64
	// DiscreteGaussian draws from the discrete Gaussian distribution of
	// variance parameter s2Num/s2Den (noise.Rand.DiscreteGaussian).
	DiscreteGaussian(s2Num, s2Den uint64) int64
}
