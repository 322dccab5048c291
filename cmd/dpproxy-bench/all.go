package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

// suite is one `go test -bench` run of the speed suite and the figures it
// yields. Small and Full are its sizes: -benchtime and environment.
type suite struct {
	Name        string
	Pkg         string
	Pattern     string
	Small, Full size
	Figures     []figureSpec
	// Needs is the server binary the whole suite needs: absent, the suite
	// is skipped with a note, unless CI=true (where internal/testdb fails
	// it). Benchmarks of a suite that need other servers skip themselves
	// (internal/testdb) and are listed as skipped.
	Needs string
}

type size struct {
	Benchtime string
	Env       []string
}

// figureSpec names, for each benchmark whose name matches Bench, a figure:
// Value against Baseline (metric units of the same result, or of the
// result named BaselineBench), as the metric Ratio when the benchmark
// reports it (else Value/Baseline). Without a Baseline unit the baseline
// shown is Value/Ratio.
type figureSpec struct {
	Label         string
	Bench         string // a regular expression over the result's name
	Value         string
	Baseline      string
	BaselineBench string
	BaselineLabel string // the baseline's unit when there is no Baseline metric
	Ratio         string
}

// figure is one reported figure.
type figure struct {
	Name         string  `json:"name"`
	Bench        string  `json:"bench"`
	Baseline     float64 `json:"baseline"`
	BaselineUnit string  `json:"baseline_unit"`
	Value        float64 `json:"value"`
	ValueUnit    string  `json:"value_unit"`
	Ratio        float64 `json:"ratio"`
	Command      string  `json:"command"`
}

// suiteRun is what one suite did.
type suiteRun struct {
	Name    string          `json:"name"`
	Command string          `json:"command"`
	Seconds float64         `json:"seconds"`
	Skipped string          `json:"skipped,omitempty"`
	Error   string          `json:"error,omitempty"`
	Results []goBenchResult `json:"results,omitempty"`
	Skips   []benchSkip     `json:"skips,omitempty"`
}

