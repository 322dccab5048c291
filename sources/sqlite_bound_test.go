package sources

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
)

// The bounded file scan and the SQL path give identical histograms and unit
// cells: random tables with skewed units (a few with hundreds of rows, most
// with one to three), integer, text and blob units, NULL units, REAL
// columns holding integral values (stored as integers), a rowid unit, a
// column added by ALTER TABLE with a default, and bounds from tiny to
// larger than any unit.

const boundColumns = `
    columns:
      a: {type: integer, min: 0, max: 9, width: 3}
      b: {type: categorical, values: [x, y, z], null: cell, out_of_domain: other}
      f: {type: numeric, edges: [0, 1.5, 10, 1000000], out_of_domain: other, null: cell}
      d: {type: integer, min: 0, max: 3, out_of_domain: drop}
`

// boundTable writes a random table: unitSQL is the unit column's type,
// unit(i) the unit of row i.
func boundTable(t *testing.T, path, unitSQL string, rows int, unit func(r *rand.Rand) any, seed uint64) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE u (uid " + unitSQL + ", a INTEGER, b TEXT, f REAL)"); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 3))
	tx, _ := db.Begin()
	for range rows {
		f := []any{0.0, 1.0, 2.5, 7.0, 1e6, 3e6, -1.0, nil}[r.IntN(8)]
		b := []any{"x", "y", "z", "w", "", nil, []byte("x")}[r.IntN(7)]
		if _, err := tx.Exec("INSERT INTO u VALUES (?, ?, ?, ?)", unit(r), r.IntN(12), b, f); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// d is added after the rows: they hold its default.
	if _, err := db.Exec("ALTER TABLE u ADD COLUMN d INTEGER DEFAULT 2"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO u (uid, a, b, f, d) SELECT uid, a, b, f, 1 FROM u WHERE rowid % 5 = 0"); err != nil {
		t.Fatal(err)
	}
}

// skewed draws units: 1% of rows for each of three heavy units, the rest
// over many.
func skewed(r *rand.Rand) int64 {
	if r.IntN(100) < 3 {
		return int64(r.IntN(3))
	}
	return 3 + int64(r.IntN(400))
}

// bothPaths returns the histogram (internal cells) and sorted unit cell
// sets by the file scan and by SQL.
func bothPaths(t *testing.T, s *sqliteSource, tab *catalog.Table, cols []*catalog.Column) (scan, sqlPath []float64, scanSets, sqlSets []string) {
	t.Helper()
	ctx := context.Background()
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	n := cells(cols)
	fs, root, err := s.planBound(ctx, tx, tab, cols)
	if err != nil {
		t.Fatal(err)
	}
	if fs == nil {
		t.Fatal("no file scan for the bounded table")
	}
	var rows atomic.Int64
	fs.rows = &rows
	scan = make([]float64, n)
	if err := fs.runBound(ctx, root, scan, 2, nil); err != nil {
		t.Fatal(err)
	}
	err = fs.runBound(ctx, root, make([]float64, n), 2, func(cs []int) error {
		scanSets = append(scanSets, fmt.Sprint(sortedInts(cs)))
		return nil
	})
	fs.sf.close()
	if err != nil {
		t.Fatal(err)
	}
	sqlPath = make([]float64, n)
	if err := s.bounded(ctx, tx, tab, cols, sqlPath, &rows); err != nil {
		t.Fatal(err)
	}
	q, args := s.boundedQuery(tab, cols, true)
	r, err := tx.Query(q, args...)
	if err != nil {
		t.Fatal(err)
	}
	byUnit := map[string][]int{}
	for r.Next() {
		var u any
		var c int
		if err := r.Scan(&u, &c); err != nil {
			t.Fatal(err)
		}
		k := fmt.Sprintf("%T %v", u, u)
		byUnit[k] = append(byUnit[k], c)
	}
	r.Close()
	for _, cs := range byUnit {
		sqlSets = append(sqlSets, fmt.Sprint(sortedInts(cs)))
	}
	slices.Sort(scanSets)
	slices.Sort(sqlSets)
	return scan, sqlPath, scanSets, sqlSets
}

