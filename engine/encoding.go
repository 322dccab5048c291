package engine

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// Stored answers are encoded compactly, by column: each column is either a
// dictionary of distinct values with one index per row (labels, strings) or
// numbers (a zigzag varint per integer, eight bytes per float), so a
// million-group answer takes a few bytes per row on disk, and decoding it
// needs no boxed value per cell. Answers stored by earlier versions (JSON)
// are still read.

// encodingMagic starts the compact encoding.
var encodingMagic = []byte("dpR1")

// Column encodings.
const (
	encDict  byte = 'd'
	encInts  byte = 'i'
	encFloat byte = 'f'
)

// Value tags in dictionaries.
const (
	tagNull byte = iota
	tagInt
	tagFloat
	tagString
)

func encodeResults(rs []*Result) ([]byte, error) {
	var b bytes.Buffer
	size := 64
	for _, r := range rs {
		size += 2 * r.Len() * len(r.Columns)
	}
	b.Grow(size)
	b.Write(encodingMagic)
	putUvarint(&b, uint64(len(rs)))
	for _, r := range rs {
		putUvarint(&b, uint64(len(r.Columns)))
		for _, c := range r.Columns {
			putString(&b, c.Name)
			putUvarint(&b, uint64(c.Type))
		}
		n := r.Len()
		putUvarint(&b, uint64(n))
		for k := range r.Columns {
			encodeColumn(&b, r, k, n)
		}
	}
	return b.Bytes(), nil
}

func encodeColumn(b *bytes.Buffer, r *Result, k, n int) {
	if r.table != nil && r.table.cols[k].numbers == nil { // already a dictionary
		c := &r.table.cols[k]
		b.WriteByte(encDict)
		putUvarint(b, uint64(len(c.labels)))
		for _, v := range c.labels {
			putValue(b, v)
		}
		for i := 0; i < n; i++ {
			putUvarint(b, uint64(c.cell(i)))
		}
		return
	}
	ints, floats := true, true
	for i := 0; i < n; i++ {
		switch r.Value(i, k).Kind {
		case KindInt:
			floats = false
		case KindFloat:
			ints = false
		case KindString:
			ints, floats = false, false
		}
	}
	switch {
	case ints:
		b.WriteByte(encInts)
		for i := 0; i < n; i++ {
			v := r.Value(i, k)
			if v.Kind == KindNull {
				putUvarint(b, 0)
				continue
			}
			putUvarint(b, zigzag(v.Int)<<1|1)
		}
	case floats:
		b.WriteByte(encFloat)
		var buf [8]byte
		for i := 0; i < n; i++ {
			v := r.Value(i, k)
			f := v.Float
			if v.Kind == KindNull {
				f = math.NaN()
			}
			binary.LittleEndian.PutUint64(buf[:], math.Float64bits(f))
			b.Write(buf[:])
		}
	default:
		b.WriteByte(encDict)
		index := map[Value]uint64{}
		var dict []Value
		cells := make([]uint64, n)
		for i := 0; i < n; i++ {
			v := r.Value(i, k)
			j, ok := index[v]
			if !ok {
				j = uint64(len(dict))
				index[v] = j
				dict = append(dict, v)
			}
			cells[i] = j
		}
		putUvarint(b, uint64(len(dict)))
		for _, v := range dict {
			putValue(b, v)
		}
		for _, j := range cells {
			putUvarint(b, j)
		}
	}
}

func zigzag(v int64) uint64   { return uint64(v<<1) ^ uint64(v>>63) }
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

func putUvarint(b *bytes.Buffer, v uint64) {
	var buf [binary.MaxVarintLen64]byte
	b.Write(buf[:binary.PutUvarint(buf[:], v)])
}

func putString(b *bytes.Buffer, s string) {
	putUvarint(b, uint64(len(s)))
	b.WriteString(s)
}

func putValue(b *bytes.Buffer, v Value) {
	switch v.Kind {
	case KindInt:
		b.WriteByte(tagInt)
		putUvarint(b, zigzag(v.Int))
	case KindFloat:
		b.WriteByte(tagFloat)
		var buf [8]byte
		binary.LittleEndian.PutUint64(buf[:], math.Float64bits(v.Float))
		b.Write(buf[:])
	case KindString:
		b.WriteByte(tagString)
		putString(b, v.Str)
	default:
		b.WriteByte(tagNull)
	}
}

// decoder reads the compact encoding; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

var errShort = errors.New("truncated")

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a length no larger than what the remaining bytes can hold at
// min bytes per item, so damaged input cannot make it allocate much.
func (d *decoder) count(min int) int {
	v := d.uvarint()
	if d.err == nil && v > uint64(len(d.b)/max(min, 1)+1) {
		d.err = errShort
	}
	if d.err != nil {
		return 0
	}
	return int(v)
}