// benchSuites is the speed suite: every figure against its baseline, run
// in the same process.
var benchSuites = []suite{
	{
		Name: "bounded-scale", Pkg: "./sources", Pattern: "^BenchmarkBoundedScale$",
		Small: size{"1x", []string{"DPPROXY_BENCH_ROWS=100000"}},
		Full:  size{"3x", []string{"DPPROXY_BENCH_ROWS=1000000"}},
		Figures: []figureSpec{
			{Label: "SQLite bounded histogram / plain GROUP BY", Bench: `^BenchmarkBoundedScale/sqlite/(\w+)/vs-sql-groupby$`, Value: "bounded-ms", Baseline: "plain-ms", Ratio: "x-plain"},
			{Label: "SQLite bounded histogram / unbounded file scan", Bench: `^BenchmarkBoundedScale/sqlite/(\w+)/vs-file-scan$`, Value: "bounded-ms", Baseline: "plain-ms", Ratio: "x-plain"},
			{Label: "PostgreSQL bounded histogram / plain GROUP BY", Bench: `^BenchmarkBoundedScale/postgres/(\w+)$`, Value: "bounded-ms", Baseline: "plain-ms", Ratio: "x-plain"},
			{Label: "MariaDB bounded histogram / plain GROUP BY", Bench: `^BenchmarkBoundedScale/mariadb/(\w+)$`, Value: "bounded-ms", Baseline: "plain-ms", Ratio: "x-plain"},
			// The floors: the least SQL any exact bounding runs (the heavy
			// units' GROUP BY unit; the (unit, cell) pairs g/r needs).
			{Label: "PostgreSQL bounding floor / plain GROUP BY", Bench: `^BenchmarkBoundedScale/postgres/(floor-\w+)$`, Value: "bounded-ms", Baseline: "plain-ms", Ratio: "x-plain"},
			{Label: "MariaDB bounding floor / plain GROUP BY", Bench: `^BenchmarkBoundedScale/mariadb/(floor-\w+)$`, Value: "bounded-ms", Baseline: "plain-ms", Ratio: "x-plain"},
		},
	},
	{
		Name: "bounded-demo", Pkg: "./sources", Pattern: "^BenchmarkBoundedDemo$",
		Small: size{"2x", nil}, Full: size{"5x", nil},
		Figures: []figureSpec{
			{Label: "demo events bounded histogram / unbounded", Bench: `^BenchmarkBoundedDemo$`, Value: "bounded-ms", Baseline: "plain-ms", Ratio: "x-plain"},
		},
	},
	{
		Name: "key-selection", Pkg: "./sources", Pattern: "^BenchmarkKeySelection$",
		Small: size{"1x", []string{"DPPROXY_BENCH_ROWS=200000"}},
		Full:  size{"3x", []string{"DPPROXY_BENCH_ROWS=1000000"}},
		Figures: []figureSpec{
			{Label: "partition selection / plain GROUP BY", Bench: `^BenchmarkKeySelection$`, Value: "selection-ms", Baseline: "plain-ms", Ratio: "selection/plain"},
		},
	},
	{
		Name: "clickhouse", Pkg: "./sources", Pattern: "^BenchmarkClickHouseUnitHistogram$",
		Small: size{"1x", []string{"DPPROXY_BENCH_ROWS=1000000"}},
		Full:  size{"3x", []string{"DPPROXY_BENCH_ROWS=10000000"}},
		Needs: "clickhouse-server",
		Figures: []figureSpec{
			{Label: "ClickHouse unit histogram per shard / plain GROUP BY", Bench: `^BenchmarkClickHouseUnitHistogram$`, Value: "pershard-ms", Baseline: "groupby-ms", Ratio: "pershard/groupby"},
			{Label: "ClickHouse unit histogram global / plain GROUP BY", Bench: `^BenchmarkClickHouseUnitHistogram$`, Value: "global-ms", Baseline: "groupby-ms", Ratio: "global/groupby"},
		},
	},
	{
		Name: "login-flood", Pkg: "./mysqlfront", Pattern: "^BenchmarkLoginDuringFlood$",
		Small: size{"200x", nil}, Full: size{"2000x", nil},
		Figures: []figureSpec{
			{Label: "login during flood / quiet", Bench: `^BenchmarkLoginDuringFlood/(\w+)$`, Value: "flood-ns/login", BaselineLabel: "quiet-ns/login (mean of before and after)", Ratio: "flood/quiet"},
		},
	},
	{
		Name: "planner", Pkg: "./planner", Pattern: "^Benchmark(ChooseCube|ChooseCached)$",
		Small: size{"5x", nil}, Full: size{"20x", nil},
		Figures: []figureSpec{
			{Label: "cached plan / planning from scratch (10⁶ cells)", Bench: `^BenchmarkChooseCached$`, Value: "ns/op", Baseline: "ns/op", BaselineBench: "BenchmarkChooseCube"},
		},
	},
	{
		Name: "long-prefix", Pkg: "./planner", Pattern: "^BenchmarkLongPrefix$",
		Small: size{"1x", nil}, Full: size{"1x", []string{"DPPROXY_BENCH_LONG_PREFIX=1048576"}},
		Figures: []figureSpec{
			{Label: "long prefix column, error × SVD bound / the dense plan's at 1,024 cells", Bench: `^BenchmarkLongPrefix/(\w+/\d+)$`, Value: "x-svd", Baseline: "x-svd-1024"},
			{Label: "long prefix column, planning / the dense plan at 1,024 cells", Bench: `^BenchmarkLongPrefix/(\w+/\d+)$`, Value: "plan-ms", Baseline: "plan-ms-1024"},
		},
	},
	{
		Name: "time-dashboard", Pkg: "./engine", Pattern: "^BenchmarkTimeDashboard$",
		Small: size{"1x", nil}, Full: size{"3x", nil},
		Figures: []figureSpec{
			{Label: "time panel, cold / SQLite's exact GROUP BY", Bench: `^BenchmarkTimeDashboard/([\w-]+)$`, Value: "dp-ms/op", Baseline: "sqlite-ms/op", Ratio: "ratio"},
		},
	},
	{
		Name: "long-panels", Pkg: "./engine", Pattern: "^BenchmarkLongTimePanels$",
		Small: size{"1x", nil}, Full: size{"3x", nil},
		Figures: []figureSpec{
			{Label: "five years of hourly bins, cold / SQLite's exact query", Bench: `^BenchmarkLongTimePanels/(\w+)$`, Value: "dp-ms/op", Baseline: "sqlite-ms/op", Ratio: "ratio"},
		},
	},
	{
		Name: "fresh-events", Pkg: "./cmd/dpproxy", Pattern: "^BenchmarkDemoEventsFresh$",
		Small: size{"3x", nil}, Full: size{"7x", nil},
		Needs: "mysql",
		Figures: []figureSpec{
			{Label: "fresh demo events query via the mysql CLI, p50 / SQLite's exact query", Bench: `^BenchmarkDemoEventsFresh/(\w+)$`, Value: "dp-p50-ms", Baseline: "sqlite-p50-ms", Ratio: "x-sqlite"},
		},
	},
	{
		Name: "reuse-cost", Pkg: "./engine", Pattern: "^BenchmarkReuseDecisionCost$",
		Small: size{"4x", nil}, Full: size{"12x", nil},
		Figures: []figureSpec{
			{Label: "fresh batch, stored-measurement reuse on / off", Bench: `^BenchmarkReuseDecisionCost/([\w/-]+)$`, Value: "ms_reuse_on", Baseline: "ms_reuse_off", Ratio: "on/off"},
		},
	},
	{
		Name: "reuse-year-cost", Pkg: "./engine", Pattern: "^BenchmarkReuseYearDecisionCost$",
		Small: size{"2x", nil}, Full: size{"5x", nil},
		Figures: []figureSpec{
			{Label: "a year of hours, fresh batch, stored-measurement reuse on / off", Bench: `^BenchmarkReuseYearDecisionCost/([\w/-]+)$`, Value: "ms_reuse_on", Baseline: "ms_reuse_off", Ratio: "on/off"},
		},
	},
	{
		Name: "reuse", Pkg: "./engine", Pattern: "^Benchmark(DashboardReuse|DashboardRefresh|TimeDashboardReuse)$",
		Small: size{"2x", nil}, Full: size{"20x", nil},
		Figures: []figureSpec{
			{Label: "ε with stored measurements / alone", Bench: `^Benchmark((?:Time)?Dashboard(?:Reuse|Refresh)/[\w/-]+)$`, Value: "eps_stored", Baseline: "eps_alone"},
			{Label: "MSE with stored measurements / alone", Bench: `^Benchmark((?:Time)?Dashboard(?:Reuse|Refresh)/[\w/-]+)$`, Value: "mse_stored", Baseline: "mse_alone"},
		},
	},
}

