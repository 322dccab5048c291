package sources

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/bits"
	"strconv"
	"sync/atomic"
)

// SQLite's keyed hash. The embedded engine ranks rows by SipHash-2-4
// (Aumasson and Bernstein 2012) keyed with the first 16 bytes of SHA-256
// of the unit key, over the same bytes UnitHash writes after the key (per
// value 0x1f, then "N" for NULL or "V" and its text), as an unsigned
// 64-bit integer. SQL sees it as a signed integer whose order is that
// unsigned order (the top bit flipped), from the Go function
// dpproxy_unit_hash, and the file scan computes the same hash in the same
// process (sqlite_bound.go); the servers keep their built-in SHA-256
// (UnitHash), which they compute without a function of ours.
//
// Privacy does not rest on the hash. The bound on what one unit adds to
// the histogram (k rows, g cells, r rows per cell) holds for any choice of
// rows made from the unit's own rows alone; the hash makes that choice a
// fixed function of the unit's rows and the key, so every histogram of one
// data version is a histogram of the same truncated table, and the key
// makes it unpredictable to whoever writes the rows. SipHash is a keyed
// pseudo-random function built for exactly this (hash-flooding defence),
// and is several times cheaper per row than SHA-256. Two distinct rows of
// one unit tie with probability 2⁻⁶⁴ per pair; SQL then breaks the tie in
// its own way, which the file scan may not follow.

// sipKey derives SipHash's 128-bit key from the unit key.
func sipKey(key string) (k0, k1 uint64) {
	d := sha256.Sum256([]byte(key))
	return binary.LittleEndian.Uint64(d[:8]), binary.LittleEndian.Uint64(d[8:16])
}

// cachedSipKey remembers the last key's derivation: the SQL function is
// called once per row with the same key.
var cachedSipKey atomic.Pointer[struct {
	key    string
	k0, k1 uint64
}]

func sipKeyCached(key string) (uint64, uint64) {
	if c := cachedSipKey.Load(); c != nil && c.key == key {
		return c.k0, c.k1
	}
	k0, k1 := sipKey(key)
	cachedSipKey.Store(&struct {
		key    string
		k0, k1 uint64
	}{string([]byte(key)), k0, k1}) // a copy: key may be a volatile view
	return k0, k1
}

// siphash24 is SipHash-2-4 of m.
func siphash24(k0, k1 uint64, m []byte) uint64 {
	v0 := k0 ^ 0x736f6d6570736575
	v1 := k1 ^ 0x646f72616e646f6d
	v2 := k0 ^ 0x6c7967656e657261
	v3 := k1 ^ 0x7465646279746573
	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13)
		v1 ^= v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16)
		v3 ^= v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21)
		v3 ^= v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17)
		v1 ^= v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	n := len(m)
	for len(m) >= 8 {
		w := binary.LittleEndian.Uint64(m)
		v3 ^= w
		round()
		round()
		v0 ^= w
		m = m[8:]
	}
	b := uint64(n) << 56
	for i := len(m) - 1; i >= 0; i-- {
		b |= uint64(m[i]) << (8 * i)
	}
	v3 ^= b
	round()
	round()
	v0 ^= b
	v2 ^= 0xff
	round()
	round()
	round()
	round()
	return v0 ^ v1 ^ v2 ^ v3
}

// appendHashValue appends one value's bytes of the hashed message.
func appendHashValue(buf []byte, v any) []byte {
	buf = append(buf, 0x1f)
	if v == nil {
		return append(buf, 'N')
	}
	buf = append(buf, 'V')
	switch v := v.(type) {
	case string:
		return append(buf, v...)
	case []byte:
		return append(buf, v...)
	case int64:
		return strconv.AppendInt(buf, v, 10)
	case int:
		return strconv.AppendInt(buf, int64(v), 10)
	case float64:
		return strconv.AppendFloat(buf, v, 'g', -1, 64)
	default:
		return fmt.Append(buf, v)
	}
}

// UnitHash64 is SQLite's keyed hash of values (see above), in the order
// rows are ranked by; tests replay the embedded engine's selection with it.
func UnitHash64(key string, vals ...any) uint64 {
	k0, k1 := sipKey(key)
	var buf []byte
	for _, v := range vals {
		buf = appendHashValue(buf, v)
	}
	return siphash24(k0, k1, buf)
}

// sqlOrder is h as SQLite's signed integer of the same order.
func sqlOrder(h uint64) int64 { return int64(h ^ 1<<63) }
