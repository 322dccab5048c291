package measure

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
)

// Several processes writing one store at once while reading it: every
// store's Load ends with every measurement, oldest first, none skipped by
// the cache of what it read before (ids commit in order).
func TestStoreSharedWriters(t *testing.T) { onBackends(t, testStoreSharedWriters) }

func testStoreSharedWriters(t *testing.T, open opener) {
	ctx := context.Background()
	const stores, puts = 3, 15
	ss := make([]*Store, stores)
	for i := range ss {
		ss[i] = open(t, 0)
	}
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Go(func() {
			for range puts {
				if err := s.Put(ctx, []*Measurement{sample("v", 3)}); err != nil {
					t.Error(err)
					return
				}
				if _, err := s.Load(ctx, "t", "d", "v"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for i, s := range ss {
		got, err := s.Load(ctx, "t", "d", "v")
		if err != nil || len(got) != stores*puts {
			t.Fatalf("store %d: %d measurements, %v; want %d", i, len(got), err, stores*puts)
		}
		for k := 1; k < len(got); k++ {
			if got[k].ID <= got[k-1].ID {
				t.Fatalf("store %d: ids %d then %d", i, got[k-1].ID, got[k].ID)
			}
		}
	}
}

// Migrate copies a SQLite store's measurements (in order, encodings and
// ledger entries intact) and key sets into another store, keeps the
// destination's bound, and adds nothing when run again.
func TestMigrate(t *testing.T) { onBackends(t, testMigrate) }

func testMigrate(t *testing.T, open opener) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "src.sqlite")
	src, err := Open(ctx, path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	const n = 450 // more than two batches
	for i := range n {
		m := sample(fmt.Sprint("v", i%3), 2+i%5)
		m.LedgerSeq = int64(i + 1)
		if err := src.Put(ctx, []*Measurement{m}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if _, err := src.PutKeys(ctx, KeySet{Table: "t", Def: "d", Column: "c", Version: fmt.Sprint("v", i), LedgerSeq: int64(1000 + i), Keys: []string{"a", fmt.Sprint(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	replay := Replay{LedgerSeq: 2000, Table: "t", User: "u", Texts: []string{"SELECT COUNT(*) FROM t"}, Options: map[string]string{"dp_epsilon": "0.5"}, Reused: true, Stored: []int64{1, 2}}
	if err := src.PutReplay(ctx, replay); err != nil {
		t.Fatal(err)
	}
	dst := open(t, 0)
	if _, err := dst.PutKeys(ctx, KeySet{Table: "t", Def: "d", Column: "c", Version: "v0", Keys: []string{"mine"}}); err != nil {
		t.Fatal(err)
	}
	added, err := Migrate(ctx, path, dst)
	// n measurements, 2 key sets (v0's is there already), the replay
	// record and its basis.
	if err != nil || added != n+4 {
		t.Fatalf("migrated %d, %v; want %d", added, err, n+4)
	}
	if got, err := dst.Replay(ctx, replay.LedgerSeq); err != nil || !reflect.DeepEqual(got, replay) {
		t.Fatalf("migrated replay %+v, %v; want %+v", got, err, replay)
	}
	for v := range 3 {
		version := fmt.Sprint("v", v)
		want, err := src.Load(ctx, "t", "d", version)
		if err != nil {
			t.Fatal(err)
		}
		got, err := open(t, 0).Load(ctx, "t", "d", version)
		if err != nil || len(got) != len(want) {
			t.Fatalf("%s: %d measurements, %v; want %d", version, len(got), err, len(want))
		}
		for i := range want {
			if got[i].LedgerSeq != want[i].LedgerSeq {
				t.Fatalf("%s: measurement %d paid by %d, want %d (order)", version, i, got[i].LedgerSeq, want[i].LedgerSeq)
			}
			g, w := *got[i], *want[i]
			g.ID, w.ID = 0, 0
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("%s: measurement %d differs", version, i)
			}
		}
		keys, ok, err := dst.Keys(ctx, "t", "d", "c", version)
		wantKeys := []string{"a", fmt.Sprint(v)}
		if v == 0 {
			wantKeys = []string{"mine"}
		}
		if err != nil || !ok || !reflect.DeepEqual(keys, wantKeys) {
			t.Fatalf("%s keys: %v %v %v", version, keys, ok, err)
		}
	}
	if b1, b2 := bytesOf(t, src), bytesOf(t, dst); b1 != b2 {
		t.Fatalf("%d bytes copied, source holds %d", b2, b1)
	}
	if added, err := Migrate(ctx, path, dst); err != nil || added != 0 {
		t.Fatalf("second migration added %d, %v", added, err)
	}
	small := open(t, 4000) // the same database, a smaller bound
	if _, err := Migrate(ctx, path, small); err != nil {
		t.Fatal(err)
	}
	if b := bytesOf(t, small); b > 4000 {
		t.Fatalf("%d bytes past a bound of 4000", b)
	}
}

func bytesOf(t *testing.T, s *Store) int64 {
	t.Helper()
	n, err := s.Bytes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}