// benchAll runs the speed suite and prints every figure against its
// baseline; --json writes them too.
func benchAll(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("all", flag.ContinueOnError)
	fs.SetOutput(stderr)
	full := fs.Bool("full", false, "the benchmarks' own sizes (1M–10M rows, more iterations) instead of the small defaults")
	jsonPath := fs.String("json", "", "also write the figures, raw results and skips as JSON to this `file`")
	only := fs.String("only", "", "run only the suites whose name matches this `regexp` ("+suiteNames()+")")
	if err := fs.Parse(args); err != nil {
		return exitError{Code: 2, Err: err}
	}
	var sel *regexp.Regexp
	if *only != "" {
		var err error
		if sel, err = regexp.Compile(*only); err != nil {
			return exitError{Code: 2, Err: err}
		}
	}
	start := time.Now()
	var runs []suiteRun
	var figs []figure
	failed := false
	for _, s := range benchSuites {
		if sel != nil && !sel.MatchString(s.Name) {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		r := runSuite(ctx, s, *full, stderr)
		if r.Error != "" {
			failed = true
		}
		figs = append(figs, figuresOf(s, r)...)
		runs = append(runs, r)
	}
	printFigures(stdout, figs, runs)
	fmt.Fprintf(stdout, "\n%d figures in %v (GOMAXPROCS %d, %s)\n", len(figs), time.Since(start).Round(time.Second), runtime.GOMAXPROCS(0), sizeName(*full))
	if *jsonPath != "" {
		out := struct {
			Started time.Time  `json:"started"`
			Seconds float64    `json:"seconds"`
			Full    bool       `json:"full"`
			Go      string     `json:"go"`
			Procs   int        `json:"gomaxprocs"`
			Figures []figure   `json:"figures"`
			Suites  []suiteRun `json:"suites"`
		}{start, time.Since(start).Seconds(), *full, runtime.Version(), runtime.GOMAXPROCS(0), figs, runs}
		b, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*jsonPath, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if failed {
		return fmt.Errorf("some benchmarks failed (see above)")
	}
	return ctx.Err()
}

func sizeName(full bool) string {
	if full {
		return "--full sizes"
	}
	return "default (small) sizes"
}

func suiteNames() string {
	var ns []string
	for _, s := range benchSuites {
		ns = append(ns, s.Name)
	}
	return strings.Join(ns, ", ")
}

// command is the suite's go test and its shell command line. -v prints
// why a benchmark skipped (without it, a skip is silent).
func (s suite) command(full bool) (env []string, args []string, line string) {
	sz := s.Small
	if full {
		sz = s.Full
	}
	args = []string{"test", "-v", "-run", "^$", "-bench", s.Pattern, "-benchtime", sz.Benchtime, "-timeout", "30m", s.Pkg}
	line = strings.Join(sz.Env, " ")
	if line != "" {
		line += " "
	}
	line += "go test -v -run '^$' -bench '" + s.Pattern + "' " + strings.Join(args[6:], " ")
	return sz.Env, args, line
}

// runSuite runs one suite from the module's root, echoing its output to
// progress, and parses it.
func runSuite(ctx context.Context, s suite, full bool, progress io.Writer) suiteRun {
	env, args, line := s.command(full)
	r := suiteRun{Name: s.Name, Command: line}
	if s.Needs != "" && os.Getenv("CI") != "true" && !haveBinary(s.Needs) {
		r.Skipped = s.Needs + " is not installed (under CI=true the suite runs, and fails)"
		fmt.Fprintf(progress, "== %s: skipped: %s\n", s.Name, r.Skipped)
		return r
	}
	fmt.Fprintf(progress, "== %s: %s\n", s.Name, line)
	root, err := moduleRoot(ctx)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(&out, progress)
	cmd.Stderr = io.MultiWriter(&out, progress)
	runErr := cmd.Run()
	r.Seconds = time.Since(start).Seconds()
	r.Results, r.Skips, _ = parseBench(&out)
	if runErr != nil {
		r.Error = runErr.Error()
	}
	return r
}

func haveBinary(name string) bool {
	if _, err := exec.LookPath(name); err == nil {
		return true
	}
	for _, dir := range []string{"/usr/sbin/", "/usr/local/sbin/"} {
		if _, err := os.Stat(dir + name); err == nil {
			return true
		}
	}
	return false
}

func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the dpproxy module: run from its checkout")
	}
	return strings.TrimSuffix(mod, "/go.mod"), nil
}

