package sources

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
)

// The join fixture: three tables of one privacy unit space. events (the
// fact table: one heavy unit with 60 rows, most with a few, some with a
// NULL unit), users (one row per unit, some units missing, a NULL plan)
// and sessions (zero to three per unit, so events × sessions fans out).
type joinData struct {
	events, users, sessions [][]any // unit first, then the declared columns
}

func joinRows() joinData {
	r := rand.New(rand.NewPCG(9, 13))
	var d joinData
	pick := func(vs ...any) any { return vs[r.IntN(len(vs))] }
	addEvents := func(u any, n int) {
		for range n {
			d.events = append(d.events, []any{u, pick("FR", "DE", "US", "XX"), pick("ios", "web")})
		}
	}
	addEvents(int64(1), 60)
	for u := int64(2); u <= 40; u++ {
		addEvents(u, r.IntN(6))
	}
	addEvents(nil, 5)
	for u := int64(1); u <= 45; u++ {
		if u%9 == 4 {
			continue // no user row: a LEFT JOIN keeps the events with NULLs
		}
		d.users = append(d.users, []any{u, pick("free", "pro", nil)})
	}
	d.users = append(d.users, []any{nil, "pro"})
	for u := int64(1); u <= 40; u++ {
		for range r.IntN(4) {
			d.sessions = append(d.sessions, []any{u, int64(r.IntN(7))})
		}
	}
	return d
}

