package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/state"
)

// stateCmd: `dpproxy state migrate --config FILE --data-dir DIR` copies the
// SQLite state of a data directory into the PostgreSQL database the
// catalog's state section names (package state does the work).
func stateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "migrate" {
		return exitError{Code: 2, Err: errors.New("state: usage: dpproxy state migrate --config FILE [--data-dir DIR]")}
	}
	fs := flag.NewFlagSet("state migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf commonFlags
	cf.register(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if cf.config == "" {
		return exitError{Code: 2, Err: errors.New("state migrate: --config is required: its state section names the PostgreSQL database to copy into")}
	}
	cat, err := catalog.Load(cf.config)
	if err != nil {
		return err
	}
	m, err := state.Migrate(ctx, cf.dataDir, cat.State)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "copied %s into %s: %d ledger entries (hashes unchanged, verified), %d stored answers, %d measurements and key sets",
		cf.dataDir, m.Where, m.Entries, m.Answers, m.Measurements)
	if m.UnitKey {
		fmt.Fprint(stdout, ", the unit-hash key")
	}
	fmt.Fprintln(stdout)
	return nil
}
