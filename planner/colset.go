package planner

import "math/bits"

// colSet is a set of column (attribute) indexes below maxSetColumns, bit j
// for column j. It is comparable, so it keys maps; marginal and residual
// planning index everything by it, never by the product domain.
type colSet [4]uint64

// maxSetColumns bounds the columns a marginal or residual plan can span.
const maxSetColumns = 256

func setOf(cols ...int) colSet {
	var s colSet
	for _, j := range cols {
		s = s.with(j)
	}
	return s
}

func (s colSet) has(j int) bool { return s[j>>6]&(1<<(uint(j)&63)) != 0 }

func (s colSet) with(j int) colSet {
	s[j>>6] |= 1 << (uint(j) & 63)
	return s
}

// subsetOf reports s ⊆ t.
func (s colSet) subsetOf(t colSet) bool {
	for i := range s {
		if s[i]&^t[i] != 0 {
			return false
		}
	}
	return true
}

func (s colSet) len() int {
	n := 0
	for _, w := range s {
		n += bits.OnesCount64(w)
	}
	return n
}

// cols lists the members in ascending order.
func (s colSet) cols() []int {
	var out []int
	for i, w := range s {
		for w != 0 {
			b := bits.TrailingZeros64(w)
			out = append(out, i*64+b)
			w &^= 1 << uint(b)
		}
	}
	return out
}

// less orders sets by size, then by their members (lexicographically), so
// families list ∅ first and coarse sets before fine ones. Of two sets of
// equal size, the one holding the lowest column where they differ comes
// first.
func (s colSet) less(t colSet) bool {
	if a, b := s.len(), t.len(); a != b {
		return a < b
	}
	for i := range s {
		if x := s[i] ^ t[i]; x != 0 {
			return s[i]&(x&-x) != 0
		}
	}
	return false
}

// eachSubset calls f for every subset of s (2^|s| of them), s itself
// included.
func (s colSet) eachSubset(f func(colSet)) {
	cs := s.cols()
	for m := 0; m < 1<<len(cs); m++ {
		var t colSet
		for i, j := range cs {
			if m&(1<<i) != 0 {
				t = t.with(j)
			}
		}
		f(t)
	}
}