// figuresOf turns a suite's results into its figures.
func figuresOf(s suite, r suiteRun) []figure {
	byName := map[string]goBenchResult{}
	for _, res := range r.Results {
		byName[res.Name] = res
	}
	var figs []figure
	for _, spec := range s.Figures {
		re := regexp.MustCompile(spec.Bench)
		for _, res := range r.Results {
			m := re.FindStringSubmatch(res.Name)
			if m == nil {
				continue
			}
			v, ok := res.Metrics[spec.Value]
			if !ok {
				continue
			}
			f := figure{Name: spec.Label, Bench: res.Name, Value: v, ValueUnit: spec.Value, Command: r.Command}
			if len(m) > 1 {
				f.Name += " [" + m[1] + "]"
			}
			base := res
			if spec.BaselineBench != "" {
				if base, ok = byName[spec.BaselineBench]; !ok {
					continue
				}
			}
			if spec.Baseline != "" {
				f.Baseline, f.BaselineUnit = base.Metrics[spec.Baseline], spec.Baseline
				if spec.BaselineBench != "" {
					f.BaselineUnit = strings.TrimPrefix(spec.BaselineBench, "Benchmark") + " " + spec.Baseline
				}
			}
			if ratio, ok := res.Metrics[spec.Ratio]; ok && spec.Ratio != "" {
				f.Ratio = ratio
				if spec.Baseline == "" && ratio != 0 {
					f.Baseline, f.BaselineUnit = v/ratio, spec.BaselineLabel
				}
			} else if f.Baseline != 0 {
				f.Ratio = v / f.Baseline
			}
			figs = append(figs, f)
		}
	}
	return figs
}

// printFigures prints the figures as a table, then the skips and errors.
func printFigures(w io.Writer, figs []figure, runs []suiteRun) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tbaseline\tvalue\tratio")
	for _, f := range figs {
		fmt.Fprintf(tw, "%s\t%s %s\t%s %s\t%.3g×\n", f.Name, num(f.Baseline), f.BaselineUnit, num(f.Value), f.ValueUnit, f.Ratio)
	}
	tw.Flush()
	fmt.Fprintln(w, "\ncommands:")
	for _, r := range runs {
		switch {
		case r.Skipped != "":
			fmt.Fprintf(w, "  %s: skipped: %s\n", r.Name, r.Skipped)
		default:
			fmt.Fprintf(w, "  %s (%.0fs): %s\n", r.Name, r.Seconds, r.Command)
		}
		for _, s := range r.Skips {
			what := "skipped"
			if s.Failed {
				what = "FAILED"
			}
			fmt.Fprintf(w, "    %s %s: %s\n", s.Name, what, s.Reason)
		}
		if r.Error != "" {
			fmt.Fprintf(w, "    error: %s\n", r.Error)
		}
	}
}

// num prints v with three significant digits, without exponents for the
// sizes benchmarks report.
func num(v float64) string {
	if v >= 1000 || v <= -1000 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}
