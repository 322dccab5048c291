package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"testing"
)

func TestStatus(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
		out  string
	}{
		{nil, 0, ""},
		{flag.ErrHelp, 0, ""},
		{errors.New("boom"), 1, "p: boom\n"},
		{ExitError{Code: 3, Err: errors.New("tampered")}, 3, "p: tampered\n"},
		{fmt.Errorf("audit: %w", ExitError{Code: 2, Err: errors.New("usage")}), 2, "p: usage\n"},
	} {
		var b bytes.Buffer
		if code := Status(&b, "p", tc.err); code != tc.code || b.String() != tc.out {
			t.Errorf("Status(%v) = %d %q, want %d %q", tc.err, code, b.String(), tc.code, tc.out)
		}
	}
}
