package measure

import (
	"context"
	"fmt"
	"reflect"
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

func TestStoreKeysAndPersists(t *testing.T) { onBackends(t, testStoreKeysAndPersists) }

func testStoreKeysAndPersists(t *testing.T, open opener) {
	ctx := context.Background()
	s := open(t, 0)
	a, b := sample("v1", 4), sample("v2", 4)
	if err := s.Put(ctx, []*Measurement{a, b}); err != nil {
		t.Fatal(err)
	}
	if a.ID == 0 || b.ID == 0 || a.ID == b.ID {
		t.Fatalf("ids %d %d", a.ID, b.ID)
	}
	s.Close()
	s = open(t, 0)
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
	t.Run("memory", func(t *testing.T) {
		testStoreBoundedInBytes(t, func(t *testing.T, maxBytes int64) *Store {
			s, err := Open(context.Background(), "", maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		})
	})
	onBackends(t, testStoreBoundedInBytes)
}

func testStoreBoundedInBytes(t *testing.T, open opener) {
	ctx := context.Background()
	s := open(t, 4000)
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

// A measurement Put after a Load is remembered by the cache as a copy
// equal to what decoding it gives; one put by another Store in between
// is not skipped (the cache then reads both from the file).
func TestStorePutRemembers(t *testing.T) { onBackends(t, testStorePutRemembers) }

func testStorePutRemembers(t *testing.T, open opener) {
	ctx := context.Background()
	s := open(t, 0)
	if _, err := s.Load(ctx, "t", "d", "v1"); err != nil {
		t.Fatal(err)
	}
	a := sample("v1", 3)
	if err := s.Put(ctx, []*Measurement{a}); err != nil {
		t.Fatal(err)
	}
	a.Answers[0] = 99 // the caller's copy, not the cache's
	got, err := s.Load(ctx, "t", "d", "v1")
	if err != nil || len(got) != 1 || got[0].ID != a.ID || got[0].Answers[0] != 0 {
		t.Fatalf("Load after Put = %+v, %v", got, err)
	}
	other := open(t, 0)
	b, c := sample("v1", 2), sample("v1", 1)
	if err := other.Put(ctx, []*Measurement{b}); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, []*Measurement{c}); err != nil {
		t.Fatal(err)
	}
	got, err = s.Load(ctx, "t", "d", "v1")
	if err != nil || len(got) != 3 || got[1].ID != b.ID || got[2].ID != c.ID {
		t.Fatalf("Load after two writers = %d measurements, %v", len(got), err)
	}
	fresh := open(t, 0)
	want, err := fresh.Load(ctx, "t", "d", "v1")
	if err != nil || len(want) != 3 {
		t.Fatal(err)
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("measurement %d: cached %+v, decoded %+v", i, got[i], want[i])
		}
	}
}

// Key sets persist across a reopen, the first one stored for a version
// wins, and only the newest keySetVersions versions of a column are kept.
func TestStoreKeySets(t *testing.T) { onBackends(t, testStoreKeySets) }

func testStoreKeySets(t *testing.T, open opener) {
	ctx := context.Background()
	s := open(t, 0)
	if _, ok, err := s.Keys(ctx, "t", "d", "c", "v1"); ok || err != nil {
		t.Fatalf("empty store: ok %v, %v", ok, err)
	}
	got, err := s.PutKeys(ctx, KeySet{Table: "t", Def: "d", Column: "c", Version: "v1", LedgerSeq: 3, Keys: []string{"a", "b"}})
	if err != nil || !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("PutKeys = %v, %v", got, err)
	}
	got, err = s.PutKeys(ctx, KeySet{Table: "t", Def: "d", Column: "c", Version: "v1", LedgerSeq: 4, Keys: []string{"z"}})
	if err != nil || !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("second PutKeys of a version = %v, %v; want the first set", got, err)
	}
	if _, err := s.PutKeys(ctx, KeySet{Table: "t", Def: "d", Column: "e", Version: "v1", Keys: nil}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, 0)
	if keys, ok, err := s.Keys(ctx, "t", "d", "c", "v1"); !ok || err != nil || !reflect.DeepEqual(keys, []string{"a", "b"}) {
		t.Fatalf("after reopen: %v %v %v", keys, ok, err)
	}
	if keys, ok, err := s.Keys(ctx, "t", "d", "e", "v1"); !ok || err != nil || len(keys) != 0 || keys == nil {
		t.Fatalf("an empty released set must read back as empty, not absent: %v %v %v", keys, ok, err)
	}
	for _, key := range [][4]string{{"t", "d", "c", "v2"}, {"t", "x", "c", "v1"}, {"u", "d", "c", "v1"}} {
		if _, ok, _ := s.Keys(ctx, key[0], key[1], key[2], key[3]); ok {
			t.Errorf("Keys %v found", key)
		}
	}
	for i := 2; i <= keySetVersions+1; i++ {
		if _, err := s.PutKeys(ctx, KeySet{Table: "t", Def: "d", Column: "c", Version: "v" + string(rune('0'+i)), Keys: []string{"a"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, _ := s.Keys(ctx, "t", "d", "c", "v1"); ok {
		t.Error("the oldest version's keys are kept past keySetVersions")
	}
	if _, ok, _ := s.Keys(ctx, "t", "d", "c", "v2"); !ok {
		t.Error("a recent version's keys were forgotten")
	}
}

// The decoded-measurement cache stays within its bound across keys,
// least recently used keys going first.
func TestStoreCacheBounded(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, "", 4000)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const keys = 12
	for i := range keys {
		v := fmt.Sprint("v", i)
		if err := s.Put(ctx, []*Measurement{sample(v, 60)}); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Load(ctx, "t", "d", v); err != nil || len(got) != 1 {
			t.Fatalf("Load %s = %d measurements, %v", v, len(got), err)
		}
		if s.cache.Bytes() > s.cache.Limit() {
			t.Fatalf("cache holds %d bytes, bound %d", s.cache.Bytes(), s.cache.Limit())
		}
	}
	if n := s.cache.Len(); n == 0 || n == keys {
		t.Fatalf("%d of %d keys cached: the bound did not evict", n, keys)
	}
	if _, ok := s.cache.Get(fmt.Sprint("t\x00d\x00v", keys-1)); !ok {
		t.Fatal("the most recently loaded key is not cached")
	}
	if _, ok := s.cache.Get("t\x00d\x00v0"); ok {
		t.Fatal("the least recently loaded key is still cached")
	}
}

// The cache charges a measurement its decoded size when that is larger
// than its encoding: a day among five years of hours is stored as its 24
// non-zero entries but decodes to 43,824 values, so a store bounded below
// that loads it without keeping it.
func TestStoreCacheChargesDecodedSize(t *testing.T) {
	ctx := context.Background()
	const n = 43_824
	day := make([]float64, n)
	for h := 0; h < 24; h++ {
		day[n-24+h] = 1
	}
	m := &Measurement{Table: "t", Def: "d", Version: "v", LedgerSeq: 1, Strategy: "workload",
		Columns: []Column{{Name: "ts", Def: "ts1", Size: n, Whole: true}}, Factors: [][]float64{day}, Rows: []int{1},
		Answers: []float64{3}, Noise: "laplace", Scale: "10/1", Variance: 200}
	for _, bound := range []int64{1 << 20, 100_000} {
		s, err := Open(ctx, "", bound)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx, []*Measurement{m}); err != nil || m.ID == 0 {
			t.Fatalf("bound %d: Put: id %d, %v", bound, m.ID, err)
		}
		stored, _ := s.Bytes(ctx)
		got, err := s.Load(ctx, "t", "d", "v")
		if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0].Factors, m.Factors) {
			t.Fatalf("bound %d: Load: %d measurements, %v", bound, len(got), err)
		}
		if cached := s.cache.Bytes(); bound > n*8 && cached < n*8 || bound < n*8 && cached != 0 {
			t.Fatalf("bound %d: the cache holds %d bytes for a measurement of %d stored, %d decoded", bound, cached, stored, n*8)
		}
		s.Close()
	}
}