func (d *decoder) bytes(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.b) {
		d.err = errShort
		return nil
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) byte() byte {
	b := d.bytes(1)
	if b == nil {
		return 0
	}
	return b[0]
}

func (d *decoder) string() string { return string(d.bytes(d.count(1))) }

func (d *decoder) value() Value {
	switch d.byte() {
	case tagInt:
		return Value{Kind: KindInt, Int: unzigzag(d.uvarint())}
	case tagFloat:
		b := d.bytes(8)
		if b == nil {
			return Value{}
		}
		return Value{Kind: KindFloat, Float: math.Float64frombits(binary.LittleEndian.Uint64(b))}
	case tagString:
		return Value{Kind: KindString, Str: d.string()}
	}
	return Value{}
}

func decodeResults(b []byte) ([]*Result, error) {
	if !bytes.HasPrefix(b, encodingMagic) {
		return decodeJSONResults(b)
	}
	d := &decoder{b: b[len(encodingMagic):]}
	out := make([]*Result, d.count(2))
	for i := range out {
		r := &Result{Columns: make([]Column, d.count(2))}
		for k := range r.Columns {
			r.Columns[k] = Column{Name: d.string(), Type: ColumnType(d.uvarint())}
		}
		n := d.count(0)
		t := &table{n: n, cols: make([]tableColumn, len(r.Columns))}
		for k := range t.cols {
			c := &t.cols[k]
			switch d.byte() {
			case encInts:
				c.isInt = true
				c.numbers = make([]float64, 0, min(n, len(d.b)))
				for j := 0; j < n && d.err == nil; j++ {
					u := d.uvarint()
					if u == 0 {
						c.numbers = append(c.numbers, math.NaN())
					} else {
						c.numbers = append(c.numbers, float64(unzigzag(u>>1)))
					}
				}
			case encFloat:
				raw := d.bytes(8 * n)
				c.numbers = make([]float64, 0, len(raw)/8)
				for j := 0; j+8 <= len(raw); j += 8 {
					c.numbers = append(c.numbers, math.Float64frombits(binary.LittleEndian.Uint64(raw[j:])))
				}
			case encDict:
				c.labels = make([]Value, d.count(1))
				for j := range c.labels {
					c.labels[j] = d.value()
				}
				c.cells = make([]uint32, 0, min(n, len(d.b)))
				for j := 0; j < n && d.err == nil; j++ {
					x := d.uvarint()
					if x >= uint64(len(c.labels)) {
						d.err = fmt.Errorf("dictionary index %d of %d", x, len(c.labels))
						break
					}
					c.cells = append(c.cells, uint32(x))
				}
			default:
				d.err = errors.New("unknown column encoding")
			}
		}
		if d.err != nil {
			return nil, fmt.Errorf("decode stored answer: %w", d.err)
		}
		r.table = t
		if n <= smallResult {
			r.Rows = make([][]any, 0, n)
			for j := 0; j < n; j++ {
				r.Rows = append(r.Rows, r.Row(j, nil))
			}
			r.table = nil
		}
		out[i] = r
	}
	if d.err != nil {
		return nil, fmt.Errorf("decode stored answer: %w", d.err)
	}
	return out, nil
}

// storedValue is one row value of the earlier JSON encoding: int64,
// float64, string, or NULL (a nil *storedValue).
type storedValue struct {
	I *int64   `json:"i,omitempty"`
	F *float64 `json:"f,omitempty"`
	S *string  `json:"s,omitempty"`
}

type storedResult struct {
	Columns []Column         `json:"columns"`
	Rows    [][]*storedValue `json:"rows"`
}

func decodeJSONResults(b []byte) ([]*Result, error) {
	var in []storedResult
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("decode stored answer: %w", err)
	}
	out := make([]*Result, len(in))
	for i, r := range in {
		res := &Result{Columns: r.Columns}
		for _, row := range r.Rows {
			if len(row) != len(r.Columns) {
				return nil, fmt.Errorf("decode stored answer: a row of %d values for %d columns", len(row), len(r.Columns))
			}
			vals := make([]any, len(row))
			for c, v := range row {
				switch {
				case v == nil:
				case v.I != nil:
					vals[c] = *v.I
				case v.F != nil:
					vals[c] = *v.F
				case v.S != nil:
					vals[c] = *v.S
				default:
					return nil, fmt.Errorf("decode stored answer: an empty value")
				}
			}
			res.Rows = append(res.Rows, vals)
		}
		out[i] = res.compact()
	}
	return out, nil
}
