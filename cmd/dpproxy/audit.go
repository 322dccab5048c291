package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
)

// audit: `dpproxy audit [list|budgets|verify] [flags]`. With no
// subcommand it prints the entries and the budgets.
func audit(ctx context.Context, args []string, stdout io.Writer) error {
	sub := "all"
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		sub, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("audit "+sub, flag.ContinueOnError)
	var cf commonFlags
	cf.register(fs)
	user := fs.String("user", "", "only entries of this user (list)")
	table := fs.String("table", "", "only entries for this table (list)")
	since := fs.String("since", "", "only entries at or after this RFC 3339 time (list)")
	asJSON := fs.Bool("json", false, "print JSON, one object per line (list)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if _, err := os.Stat(cf.ledgerPath()); err != nil {
		return exitError{code: 1, err: fmt.Errorf("no ledger at %s: %w", cf.ledgerPath(), err)}
	}
	l, err := budget.Open(ctx, cf.ledgerPath())
	if err != nil {
		return err
	}
	defer l.Close()
	cat := catalog.Demo()
	if cf.config != "" {
		if cat, err = catalog.Load(cf.config); err != nil {
			return err
		}
	}
	switch sub {
	case "verify":
		if err := l.Verify(ctx); err != nil {
			var te *budget.TamperError
			if errors.As(err, &te) {
				return exitError{code: 3, err: fmt.Errorf("ledger verification FAILED at entry %d: %s", te.Seq, te.Reason)}
			}
			return err
		}
		entries, err := l.Entries(ctx, budget.Filter{})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "ledger OK: %d entries, hash chain intact, budgets recomputed from entries\n", len(entries))
		return nil
	case "list", "all":
		f := budget.Filter{User: *user, Table: *table}
		if *since != "" {
			if f.Since, err = time.Parse(time.RFC3339, *since); err != nil {
				return fmt.Errorf("--since: %w", err)
			}
		}
		entries, err := l.Entries(ctx, f)
		if err != nil {
			return err
		}
		if err := printEntries(stdout, entries, *asJSON); err != nil {
			return err
		}
		if sub == "list" {
			return nil
		}
		fmt.Fprintln(stdout)
		fallthrough
	case "budgets":
		return printBudgets(ctx, stdout, l, cat)
	}
	return fmt.Errorf("audit: unknown subcommand %q (list, budgets, verify)", sub)
}

func printEntries(w io.Writer, entries []budget.Entry, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		for _, e := range entries {
			if err := enc.Encode(e); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tKIND\tUSER\tTABLES\tMECHANISM\tEPSILON\tRHO\tSTRATEGY")
	for _, e := range entries {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%v\t%s\t%g\t%g\t%s\n", e.Seq, e.Time.UTC().Format(time.RFC3339), e.Kind, e.User, e.Tables, e.Mechanism, e.Cost.Epsilon, e.Cost.Rho, e.Strategy)
	}
	return tw.Flush()
}

func printBudgets(ctx context.Context, w io.Writer, l *budget.Ledger, cat *catalog.Catalog) error {
	rows, err := l.Budgets(ctx)
	if err != nil {
		return err
	}
	spent := map[[2]string]budget.Cost{}
	for _, r := range rows {
		spent[[2]string{r.User, r.Table}] = r.Cost
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCOPE\tUSER\tTABLE\tLIMIT_EPSILON\tSPENT_EPSILON\tREMAINING_EPSILON")
	for _, t := range cat.Tables {
		s := budget.EpsilonFor(spent[[2]string{"", t.Name}], t.Budget.Delta)
		fmt.Fprintf(tw, "table\t*\t%s\t%g\t%.6g\t%.6g\n", t.Name, t.Budget.Total, s, t.Budget.Total-s)
		var users []string
		for k := range spent {
			if k[1] == t.Name && k[0] != "" {
				users = append(users, k[0])
			}
		}
		sort.Strings(users)
		for _, u := range users {
			s := budget.EpsilonFor(spent[[2]string{u, t.Name}], t.Budget.Delta)
			fmt.Fprintf(tw, "user_table\t%s\t%s\t%g\t%.6g\t%.6g\n", u, t.Name, t.Budget.PerUser, s, t.Budget.PerUser-s)
		}
	}
	return tw.Flush()
}
