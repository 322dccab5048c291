// Command cisummary reads the output of `go test -json` and prints, for
// each package, how many tests passed, failed and were skipped; the output
// of every failed test (and of a package that failed outside its tests: a
// build error, a panic, a timeout); every skipped test with its reason; and
// totals, ending with the line "packages: N passed, N failed", which CI's
// harness reads. It is what .ci/run prints instead of go test's own output,
// which it keeps as a file.
//
// Usage:
//
//	go test -json ./... 2>&1 | tee log.json | go run ./internal/cisummary [-allow FILE] [-strict-skips]
//	go run ./internal/cisummary [-allow FILE] [-strict-skips] log.json
//
// Tests are counted with their subtests, each once. A package passes when go
// test says it passed and, under -strict-skips (.ci/run sets it when
// CI=true), every test it skipped is on the allow-list FILE. Each line of
// FILE is
//
//	package TestName  # reason
//
// where package is an import path or its part below the module
// ("cmd/dpproxy"), an entry covers the test's subtests, and the reason is
// required. Lines that hold only a comment are ignored.
//
// The exit status is 0 when every package passed, 1 when one did not, and 2
// when the allow-list cannot be read. Lines of the input that are not JSON
// (go's own messages on stderr) are printed as they come.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

func main() {
	allowPath := flag.String("allow", "", "the skip allow-list `file`")
	strict := flag.Bool("strict-skips", false, "fail a package that skips a test not on the allow-list")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: cisummary [-allow FILE] [-strict-skips] [go-test.json]")
		flag.PrintDefaults()
	}
	flag.Parse()
	var allow allowList
	if *allowPath != "" {
		var err error
		if allow, err = readAllowList(*allowPath); err != nil {
			fmt.Fprintln(os.Stderr, "cisummary:", err)
			os.Exit(2)
		}
	}
	in := io.Reader(os.Stdin)
	switch flag.NArg() {
	case 0:
	case 1:
		f, err := os.Open(flag.Arg(0))
		if err != nil {
			fmt.Fprintln(os.Stderr, "cisummary:", err)
			os.Exit(2)
		}
		defer f.Close()
		in = f
	default:
		flag.Usage()
		os.Exit(2)
	}
	s := newSummary(os.Stdout, allow, *allowPath, *strict)
	if err := s.read(in); err != nil {
		fmt.Fprintln(os.Stderr, "cisummary:", err)
		os.Exit(2)
	}
	if !s.finish() {
		os.Exit(1)
	}
}

// event is one line of `go test -json` (cmd/test2json), with the build
// events that go test adds (ImportPath, FailedBuild).
type event struct {
	Action      string
	Package     string
	Test        string
	Output      string
	Elapsed     float64
	ImportPath  string
	FailedBuild string
}

type test struct {
	name   string
	state  string // "run", then "pass", "fail" or "skip"
	output []string
}

type pkg struct {
	name        string
	tests       map[string]*test
	order       []string
	output      []string // lines outside any test
	state       string   // "", then "pass", "fail" or "skip" (no test files)
	elapsed     float64
	failedBuild string
}

func (p *pkg) test(name string) *test {
	t := p.tests[name]
	if t == nil {
		t = &test{name: name, state: "run"}
		p.tests[name] = t
		p.order = append(p.order, name)
	}
	return t
}

type counts struct{ passed, failed, skipped int }

type summary struct {
	w         io.Writer
	allow     allowList
	allowPath string
	strict    bool

	pkgs  map[string]*pkg
	order []string
	build map[string][]string // build output by ImportPath

	tests                                counts
	pkgPassed, pkgFailed, pkgNoTestFiles int
	refused                              []string // skips not on the allow-list, as "pkg Test"
	allowed                              map[int]bool
}

func newSummary(w io.Writer, allow allowList, allowPath string, strict bool) *summary {
	return &summary{w: w, allow: allow, allowPath: allowPath, strict: strict,
		pkgs: map[string]*pkg{}, build: map[string][]string{}, allowed: map[int]bool{}}
}

