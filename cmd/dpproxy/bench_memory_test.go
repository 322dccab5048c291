package main

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/internal/heappeak"
)

// BenchmarkGroupByMemory measures the proxy's peak heap for one large
// GROUP BY, per domain cell: the demo table's age × education ×
// hours_per_week × race × sex (1,172,160 cells, every group returned), each
// run with a distinct LIMIT above the group count so no answer comes from
// the store, the first run building the histogram. The proxy runs in this
// process; the client (the Go driver reading every row) runs in a child
// process, so only the proxy's memory is measured. Reported as
// peak-bytes/cell: the largest peak of Go heap objects (live and not yet
// collected) above the level before the query, over the runs.
func BenchmarkGroupByMemory(b *testing.B) {
	_, addr := startProxy(b, "")
	const cells = 74 * 16 * 99 * 5 * 2
	var worst uint64
	for i := 0; i < b.N; i++ {
		q := "SELECT age, education, hours_per_week, race, sex, COUNT(*) FROM adult GROUP BY age, education, hours_per_week, race, sex LIMIT " + itoa(2000000+i)
		peak := heappeak.During(func() {
			cmd := exec.Command(os.Args[0], "-test.run=^TestBenchClientHelper$", "-test.count=1")
			cmd.Env = append(os.Environ(), "DPPROXY_BENCH_CLIENT="+addr+"\n"+q)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "rows="+strconv.Itoa(cells)+"\n") {
				b.Fatalf("client: %v\n%s", err, out)
			}
		})
		worst = max(worst, peak)
	}
	b.ReportMetric(float64(worst)/cells, "peak-bytes/cell")
}

func itoa(i int) string {
	const digits = "0123456789"
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{digits[i%10]}, b...)
	}
	return string(b)
}

// TestBenchClientHelper is the benchmarks' client process: it runs one
// query through the Go driver and prints the number of rows read. It does
// nothing unless DPPROXY_BENCH_CLIENT ("addr\nquery") is set.
func TestBenchClientHelper(t *testing.T) {
	spec := os.Getenv("DPPROXY_BENCH_CLIENT")
	if spec == "" {
		t.Skip("a helper process for benchmarks")
	}
	addr, q, _ := strings.Cut(spec, "\n")
	db, err := sql.Open("mysql", "analyst:analyst@tcp("+addr+")/demo")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("rows=%d\n", n)
}