func joinCatalog(t testing.TB, source, schema, eventsUnit string) *catalog.Catalog {
	t.Helper()
	y := "database: conf\nsources:\n  " + source + "\ntables:\n" +
		"  events:\n    source_table: " + schema + "events\n    budget: {total: 1, per_user: 1, default_per_query: 0.1}\n" +
		"    privacy_unit: " + eventsUnit + "\n" +
		"    columns:\n      country: {type: categorical, values: [FR, DE, US], out_of_domain: other}\n      device: {type: categorical, values: [ios, web]}\n" +
		"  users:\n    source_table: " + schema + "users\n    budget: {total: 1, per_user: 1, default_per_query: 0.1}\n" +
		"    privacy_unit: {column: id, max_rows: 1, space: customer}\n" +
		"    columns:\n      plan: {type: categorical, values: [free, pro], null: cell}\n" +
		"  sessions:\n    source_table: " + schema + "sessions\n    budget: {total: 1, per_user: 1, default_per_query: 0.1}\n" +
		"    privacy_unit: {column: user_id, max_rows: 3, space: customer}\n" +
		"    columns:\n      pages: {type: integer, min: 0, max: 5, null: cell}\n" +
		"  users_text:\n    source_table: " + schema + "users_text\n    budget: {total: 1, per_user: 1, default_per_query: 0.1}\n" +
		"    privacy_unit: {column: id, max_rows: 1, space: customer}\n" +
		"    columns:\n      plan: {type: categorical, values: [free, pro], null: cell}\n"
	cat, err := catalog.Parse("join.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// loadJoin creates the fixture's tables (and users_text, users with a
// text unit) in schema ("" or "name.").
func loadJoin(t testing.TB, db *sql.DB, engine, schema string, d joinData) {
	t.Helper()
	text := map[string]string{"sqlite": "TEXT", "postgres": "TEXT", "mysql": "VARCHAR(16)"}[engine]
	tables := []struct {
		name, cols string
		rows       [][]any
	}{
		{"events", "user_id BIGINT, country " + text + ", device " + text, d.events},
		{"users", "id BIGINT, plan " + text, d.users},
		{"sessions", "user_id BIGINT, pages BIGINT", d.sessions},
		{"users_text", "id " + text + ", plan " + text, nil},
	}
	for _, tb := range tables {
		if _, err := db.Exec("CREATE TABLE " + schema + tb.name + " (" + tb.cols + ")"); err != nil {
			t.Fatal(err)
		}
		if len(tb.rows) == 0 {
			continue
		}
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		var marks []string
		for i := range tb.rows[0] {
			if engine == "postgres" {
				marks = append(marks, fmt.Sprintf("$%d", i+1))
			} else {
				marks = append(marks, "?")
			}
		}
		ins := "INSERT INTO " + schema + tb.name + " VALUES (" + strings.Join(marks, ", ") + ")"
		for _, r := range tb.rows {
			if _, err := tx.Exec(ins, r...); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// goJoin joins the fixture's rows in Go as the joined table's rows: the
// first table's unit, then every joined table's columns in the joined
// table's column order (NULLs for a LEFT JOIN's missing rows).
func goJoin(j *catalog.UnitJoin, d joinData) [][]any {
	data := map[string][][]any{"events": d.events, "users": d.users, "sessions": d.sessions}
	// partial rows: one source row (or nil) per joined table so far.
	partial := [][][]any{}
	for _, r := range data[j.Tables[0].Table] {
		partial = append(partial, [][]any{r})
	}
	for i, jt := range j.Tables[1:] {
		var next [][][]any
		for _, p := range partial {
			var unit any
			if p[jt.On] != nil {
				unit = p[jt.On][0]
			}
			matched := false
			for _, r := range data[jt.Table] {
				if unit != nil && r[0] != nil && r[0] == unit {
					next = append(next, append(slices.Clone(p), r))
					matched = true
				}
			}
			if !matched && jt.Left {
				next = append(next, append(slices.Clone(p), nil))
			}
		}
		partial = next
		_ = i
	}
	var out [][]any
	for _, p := range partial {
		row := []any{p[0][0]}
		for i, jt := range j.Tables {
			n := len(data[jt.Table][0]) - 1
			for c := range n {
				if p[i] == nil {
					row = append(row, nil)
				} else {
					row = append(row, p[i][c+1])
				}
			}
		}
		out = append(out, row)
	}
	return out
}

// joinShapes are the joins the fixture checks: inner, LEFT, chained
// through a table other than the first, and a LEFT JOIN that fans out.
var joinShapes = []*catalog.UnitJoin{
	{Tables: []catalog.JoinedTable{{Table: "events"}, {Table: "users"}}},
	{Tables: []catalog.JoinedTable{{Table: "events"}, {Table: "users", Left: true}}},
	{Tables: []catalog.JoinedTable{{Table: "events"}, {Table: "users"}, {Table: "sessions", On: 1}}},
	{Tables: []catalog.JoinedTable{{Table: "events"}, {Table: "sessions", Left: true}}},
}

// checkJoinTruncation compares the bounded histogram of every join shape,
// for a row bound alone and with group and per-group bounds, and every
// column set, with the brute force of the Go join (truncation), as one
// pushed-down statement per histogram; and the distinct (unit, cell)
// pairs behind COUNT(DISTINCT unit).
func checkJoinTruncation(t *testing.T, source, schema string, d joinData) {
	for _, unit := range []string{"{column: user_id, max_rows: 4, space: customer}", "{column: user_id, max_rows: 5, max_groups: 2, max_rows_per_group: 2, space: customer}"} {
		t.Run(unit, func(t *testing.T) {
			ctx := context.Background()
			cat := joinCatalog(t, source, schema, unit)
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
			// The engine's own keyed hash: SQLite's (UnitHash64),
			// PostgreSQL's (PostgresUnitHash), MariaDB's (UnitHash).
			truncation := truncation
			if strings.Contains(source, "driver: sqlite") {
				truncation = func(key string, tab *catalog.Table, cols []*catalog.Column, rows [][]any) ([]float64, []string) {
					return truncationBy(sqliteOrder(key), tab, cols, rows)
				}
			}
			if strings.Contains(source, "driver: postgres") {
				truncation = func(key string, tab *catalog.Table, cols []*catalog.Column, rows [][]any) ([]float64, []string) {
					return truncationBy(postgresOrder(key), tab, cols, rows)
				}
			}
			for _, shape := range joinShapes {
				j := &catalog.UnitJoin{Tables: slices.Clone(shape.Tables)}
				tab, err := catalog.JoinTables(cat, j)
				if err != nil {
					t.Fatal(err)
				}
				if err := set.CheckUnitJoin(ctx, tab); err != nil {
					t.Fatalf("%s: %v", tab.Name, err)
				}
				rows := goJoin(j, d)
				colSets := [][]*catalog.Column{nil}
				for _, c := range tab.Columns {
					colSets = append(colSets, []*catalog.Column{c})
				}
				colSets = append(colSets, tab.Columns[:2], tab.Columns[1:], tab.Columns)
				for _, cols := range colSets {
					got, err := set.Histogram(ctx, tab, cols)
					if err != nil {
						t.Fatalf("%s %d columns: %v", tab.Name, len(cols), err)
					}
					want, wantSets := truncation(key, tab, cols, rows)
					if !slices.Equal(got, want) {
						t.Errorf("%s, columns %v: got %v, want %v", tab.Name, names(cols), got, want)
					}
					var sets []string
					err = set.UnitCells(ctx, tab, cols, func(cells []int) error {
						m := map[int]bool{}
						for _, c := range cells {
							m[c] = true
						}
						sets = append(sets, cellSet(m))
						return nil
					})
					if err != nil {
						t.Fatal(err)
					}
					slices.Sort(sets)
					if !slices.Equal(sets, wantSets) {
						t.Errorf("%s, columns %v: unit cells %v, want %v", tab.Name, names(cols), sets, wantSets)
					}
					total := 0.0
					for _, x := range got {
						total += x
					}
					if total > float64(40*tab.Unit.L1()) {
						t.Errorf("%s: total %v over 40 units × %d", tab.Name, total, tab.Unit.L1())
					}
				}
			}
			// Units of different types are refused before any count.
			tab, err := catalog.JoinTables(cat, &catalog.UnitJoin{Tables: []catalog.JoinedTable{{Table: "events"}, {Table: "users_text"}}})
			if err != nil {
				t.Fatal(err)
			}
			var te *UnitTypeError
			if err := set.CheckUnitJoin(ctx, tab); !errors.As(err, &te) {
				t.Errorf("units BIGINT and text: %v, want a UnitTypeError", err)
			}
		})
	}
}

func names(cols []*catalog.Column) []string {
	var out []string
	for _, c := range cols {
		out = append(out, c.Name)
	}
	return out
}

func TestJoinTruncationSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.sqlite")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	d := joinRows()
	loadJoin(t, db, "sqlite", "", d)
	db.Close()
	checkJoinTruncation(t, "main: {driver: sqlite, path: "+path+"}", "", d)
}

func TestJoinTruncationPostgres(t *testing.T) {
	srv := pgServer.Get(t)
	if err := srv.Exec(context.Background(), "DROP SCHEMA IF EXISTS uj CASCADE", "CREATE SCHEMA uj"); err != nil {
		t.Fatal(err)
	}
	db, err := srv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	d := joinRows()
	loadJoin(t, db, "postgres", "uj.", d)
	checkJoinTruncation(t, "main: {driver: postgres, dsn: \""+srv.AdminDSN+"\"}", "uj.", d)
}

func TestJoinTruncationMariaDB(t *testing.T) {
	srv := mariaServer.Get(t)
	if err := srv.Exec(context.Background(), "DROP DATABASE IF EXISTS uj", "CREATE DATABASE uj CHARACTER SET utf8mb4"); err != nil {
		t.Fatal(err)
	}
	db, err := srv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	d := joinRows()
	loadJoin(t, db, "mysql", "uj.", d)
	dsn := fmt.Sprintf("root@unix(%s)/uj", strings.TrimSuffix(strings.TrimPrefix(srv.AdminDSN, "root@unix("), ")/?multiStatements=true"))
	checkJoinTruncation(t, "main: {driver: mysql, dsn: \""+dsn+"\"}", "uj.", d)
}

// without is d with every row of unit u removed from every table.
func (d joinData) without(u int64) joinData {
	drop := func(rows [][]any) [][]any {
		var out [][]any
		for _, r := range rows {
			if r[0] != u {
				out = append(out, r)
			}
		}
		return out
	}
	return joinData{drop(d.events), drop(d.users), drop(d.sessions)}
}

// The sensitivity of joins on the unit, by brute force: for every join
// shape, every bound (k alone; k, g and r) and every column set, removing
// all rows of one unit from every joined table — each unit in turn —
// moves the bounded histogram by at most min(k, g·r) in L1 norm and by at
// most min(k, r) in any cell, whatever the fan-out (the heavy unit has 60
// events and up to three sessions each). The histograms are the brute
// force that TestJoinTruncation* proves equal to every engine's; one
// removal per bound is also counted by SQLite itself.
func TestJoinUnitSensitivity(t *testing.T) {
	d := joinRows()
	path := filepath.Join(t.TempDir(), "j.sqlite")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	loadJoin(t, db, "sqlite", "", d)
	db.Close()
	path1 := filepath.Join(t.TempDir(), "j1.sqlite")
	db, err = sql.Open("sqlite", path1)
	if err != nil {
		t.Fatal(err)
	}
	loadJoin(t, db, "sqlite", "", d.without(1))
	db.Close()
	for _, unit := range []string{"{column: user_id, max_rows: 4, space: customer}", "{column: user_id, max_rows: 5, max_groups: 2, max_rows_per_group: 2, space: customer}", "{column: user_id, max_rows: 6, max_groups: 3, max_rows_per_group: 1, space: customer}"} {
		ctx := context.Background()
		dir := t.TempDir()
		cat := joinCatalog(t, "main: {driver: sqlite, path: "+path+"}", "", unit)
		set, err := Open(ctx, cat, Options{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer set.Close()
		cat1 := joinCatalog(t, "main: {driver: sqlite, path: "+path1+"}", "", unit)
		set1, err := Open(ctx, cat1, Options{DataDir: dir}) // the same key
		if err != nil {
			t.Fatal(err)
		}
		defer set1.Close()
		key, err := loadUnitKey(dir)
		if err != nil {
			t.Fatal(err)
		}
		// SQLite's keyed hash (UnitHash64), which its scan and SQL use.
		truncation := func(key string, tab *catalog.Table, cols []*catalog.Column, rows [][]any) ([]float64, []string) {
			return truncationBy(sqliteOrder(key), tab, cols, rows)
		}
		for _, shape := range joinShapes {
			j := &catalog.UnitJoin{Tables: slices.Clone(shape.Tables)}
			tab, err := catalog.JoinTables(cat, j)
			if err != nil {
				t.Fatal(err)
			}
			l1, perCell := float64(tab.Unit.L1()), float64(tab.Unit.PerCell())
			colSets := [][]*catalog.Column{nil, tab.Columns}
			for _, c := range tab.Columns {
				colSets = append(colSets, []*catalog.Column{c})
			}
			attained := false
			for _, cols := range colSets {
				full, _ := truncation(key, tab, cols, goJoin(j, d))
				for u := int64(1); u <= 45; u++ {
					less, _ := truncation(key, tab, cols, goJoin(j, d.without(u)))
					dist, worst := 0.0, 0.0
					for i := range full {
						x := full[i] - less[i]
						if x < 0 {
							t.Fatalf("%s %s: removing unit %d added rows to cell %d", unit, tab.Name, u, i)
						}
						dist += x
						worst = max(worst, x)
					}
					if dist > l1 || worst > perCell {
						t.Errorf("%s %s columns %v: unit %d moves the histogram by %v in L1 (bound %v), %v in one cell (bound %v)", unit, tab.Name, names(cols), u, dist, l1, worst, perCell)
					}
					attained = attained || dist == l1
				}
				// The engine agrees for the heavy unit.
				got, err := set.Histogram(ctx, tab, cols)
				if err != nil {
					t.Fatal(err)
				}
				tab1, err := catalog.JoinTables(cat1, &catalog.UnitJoin{Tables: slices.Clone(shape.Tables)})
				if err != nil {
					t.Fatal(err)
				}
				got1, err := set1.Histogram(ctx, tab1, cols)
				if err != nil {
					t.Fatal(err)
				}
				less, _ := truncation(key, tab, cols, goJoin(j, d.without(1)))
				if !slices.Equal(got, full) || !slices.Equal(got1, less) {
					t.Errorf("%s %s columns %v: SQLite %v / %v, brute force %v / %v", unit, tab.Name, names(cols), got, got1, full, less)
				}
			}
			if !attained {
				t.Errorf("%s %s: no unit attains the bound %v: the test has no power", unit, tab.Name, l1)
			}
		}
	}
}