func sortedInts(cs []int) []int {
	out := slices.Clone(cs)
	slices.Sort(out)
	return out
}

func TestBoundedScanMatchesSQL(t *testing.T) {
	units := []struct {
		name, sqlType string
		draw          func(r *rand.Rand) any
	}{
		{"integer", "INTEGER", func(r *rand.Rand) any {
			if r.IntN(50) == 0 {
				return nil
			}
			return skewed(r)
		}},
		{"text", "TEXT", func(r *rand.Rand) any {
			if r.IntN(50) == 0 {
				return nil
			}
			return fmt.Sprintf("user-%d", skewed(r))
		}},
		{"mixed", "", func(r *rand.Rand) any { // no affinity: integers, text and blobs
			switch u := skewed(r); r.IntN(3) {
			case 0:
				return u
			case 1:
				return fmt.Sprint(u)
			default:
				return []byte(fmt.Sprint(u))
			}
		}},
	}
	bounds := []string{
		"{column: uid, max_rows: 1}",
		"{column: uid, max_rows: 4}",
		"{column: uid, max_rows: 1000}",
		"{column: uid, max_rows: 5, max_groups: 2, max_rows_per_group: 2}",
		"{column: uid, max_rows: 50, max_groups: 3}",
		"{column: uid, max_rows: 50, max_rows_per_group: 1}",
	}
	for ui, unit := range units {
		t.Run(unit.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "u.sqlite")
			boundTable(t, path, unit.sqlType, 3000, unit.draw, uint64(ui))
			for _, bound := range bounds {
				y := "database: b\nsources:\n  main: {driver: sqlite, path: " + path + "}\ntables:\n  t:\n    source_table: u\n" +
					"    budget: {total: 1, per_user: 1, default_per_query: 0.1}\n    privacy_unit: " + bound + "\n" + boundColumns
				cat, err := catalog.Parse("b.yaml", []byte(y))
				if err != nil {
					t.Fatal(err)
				}
				dir := t.TempDir()
				set, err := Open(context.Background(), cat, Options{DataDir: dir})
				if err != nil {
					t.Fatal(err)
				}
				s := set.sources["main"].be.(*sqliteSource)
				tab := cat.Table("t")
				a, b, f, d := tab.Columns[0], tab.Columns[1], tab.Columns[2], tab.Columns[3]
				for _, cols := range [][]*catalog.Column{nil, {a}, {b}, {f}, {d}, {a, b}, {b, f, d}, {a, b, f, d}, {d.WithDroppedCell()}} {
					scan, sqlPath, scanSets, sqlSets := bothPaths(t, s, tab, cols)
					if !slices.Equal(scan, sqlPath) {
						t.Errorf("%s, %d columns: scan %v, SQL %v", bound, len(cols), scan, sqlPath)
					}
					if !slices.Equal(scanSets, sqlSets) {
						t.Errorf("%s, %d columns: unit cells differ (%d and %d units)", bound, len(cols), len(scanSets), len(sqlSets))
					}
				}
				set.Close()
			}
		})
	}
}

