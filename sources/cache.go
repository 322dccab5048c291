package sources

import (
	"container/list"
	"sync"
	"time"
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

	key  string
	elem *list.Element
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

// lru is the histogram cache, bounded in bytes: the least recently used
// histograms go first. A histogram larger than the whole bound is not kept.
type lru struct {
	mu    sync.Mutex
	limit int64
	used  int64
	order *list.List // front: most recent
	byKey map[string]*entry
}

func newLRU(limit int64) *lru {
	return &lru{limit: limit, order: list.New(), byKey: map[string]*entry{}}
}

func (c *lru) get(key string) *entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.byKey[key]
	if e != nil {
		c.order.MoveToFront(e.elem)
	}
	return e
}

func (c *lru) put(key string, e *entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.byKey[key]; old != nil {
		c.remove(old)
	}
	if e.bytes() > c.limit {
		return
	}
	e.key = key
	e.elem = c.order.PushFront(e)
	c.byKey[key] = e
	c.used += e.bytes()
	for c.used > c.limit {
		c.remove(c.order.Back().Value.(*entry))
	}
}

func (c *lru) remove(e *entry) {
	c.order.Remove(e.elem)
	delete(c.byKey, e.key)
	c.used -= e.bytes()
}

// Used is the cache's current size in bytes.
func (c *lru) size() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

// superset finds a fresh cached histogram of the same table whose columns
// include every one of cols, the smallest such.
func (c *lru) superset(table string, cols []string, fresh func(*entry) bool) *entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	var best *entry
	for _, e := range c.byKey {
		if e.table != table || len(e.cols) < len(cols) || !fresh(e) || !contains(e.cols, cols) {
			continue
		}
		if best == nil || len(e.counts) < len(best.counts) {
			best = e
		}
	}
	if best != nil {
		c.order.MoveToFront(best.elem)
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
