package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/demo"
	"github.com/dpproxy/dpproxy/engine"
	"github.com/dpproxy/dpproxy/planner"
	"github.com/dpproxy/dpproxy/sources"
)

// wideDashboard is a dashboard over the 20-column fixture: GROUP BYs of
// one to three columns, sent as one batch.
var wideDashboard = []string{
	"SELECT sex, COUNT(*) FROM wide GROUP BY sex",
	"SELECT education, COUNT(*) FROM wide GROUP BY education",
	"SELECT age, COUNT(*) FROM wide GROUP BY age",
	"SELECT region, COUNT(*) FROM wide GROUP BY region",
	"SELECT occupation, COUNT(*) FROM wide GROUP BY occupation",
	"SELECT race, sex, COUNT(*) FROM wide GROUP BY race, sex",
	"SELECT housing, income, COUNT(*) FROM wide GROUP BY housing, income",
	"SELECT education, income, COUNT(*) FROM wide GROUP BY education, income",
	"SELECT hours_per_week, sex, COUNT(*) FROM wide GROUP BY hours_per_week, sex",
	"SELECT health, children, vehicles, COUNT(*) FROM wide GROUP BY health, children, vehicles",
	"SELECT internet, language, sex, COUNT(*) FROM wide GROUP BY internet, language, sex",
	"SELECT age, marital_status, relationship, COUNT(*) FROM wide GROUP BY age, marital_status, relationship",
}

// benchWide: `dpproxy-bench wide [--rows N] [--dir DIR]`. It generates the
// 20-column fixture into SQLite, answers the dashboard through the engine
// (planning, one histogram per column set, ledger charge, measurement and
// reconstruction in marginal space, result rows), and, as the baseline in
// the same process, runs the same GROUP BYs exactly in SQLite; it prints
// time and peak heap of each.
func benchWide(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("wide", flag.ContinueOnError)
	rows := fs.Int("rows", 1_000_000, "rows of the generated table")
	dir := fs.String("dir", "", "directory for the fixture, ledger and answers (default: a temporary one, removed after)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx := context.Background()
	if *dir == "" {
		d, err := os.MkdirTemp("", "dpproxy-bench-wide-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		*dir = d
	}
	data := filepath.Join(*dir, "wide.sqlite")
	if _, err := os.Stat(data); err != nil {
		t0 := time.Now()
		if err := demo.GenerateWide(ctx, data, *rows); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "generated %d rows × 20 columns into %s in %s\n", *rows, data, time.Since(t0).Round(time.Millisecond))
	}
	cat, err := catalog.Parse("wide.yaml", []byte(`
database: bench
sources: {main: {driver: sqlite, path: wide.sqlite}}
tables:
  wide:
    noise: laplace
    budget: {total: 1000000, per_user: 1000000, default_per_query: 1, max_per_query: 10}
    columns:
`+demo.WideColumns+`
users:
  analyst: {password: analyst, role: analyst}
`))
	if err != nil {
		return err
	}
	w, _, err := benchCompile(cat, "wide", strings.Join(wideDashboard, ";"))
	if err != nil {
		return err
	}
	p, err := planner.New().Choose(context.Background(), w, planner.Options{Noise: catalog.Laplace, Epsilon: 1})
	if err != nil {
		return err
	}
	counted := 0.0
	for _, t := range p.Tables {
		c := 1.0
		for _, j := range t {
			c *= float64(w.Columns[j].Size())
		}
		counted += c
	}
	fmt.Fprintf(stdout, "dashboard: %d GROUP BYs over %d of the 20 columns; product domain %.3g cells; plan %s counts %d tables, %.0f cells\n",
		len(wideDashboard), len(w.Columns), productOf(w), p.Name, len(p.Tables), counted)

	baseline := func() (int, error) {
		db, err := sql.Open("sqlite", "file:"+data+"?mode=ro")
		if err != nil {
			return 0, err
		}
		defer db.Close()
		n := 0
		for _, q := range wideDashboard {
			rs, err := db.QueryContext(ctx, q)
			if err != nil {
				return 0, err
			}
			for rs.Next() {
				n++
			}
			if err := rs.Close(); err != nil {
				return 0, err
			}
		}
		return n, nil
	}
	dp := func(run int) (int, error) {
		l, err := budget.Open(ctx, filepath.Join(*dir, fmt.Sprintf("ledger-%d.sqlite", run)))
		if err != nil {
			return 0, err
		}
		defer l.Close()
		h, err := sources.Open(ctx, cat, sources.Options{DataDir: *dir})
		if err != nil {
			return 0, err
		}
		defer h.Close()
		eng := engine.New(engine.Config{Catalog: cat, Ledger: l, Histograms: h, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		rs, err := eng.Answer(ctx, &engine.Session{ConnID: 1, User: "analyst"}, wideDashboard)
		if err != nil {
			return 0, err
		}
		n := 0
		for _, r := range rs {
			n += len(r.Rows)
		}
		return n, nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "run\trows returned\tseconds\tpeak heap MB\tallocated MB")
	var times [2][]float64
	for run := 0; run < 2; run++ {
		for i, f := range []struct {
			name string
			fn   func() (int, error)
		}{{"exact GROUP BYs in SQLite (baseline)", baseline}, {"dpproxy engine, marginal space", func() (int, error) { return dp(run) }}} {
			n, secs, peak, alloc, err := measured(f.fn)
			if err != nil {
				return err
			}
			times[i] = append(times[i], secs)
			fmt.Fprintf(tw, "%s #%d\t%d\t%.3f\t%.1f\t%.1f\n", f.name, run+1, n, secs, peak/1e6, alloc/1e6)
		}
	}
	fmt.Fprintf(tw, "engine ÷ baseline time: %.2f, %.2f\n", times[1][0]/times[0][0], times[1][1]/times[0][1])
	return tw.Flush()
}

func productOf(w *compile.Workload) float64 {
	n := 1.0
	for _, s := range w.Sizes() {
		n *= float64(s)
	}
	return n
}

// measured runs fn after a GC and returns its result, wall time, the peak
// live heap above the heap before it (sampled every millisecond) and the
// bytes it allocated.
func measured(fn func() (int, error)) (n int, secs, peak, alloc float64, err error) {
	runtime.GC()
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(samples)
	base, alloc0 := float64(samples[0].Value.Uint64()), float64(samples[1].Value.Uint64())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var top float64
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			top = max(top, float64(s[0].Value.Uint64()))
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	t0 := time.Now()
	n, err = fn()
	secs = time.Since(t0).Seconds()
	close(stop)
	wg.Wait()
	metrics.Read(samples)
	return n, secs, max(top-base, 0), float64(samples[1].Value.Uint64()) - alloc0, err
}
