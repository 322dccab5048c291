package sources

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
)

// publicCatalog declares a protected table and the public table dims read
// from sourceTable of the source.
func publicCatalog(t *testing.T, source, sourceTable string) *catalog.Catalog {
	t.Helper()
	y := "database: conf\nsources:\n  " + source + "\ntables:\n  t:\n    budget: {total: 1, per_user: 1, default_per_query: 0.1}\n" +
		"    columns: {c: {type: categorical, values: [a]}}\npublic_tables:\n  dims: {source: main, source_table: " + sourceTable +
		", columns: {code: text, n: integer, x: numeric}}\n"
	cat, err := catalog.Parse("public.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

var publicRows = [][]any{{"US", int64(1), 2.5}, {"x'y", nil, -1000.0}, {nil, int64(3), 0.25}}

var publicWant = [][]catalog.PublicValue{
	{{Text: "US"}, {Text: "1"}, {Text: "2.5"}},
	{{Text: "x'y"}, {Null: true}, {Text: "-1000"}},
	{{Null: true}, {Text: "3"}, {Text: "0.25"}},
}

// loadPublic creates name(code, n, x) with rows through db.
func loadPublic(t *testing.T, db *sql.DB, engine, name string, rows [][]any) {
	t.Helper()
	types := map[string]string{"sqlite": "code TEXT, n INTEGER, x REAL", "postgres": "code TEXT, n BIGINT, x DOUBLE PRECISION", "mysql": "code VARCHAR(16), n BIGINT, x DOUBLE"}[engine]
	if _, err := db.Exec("CREATE TABLE " + name + " (" + types + ")"); err != nil {
		t.Fatal(err)
	}
	marks := "?, ?, ?"
	if engine == "postgres" {
		marks = "$1, $2, $3"
	}
	for _, r := range rows {
		if _, err := db.Exec("INSERT INTO "+name+" VALUES ("+marks+")", r...); err != nil {
			t.Fatal(err)
		}
	}
}

func checkPublic(t *testing.T, cat *catalog.Catalog) {
	t.Helper()
	ctx := context.Background()
	set, err := Open(ctx, cat, Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	if err := set.LoadPublicTables(ctx, cat); err != nil {
		t.Fatal(err)
	}
	if got := cat.PublicTable("dims").Rows; !reflect.DeepEqual(got, publicWant) {
		t.Errorf("rows %v, want %v", got, publicWant)
	}
}

func TestLoadPublicTablesSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.sqlite")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	loadPublic(t, db, "sqlite", "dims", publicRows)
	var many [][]any
	for i := range catalog.MaxPublicRows + 1 {
		many = append(many, []any{fmt.Sprint(i), int64(i), 0.5})
	}
	tx, _ := db.Begin()
	if _, err := tx.Exec("CREATE TABLE big (code TEXT, n INTEGER, x REAL)"); err != nil {
		t.Fatal(err)
	}
	for _, r := range many {
		tx.Exec("INSERT INTO big VALUES (?, ?, ?)", r...)
	}
	if _, err := tx.Exec("CREATE TABLE bad (code TEXT, n TEXT, x REAL); INSERT INTO bad VALUES ('a', 'seven', 1)"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	source := "main: {driver: sqlite, path: " + path + "}"
	checkPublic(t, publicCatalog(t, source, "dims"))

	ctx := context.Background()
	for table, want := range map[string]string{
		"big": fmt.Sprintf("public table dims (source main, table big): more than %d rows", catalog.MaxPublicRows),
		"bad": `public table dims (source main, table bad): row 1, column n: "seven" is not an integer`,
	} {
		cat := publicCatalog(t, source, table)
		set, err := Open(ctx, cat, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := set.LoadPublicTables(ctx, cat); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", table, err, want)
		}
		set.Close()
	}
}

func TestLoadPublicTablesPostgres(t *testing.T) {
	srv := pgServer.Get(t)
	if err := srv.Exec(context.Background(), "DROP SCHEMA IF EXISTS pub CASCADE", "CREATE SCHEMA pub"); err != nil {
		t.Fatal(err)
	}
	db, err := srv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	loadPublic(t, db, "postgres", "pub.dims", publicRows)
	checkPublic(t, publicCatalog(t, "main: {driver: postgres, dsn: \""+srv.AdminDSN+"\"}", "pub.dims"))
}

func TestLoadPublicTablesMariaDB(t *testing.T) {
	srv := mariaServer.Get(t)
	if err := srv.Exec(context.Background(), "DROP DATABASE IF EXISTS pub", "CREATE DATABASE pub CHARACTER SET utf8mb4"); err != nil {
		t.Fatal(err)
	}
	db, err := srv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	loadPublic(t, db, "mysql", "pub.dims", publicRows)
	checkPublic(t, publicCatalog(t, "main: {driver: mysql, dsn: \""+srv.AdminDSN+"\"}", "pub.dims"))
}
