package main

import (
	"bufio"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// goBenchResult is one result line of `go test -bench`: the benchmark's name
// (without the -GOMAXPROCS suffix), its iterations and every metric it
// printed, ns/op and those of b.ReportMetric alike, by unit.
type goBenchResult struct {
	Name    string             `json:"name"`
	N       int                `json:"n"`
	Metrics map[string]float64 `json:"metrics"`
}

// benchSkip is a benchmark that skipped (or failed), with the first line
// it logged.
type benchSkip struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
	Failed bool   `json:"failed,omitempty"`
}

var procsSuffix = regexp.MustCompile(`-\d+$`)

// parseBench reads the output of `go test -bench` (the standard format,
// https://go.dev/design/14313-benchmark-format): its result lines, and the
// benchmarks that reported `--- SKIP` or `--- FAIL`, with the last line
// they logged (before it under -v, after it without). Other lines (goos,
// PASS, ok, logs, names alone under -v) are ignored.
func parseBench(r io.Reader) (results []goBenchResult, skips []benchSkip, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	lastLog := ""          // the last line logged since a benchmark's name
	var pending *benchSkip // a SKIP or FAIL waiting for its reason
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(line, "    ") && trimmed != "" {
			// "    file_test.go:12: message"
			if i := strings.Index(trimmed, ": "); i > 0 && strings.Contains(trimmed[:i], ".go:") {
				trimmed = trimmed[i+2:]
			}
			if pending != nil {
				pending.Reason = trimmed
				skips = append(skips, *pending)
				pending = nil
			} else {
				lastLog = trimmed
			}
			continue
		}
		if pending != nil {
			skips = append(skips, *pending)
			pending = nil
		}
		if strings.HasPrefix(line, "Benchmark") {
			lastLog = ""
			if r, ok := parseResultLine(line); ok {
				results = append(results, r)
			}
			continue
		}
		for _, p := range []struct {
			prefix string
			failed bool
		}{{"--- SKIP: ", false}, {"--- FAIL: ", true}} {
			if rest, ok := strings.CutPrefix(trimmed, p.prefix); ok {
				name, _, _ := strings.Cut(rest, " ")
				s := benchSkip{Name: procsSuffix.ReplaceAllString(name, ""), Failed: p.failed, Reason: lastLog}
				if lastLog != "" {
					skips = append(skips, s)
				} else {
					pending = &s
				}
				lastLog = ""
			}
		}
	}
	if pending != nil {
		skips = append(skips, *pending)
	}
	return results, skips, sc.Err()
}

// parseResultLine parses "BenchmarkName-2  <N>  <value> <unit> ...".
func parseResultLine(line string) (goBenchResult, bool) {
	f := strings.Fields(line)
	if len(f) < 4 || len(f)%2 != 0 || !strings.HasPrefix(f[0], "Benchmark") {
		return goBenchResult{}, false
	}
	n, err := strconv.Atoi(f[1])
	if err != nil {
		return goBenchResult{}, false
	}
	r := goBenchResult{Name: procsSuffix.ReplaceAllString(f[0], ""), N: n, Metrics: map[string]float64{}}
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return goBenchResult{}, false
		}
		r.Metrics[f[i+1]] = v
	}
	return r, true
}
