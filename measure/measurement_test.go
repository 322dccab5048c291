package measure

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestFactorsRoundTrip: factors are stored densely, or as their non-zero
// entries when mostly zero, and read back equal; plain dense factors (what
// earlier versions stored) still read.
func TestFactorsRoundTrip(t *testing.T) {
	day := make([]float64, 2*48) // two rows of a 48-cell column, 12 ones each
	for c := 0; c < 12; c++ {
		day[c], day[48+24+c] = 1, 1
	}
	dense := []float64{1, 2, 0, 3}
	m := &Measurement{ID: 7, Columns: []Column{{Name: "ts", Def: "d", Size: 48}, {Name: "a", Def: "a", Size: 2}, {Name: "b", Def: "b", Size: 4}},
		Factors: [][]float64{day, nil, dense}, Rows: []int{2, 2, 1}, Answers: make([]float64, 4), Variance: 2}
	body, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `{"len":96,"nz":[0,1,`) || !strings.Contains(string(body), `[1,2,0,3]`) {
		t.Fatalf("encoding: %s", body)
	}
	var back Measurement
	if err := json.Unmarshal(body, &back); err != nil {
		t.Fatal(err)
	}
	if back.ID != 7 || !slices.Equal(back.Factors[0], day) || back.Factors[1] != nil || !slices.Equal(back.Factors[2], dense) || back.Check() != nil {
		t.Fatalf("read back %+v", back)
	}
	old := `{"id":1,"columns":[{"name":"b","def":"b","size":4,"whole":true}],"factors":[[1,1,0,0]],"rows":[1],"answers":[5],"noise":"laplace","scale":"1/1","variance":2}`
	var o Measurement
	if err := json.Unmarshal([]byte(old), &o); err != nil || !slices.Equal(o.Factors[0], []float64{1, 1, 0, 0}) {
		t.Fatalf("dense encoding: %+v, %v", o, err)
	}
}

// FuzzDecodeMeasurement: a damaged record is an error, never a panic or
// an allocation past the bound; what decodes re-encodes to the same.
func FuzzDecodeMeasurement(f *testing.F) {
	f.Add([]byte(`{"id":1,"columns":[{"name":"b","def":"b","size":4,"whole":true}],"factors":[{"len":4,"nz":[0,1,3,2]}],"rows":[1],"answers":[5],"variance":2}`))
	f.Add([]byte(`{"factors":[null,[1,2],{"len":2,"nz":[1,1]}]}`))
	f.Add([]byte(`{"factors":[{"len":-1,"nz":[]}]}`))
	f.Add([]byte(`{"factors":[[1,2]],"classes":[[0,1,-1,2,1,1]],"rows":[1]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m Measurement
		if err := json.Unmarshal(b, &m); err != nil {
			return
		}
		again, err := json.Marshal(&m)
		if err != nil {
			t.Fatalf("re-encoding: %v", err)
		}
		var m2 Measurement
		if err := json.Unmarshal(again, &m2); err != nil {
			t.Fatalf("re-decoding %s: %v", again, err)
		}
		if len(m2.Factors) != len(m.Factors) {
			t.Fatalf("factors %d then %d", len(m.Factors), len(m2.Factors))
		}
		for j := range m.Factors {
			if !slices.Equal(m.Factors[j], m2.Factors[j]) && !(len(m.Factors[j]) == 0 && len(m2.Factors[j]) == 0) {
				t.Fatalf("factor %d: %v then %v", j, m.Factors[j], m2.Factors[j])
			}
		}
		if len(m2.Classes) != len(m.Classes) {
			t.Fatalf("class maps %d then %d", len(m.Classes), len(m2.Classes))
		}
		for j := range m.Classes {
			if !slices.Equal(m.Classes[j], m2.Classes[j]) {
				t.Fatalf("class map %d: %v then %v", j, m.Classes[j], m2.Classes[j])
			}
		}
	})
}
