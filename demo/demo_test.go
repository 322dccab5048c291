package demo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/catalog"
)

// shared is one DefaultRows demo database for the tests that only read it.
var shared struct {
	once sync.Once
	dir  string
	path string
	took time.Duration
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

func sharedDB(t *testing.T) string {
	t.Helper()
	shared.once.Do(func() {
		if shared.dir, shared.err = os.MkdirTemp("", "demo-test-"); shared.err != nil {
			return
		}
		shared.path = filepath.Join(shared.dir, "demo.sqlite")
		start := time.Now()
		shared.err = Generate(context.Background(), shared.path, DefaultRows)
		shared.took = time.Since(start)
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.path
}

func open(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// digest is a SHA-256 over the rows of a query, as text.
func digest(t *testing.T, db *sql.DB, query string) string {
	t.Helper()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	h := sha256.New()
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(h, vals...)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

func TestDeterministic(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.sqlite"), filepath.Join(dir, "sub", "b.sqlite")
	for _, p := range []string{a, b} {
		if err := Generate(context.Background(), p, 5000); err != nil {
			t.Fatal(err)
		}
	}
	dba, dbb := open(t, a), open(t, b)
	for _, q := range []string{
		"SELECT * FROM adult ORDER BY rowid",
		"SELECT education, income, count(*), sum(age), sum(hours_per_week) FROM adult GROUP BY 1, 2 ORDER BY 1, 2",
	} {
		if da, db := digest(t, dba, q), digest(t, dbb, q); da != db {
			t.Errorf("%s: %s != %s", q, da, db)
		}
	}
	fa, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fa, fb) {
		t.Error("the two files differ")
	}
	// A prefix of the default table: rows do not depend on the row count.
	if da, ds := digest(t, dba, "SELECT * FROM adult ORDER BY rowid"),
		digest(t, open(t, sharedDB(t)), "SELECT * FROM adult WHERE rowid <= 5000 ORDER BY rowid"); da != ds {
		t.Error("the first 5000 rows depend on the row count")
	}
	// No temporary files are left behind.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("left %s", e.Name())
		}
	}
}

func TestFast(t *testing.T) {
	sharedDB(t)
	t.Logf("generated %d rows in %v", DefaultRows, shared.took)
	// A loose bound against a regression that would make the first start
	// of `dpproxy serve` slow (adult and 4× as many events; about 1 s on
	// an idle machine, BenchmarkGenerate measures it).
	if !raceEnabled && shared.took > 5*time.Second {
		t.Errorf("generating %d rows took %v", DefaultRows, shared.took)
	}
}

// table is the shared database's adult table, read once with database/sql:
// scanning in Go is much faster under the race detector than one SQL query
// per statistic.
var table struct {
	once sync.Once
	cols []string
	rows [][]any // values as the driver returns them: int64, string or nil
	err  error
}

func loadTable(t *testing.T) ([]string, [][]any) {
	t.Helper()
	db := open(t, sharedDB(t))
	table.once.Do(func() {
		rows, err := db.Query("SELECT * FROM adult ORDER BY rowid")
		if err != nil {
			table.err = err
			return
		}
		defer rows.Close()
		table.cols, _ = rows.Columns()
		for rows.Next() {
			r := make([]any, len(table.cols))
			ptrs := make([]any, len(r))
			for i := range r {
				ptrs[i] = &r[i]
			}
			if table.err = rows.Scan(ptrs...); table.err != nil {
				return
			}
			table.rows = append(table.rows, r)
		}
		table.err = rows.Err()
	})
	if table.err != nil {
		t.Fatal(table.err)
	}
	return table.cols, table.rows
}

func TestDomains(t *testing.T) {
	db := open(t, sharedDB(t))
	tb := catalog.Demo().Table("adult")
	if tb == nil {
		t.Fatal("demo catalog has no adult")
	}
	// The source table has exactly the catalog's columns, in its order, with
	// INTEGER for the integer ranges and TEXT for the categories.
	rows, err := db.Query("SELECT name, type FROM pragma_table_info('adult') ORDER BY cid")
	if err != nil {
		t.Fatal(err)
	}
	var i int
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			t.Fatal(err)
		}
		if i >= len(tb.Columns) || tb.Columns[i].Name != name {
			t.Errorf("source column %d is %s", i, name)
		} else if want := map[bool]string{true: "INTEGER", false: "TEXT"}[tb.Columns[i].IsNumeric()]; typ != want {
			t.Errorf("column %s has type %s, want %s", name, typ, want)
		}
		i++
	}
	rows.Close()
	if i != len(tb.Columns) {
		t.Errorf("%d source columns, want %d", i, len(tb.Columns))
	}

	cols, data := loadTable(t)
	if len(data) != DefaultRows {
		t.Errorf("%d rows, want %d", len(data), DefaultRows)
	}
	// Every value lies in its column's declared domain, every value of a
	// categorical domain occurs, and there is no NULL.
	for j, name := range cols {
		c := tb.Column(name)
		if c == nil {
			t.Errorf("column %s not in the catalog", name)
			continue
		}
		in := map[string]bool{}
		for _, v := range c.Values {
			in[v] = true
		}
		seen := map[any]bool{}
		bad := 0
		for _, r := range data {
			v := r[j]
			seen[v] = true
			ok := false
			switch x := v.(type) {
			case string:
				ok = c.Kind == catalog.Categorical && in[x]
			case int64:
				ok = c.Kind == catalog.IntegerRange && x >= c.Min && x <= c.Max
			}
			if !ok {
				if bad++; bad <= 3 {
					t.Errorf("%s: value %#v (%T) outside the domain", name, v, v)
				}
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d values outside the domain", name, bad)
		}
		if c.Kind == catalog.Categorical && len(seen) != len(c.Values) {
			t.Errorf("%s: %d distinct values, %d declared", name, len(seen), len(c.Values))
		}
	}
}

func TestMarginals(t *testing.T) {
	cols, data := loadTable(t)
	col := map[string]int{}
	for i, c := range cols {
		col[c] = i
	}
	str := func(r []any, c string) string { s, _ := r[col[c]].(string); return s }
	num := func(r []any, c string) int64 { n, _ := r[col[c]].(int64); return n }
	type pred func([]any) bool
	all := func([]any) bool { return true }
	is := func(c string, vs ...string) pred {
		return func(r []any) bool {
			for _, v := range vs {
				if str(r, c) == v {
					return true
				}
			}
			return false
		}
	}
	between := func(c string, lo, hi int64) pred {
		return func(r []any) bool { n := num(r, c); return n >= lo && n <= hi }
	}
	// mean is the average of f over the rows where p holds.
	mean := func(f func([]any) float64, p pred) float64 {
		var s, n float64
		for _, r := range data {
			if p(r) {
				s += f(r)
				n++
			}
		}
		return s / n
	}
	indicator := func(p pred) func([]any) float64 {
		return func(r []any) float64 {
			if p(r) {
				return 1
			}
			return 0
		}
	}
	frac := func(p pred) float64 { return mean(indicator(p), all) }
	rich := func(p pred) float64 { return mean(indicator(is("income", ">50K")), p) }
	hours := func(r []any) float64 { return float64(num(r, "hours_per_week")) }
	married := indicator(is("marital_status", "Married-civ-spouse"))
	graduate := is("education", "Bachelors", "Masters", "Prof-school", "Doctorate")
	hsGrad := is("education", "HS-grad")

	checks := []struct {
		name   string
		got    float64
		lo, hi float64
	}{
		{">50K share", frac(is("income", ">50K")), 0.18, 0.30},
		{"Married-civ-spouse share", frac(is("marital_status", "Married-civ-spouse")), 0.40, 0.52},
		{"Male share", frac(is("sex", "Male")), 0.62, 0.72},
		{"Private share", frac(is("workclass", "Private")), 0.65, 0.80},
		{"40-hour share", frac(between("hours_per_week", 40, 40)), 0.35, 0.55},
		{"HS-grad, Some-college, Bachelors share", frac(is("education", "HS-grad", "Some-college", "Bachelors")), 0.60, 0.80},
		{"White share", frac(is("race", "White")), 0.80, 0.90},
		{"mean age", mean(func(r []any) float64 { return float64(num(r, "age")) }, all), 35, 42},
		{"share aged 25-44", frac(between("age", 25, 44)), 0.40, 0.60},
	}
	for _, c := range checks {
		t.Logf("%-45s %.3f", c.name, c.got)
		if c.got < c.lo || c.got > c.hi {
			t.Errorf("%s = %.3f, want in [%.2f, %.2f]", c.name, c.got, c.lo, c.hi)
		}
	}
	orders := []struct {
		name       string
		less, more float64
	}{
		{">50K: HS-grad < Bachelors+", rich(hsGrad), rich(graduate)},
		{">50K: below HS < HS-grad", rich(is("education", "Preschool", "1st-4th", "5th-6th", "7th-8th", "9th", "10th", "11th", "12th")), rich(hsGrad)},
		{">50K: HS-grad < Some-college", rich(hsGrad), rich(is("education", "Some-college"))},
		{">50K: Bachelors < Masters", rich(is("education", "Bachelors")), rich(is("education", "Masters"))},
		{">50K: Masters < Prof-school", rich(is("education", "Masters")), rich(is("education", "Prof-school"))},
		{">50K: aged 17-24 < 35-44", rich(between("age", 17, 24)), rich(between("age", 35, 44))},
		{">50K: aged 35-44 < 45-55", rich(between("age", 35, 44)), rich(between("age", 45, 55))},
		{">50K: aged 65+ < 45-55", rich(between("age", 65, 90)), rich(between("age", 45, 55))},
		{">50K: Never-married < Married-civ-spouse", rich(is("marital_status", "Never-married")), rich(is("marital_status", "Married-civ-spouse"))},
		{">50K: under 40 hours < over 40", rich(between("hours_per_week", 1, 39)), rich(between("hours_per_week", 41, 99))},
		{">50K: Female < Male", rich(is("sex", "Female")), rich(is("sex", "Male"))},
		{"mean hours: Female < Male", mean(hours, is("sex", "Female")), mean(hours, is("sex", "Male"))},
		{"married: Female < Male", mean(married, is("sex", "Female")), mean(married, is("sex", "Male"))},
		{"married: aged 17-24 < 35-54", mean(married, between("age", 17, 24)), mean(married, between("age", 35, 54))},
		{"Prof-specialty or Exec-managerial: HS-grad < Bachelors+",
			mean(indicator(is("occupation", "Prof-specialty", "Exec-managerial")), hsGrad),
			mean(indicator(is("occupation", "Prof-specialty", "Exec-managerial")), graduate)},
	}
	for _, o := range orders {
		t.Logf("%-55s %.3f < %.3f", o.name, o.less, o.more)
		if !(o.less < o.more) {
			t.Errorf("%s: %.3f is not less than %.3f", o.name, o.less, o.more)
		}
	}

	// Most common values.
	counts := func(key func([]any) string) map[string]int {
		m := map[string]int{}
		for _, r := range data {
			m[key(r)]++
		}
		return m
	}
	top := func(m map[string]int, k int) []string {
		var keys []string
		for key := range m {
			keys = append(keys, key)
		}
		sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || m[keys[i]] == m[keys[j]] && keys[i] < keys[j] })
		return keys[:min(k, len(keys))]
	}
	for c, want := range map[string]string{"workclass": "Private", "marital_status": "Married-civ-spouse", "race": "White", "sex": "Male", "income": "<=50K"} {
		if got := top(counts(func(r []any) string { return str(r, c) }), 1)[0]; got != want {
			t.Errorf("most common %s is %s, want %s", c, got, want)
		}
	}
	if got := top(counts(func(r []any) string { return fmt.Sprint(num(r, "hours_per_week")) }), 1)[0]; got != "40" {
		t.Errorf("most common hours_per_week is %s", got)
	}
	if got := top(counts(func(r []any) string { return fmt.Sprint(num(r, "age") / 5 * 5) }), 1)[0]; got != "30" && got != "35" {
		t.Errorf("most common 5-year age band starts at %s", got)
	}
	edu := top(counts(func(r []any) string { return str(r, "education") }), 3)
	sort.Strings(edu)
	if want := []string{"Bachelors", "HS-grad", "Some-college"}; !reflect.DeepEqual(edu, want) {
		t.Errorf("most common educations %v, want %v", edu, want)
	}
}

