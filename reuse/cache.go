package reuse

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/dpproxy/dpproxy/internal/cache"
	"github.com/dpproxy/dpproxy/measure"
	"github.com/dpproxy/dpproxy/planner"
)

// Cache keeps solved systems of stored measurements, so that a batch does
// not pay the O(n²) per measurement to build a domain's information
// matrix and the O(n³) to factor it when another batch already did over
// the same measurements. An entry is keyed by the domain's columns, its
// classes of cells, and the identities of the measurements that join it:
// stored measurements never change, so an entry is never stale, only
// unused once more measurements join (the least recently used go first).
// When a batch is measured and combined, the combined system is put
// under the key the next batch will find (Decision.Remember): that is
// the update as measurements arrive.
//
// Everything cached is a function of released measurements and public
// structure: caching changes no answer, only when it is computed.
type Cache struct {
	lru *cache.LRU[string, *solved] // nil: nothing is kept
}

// NewCache returns a cache of up to bytes (≤ 0: none).
func NewCache(bytes int64) *Cache {
	if bytes <= 0 {
		return &Cache{}
	}
	return &Cache{lru: cache.New[string, *solved](bytes)}
}

// solved is one domain's system over some measurements and, once asked
// for, its estimate (solved once, however many batches ask at a time).
type solved struct {
	g    *planner.GLS
	once sync.Once
	est  *planner.Estimate // nil when g has no information
}

// estimate solves s's system the first time and returns the estimate.
func (s *solved) estimate() *planner.Estimate {
	s.once.Do(func() {
		if s.est == nil && !s.g.Empty() {
			s.est, _ = s.g.Solve()
		}
	})
	return s.est
}

// system returns the entry under keys[0], built on a miss: from the
// entry of the longest prefix of ms found under keys[i] (the system of
// ms[:len(ms)-i], cloned, with the last i added: a batch after one that
// stored new measurements adds only those), else from g, empty, with all
// of ms added. Adding the same measurements in the same order gives the
// same information matrix bit for bit, however it was started.
func (c *Cache) system(keys []string, g *planner.GLS, ms []*measure.Measurement) *solved {
	if c != nil && c.lru != nil {
		if s, ok := c.lru.Get(keys[0]); ok {
			return s
		}
		for i := 1; i < len(keys); i++ {
			if p, ok := c.lru.Get(keys[i]); ok {
				g, ms = p.g.Clone(), ms[len(ms)-i:]
				break
			}
		}
	}
	for _, m := range ms {
		g.Add(m, 1)
	}
	s := &solved{g: g}
	c.put(keys[0], s)
	return s
}

// put keeps s under key (the first entry stays).
func (c *Cache) put(key string, s *solved) {
	if c == nil || c.lru == nil {
		return
	}
	// The information matrix and, once solved, a factor of its size.
	c.lru.Add(key, s, 2*s.g.Bytes()+int64(len(key)))
}

// systemKey names a domain's system: its columns (as the system sees
// them), the class of every cell of each batch column (sizes) when it is
// solved over classes, and the identity of each measurement that joins,
// in order. A stored measurement is identified by its table, definition,
// data version, ID, ledger entry and time: IDs are unique within a store
// file, and the rest tells apart stores that reuse them.
func systemKey(cols []measure.Column, cls *planner.Classes, sizes []int, ms []*measure.Measurement) string {
	return systemKeys(cols, cls, sizes, ms, 0)[0]
}

// prefixKeys is how many shorter prefixes of a system's measurements
// Cache.system looks for: a batch usually stores a few records (one per
// block of a marginal plan).
const prefixKeys = 32

// systemKeys is systemKey of ms[:len(ms)-i] for i = 0 … back (while
// some measurement is left), in one pass.
func systemKeys(cols []measure.Column, cls *planner.Classes, sizes []int, ms []*measure.Measurement, back int) []string {
	h := sha256.New()
	for _, c := range cols {
		fmt.Fprintf(h, "col %+v\n", c)
	}
	if cls != nil {
		for j, n := range sizes {
			fmt.Fprintf(h, "classes %d:", j)
			for i := 0; i < n; i++ {
				fmt.Fprintf(h, " %d", cls.Class(j, i))
			}
			h.Write([]byte("\n"))
		}
	}
	back = min(back, len(ms)-1)
	keys := make([]string, max(back, 0)+1)
	for k, m := range ms {
		fmt.Fprintf(h, "m %q %q %q %d %d %d\n", m.Table, m.Def, m.Version, m.ID, m.LedgerSeq, m.Time.UnixNano())
		if i := len(ms) - 1 - k; i <= back {
			keys[i] = hex.EncodeToString(h.Sum(nil))
		}
	}
	if len(ms) == 0 {
		keys[0] = hex.EncodeToString(h.Sum(nil))
	}
	return keys
}
