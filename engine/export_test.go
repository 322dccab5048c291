package engine

import (
	"cmp"
	"math/rand/v2"
	"slices"

	"github.com/dpproxy/dpproxy/noise"
)

// This file is compiled into the package's test binary only: nothing in
// a production build can switch noise off.

// withoutNoise makes e release exact answers: every measurement's noise is
// 0 and top-k picks the k largest utilities (ties by position), so tests
// can compare whole answers with the truth through the real planner,
// measurement, stored-measurement reuse and result assembly. Call it
// before e answers anything.
func (e *Engine) withoutNoise() *Engine {
	e.sampler = func() sampler { return noNoise{} }
	return e
}

// noNoise is a sampler that draws nothing.
type noNoise struct{}

func (noNoise) DiscreteLaplace(tNum, tDen uint64) int64    { return 0 }
func (noNoise) DiscreteGaussian(s2Num, s2Den uint64) int64 { return 0 }

func (noNoise) TopK(utilities []int64, k int, epsNum, epsDen uint64, sensitivity int64) []int {
	idx := make([]int, len(utilities))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(utilities[b], utilities[a]) })
	return idx[:min(k, len(idx))]
}

// withSelectionSeed makes e's partition selections draw from a ChaCha8
// stream seeded with seed (each selection continues the stream), so
// statistical tests are reproducible.
func (e *Engine) withSelectionSeed(seed uint64) *Engine {
	src := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24), 'd', 'p', 's', 'e', 'l'})
	e.selectionRand = func() *noise.Rand { return noise.NewRandFrom(src) }
	return e
}

// withNoiseSeed makes e's measurements draw their noise from a ChaCha8
// stream seeded with seed (each measurement continues the stream), so two
// engines answering the same batches in the same order draw the same
// noise: tests can compare what each derives.
func (e *Engine) withNoiseSeed(seed uint64) *Engine {
	src := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24), 'd', 'p', 'n', 'o', 'i'})
	r := noise.NewRandFrom(src)
	e.sampler = func() sampler { return r }
	return e
}
