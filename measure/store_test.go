package measure

import (
	"context"
	"path/filepath"
	"testing"
)

func sample(version string, n int) *Measurement {
	ans := make([]float64, n)
	for i := range ans {
		ans[i] = float64(i)
	}
	return &Measurement{Table: "t", Def: "d", Version: version, LedgerSeq: 1, Strategy: "identity",
		Columns: []Column{{Name: "a", Def: "a1", Size: n, Whole: true}}, Factors: [][]float64{nil}, Rows: []int{n},
		Answers: ans, Noise: "laplace", Scale: "10/1", Variance: 200}
}

func TestStoreKeysAndPersists(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.sqlite")
	s, err := Open(ctx, path, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, b := sample("v1", 4), sample("v2", 4)
	if err := s.Put(ctx, []*Measurement{a, b}); err != nil {
		t.Fatal(err)
	}
	if a.ID == 0 || b.ID == 0 || a.ID == b.ID {
		t.Fatalf("ids %d %d", a.ID, b.ID)
	}
	s.Close()
	s, err = Open(ctx, path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Load(ctx, "t", "d", "v1")
	if err != nil || len(got) != 1 || got[0].ID != a.ID || got[0].Answers[3] != 3 {
		t.Fatalf("Load v1 = %+v, %v", got, err)
	}
	c := sample("v1", 2)
	if err := s.Put(ctx, []*Measurement{c}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Load(ctx, "t", "d", "v1"); err != nil || len(got) != 2 || got[1].ID != c.ID {
		t.Fatalf("Load after Put = %d measurements, %v", len(got), err)
	}
	for _, key := range [][3]string{{"t", "d", "v3"}, {"t", "other", "v1"}, {"u", "d", "v1"}} {
		if got, err := s.Load(ctx, key[0], key[1], key[2]); err != nil || len(got) != 0 {
			t.Fatalf("Load %v = %d measurements, %v", key, len(got), err)
		}
	}
}

func TestStoreBoundedInBytes(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, "", 4000)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < 20; i++ {
		if err := s.Put(ctx, []*Measurement{sample("v", 50)}); err != nil {
			t.Fatal(err)
		}
		n, err := s.Bytes(ctx)
		if err != nil || n > 4000 {
			t.Fatalf("after %d puts: %d bytes, %v", i+1, n, err)
		}
	}
	got, _ := s.Load(ctx, "t", "d", "v")
	if len(got) == 0 || len(got) == 20 {
		t.Fatalf("%d measurements kept", len(got))
	}
	for k := 1; k < len(got); k++ {
		if got[k].ID <= got[k-1].ID {
			t.Fatal("not oldest first")
		}
	}
	big := sample("v", 5000)
	if err := s.Put(ctx, []*Measurement{big}); err != nil || big.ID != 0 {
		t.Fatalf("oversized: id %d, %v", big.ID, err)
	}
	bad := sample("v", 3)
	bad.Answers = bad.Answers[:2]
	if err := s.Put(ctx, []*Measurement{bad}); err == nil {
		t.Fatal("malformed measurement stored")
	}
}