func TestIdempotent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "demo.sqlite")
	ctx := context.Background()
	if err := Generate(ctx, path, 1000); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if before.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", before.Mode())
	}
	if err := Generate(ctx, path, 1000); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
		t.Error("second call rewrote the file")
	}

	// Another row count replaces the file.
	if err := Generate(ctx, path, 1500); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := open(t, path).QueryRow("SELECT count(*) FROM adult").Scan(&n); err != nil || n != 1500 {
		t.Errorf("after regeneration: %d rows, %v", n, err)
	}

	// A damaged demo database is regenerated.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("DELETE FROM adult WHERE rowid % 2 = 0"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := Generate(ctx, path, 1500); err != nil {
		t.Fatal(err)
	}
	if err := open(t, path).QueryRow("SELECT count(*) FROM adult").Scan(&n); err != nil || n != 1500 {
		t.Errorf("after repair: %d rows, %v", n, err)
	}

	// An empty file is filled.
	empty := filepath.Join(dir, "empty.sqlite")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Generate(ctx, empty, 10); err != nil {
		t.Fatal(err)
	}
}

func TestRefusesForeignFiles(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()

	other := filepath.Join(dir, "other.sqlite")
	db, err := sql.Open("sqlite", other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE precious (x)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := Generate(ctx, other, 10); err == nil || !strings.Contains(err.Error(), "not a dpproxy demo database") {
		t.Errorf("got %v", err)
	}

	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte(strings.Repeat("not a database\n", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Generate(ctx, text, 10); err == nil {
		t.Error("overwrote a text file")
	}
	if b, _ := os.ReadFile(text); !bytes.HasPrefix(b, []byte("not a database")) {
		t.Error("text file changed")
	}

	if err := Generate(ctx, dir, 10); err == nil {
		t.Error("accepted a directory")
	}
	if err := Generate(ctx, filepath.Join(dir, "x.sqlite"), -1); err == nil {
		t.Error("accepted a negative row count")
	}
}

func TestCancel(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	path := filepath.Join(dir, "demo.sqlite")
	if err := Generate(ctx, path, 10000); err == nil {
		t.Fatal("no error after cancel")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left %d files", len(entries))
	}
}

func TestIncomeProbability(t *testing.T) {
	// Monotone table, clamped at both ends.
	for i := 1; i < len(sigmoid); i++ {
		if sigmoid[i] <= sigmoid[i-1] {
			t.Fatalf("sigmoid not increasing at %d", i)
		}
	}
	lo := person{age: 17, hours: 1, education: ePreschool, workclass: wNeverWorked, occupation: oPrivHouseServ, marital: mNeverMarried, race: rOther, sex: sFemale}
	hi := person{age: 50, hours: 60, education: eProfSchool, workclass: wSelfEmpInc, occupation: oExecManagerial, marital: mMarriedCiv, race: rWhite, sex: sMale}
	if p := incomeProbability(lo); p != sigmoid[0] {
		t.Errorf("lowest %d", p)
	}
	if p := incomeProbability(hi); p < 900000 || p > sigmoid[80] {
		t.Errorf("highest %d", p)
	}
}
