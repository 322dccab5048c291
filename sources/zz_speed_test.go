package sources

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/catalog"
)

func TestZZSpeed(t *testing.T) {
	path := os.Getenv("DB")
	if path == "" {
		t.Skip()
	}
	cat := catalog.Demo()
	cat.Sources["main"].Path = path
	s, err := Open(context.Background(), cat, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tab := cat.Table("adult")
	cols := []*catalog.Column{tab.Column("age"), tab.Column("education"), tab.Column("hours_per_week")}
	t0 := time.Now()
	x, err := s.Histogram(context.Background(), tab, cols)
	if err != nil {
		t.Fatal(err)
	}
	var tot float64
	for _, v := range x {
		tot += v
	}
	t.Log("file", tot, time.Since(t0))
	be := s.sources["main"].be.(*sqliteSource)
	ctx := context.Background()
	conn, _ := be.db.Conn(ctx)
	tx, _ := conn.BeginTx(ctx, nil)
	counts := make([]float64, cells(cols))
	t0 = time.Now()
	var rows atomic.Int64
	if err := be.aggregate(ctx, tx, tab, cols, counts, &rows); err != nil {
		t.Fatal(err)
	}
	tot = 0
	for _, v := range strip(counts, cols) {
		tot += v
	}
	t.Log("aggregate", tot, time.Since(t0))
	y := strip(counts, cols)
	for i := range x {
		if x[i] != y[i] {
			t.Fatal("differ at", i)
		}
	}
	tx.Rollback()
	conn.Close()
}
