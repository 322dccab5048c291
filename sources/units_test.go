package sources

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
)

// The unit fixture: a heavy-tailed table (one unit with 150 rows, a few
// with tens, most with one to three, some rows with a NULL unit) over
// integer and text columns, whose keyed hashes Go replays exactly on every
// engine.
const unitColumns = `
    columns:
      a: {type: integer, min: 0, max: 5, width: 2}
      b: {type: categorical, values: [x, y, z], null: cell, out_of_domain: other}
      c: {type: integer, min: 1, max: 3, out_of_domain: drop}
`

func unitRows() [][]any {
	r := rand.New(rand.NewPCG(5, 7))
	var rows [][]any
	add := func(uid any, n int) {
		for range n {
			b := []any{"x", "y", "z", "w", nil}[r.IntN(5)]
			rows = append(rows, []any{uid, int64(r.IntN(7)), b, int64(r.IntN(5))})
		}
	}
	add(int64(1), 150)
	for u := int64(2); u < 6; u++ {
		add(u, 10+int(u)*3)
	}
	for u := int64(6); u < 60; u++ {
		add(u, 1+r.IntN(3))
	}
	add(nil, 7)
	return rows
}

func unitCatalog(t testing.TB, source, sourceTable, unit string) *catalog.Catalog {
	t.Helper()
	y := "database: conf\nsources:\n  " + source + "\ntables:\n  t:\n    source_table: " + sourceTable +
		"\n    budget: {total: 1, per_user: 1, default_per_query: 0.1}\n    privacy_unit: " + unit + "\n" + unitColumns
	cat, err := catalog.Parse("units.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

func loadUnits(t testing.TB, db *sql.DB, engine, name string, rows [][]any) {
	t.Helper()
	mark := func(i int) string {
		if engine == "postgres" {
			return fmt.Sprintf("$%d", i)
		}
		return "?"
	}
	text := map[string]string{"sqlite": "TEXT", "postgres": "TEXT", "mysql": "VARCHAR(16)"}[engine]
	if _, err := db.Exec("CREATE TABLE " + name + " (uid BIGINT, a BIGINT, b " + text + ", c BIGINT)"); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	ins := fmt.Sprintf("INSERT INTO %s VALUES (%s, %s, %s, %s)", name, mark(1), mark(2), mark(3), mark(4))
	for _, r := range rows {
		if _, err := tx.Exec(ins, r...); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// truncation is the brute-force bounded histogram (internal domain,
// stripped): each unit's max_rows rows of least UnitHash, then its
// max_groups cells of least cell hash and max_rows_per_group rows of least
// hash in each; NULL units dropped.
//
// It returns that histogram and each unit's kept cells (sorted, one string
// per unit, the units sorted).
func truncation(key string, tab *catalog.Table, cols []*catalog.Column, rows [][]any) ([]float64, []string) {
	return truncationBy(func(vals ...any) string { return UnitHash(key, vals...) }, tab, cols, rows)
}

// postgresOrder is PostgreSQL's keyed hash (PostgresUnitHash) as text of
// the same (signed) order, for truncationBy.
func postgresOrder(key string) func(vals ...any) string {
	return func(vals ...any) string { return postgresKeyHash(key, vals...) }
}

// sqliteOrder is SQLite's keyed hash (UnitHash64) as text of the same
// order, for truncationBy.
func sqliteOrder(key string) func(vals ...any) string {
	return func(vals ...any) string { return fmt.Sprintf("%016x", UnitHash64(key, vals...)) }
}

// truncationBy is truncation with the engine's keyed hash as ordered text.
func truncationBy(hash func(vals ...any) string, tab *catalog.Table, cols []*catalog.Column, rows [][]any) ([]float64, []string) {
	u := tab.Unit
	pos := map[string]int{"uid": 0}
	for j, c := range tab.Columns {
		pos[c.Name] = j + 1
	}
	type row struct {
		hash string
		cell int
	}
	st := strides(cols)
	byUnit := map[int64][]row{}
	for _, r := range rows {
		if r[0] == nil {
			continue
		}
		cell := 0
		for j, c := range cols {
			x := c.CellOf(r[pos[c.Name]])
			if x < 0 {
				x = c.Size()
			}
			cell += x * st[j]
		}
		id := r[0].(int64)
		byUnit[id] = append(byUnit[id], row{hash(r...), cell})
	}
	counts := make([]float64, cells(cols))
	var sets []string
	for id, rs := range byUnit {
		slices.SortFunc(rs, func(a, b row) int { return strings.Compare(a.hash, b.hash) })
		rs = rs[:min(len(rs), int(u.MaxRows))]
		set := map[int]bool{}
		if !u.CellBounded() {
			for _, r := range rs {
				counts[r.cell]++
				set[r.cell] = true
			}
			sets = append(sets, cellSet(set))
			continue
		}
		g, per := int(u.Groups()), int(u.PerCell())
		var cellsOf []int
		for _, r := range rs {
			if !slices.Contains(cellsOf, r.cell) {
				cellsOf = append(cellsOf, r.cell)
			}
		}
		slices.SortFunc(cellsOf, func(a, b int) int {
			return strings.Compare(hash("cell", id, int64(a)), hash("cell", id, int64(b)))
		})
		kept := map[int]int{}
		for _, c := range cellsOf[:min(len(cellsOf), g)] {
			kept[c] = 0
		}
		for _, r := range rs { // in hash order
			if n, ok := kept[r.cell]; ok && n < per {
				kept[r.cell]++
				counts[r.cell]++
				set[r.cell] = true
			}
		}
		sets = append(sets, cellSet(set))
	}
	slices.Sort(sets)
	return strip(counts, cols), sets
}

func cellSet(set map[int]bool) string {
	var cs []int
	for c := range set {
		cs = append(cs, c)
	}
	slices.Sort(cs)
	return fmt.Sprint(cs)
}

// checkTruncation compares every column set's bounded histogram with the
// brute force, for a row bound alone and for row, group and per-group
// bounds together, and checks the bounds themselves: no unit beyond them.
func checkTruncation(t *testing.T, source, sourceTable string, rows [][]any) {
	for _, unit := range []string{"{column: uid, max_rows: 4}", "{column: uid, max_rows: 5, max_groups: 2, max_rows_per_group: 2}"} {
		t.Run(unit, func(t *testing.T) {
			ctx := context.Background()
			cat := unitCatalog(t, source, sourceTable, unit)
			dir := t.TempDir()
			set, err := Open(ctx, cat, Options{DataDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer set.Close()
			key, err := loadUnitKey(dir)
			if err != nil {
				t.Fatal(err)
			}
			tab := cat.Table("t")
			a, b, c := tab.Columns[0], tab.Columns[1], tab.Columns[2]
			for _, cols := range [][]*catalog.Column{nil, {a}, {b}, {c}, {a, b}, {b, c}, {a, b, c}, {a, c.WithDroppedCell()}} {
				got, err := set.Histogram(ctx, tab, cols)
				if err != nil {
					t.Fatalf("%v: %v", cols, err)
				}
				order := func(vals ...any) string { return UnitHash(key, vals...) }
				if strings.Contains(source, "sqlite") {
					order = sqliteOrder(key)
				}
				if strings.Contains(source, "postgres") {
					order = postgresOrder(key)
				}
				want, wantSets := truncationBy(order, tab, cols, rows)
				if !slices.Equal(got, want) {
					t.Errorf("columns %d: got %v, want %v", len(cols), got, want)
				}
				// The distinct (unit, cell) pairs behind COUNT(DISTINCT uid).
				var sets []string
				err = set.UnitCells(ctx, tab, cols, func(cells []int) error {
					m := map[int]bool{}
					for _, c := range cells {
						m[c] = true
					}
					if len(m) != len(cells) {
						t.Errorf("repeated cells %v", cells)
					}
					sets = append(sets, cellSet(m))
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				slices.Sort(sets)
				if !slices.Equal(sets, wantSets) {
					t.Errorf("columns %d: unit cells %v, want %v", len(cols), sets, wantSets)
				}
				total := 0.0
				for _, x := range got {
					total += x
				}
				if cols == nil && total > float64(len(rows))-150 {
					t.Errorf("total %v: the heavy unit was not truncated", total)
				}
				// 59 units: none keeps more than L1 rows.
				if total > float64(59*tab.Unit.L1()) {
					t.Errorf("total %v over 59 units × %d", total, tab.Unit.L1())
				}
			}
		})
	}
}

func TestTruncationSQLite(t *testing.T) {
	rows := unitRows()
	for _, mode := range []string{"delete", "wal"} {
		t.Run(mode, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "u.sqlite")
			db, err := sql.Open("sqlite", path+"?_pragma=journal_mode("+mode+")")
			if err != nil {
				t.Fatal(err)
			}
			loadUnits(t, db, "sqlite", "u", rows)
			db.Close()
			checkTruncation(t, "main: {driver: sqlite, path: "+path+"}", "u", rows)
		})
	}
}

func TestTruncationPostgres(t *testing.T) {
	srv := pgServer.Get(t)
	if err := srv.Exec(context.Background(), "DROP SCHEMA IF EXISTS units CASCADE", "CREATE SCHEMA units"); err != nil {
		t.Fatal(err)
	}
	db, err := srv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows := unitRows()
	loadUnits(t, db, "postgres", "units.u", rows)
	checkTruncation(t, "main: {driver: postgres, dsn: \""+srv.AdminDSN+"\"}", "units.u", rows)
}

func TestTruncationMariaDB(t *testing.T) {
	srv := mariaServer.Get(t)
	if err := srv.Exec(context.Background(), "DROP DATABASE IF EXISTS units", "CREATE DATABASE units CHARACTER SET utf8mb4"); err != nil {
		t.Fatal(err)
	}
	db, err := srv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows := unitRows()
	loadUnits(t, db, "mysql", "units.u", rows)
	dsn := fmt.Sprintf("root@unix(%s)/units", strings.TrimSuffix(strings.TrimPrefix(srv.AdminDSN, "root@unix("), ")/?multiStatements=true"))
	checkTruncation(t, "main: {driver: mysql, dsn: \""+dsn+"\"}", "units.u", rows)
}

// The unit key is generated once, mode 0600, and a key others can read is
// refused.
func TestUnitKeyFile(t *testing.T) {
	dir := t.TempDir()
	k1, err := loadUnitKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, UnitKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v %v", fi.Mode(), err)
	}
	k2, err := loadUnitKey(dir)
	if err != nil || k1 != k2 || len(k1) != 64 {
		t.Fatalf("second load %q %v, first %q", k2, err, k1)
	}
	os.Chmod(filepath.Join(dir, UnitKeyFile), 0o644)
	if _, err := loadUnitKey(dir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("readable key: %v", err)
	}
	if _, err := loadUnitKey(""); err == nil {
		t.Error("no data directory: no error")
	}
}

// ProfileUnits is the exact distribution of rows per unit, NULL units
// apart.
func TestProfileUnits(t *testing.T) {
	rows := unitRows()
	path := filepath.Join(t.TempDir(), "u.sqlite")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	loadUnits(t, db, "sqlite", "u", rows)
	db.Close()
	cat := unitCatalog(t, "main: {driver: sqlite, path: "+path+"}", "u", "{column: uid, max_rows: 4}")
	set, err := Open(context.Background(), cat, Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	p, err := set.ProfileUnits(context.Background(), cat.Table("t"), "")
	if err != nil {
		t.Fatal(err)
	}
	per := map[int64]int64{}
	nulls := int64(0)
	for _, r := range rows {
		if r[0] == nil {
			nulls++
		} else {
			per[r[0].(int64)]++
		}
	}
	kept := int64(0)
	for _, n := range per {
		kept += min(n, 4)
	}
	if p.Units != int64(len(per)) || p.Rows != int64(len(rows))-nulls || p.NullRows != nulls || p.Kept(4) != kept || p.Quantile(1) != 150 {
		t.Errorf("profile %+v: want %d units, %d rows, %d NULL, %d kept at 4", p, len(per), int64(len(rows))-nulls, nulls, kept)
	}
}