func (s *summary) pkg(name string) *pkg {
	p := s.pkgs[name]
	if p == nil {
		p = &pkg{name: name, tests: map[string]*test{}}
		s.pkgs[name] = p
		s.order = append(s.order, name)
	}
	return p
}

// read consumes the stream, printing each package as go test finishes it.
func (s *summary) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil || e.Action == "" {
			fmt.Fprintf(s.w, "%s\n", line)
			continue
		}
		s.event(&e)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading go test's output: %w", err)
	}
	return nil
}

func (s *summary) event(e *event) {
	switch e.Action {
	case "build-output":
		s.build[e.ImportPath] = append(s.build[e.ImportPath], e.Output)
		return
	case "build-fail":
		return
	}
	if e.Package == "" {
		return
	}
	p := s.pkg(e.Package)
	if e.Test == "" {
		switch e.Action {
		case "output":
			p.output = append(p.output, e.Output)
		case "pass", "fail", "skip":
			p.state, p.elapsed, p.failedBuild = e.Action, e.Elapsed, e.FailedBuild
			s.report(p)
		}
		return
	}
	t := p.test(e.Test)
	switch e.Action {
	case "output":
		t.output = append(t.output, e.Output)
	case "pass", "fail", "skip":
		t.state = e.Action
	}
}

// framing reports whether a test's output line is go test's own marker of
// a test starting or resuming, which says nothing when printed again.
func framing(line string) bool {
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME"} {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return false
}

// skipReason is the skipped test's own message: its output less the
// framing and the "--- SKIP" line.
func skipReason(t *test) string {
	var b []string
	for _, l := range t.output {
		l = strings.TrimSpace(l)
		if l == "" || framing(l) || strings.HasPrefix(l, "--- SKIP") {
			continue
		}
		b = append(b, l)
	}
	if len(b) == 0 {
		return "(no reason given)"
	}
	return strings.Join(b, " / ")
}

// report prints one finished package and adds it to the totals.
func (s *summary) report(p *pkg) {
	if p.state == "skip" && len(p.tests) == 0 {
		s.pkgNoTestFiles++
		fmt.Fprintf(s.w, "?     %s  [no test files]\n", p.name)
		return
	}
	var c counts
	var failed, unfinished, skipped []*test
	for _, name := range p.order {
		t := p.tests[name]
		switch t.state {
		case "pass":
			c.passed++
		case "fail":
			c.failed++
			failed = append(failed, t)
		case "skip":
			c.skipped++
			skipped = append(skipped, t)
		default: // the binary exited, panicked or timed out in it
			c.failed++
			unfinished = append(unfinished, t)
		}
	}
	var refused []*test
	for _, t := range skipped {
		if i := s.allow.match(p.name, t.name); i >= 0 {
			s.allowed[i] = true
		} else if s.strict {
			refused = append(refused, t)
			s.refused = append(s.refused, p.name+" "+t.name)
		}
	}
	ok := p.state == "pass" && len(refused) == 0
	s.tests.passed += c.passed
	s.tests.failed += c.failed
	s.tests.skipped += c.skipped
	mark := "ok   "
	if ok {
		s.pkgPassed++
	} else {
		s.pkgFailed++
		mark = "FAIL "
	}
	fmt.Fprintf(s.w, "%s %s  %d passed, %d failed, %d skipped  (%.2fs)\n", mark, p.name, c.passed, c.failed, c.skipped, p.elapsed)
	for _, t := range skipped {
		note := ""
		switch {
		case s.allow.match(p.name, t.name) >= 0:
			note = " [allow-listed]"
		case s.strict:
			note = " [NOT on the allow-list: fails under CI=true]"
		}
		fmt.Fprintf(s.w, "      skip %s: %s%s\n", t.name, skipReason(t), note)
	}
	if p.failedBuild != "" {
		fmt.Fprintf(s.w, "      build failed (%s):\n", p.failedBuild)
		indent(s.w, s.build[p.failedBuild])
	}
	for _, t := range failed {
		fmt.Fprintf(s.w, "      --- %s failed:\n", t.name)
		indent(s.w, dropFraming(t.output))
	}
	for _, t := range unfinished {
		fmt.Fprintf(s.w, "      --- %s did not finish (the test binary exited, panicked or timed out during it):\n", t.name)
		indent(s.w, dropFraming(t.output))
	}
	if p.state == "fail" && p.failedBuild == "" && hasNews(p.output) {
		fmt.Fprintf(s.w, "      package output:\n")
		indent(s.w, p.output)
	}
}

