package sources

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
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

// PostgreSQL's keyed hash. The PostgreSQL dialect ranks by
// hash_record_extended(ROW(values…), seed) with seed the 64-bit
// hashtextextended(key, 0): each value hashed by its type's own extended
// hash function with the seed (integers by hashint8extended, which int2
// and int4 share; text by hash_bytes_extended of its bytes; NULL as 0),
// combined as h = 31·h + element. These are PostgreSQL's hash functions
// of hash partitioning (Bob Jenkins' lookup3), computed on the values as
// stored, with no text built per row: a fifth of the cost of hashing the
// keyed text (hashtextextended of the concatenated values, what it ranked
// by before), which is what bounding pays on each row of a heavy unit.
// Privacy does not rest on it any more than on SipHash (see above): it is
// not a keyed pseudo-random function, only a deterministic function of
// the unit's rows and the key, which is all the stable truncation needs.

// PostgresUnitHash is PostgreSQL's keyed hash of values (see above), as
// the signed integer PostgreSQL ranks by; tests replay the server's
// selection with it. It matches the server for NULL (nil), integers of
// any width (int, int64, int32), text (string, []byte: its bytes as
// stored, UTF-8 in a UTF-8 database, under a deterministic collation) and
// float8 (float64), on a little-endian machine (lookup3 reads words in
// the machine's order); any other value is hashed as its text, which
// matches only a text column holding that text.
func PostgresUnitHash(key string, vals ...any) int64 {
	seed := pgHashBytesExtended([]byte(key), 0)
	var h uint64
	for _, v := range vals {
		h = h*31 + pgHashValueExtended(v, seed)
	}
	return int64(h)
}

// pgHashValueExtended is the extended hash PostgreSQL's type of v
// computes of it with seed, as hash_record_extended calls it (0 for NULL).
func pgHashValueExtended(v any, seed uint64) uint64 {
	switch v := v.(type) {
	case nil:
		return 0
	case int64:
		return pgHashInt8Extended(v, seed)
	case int:
		return pgHashInt8Extended(int64(v), seed)
	case int32:
		return pgHashInt8Extended(int64(v), seed)
	case string:
		return pgHashBytesExtended([]byte(v), seed)
	case []byte:
		return pgHashBytesExtended(v, seed)
	case float64:
		// hashfloat8extended: both zeros hash as the seed, every NaN as
		// the one NaN.
		if v == 0 {
			return seed
		}
		if math.IsNaN(v) {
			v = math.Float64frombits(0x7ff8000000000000) // C's NAN
		}
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(v))
		return pgHashBytesExtended(b[:], seed)
	default:
		return pgHashBytesExtended(fmt.Append(nil, v), seed)
	}
}

// pgHashInt8Extended is hashint8extended: the two halves folded into one
// 32-bit word (so that int2, int4 and int8 of one value hash alike), then
// hash_bytes_uint32_extended.
func pgHashInt8Extended(v int64, seed uint64) uint64 {
	lo, hi := uint32(v), uint32(uint64(v)>>32)
	if v >= 0 {
		lo ^= hi
	} else {
		lo ^= ^hi
	}
	a := uint32(0x9e3779b9 + 4 + 3923095)
	b, c := a, a
	if seed != 0 {
		a += uint32(seed >> 32)
		b += uint32(seed)
		a, b, c = pgMix(a, b, c)
	}
	a += lo
	_, b, c = pgFinal(a, b, c)
	return uint64(b)<<32 | uint64(c)
}

// pgHashBytesExtended is PostgreSQL's hash_bytes_extended(k, seed) as a
// little-endian machine computes it.
func pgHashBytesExtended(k []byte, seed uint64) uint64 {
	a := 0x9e3779b9 + uint32(len(k)) + 3923095
	b, c := a, a
	if seed != 0 {
		a += uint32(seed >> 32)
		b += uint32(seed)
		a, b, c = pgMix(a, b, c)
	}
	for len(k) >= 12 {
		a += binary.LittleEndian.Uint32(k)
		b += binary.LittleEndian.Uint32(k[4:])
		c += binary.LittleEndian.Uint32(k[8:])
		a, b, c = pgMix(a, b, c)
		k = k[12:]
	}
	// The last 0–11 bytes: a and b take whole little-endian words, c its
	// bytes shifted up by one (its lowest byte is lookup3's length byte).
	var tail [12]byte
	copy(tail[:], k)
	a += binary.LittleEndian.Uint32(tail[:])
	b += binary.LittleEndian.Uint32(tail[4:])
	c += binary.LittleEndian.Uint32(tail[8:]) << 8
	_, b, c = pgFinal(a, b, c)
	return uint64(b)<<32 | uint64(c)
}

func pgMix(a, b, c uint32) (uint32, uint32, uint32) {
	a -= c
	a ^= bits.RotateLeft32(c, 4)
	c += b
	b -= a
	b ^= bits.RotateLeft32(a, 6)
	a += c
	c -= b
	c ^= bits.RotateLeft32(b, 8)
	b += a
	a -= c
	a ^= bits.RotateLeft32(c, 16)
	c += b
	b -= a
	b ^= bits.RotateLeft32(a, 19)
	a += c
	c -= b
	c ^= bits.RotateLeft32(b, 4)
	b += a
	return a, b, c
}

func pgFinal(a, b, c uint32) (uint32, uint32, uint32) {
	c ^= b
	c -= bits.RotateLeft32(b, 14)
	a ^= c
	a -= bits.RotateLeft32(c, 11)
	b ^= a
	b -= bits.RotateLeft32(a, 25)
	c ^= b
	c -= bits.RotateLeft32(b, 16)
	a ^= c
	a -= bits.RotateLeft32(c, 4)
	b ^= a
	b -= bits.RotateLeft32(a, 14)
	c ^= b
	c -= bits.RotateLeft32(b, 24)
	return a, b, c
}
