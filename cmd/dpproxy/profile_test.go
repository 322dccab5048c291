package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// profile-units prints the exact rows-per-unit distribution of a table
// with a privacy unit, flagged as exact data for the data owner.
func TestProfileUnitsCLI(t *testing.T) {
	dir := t.TempDir()
	stmts := []string{"CREATE TABLE events (user_id INTEGER, kind TEXT)"}
	for u := 1; u <= 10; u++ {
		for range u {
			stmts = append(stmts, "INSERT INTO events VALUES ("+itoa(u)+", 'view')")
		}
	}
	stmts = append(stmts, "INSERT INTO events VALUES (NULL, 'view')")
	sqliteExec(t, filepath.Join(dir, "events.sqlite"), stmts...)
	cat := `database: shop
sources: {main: {driver: sqlite, path: events.sqlite}}
tables:
  events:
    budget: {total: 1, per_user: 1, default_per_query: 0.1}
    privacy_unit: {column: user_id, max_rows: 5}
    columns:
      kind: {type: categorical, values: [view, buy]}
`
	if err := os.WriteFile(filepath.Join(dir, "shop.yaml"), []byte(cat), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"profile-units", "-config", filepath.Join(dir, "shop.yaml"), "-data-dir", dir}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{
		"EXACT DATA: for the data owner only",
		"table events, unit user_id: 10 units, 55 rows, 1 rows with a NULL unit (not counted)",
		"rows per unit: median 5, p90 9, p99 10, max 10",
		"declared: user_id (max_rows 5)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
