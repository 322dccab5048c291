package sources

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/demo"
)

// BenchmarkSQLiteHistogram times a cold histogram of the demo table's
// age × education × hours_per_week (117,216 cells) over DPPROXY_BENCH_ROWS
// rows (default 1,000,000), generated once into DPPROXY_BENCH_DIR (default
// a temporary directory): each iteration opens a fresh source set, so
// nothing is cached in dpproxy. `dpproxy bench source` compares the same
// build with the engines' own GROUP BY.
func BenchmarkSQLiteHistogram(b *testing.B) {
	rows := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("DPPROXY_BENCH_ROWS")); err == nil && v > 0 {
		rows = v
	}
	dir := os.Getenv("DPPROXY_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	path := filepath.Join(dir, fmt.Sprintf("adult-%d.sqlite", rows))
	ctx := context.Background()
	if err := demo.Generate(ctx, path, rows); err != nil {
		b.Fatal(err)
	}
	cat := catalog.Demo()
	cat.Sources["main"].Path = path
	t := cat.Table("adult")
	cols := []*catalog.Column{t.Column("age"), t.Column("education"), t.Column("hours_per_week")}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		set, err := Open(ctx, cat, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := set.Histogram(ctx, t, cols); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		set.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(rows), "rows")
}
