package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/engine"
	"github.com/dpproxy/dpproxy/measure"
	"github.com/dpproxy/dpproxy/state"
)

// verifyReplan is `audit verify --replan N`, run after the ledger's own
// checks passed: the newest n charges that record a plan digest and have a
// replay record are re-planned from the record with the catalog (no data
// source is opened, as for EXPLAIN), after checking the record's texts
// against the entry's query digest, and each re-derived strategy digest is
// compared with the one the hash chain covers. A mismatch, or texts the
// entry does not authenticate, is exit status 3 naming the entries.
func verifyReplan(ctx context.Context, stdout io.Writer, cat *catalog.Catalog, l *state.Ledger, dataDir string, n int) error {
	store, err := openReplays(ctx, l, dataDir)
	if err != nil {
		return err
	}
	if store == nil {
		fmt.Fprintf(stdout, "replanned 0: 0 match (no measurement store, so no replay records)\n")
		return nil
	}
	defer store.Close()
	entries, err := l.Entries(ctx, budget.Filter{})
	if err != nil {
		return fmt.Errorf("audit verify --replan: %w", err)
	}
	type pick struct {
		e budget.Entry
		r measure.Replay
	}
	var picks []pick
	for i := len(entries) - 1; i >= 0 && len(picks) < n; i-- {
		e := entries[i]
		if _, ok := engine.RecordedPlanDigest(e.Strategy); e.Kind != budget.KindCharge || !ok {
			continue
		}
		r, err := store.Replay(ctx, e.Seq)
		if errors.Is(err, measure.ErrNoReplay) {
			continue
		}
		if err != nil {
			return fmt.Errorf("audit verify --replan: %w", err)
		}
		picks = append(picks, pick{e, r})
	}
	eng := engine.New(engine.Config{Catalog: cat, Ledger: l.Ledger, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Measurements: store})
	var matched, skipped int
	var bad []string
	for i := len(picks) - 1; i >= 0; i-- {
		e, r := picks[i].e, picks[i].r
		line, ok, skip := replanEntry(ctx, eng, e, r)
		fmt.Fprintf(stdout, "entry %d: %s\n", e.Seq, line)
		switch {
		case skip:
			skipped++
		case ok:
			matched++
		default:
			bad = append(bad, fmt.Sprintf("entry %d: %s", e.Seq, line))
		}
	}
	summary := fmt.Sprintf("replanned %d: %d match", len(picks)-skipped, matched)
	if skipped > 0 {
		summary += fmt.Sprintf(", %d not re-derived", skipped)
	}
	fmt.Fprintln(stdout, summary)
	if len(bad) > 0 {
		return exitError{Code: 3, Err: fmt.Errorf("replan verification FAILED at %s", strings.Join(bad, "; "))}
	}
	return nil
}

// replanEntry re-plans one charge: the line to print, whether it matched,
// and whether it was left out as not re-derivable.
func replanEntry(ctx context.Context, eng *engine.Engine, e budget.Entry, r measure.Replay) (line string, ok, skip bool) {
	recorded, _ := engine.RecordedPlanDigest(e.Strategy)
	if engine.QueryDigest(r.Texts) != e.QueryDigest {
		return "replay record's statements do not match the entry's query digest", false, false
	}
	got, _, err := eng.ReplanDigest(ctx, r)
	switch {
	case errors.Is(err, engine.ErrNotRederivable):
		return "not re-derived: " + strings.TrimPrefix(err.Error(), engine.ErrNotRederivable.Error()+": "), false, true
	case err != nil:
		return fmt.Sprintf("re-planning failed: %v", err), false, false
	case got != recorded:
		return fmt.Sprintf("strategy digest MISMATCH: recorded sha256:%s, re-planned sha256:%s", recorded, got), false, false
	}
	return fmt.Sprintf("%d statement(s) on %s re-planned: sha256:%s match", len(r.Texts), r.Table, got), true, false
}

// openReplays opens the measurement store holding the replay records: the
// shared PostgreSQL database, or the data directory's file (nil when it
// does not exist: no proxy kept measurements there).
func openReplays(ctx context.Context, l *state.Ledger, dataDir string) (*measure.Store, error) {
	if l.DB != nil {
		s, err := measure.OpenDB(ctx, l.DB, 0)
		if err != nil {
			return nil, fmt.Errorf("audit verify --replan: %w", err)
		}
		return s, nil
	}
	path := filepath.Join(dataDir, state.MeasurementsFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	s, err := measure.Open(ctx, path, 0)
	if err != nil {
		return nil, fmt.Errorf("audit verify --replan: %w", err)
	}
	return s, nil
}
