package cache

import (
	"fmt"
	"sync"
	"testing"
)

// Table of operations and the keys left, most recently used first.
func TestLRU(t *testing.T) {
	type op struct {
		do   string // put, add, get, remove, clear
		key  string
		size int64
		want bool // put/add: kept; get/remove: found
	}
	tests := []struct {
		name  string
		limit int64
		ops   []op
		keys  []string
		bytes int64
	}{
		{"empty", 10, nil, nil, 0},
		{"within bound", 10, []op{{"put", "a", 3, true}, {"put", "b", 3, true}}, []string{"b", "a"}, 6},
		{"least recent evicted", 10, []op{{"put", "a", 4, true}, {"put", "b", 4, true}, {"put", "c", 4, true}}, []string{"c", "b"}, 8},
		{"get marks used", 10, []op{{"put", "a", 4, true}, {"put", "b", 4, true}, {"get", "a", 0, true}, {"put", "c", 4, true}}, []string{"c", "a"}, 8},
		{"get missing", 10, []op{{"get", "a", 0, false}}, nil, 0},
		{"too large not kept", 10, []op{{"put", "a", 4, true}, {"put", "big", 11, false}}, []string{"a"}, 4},
		{"too large removes old", 10, []op{{"put", "a", 4, true}, {"put", "a", 11, false}}, nil, 0},
		{"exactly the bound", 10, []op{{"put", "a", 4, true}, {"put", "b", 10, true}}, []string{"b"}, 10},
		{"put replaces", 10, []op{{"put", "a", 4, true}, {"put", "a", 6, true}}, []string{"a"}, 6},
		{"add keeps first", 10, []op{{"put", "a", 4, true}, {"put", "b", 4, true}, {"add", "a", 6, false}}, []string{"b", "a"}, 8},
		{"add new", 10, []op{{"add", "a", 4, true}}, []string{"a"}, 4},
		{"remove", 10, []op{{"put", "a", 4, true}, {"remove", "a", 0, true}, {"remove", "a", 0, false}}, nil, 0},
		{"clear", 10, []op{{"put", "a", 4, true}, {"clear", "", 0, false}, {"put", "b", 1, true}}, []string{"b"}, 1},
		{"zero sizes", 0, []op{{"put", "a", 0, true}, {"put", "b", 0, true}}, []string{"b", "a"}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New[string, string](tc.limit)
			for i, o := range tc.ops {
				var got bool
				switch o.do {
				case "put":
					got = c.Put(o.key, "v"+o.key, o.size)
				case "add":
					got = c.Add(o.key, "v"+o.key, o.size)
				case "get":
					var v string
					v, got = c.Get(o.key)
					if got && v != "v"+o.key {
						t.Fatalf("op %d: Get(%q) = %q", i, o.key, v)
					}
				case "remove":
					got = c.Remove(o.key)
				case "clear":
					c.Clear()
				}
				if got != o.want {
					t.Fatalf("op %d %s %q: %v, want %v", i, o.do, o.key, got, o.want)
				}
				if c.Bytes() > c.Limit() {
					t.Fatalf("op %d: %d bytes over the bound %d", i, c.Bytes(), c.Limit())
				}
			}
			var keys []string
			c.Range(func(k, v string) bool { keys = append(keys, k); return true })
			if fmt.Sprint(keys) != fmt.Sprint(tc.keys) || c.Len() != len(tc.keys) || c.Bytes() != tc.bytes {
				t.Fatalf("keys %v (len %d), %d bytes; want %v, %d bytes", keys, c.Len(), c.Bytes(), tc.keys, tc.bytes)
			}
		})
	}
}

// Range stops when f returns false.
func TestRangeStops(t *testing.T) {
	c := New[int, int](100)
	for i := range 5 {
		c.Put(i, i, 1)
	}
	n := 0
	c.Range(func(int, int) bool { n++; return n < 2 })
	if n != 2 {
		t.Fatalf("Range called f %d times after it returned false", n)
	}
}

// Concurrent use keeps the bound and the accounting (run with -race).
func TestConcurrent(t *testing.T) {
	c := New[int, int](50)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				k := (g*7 + i) % 40
				switch i % 4 {
				case 0:
					c.Put(k, i, int64(k%5))
				case 1:
					c.Add(k, i, int64(k%5))
				case 2:
					c.Get(k)
				default:
					c.Remove(k)
				}
				c.Range(func(int, int) bool { return true })
			}
		}()
	}
	wg.Wait()
	var sum int64
	c.Range(func(k, _ int) bool { sum += int64(k % 5); return true })
	if sum != c.Bytes() || c.Bytes() > c.Limit() {
		t.Fatalf("entries sum to %d bytes, cache says %d (bound %d)", sum, c.Bytes(), c.Limit())
	}
}
