package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The planner benchmark runs end to end on a small domain, and the command
// refuses what it does not know with exit status 2.
func TestRun(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"planner", "--workload", "allrange", "--domain", "16"}, &out, &errOut); code != 0 {
		t.Fatalf("planner: exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"workload allrange, domain 16 (16 cells)", "identity", "wavelet"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("planner output lacks %q:\n%s", want, out.String())
		}
	}
	for _, args := range [][]string{nil, {"nope"}, {"planner", "--workload", "nope"}, {"planner", "--noise", "nope"}, {"all", "--only", "("}, {"all", "--nope"}} {
		errOut.Reset()
		if code := run(context.Background(), args, &out, &errOut); code != 2 || errOut.Len() == 0 {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut.String())
		}
	}
}
