package main

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/budgetview"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/engine"
	"github.com/dpproxy/dpproxy/state"
)

// audit: `dpproxy audit [list|budgets|verify|sign|keygen] [flags]`. With no
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
	kind := fs.String("kind", "", "only entries of this kind: charge, reuse, derived or limits (list)")
	pubKey := fs.String("public-key", "", "Ed25519 public key (hex, base64 or PEM; @FILE reads it) that signed the heads (verify; default: the catalog's)")
	heads := fs.String("heads", "", "signed-heads file (verify, sign; default: <data-dir>/ledger.heads)")
	keyOut := fs.String("out", "", "file for the new private key (keygen)")
	replan := fs.Int("replan", 0, "also re-plan the newest N measured charges from their replay records and compare strategy digests (verify)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *heads == "" {
		*heads = cf.headsPath()
	}
	if sub == "keygen" {
		return keygen(*keyOut, stdout)
	}
	cat := catalog.Demo()
	if cf.config != "" {
		var err error
		if cat, err = catalog.Load(cf.config); err != nil {
			return err
		}
	}
	// Only sign writes (a signed head); every other subcommand reads the
	// ledger read-only, whatever schema version wrote it, and leaves it
	// as it found it. The catalog's state section says where it is: the
	// data directory's file, or a shared PostgreSQL database.
	l, err := state.OpenLedger(ctx, cat.State, cf.dataDir, sub == "sign")
	if err != nil {
		if !cat.State.Shared() && errors.Is(err, os.ErrNotExist) {
			return exitError{Code: 1, Err: err}
		}
		return tamperExit(err)
	}
	defer l.Close()
	switch sub {
	case "verify":
		pub, err := publicKey(*pubKey, cf, cat)
		if err != nil {
			return err
		}
		r, err := l.Report(ctx, engine.Limits(cat), pub, *heads)
		if err != nil {
			return tamperExit(err)
		}
		if err := printReport(ctx, stdout, r, cat, l.Ledger); err != nil || *replan <= 0 {
			return err
		}
		return verifyReplan(ctx, stdout, cat, l, cf.dataDir, *replan)
	case "sign":
		k := cf.keyPath(cat)
		if k == "" {
			return fmt.Errorf("audit sign: the catalog has no ledger.signing_key")
		}
		sh, err := signHead(ctx, l.Ledger, k, *heads)
		if err != nil {
			return tamperExit(err)
		}
		fmt.Fprintf(stdout, "%s\nappended to %s\n", sh, *heads)
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
		if *kind != "" {
			kept := entries[:0]
			for _, e := range entries {
				if e.Kind == *kind {
					kept = append(kept, e)
				}
			}
			entries = kept
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
		return printBudgets(ctx, stdout, l.Ledger, cat)
	}
	return fmt.Errorf("audit: unknown subcommand %q (list, budgets, verify, sign, keygen)", sub)
}

// tamperExit maps a *budget.TamperError to exit status 3 naming the entry,
// and a ledger file SQLite finds damaged (e.g. cut short) to exit status 3.
func tamperExit(err error) error {
	if budget.IsDamaged(err) {
		return exitError{Code: 3, Err: fmt.Errorf("ledger verification FAILED: the ledger file is damaged (truncated or corrupted): %w", err)}
	}
	var te *budget.TamperError
	if !errors.As(err, &te) {
		return err
	}
	if te.Seq == 0 {
		return exitError{Code: 3, Err: fmt.Errorf("ledger verification FAILED: %s", te.Reason)}
	}
	return exitError{Code: 3, Err: fmt.Errorf("ledger verification FAILED at entry %d: %s", te.Seq, te.Reason)}
}

// printReport renders budget.Ledger.Report, the one implementation of an
// audit's checks (the console shows the same Report): the chain, the
// charges against the limits in force, then the signed heads. A finding is
// exit status 3 naming the entry.
func printReport(ctx context.Context, stdout io.Writer, r budget.Report, cat *catalog.Catalog, l *budget.Ledger) error {
	failed := func(seq int64, problem string) error {
		if seq == 0 {
			return exitError{Code: 3, Err: fmt.Errorf("ledger verification FAILED: %s", problem)}
		}
		return exitError{Code: 3, Err: fmt.Errorf("ledger verification FAILED at entry %d: %s", seq, problem)}
	}
	if !r.ChainIntact || !r.WithinLimits {
		return failed(r.BadSeq, r.Problem)
	}
	fmt.Fprintf(stdout, "ledger OK: %d entries, hash chain intact, budgets recomputed from entries, no charge over the limit in force\n", r.Entries)
	entries, err := l.Entries(ctx, budget.Filter{})
	if err != nil {
		return err
	}
	printSpaces(stdout, cat, entries)
	h := r.Heads
	switch {
	case h == nil:
		return nil // no public key: nothing signed to check
	case !h.OK && h.BadSeq != 0:
		return failed(h.BadSeq, h.Problem) // the ledger lacks what a head signed
	case !h.OK:
		return failed(0, fmt.Sprintf("signed heads in %s, key %s: %s", h.File, h.PublicKey, h.Problem))
	case !h.Found:
		fmt.Fprintf(stdout, "no signed heads at %s (key %s)\n", h.File, h.PublicKey)
	case h.Checked == 0:
		fmt.Fprintf(stdout, "no signed heads in %s\n", h.File)
	default:
		fmt.Fprintf(stdout, "signed heads OK: %d checked with key %s; the latest, %s, is held by the ledger\n", h.Checked, h.PublicKey, h.Latest)
	}
	return nil
}

