package sources

import (
	"time"

	"github.com/dpproxy/dpproxy/internal/cache"
)

// entry is one cached histogram.
type entry struct {
	table   string   // tableKey
	cols    []string // columnKeys, in the histogram's axis order
	sizes   []int
	counts  []float64
	version string
	known   bool // version is the source's data version (else built bounds its age)
	built   time.Time
}

// entryOverhead approximates an entry's bytes besides its counts.
const entryOverhead = 512

func (e *entry) bytes() int64 {
	n := int64(8*len(e.counts)) + entryOverhead
	for _, c := range e.cols {
		n += int64(len(c))
	}
	return n
}

// histograms is the histogram cache, bounded in bytes: the least recently
// used histograms go first. A histogram larger than the whole bound is not
// kept.
type histograms struct{ *cache.LRU[string, *entry] }

func newHistograms(limit int64) histograms {
	return histograms{cache.New[string, *entry](limit)}
}

func (c histograms) get(key string) *entry {
	e, _ := c.Get(key)
	return e
}

func (c histograms) put(key string, e *entry) { c.Put(key, e, e.bytes()) }

// superset finds a fresh cached histogram of the same table whose columns
// include every one of cols, the smallest such.
func (c histograms) superset(table string, cols []string, fresh func(*entry) bool) *entry {
	var best *entry
	var bestKey string
	c.Range(func(key string, e *entry) bool {
		if e.table != table || len(e.cols) < len(cols) || !fresh(e) || !contains(e.cols, cols) {
			return true
		}
		if best == nil || len(e.counts) < len(best.counts) {
			best, bestKey = e, key
		}
		return true
	})
	if best != nil {
		c.Get(bestKey) // mark it used
	}
	return best
}

func contains(have, want []string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			if h == w {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