// hasNews reports whether a failed package's own output says more than
// go test's closing "FAIL" lines.
func hasNews(lines []string) bool {
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l != "" && l != "FAIL" && !strings.HasPrefix(l, "FAIL\t") {
			return true
		}
	}
	return false
}

func dropFraming(lines []string) []string {
	var out []string
	for _, l := range lines {
		if !framing(l) {
			out = append(out, l)
		}
	}
	return out
}

func indent(w io.Writer, lines []string) {
	for _, l := range lines {
		fmt.Fprintf(w, "        %s\n", strings.TrimRight(l, "\n"))
	}
}

// finish reports packages the stream ended inside, the allow-list and the
// totals, and says whether every package passed.
func (s *summary) finish() bool {
	for _, name := range s.order {
		if p := s.pkgs[name]; p.state == "" {
			p.state = "fail"
			p.output = append(p.output, "(go test's output ended before this package's result)\n")
			s.report(p)
		}
	}
	if len(s.allow) > 0 {
		fmt.Fprintf(s.w, "skips allowed under CI=true (%s):\n", s.allowPath)
		for i, a := range s.allow {
			seen := "did not skip in this run"
			if s.allowed[i] {
				seen = "skipped"
			}
			fmt.Fprintf(s.w, "  %s %s  # %s  (%s)\n", a.pkg, a.test, a.reason, seen)
		}
	}
	if len(s.refused) > 0 {
		sort.Strings(s.refused)
		fmt.Fprintf(s.w, "skipped tests not on the allow-list (fix the skip, or list it with a reason):\n")
		for _, r := range s.refused {
			fmt.Fprintf(s.w, "  %s\n", r)
		}
	}
	if s.pkgNoTestFiles > 0 {
		fmt.Fprintf(s.w, "packages without test files: %d\n", s.pkgNoTestFiles)
	}
	fmt.Fprintf(s.w, "tests: %d passed, %d failed, %d skipped\n", s.tests.passed, s.tests.failed, s.tests.skipped)
	fmt.Fprintf(s.w, "packages: %d passed, %d failed\n", s.pkgPassed, s.pkgFailed)
	return s.pkgFailed == 0
}

// allowList is the documented list of tests that may skip under CI=true.
type allowList []allowEntry

type allowEntry struct{ pkg, test, reason string }

func readAllowList(path string) (allowList, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseAllowList(path, string(b))
}

func parseAllowList(path, text string) (allowList, error) {
	var l allowList
	var errs []error
	for i, line := range strings.Split(text, "\n") {
		body, reason, _ := strings.Cut(line, "#")
		f := strings.Fields(body)
		reason = strings.TrimSpace(reason)
		switch {
		case len(f) == 0:
			continue
		case len(f) != 2:
			errs = append(errs, fmt.Errorf("%s:%d: want \"package TestName  # reason\", got %q", path, i+1, line))
		case reason == "":
			errs = append(errs, fmt.Errorf("%s:%d: %s %s has no reason (# why it may skip under CI)", path, i+1, f[0], f[1]))
		default:
			l = append(l, allowEntry{pkg: f[0], test: f[1], reason: reason})
		}
	}
	return l, errors.Join(errs...)
}

// match returns the index of the entry that allows pkg's test to skip, or -1.
func (l allowList) match(pkg, test string) int {
	for i, a := range l {
		if (pkg == a.pkg || strings.HasSuffix(pkg, "/"+a.pkg)) && (test == a.test || strings.HasPrefix(test, a.test+"/")) {
			return i
		}
	}
	return -1
}
