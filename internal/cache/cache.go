// Package cache is the proxy's one in-memory cache: least recently used
// entries go first once the entries' sizes, which the caller states, add up
// to more than a bound in bytes. The histogram cache (sources), the answer
// store's memory (engine), the measurement cache (measure) and the
// planner's cache of optimised columns and plans (planner) use it.
package cache

import (
	"container/list"
	"sync"
)

// LRU maps keys to values, bounded in bytes. It is safe for concurrent use.
// The zero LRU is not usable: call New.
type LRU[K comparable, V any] struct {
	mu    sync.Mutex
	limit int64
	used  int64
	order *list.List // front: most recently used; values *item[K, V]
	items map[K]*list.Element
}

type item[K comparable, V any] struct {
	key  K
	val  V
	size int64
}

// New returns an empty cache holding at most limit bytes.
func New[K comparable, V any](limit int64) *LRU[K, V] {
	return &LRU[K, V]{limit: limit, order: list.New(), items: map[K]*list.Element{}}
}

// Get returns the value under key and marks it most recently used.
func (c *LRU[K, V]) Get(key K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*item[K, V]).val, true
}

// Put keeps v under key as the most recently used entry, replacing any
// value there, and evicts the least recently used entries while the cache
// is over its bound. A value larger than the whole bound is not kept (and
// the value it would have replaced is removed): Put then reports false.
func (c *LRU[K, V]) Put(key K, v V, size int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.removeLocked(el)
	}
	return c.insertLocked(key, v, size)
}

// Add is Put unless key is cached already: the value there stays (and is
// not marked used). It reports whether v is now cached.
func (c *LRU[K, V]) Add(key K, v V, size int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[key]; ok {
		return false
	}
	return c.insertLocked(key, v, size)
}

func (c *LRU[K, V]) insertLocked(key K, v V, size int64) bool {
	if size > c.limit {
		return false
	}
	c.items[key] = c.order.PushFront(&item[K, V]{key: key, val: v, size: size})
	c.used += size
	for c.used > c.limit {
		c.removeLocked(c.order.Back())
	}
	return true
}

// Remove forgets the value under key, reporting whether there was one.
func (c *LRU[K, V]) Remove(key K) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if ok {
		c.removeLocked(el)
	}
	return ok
}

func (c *LRU[K, V]) removeLocked(el *list.Element) {
	it := el.Value.(*item[K, V])
	c.order.Remove(el)
	delete(c.items, it.key)
	c.used -= it.size
}

// Clear forgets every entry.
func (c *LRU[K, V]) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.order.Init()
	clear(c.items)
	c.used = 0
}

// Len is the number of entries.
func (c *LRU[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
}

// Bytes is the sum of the entries' sizes.
func (c *LRU[K, V]) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

// Limit is the bound in bytes.
func (c *LRU[K, V]) Limit() int64 { return c.limit }

// Range calls f for each entry, most recently used first, until f returns
// false. It does not mark entries used (Get the one chosen), and it holds
// the cache's lock: f must not call the cache.
func (c *LRU[K, V]) Range(f func(key K, v V) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for el := c.order.Front(); el != nil; el = el.Next() {
		it := el.Value.(*item[K, V])
		if !f(it.key, it.val) {
			return
		}
	}
}
