package engine

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
)

func sampleResult(n int) *Result {
	r := &Result{Columns: []Column{{"g", TypeString}, {"age", TypeInt64}, {"n", TypeInt64}, {"avg", TypeFloat64}, {"mixed", TypeString}}}
	for i := 0; i < n; i++ {
		var avg any = float64(i) / 7
		if i%11 == 0 {
			avg = nil
		}
		var mixed any = "x"
		if i%3 == 0 {
			mixed = int64(i)
		}
		r.Rows = append(r.Rows, []any{[]string{"a", "b", "ü"}[i%3], int64(17 + i%74), int64(i * 1000003), avg, mixed})
	}
	return r
}

// Stored answers round-trip exactly, small and large (by column), and take
// a few bytes per row.
func TestCompactEncodingRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 10, smallResult + 1, 50000} {
		in := sampleResult(n)
		b, err := encodeResults([]*Result{in, in.compact()})
		if err != nil {
			t.Fatal(err)
		}
		out, err := decodeResults(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range out {
			if !reflect.DeepEqual(r.Columns, in.Columns) || !reflect.DeepEqual(r.AllRows(), in.AllRows()) && n > 0 {
				t.Fatalf("%d rows: round trip differs", n)
			}
		}
		if n == 50000 {
			if per := float64(len(b)) / float64(2*n); per > 24 {
				t.Errorf("%.1f bytes per row stored", per)
			}
			if out[0].table == nil {
				t.Error("a large answer decoded to boxed rows")
			}
		}
	}
}

// Answers stored as JSON by earlier versions are still read.
func TestLegacyJSONAnswers(t *testing.T) {
	i, f, s := int64(5), 2.5, "x"
	old := []storedResult{{Columns: []Column{{"a", TypeInt64}, {"b", TypeFloat64}, {"c", TypeString}}, Rows: [][]*storedValue{{{I: &i}, {F: &f}, {S: &s}}, {nil, nil, nil}}}}
	b, _ := json.Marshal(old)
	out, err := decodeResults(b)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]any{{int64(5), 2.5, "x"}, {nil, nil, nil}}
	if !reflect.DeepEqual(out[0].AllRows(), want) {
		t.Fatalf("got %v", out[0].AllRows())
	}
}

func FuzzDecodeResults(f *testing.F) {
	b, _ := encodeResults([]*Result{sampleResult(20)})
	f.Add(b)
	f.Add([]byte(`[{"columns":[{"Name":"a","Type":0}],"rows":[[{"i":1}]]}]`))
	f.Add(append([]byte("dpR1"), 0xff, 0xff, 0xff, 0xff, 0x0f))
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, err := decodeResults(data)
		if err != nil {
			return
		}
		for _, r := range rs {
			for i := 0; i < r.Len(); i++ {
				for k := range r.Columns {
					if v := r.Value(i, k); v.Kind == KindFloat && math.IsNaN(v.Float) {
						t.Fatal("NaN value")
					}
				}
			}
		}
	})
}
