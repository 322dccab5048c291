package answers

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
)

// Answers survive reopening the file; the first put under a key wins, also
// between stores (processes) sharing the file.
func TestStorePersistsFirstAnswer(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "answers.sqlite")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Get(ctx, "k"); ok || err != nil {
		t.Fatalf("empty store: %v %v", ok, err)
	}
	if err := s.Put(ctx, "k", []byte("first")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "k", []byte("second")); err != nil {
		t.Fatal(err)
	}
	s.Close()

	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			s, err := Open(ctx, path)
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Close()
			if err := s.Put(ctx, "other", []byte{byte(i)}); err != nil {
				t.Error(err)
			}
			got, ok, err := s.Get(ctx, "k")
			if err != nil || !ok || string(got) != "first" {
				t.Errorf("reopened: %q %v %v", got, ok, err)
			}
		})
	}
	wg.Wait()
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, ok, err := s.Get(ctx, "other"); err != nil || !ok || len(got) != 1 {
		t.Fatalf("concurrent puts: %v %v %v", got, ok, err)
	}
}
