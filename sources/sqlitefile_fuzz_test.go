package sources

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// fuzzSQLiteFile writes a small rollback-journal database with 512-byte
// pages: a table deep enough for interior pages, and text long enough to
// spill onto overflow pages. It returns the file's bytes and the table's
// root page.
func fuzzSQLiteFile(f *testing.F) ([]byte, uint32) {
	f.Helper()
	path := filepath.Join(f.TempDir(), "seed.sqlite")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		f.Fatal(err)
	}
	defer db.Close()
	stmts := []string{
		"PRAGMA page_size = 512",
		"PRAGMA journal_mode = DELETE",
		"PRAGMA synchronous = OFF",
		"CREATE TABLE t (a INTEGER, b TEXT, c REAL)",
	}
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			f.Fatal(err)
		}
	}
	for i := 0; i < 60; i++ {
		b := []string{"x", "y", "z"}[i%3]
		if i%15 == 0 {
			b = strings.Repeat("w", 600)
		}
		var a any = i % 12
		if i%17 == 0 {
			a = nil
		}
		if _, err := db.Exec("INSERT INTO t VALUES (?, ?, ?)", a, b, float64(i)/10); err != nil {
			f.Fatal(err)
		}
	}
	var root uint32
	if err := db.QueryRow("SELECT rootpage FROM sqlite_schema WHERE name = 't'").Scan(&root); err != nil {
		f.Fatal(err)
	}
	if err := db.Close(); err != nil {
		f.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	// The fuzzer mutates small inputs far faster: keep the seed to a few
	// pages, yet with an interior page and overflow chains.
	if len(raw) > 16<<10 {
		f.Fatalf("seed database of %d bytes; keep it small", len(raw))
	}
	return raw, root
}

// FuzzSQLiteFileScan feeds damaged database files to the b-tree reader the
// embedded source counts with: whatever the bytes, the scan returns counts
// or an error (errFileFormat makes the caller fall back to SQL); it never
// panics, reads out of bounds or loops on pages that point in a cycle.
func FuzzSQLiteFileScan(f *testing.F) {
	raw, root := fuzzSQLiteFile(f)
	f.Add(raw, root)
	// A few targeted corruptions: a page pointing at itself, a huge cell
	// count, a truncated file.
	loop := append([]byte(nil), raw...)
	if off := int(root-1) * 512; off+12 <= len(loop) && loop[off] == 0x05 {
		loop[off+8], loop[off+9], loop[off+10], loop[off+11] = byte(root>>24), byte(root>>16), byte(root>>8), byte(root)
	}
	f.Add(loop, root)
	cells := append([]byte(nil), raw...)
	cells[512*int(root-1)+3], cells[512*int(root-1)+4] = 0xff, 0xff
	f.Add(cells, root)
	f.Add(raw[:len(raw)/2], root)

	tab := policyTable()
	cols := make([]recordColumn, len(tab.Columns))
	for i, c := range tab.Columns {
		cols[i] = newRecordColumn(i, nil, c)
	}
	size := 1
	for _, c := range tab.Columns {
		size *= c.Size() + 1 // the internal dropped cell
	}
	f.Fuzz(func(t *testing.T, data []byte, root uint32) {
		path := filepath.Join(t.TempDir(), "f.sqlite")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		sf, err := openSQLiteFile(path)
		if err != nil {
			return
		}
		defer sf.close()
		for _, workers := range []int{1, 2} {
			var rows atomic.Int64
			scan := &fileScan{sf: sf, cols: cols, order: []int{0, 1, 2}, strides: strides(tab.Columns), rows: &rows}
			counts := make([]float64, size)
			err := scan.run(context.Background(), root, counts, workers)
			if err != nil && !errors.Is(err, errFileFormat) && !errors.Is(err, os.ErrNotExist) && !isReadError(err) {
				t.Fatalf("unexpected error kind: %v", err)
			}
		}
	})
}

// isReadError reports a page read past the file's end, which the caller
// returns as an I/O error (the file changed under a read transaction, or is
// damaged).
func isReadError(err error) bool {
	return err != nil && strings.Contains(err.Error(), "sqlite file: page")
}
