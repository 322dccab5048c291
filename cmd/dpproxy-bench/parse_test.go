package main

import (
	"math"
	"os"
	"strings"
	"testing"
)

// parseBench reads go test's output as captured from `dpproxy-bench all`
// (testdata/bench.txt: result lines with b.ReportMetric units and a
// --- BENCH log; testdata/bench-v.txt: -v with a benchmark's skip and
// names printed alone), and the layout of a failure without -v.
func TestParseBench(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, tc := range []struct {
		name    string
		input   string
		results int
		want    map[string]map[string]float64 // some results' metrics
		skips   []benchSkip
	}{
		{
			name: "run", input: read("bench.txt"), results: 13,
			want: map[string]map[string]float64{
				"BenchmarkBoundedScale/sqlite/k10/vs-sql-groupby": {"ns/op": 171420761, "bounded-ms": 25, "plain-ms": 139, "x-plain": 0.1846},
				"BenchmarkBoundedScale/mariadb/k10g3r5":           {"x-plain": 5.282},
				"BenchmarkClickHouseUnitHistogram":                {"pershard/groupby": 20.18, "global/groupby": 33.38, "rows": 1000000},
				"BenchmarkLoginDuringFlood/churn":                 {"flood/quiet": 9.544, "flood-sockets/login": 14.70},
				"BenchmarkChooseCached":                           {"ns/op": 7784},
			},
		},
		{
			name: "verbose", input: read("bench-v.txt"), results: 2,
			want:  map[string]map[string]float64{"BenchmarkGenerate/adult+events": {"ns/op": 958999750}},
			skips: []benchSkip{{Name: "BenchmarkLoginDuringFlood/idle", Reason: "needs 8256 descriptors, RLIMIT_NOFILE is 2048"}},
		},
		{
			name: "failure", results: 0,
			input: "goos: linux\n--- FAIL: BenchmarkTimeDashboardReuse/epsilon1-2\n    known_bench_test.go:262: stored measurements spent ε 5, alone 5\nFAIL\n",
			skips: []benchSkip{{Name: "BenchmarkTimeDashboardReuse/epsilon1", Reason: "stored measurements spent ε 5, alone 5", Failed: true}},
		},
		{
			name: "not results", results: 0,
			input: "BenchmarkX\nBenchmarkX-2 \t 1\t abc ns/op\nBenchmarkY-2 \t 1\t 5 ns/op\t 3\nok  \tpkg\t1s\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			results, skips, err := parseBench(strings.NewReader(tc.input))
			if err != nil {
				t.Fatal(err)
			}
			if len(results) != tc.results {
				t.Errorf("%d results, want %d: %+v", len(results), tc.results, results)
			}
			got := map[string]goBenchResult{}
			for _, r := range results {
				got[r.Name] = r
			}
			for name, metrics := range tc.want {
				r, ok := got[name]
				if !ok {
					t.Errorf("no result %s", name)
					continue
				}
				for unit, v := range metrics {
					if r.Metrics[unit] != v {
						t.Errorf("%s %s = %v, want %v", name, unit, r.Metrics[unit], v)
					}
				}
			}
			if len(skips) != len(tc.skips) {
				t.Fatalf("skips %+v, want %+v", skips, tc.skips)
			}
			for i := range skips {
				if skips[i] != tc.skips[i] {
					t.Errorf("skip %+v, want %+v", skips[i], tc.skips[i])
				}
			}
		})
	}
}

// The suite's figure specs find their figures in a run's output: ratios
// the benchmarks report, ratios across two benchmarks, and a baseline
// derived from a value and its ratio.
func TestFiguresOf(t *testing.T) {
	f, err := os.Open("testdata/bench.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	results, _, err := parseBench(f)
	if err != nil {
		t.Fatal(err)
	}
	run := suiteRun{Results: results}
	byName := map[string]figure{}
	for _, s := range benchSuites {
		for _, fig := range figuresOf(s, run) {
			byName[fig.Name] = fig
		}
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Abs(b) }
	for name, want := range map[string]figure{
		"SQLite bounded histogram / plain GROUP BY [k10]":         {Baseline: 139, Value: 25, Ratio: 0.1846},
		"PostgreSQL bounded histogram / plain GROUP BY [k10g3r5]": {Baseline: 33, Value: 740, Ratio: 21.98},
		"ClickHouse unit histogram per shard / plain GROUP BY":    {Baseline: 54, Value: 1107, Ratio: 20.18},
		"login during flood / quiet [idle]":                       {Baseline: 314993 / 0.8084, Value: 314993, Ratio: 0.8084},
		"cached plan / planning from scratch (10⁶ cells)":         {Baseline: 480921685, Value: 7784, Ratio: 7784.0 / 480921685},
	} {
		got, ok := byName[name]
		if !ok {
			t.Errorf("no figure %q", name)
			continue
		}
		if !near(got.Baseline, want.Baseline) || got.Value != want.Value || !near(got.Ratio, want.Ratio) {
			t.Errorf("%s: baseline %v value %v ratio %v, want %v %v %v", name, got.Baseline, got.Value, got.Ratio, want.Baseline, want.Value, want.Ratio)
		}
	}
	if len(byName) != 13 {
		t.Errorf("%d figures, want 13 (8 bounded-scale, 2 ClickHouse, 2 login, 1 planner): %v", len(byName), byName)
	}
}