// Past the byte cap (decided from the file's size), the scan makes more
// passes, each over a keyed share of the units, and past 16 passes the
// histogram comes from SQL; the histogram and unit cells are the same.
func TestBoundedScanCap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "u.sqlite")
	boundTable(t, path, "TEXT", 2000, func(r *rand.Rand) any { return fmt.Sprint(skewed(r)) }, 9)
	y := "database: b\nsources:\n  main: {driver: sqlite, path: " + path + "}\ntables:\n  t:\n    source_table: u\n" +
		"    budget: {total: 1, per_user: 1, default_per_query: 0.1}\n    privacy_unit: {column: uid, max_rows: 3, max_groups: 2, max_rows_per_group: 2}\n" + boundColumns
	cat, err := catalog.Parse("b.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tab := cat.Table("t")
	cols := tab.Columns[:2]
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	worst := fi.Size()*boundBytesPerFileByte + boundFixedBytes
	var got [][]float64
	var sets [][]string
	for _, c := range []struct {
		cap   int64
		parts uint64 // 0: SQL
	}{{0, 1}, {worst, 1}, {worst - 1, 2}, {worst / 4, 4}, {worst / 16, 16}, {worst / 17, 0}, {1000, 0}} {
		set, err := Open(context.Background(), cat, Options{DataDir: dir, BoundBytes: c.cap})
		if err != nil {
			t.Fatal(err)
		}
		s := set.sources["main"].be.(*sqliteSource)
		tx, err := s.db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		fs, _, err := s.planBound(context.Background(), tx, tab, cols)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case fs == nil && c.parts != 0, fs != nil && fs.bound.parts != c.parts:
			t.Errorf("cap %d: scan %v, want %d passes", c.cap, fs != nil, c.parts)
		}
		if fs != nil {
			fs.sf.close()
		}
		tx.Rollback()
		h, err := set.Histogram(context.Background(), tab, cols)
		if err != nil {
			t.Fatal(err)
		}
		var us []string
		err = set.UnitCells(context.Background(), tab, cols, func(cs []int) error {
			us = append(us, fmt.Sprint(sortedInts(cs)))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(us)
		got = append(got, h)
		sets = append(sets, us)
		set.Close()
	}
	for i := range got {
		if !slices.Equal(got[i], got[0]) || !slices.Equal(sets[i], sets[0]) {
			t.Errorf("case %d: %v, want %v", i, got[i], got[0])
		}
	}
}

// A collated unit column and a REAL one are left to SQL; a unit stored as
// a floating-point value in another column abandons the scan for SQL.
func TestBoundedScanLeavesToSQL(t *testing.T) {
	for _, c := range []struct {
		ddl  string
		plan bool
	}{
		{"CREATE TABLE u (uid TEXT COLLATE NOCASE, a INTEGER)", false},
		{"CREATE TABLE u (uid REAL, a INTEGER)", false},
		{"CREATE TABLE u (uid NUMERIC, a INTEGER)", true},
	} {
		path := filepath.Join(t.TempDir(), "u.sqlite")
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{c.ddl, "INSERT INTO u VALUES (1, 1), (1.5, 2), ('A', 3), ('a', 4), (1.0, 5), (1, 6)"} {
			if _, err := db.Exec(s); err != nil {
				t.Fatal(err)
			}
		}
		db.Close()
		y := "database: b\nsources:\n  main: {driver: sqlite, path: " + path + "}\ntables:\n  t:\n    source_table: u\n" +
			"    budget: {total: 1, per_user: 1, default_per_query: 0.1}\n    privacy_unit: {column: uid, max_rows: 1}\n" +
			"    columns:\n      a: {type: integer, min: 0, max: 9}\n"
		cat, err := catalog.Parse("b.yaml", []byte(y))
		if err != nil {
			t.Fatal(err)
		}
		set, err := Open(context.Background(), cat, Options{DataDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		tab := cat.Table("t")
		s := set.sources["main"].be.(*sqliteSource)
		tx, _ := s.db.Begin()
		fs, root, err := s.planBound(context.Background(), tx, tab, tab.Columns)
		if err != nil || (fs != nil) != c.plan {
			t.Errorf("%s: file scan %v, %v", c.ddl, fs != nil, err)
		}
		if fs != nil {
			var rows atomic.Int64
			fs.rows = &rows
			if err := fs.runBound(context.Background(), root, make([]float64, cells(tab.Columns)), 1, nil); err != errScanUnit {
				t.Errorf("%s: a REAL unit: %v", c.ddl, err)
			}
			fs.sf.close()
		}
		tx.Rollback()
		// Either way, Histogram answers as SQL does.
		h, err := set.Histogram(context.Background(), tab, tab.Columns)
		if err != nil {
			t.Fatal(err)
		}
		total := 0.0
		for _, x := range h {
			total += x
		}
		// Four units each time: 1 (= 1.0), 1.5, 'A', 'a'; under NOCASE
		// '1', '1.5', '1.0' and 'A' = 'a'.
		if total != 4 {
			t.Errorf("%s: %v rows kept, want 4", c.ddl, total)
		}
		set.Close()
	}
}