// keygen writes a new Ed25519 seed (hex) to out, mode 0600, and prints the
// public key.
func keygen(out string, stdout io.Writer) error {
	if out == "" {
		return fmt.Errorf("audit keygen: --out FILE is required")
	}
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("audit keygen: %w", err)
	}
	_, werr := fmt.Fprintln(f, hex.EncodeToString(priv.Seed()))
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("audit keygen: %w", err)
	}
	fmt.Fprintf(stdout, "private key written to %s\npublic key: %s\n", out, budget.EncodePublicKey(pub))
	return nil
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
	units, deltas := false, false
	for _, e := range entries {
		units = units || e.Unit != nil
		deltas = deltas || (e.Kind == budget.KindCharge && e.Cost.Delta > 0)
	}
	head := "SEQ\tTIME\tKIND\tUSER\tTABLES\tMECHANISM\tEPSILON\tRHO"
	if deltas { // a DELTA column only when some charge spent δ (partition selection)
		head += "\tDELTA"
	}
	head += "\tSTRATEGY"
	if units { // a UNIT column only when some charge has a privacy unit
		head += "\tUNIT"
	}
	fmt.Fprintln(tw, head)
	for _, e := range entries {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%v\t%s\t%g\t%g", e.Seq, e.Time.UTC().Format(time.RFC3339), e.Kind, e.User, e.Tables, e.Mechanism, e.Cost.Epsilon, e.Cost.Rho)
		if deltas {
			fmt.Fprintf(tw, "\t%g", e.Cost.Delta)
		}
		fmt.Fprintf(tw, "\t%s", e.Strategy)
		if units && e.Kind == budget.KindCharge {
			fmt.Fprintf(tw, "\t%s", unitText(e.Unit))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// printSpaces says, after a verification, which privacy unit spaces the
// budgets were checked in: the catalog's spaces and their tables, and the
// tables whose charges from before spaces the ledger maps into a space.
func printSpaces(w io.Writer, cat *catalog.Catalog, entries []budget.Entry) {
	for _, sp := range cat.Spaces() {
		var names []string
		for _, t := range cat.SpaceTables(sp) {
			names = append(names, t.Name)
		}
		fmt.Fprintf(w, "privacy unit space %s: tables %s\n", sp, strings.Join(names, ", "))
	}
	for _, e := range entries {
		if m, ok := budget.ParseSpaceEntry(e); ok {
			fmt.Fprintf(w, "entry %d: charges on %s written before spaces count in space %s\n", e.Seq, m.Table, m.Space)
		}
	}
}

func printBudgets(ctx context.Context, w io.Writer, l *budget.Ledger, cat *catalog.Catalog) error {
	rows, err := l.Budgets(ctx)
	if err != nil {
		return err
	}
	view := budgetview.All(cat, rows)
	// δ columns only when some charge spent δ (partition selection).
	deltas := false
	for _, r := range view {
		deltas = deltas || r.Cost.Delta > 0
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "SCOPE\tUSER\tSPACE\tTABLES\tLIMIT_EPSILON\tSPENT_EPSILON\tREMAINING_EPSILON"
	if deltas {
		head += "\tLIMIT_DELTA\tSPENT_DELTA\tREMAINING_DELTA"
	}
	fmt.Fprintln(tw, head)
	for _, r := range view {
		user, limit, rem := r.User, "-", "-"
		if user == "" {
			user = "*"
		}
		if r.Limit != nil {
			limit, rem = fmt.Sprintf("%g", *r.Limit), fmt.Sprintf("%.6g", *r.Remaining)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.6g\t%s", r.Scope, user, r.Space, r.Table, limit, r.Spent, rem)
		if deltas {
			// The δ limit is the space's δ budget (none for a space no
			// longer in the catalog).
			dl, dr := "-", "-"
			if r.Limit != nil {
				dl, dr = fmt.Sprintf("%g", r.Delta), fmt.Sprintf("%.6g", r.Delta-r.Cost.Delta)
			}
			fmt.Fprintf(tw, "\t%s\t%.6g\t%s", dl, r.Cost.Delta, dr)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// unitText is a charge's privacy unit as audit prints it: "row", or the
// unit, its bounds and the row-level calibration the charge covers.
func unitText(u *budget.UnitBound) string {
	if u == nil {
		return "row"
	}
	s := fmt.Sprintf("%s max_rows=%d", u.Column, u.MaxRows)
	if u.MaxGroups > 0 {
		s += fmt.Sprintf(" max_groups=%d", u.MaxGroups)
	}
	if u.MaxRowsPerGroup > 0 {
		s += fmt.Sprintf(" max_rows_per_group=%d", u.MaxRowsPerGroup)
	}
	if u.RowEpsilon > 0 {
		s += fmt.Sprintf(" row_ε=%.6g", u.RowEpsilon)
	}
	if u.RowRho > 0 {
		s += fmt.Sprintf(" row_ρ=%.6g", u.RowRho)
	}
	if u.SelectionEpsilon > 0 {
		s += fmt.Sprintf(" selection_ε=%.6g Δ=%d", u.SelectionEpsilon, u.SelectionSensitivity)
	}
	return s
}
