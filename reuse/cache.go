package reuse

import (
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/measure"
)

// Cache keeps solved stored-measurement systems.
type Cache struct{}

// NewCache returns a cache of up to bytes.
func NewCache(bytes int64) *Cache { return &Cache{} }

// estimate is estimate, through the policy's cache.
func (pol *Policy) estimate(w *compile.Workload, doms []*domain, recs []*measure.Measurement, f float64) (*Estimated, []int64, bool) {
	return estimate(w, doms, recs, f)
}
