package main

import (
	"os"
	"strings"
	"testing"
)

// testdata/sample.json is real `go test -json ./...` output (its times
// removed) of a small module made for this test: package bad has a passing,
// a failing, a subtest-failing and a skipping test; broken does not build;
// crash panics in a test; exits calls os.Exit inside a test; empty has no
// test files; good passes with a skipped test and a skipped subtest. A line
// that is not JSON comes first, as go's own messages do.
func summarise(t *testing.T, strict bool) (string, bool) {
	t.Helper()
	allow, err := readAllowList("testdata/allowlist")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("testdata/sample.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b strings.Builder
	s := newSummary(&b, allow, "testdata/allowlist", strict)
	if err := s.read(f); err != nil {
		t.Fatal(err)
	}
	ok := s.finish()
	return b.String(), ok
}

func TestSummary(t *testing.T) {
	out, ok := summarise(t, true)
	if ok {
		t.Error("a run with failures passed")
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if last := lines[len(lines)-1]; last != "packages: 1 passed, 4 failed" {
		t.Errorf("last line %q", last)
	}
	for _, want := range []string{
		"go: downloading example.com/dep v1.0.0\n",
		"FAIL  example.com/fx/bad  2 passed, 3 failed, 1 skipped",
		"skip TestSkipNotAllowed: bad_test.go:11: TODO: a known gap [NOT on the allow-list: fails under CI=true]",
		"bad_test.go:6: got 1, want 2",
		"--- TestSubFail/broken failed:",
		"bad_test.go:9: boom",
		"build failed (example.com/fx/broken [example.com/fx/broken.test])",
		"broken/broken_test.go:5:28: undefined: undefined",
		"?     example.com/fx/empty  [no test files]",
		"FAIL  example.com/fx/crash  1 passed, 1 failed, 0 skipped",
		"panic: assignment to entry in nil map",
		"FAIL  example.com/fx/exits  0 passed, 1 failed, 0 skipped",
		"--- TestExits did not finish",
		"exits_test.go:8: about to exit",
		"ok    example.com/fx/good  3 passed, 0 failed, 2 skipped",
		"skip TestSub/b: good_test.go:9: no server [allow-listed]",
		"  none TestGone  # listed, never skips  (did not skip in this run)",
		"skipped tests not on the allow-list (fix the skip, or list it with a reason):\n  example.com/fx/bad TestSkipNotAllowed\n",
		"tests: 6 passed, 5 failed, 3 skipped\npackages: 1 passed, 4 failed\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the summary lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "=== RUN") {
		t.Errorf("the summary repeats go test's framing lines:\n%s", out)
	}
}

// Without -strict-skips (a developer's run) skips are listed, not refused.
func TestSummaryLenient(t *testing.T) {
	out, _ := summarise(t, false)
	if strings.Contains(out, "NOT on the allow-list") || strings.Contains(out, "not on the allow-list (") {
		t.Errorf("a lenient run refused a skip:\n%s", out)
	}
	if !strings.HasSuffix(out, "packages: 1 passed, 4 failed\n") {
		t.Errorf("totals:\n%s", out)
	}
}

// A stream cut short (go test killed) fails the package it was in.
func TestSummaryTruncated(t *testing.T) {
	var b strings.Builder
	s := newSummary(&b, nil, "", true)
	in := `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"run","Package":"p","Test":"TestB"}
`
	if err := s.read(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	if s.finish() || !strings.Contains(b.String(), "FAIL  p  1 passed, 1 failed, 0 skipped") ||
		!strings.HasSuffix(b.String(), "packages: 0 passed, 1 failed\n") {
		t.Errorf("truncated stream:\n%s", b.String())
	}
}

func TestAllowList(t *testing.T) {
	l, err := parseAllowList("f", "# comment\n\ncmd/dpproxy TestX  # a reason\n  budget TestY#why\n")
	if err != nil || len(l) != 2 || l[0] != (allowEntry{"cmd/dpproxy", "TestX", "a reason"}) || l[1].reason != "why" {
		t.Fatalf("%+v %v", l, err)
	}
	for _, tc := range []struct {
		pkg, test string
		want      int
	}{
		{"github.com/dpproxy/dpproxy/cmd/dpproxy", "TestX", 0},
		{"github.com/dpproxy/dpproxy/cmd/dpproxy", "TestX/sub", 0},
		{"github.com/dpproxy/dpproxy/cmd/dpproxy", "TestXY", -1},
		{"github.com/dpproxy/dpproxy/cmd/dpproxy-bench", "TestX", -1},
		{"github.com/dpproxy/dpproxy/budget", "TestY", 1},
		{"github.com/dpproxy/dpproxy/xbudget", "TestY", -1},
	} {
		if got := l.match(tc.pkg, tc.test); got != tc.want {
			t.Errorf("match(%s, %s) = %d, want %d", tc.pkg, tc.test, got, tc.want)
		}
	}
	for _, bad := range []string{"budget TestY\n", "budget  # no test name\n", "a b c # three fields\n"} {
		if _, err := parseAllowList("f", bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
