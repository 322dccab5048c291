// Package cli holds what dpproxy's two commands (cmd/dpproxy and
// cmd/dpproxy-bench) share about ending: an error that carries its exit
// status, and the one mapping from a subcommand's error to the message
// and status the shell sees.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// ExitError is an error that ends the command with Code (a finding, such
// as a ledger that fails verification, is 3; a usage error 2).
type ExitError struct {
	Code int
	Err  error
}

func (e ExitError) Error() string { return e.Err.Error() }
func (e ExitError) Unwrap() error { return e.Err }

// Status writes err (if any) to stderr after prog's name and returns the
// exit status: 0 for nil or -h (flag.ErrHelp), an ExitError's Code, else 1.
func Status(stderr io.Writer, prog string, err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var ex ExitError
	if errors.As(err, &ex) {
		fmt.Fprintln(stderr, prog+":", ex.Err)
		return ex.Code
	}
	fmt.Fprintln(stderr, prog+":", err)
	return 1
}
