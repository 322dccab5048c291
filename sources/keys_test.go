package sources

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/selection"
)

func keysCatalog(t testing.TB, path, unit string) *catalog.Catalog {
	t.Helper()
	y := "database: k\nsources:\n  main: {driver: sqlite, path: " + path + "}\ntables:\n  e:\n" +
		"    budget: {total: 1, per_user: 1, default_per_query: 0.1}\n" + unit +
		"    columns:\n      ref: {type: text}\n      item: {type: integer, open: true}\n      n: {type: integer, min: 0, max: 3}\n"
	cat, err := catalog.Parse("keys.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// KeyUnits counts, per key, the distinct units that hold it after each
// unit keeps its max_groups keys of least keyed hash: checked against Go
// replaying the same hash, for a text and an integer open column, and
// against a plain count per key without a unit.
func TestKeyUnitsSQLite(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "k.sqlite")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE e (uid INTEGER, ref TEXT, item INTEGER, n INTEGER)"); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	type row struct {
		u    any
		ref  any
		item int64
	}
	var rows []row
	for i := 0; i < 2000; i++ {
		var u any = int64(r.IntN(150))
		if i%97 == 0 {
			u = nil
		}
		var ref any = fmt.Sprintf("site%d.example", int(math.Floor(math.Pow(r.Float64(), 3)*40)))
		if i%53 == 0 {
			ref = nil
		}
		rows = append(rows, row{u, ref, int64(r.IntN(30))})
	}
	tx, _ := db.Begin()
	for _, w := range rows {
		if _, err := tx.Exec("INSERT INTO e VALUES (?, ?, ?, 1)", w.u, w.ref, w.item); err != nil {
			t.Fatal(err)
		}
	}
	tx.Commit()
	db.Close()

	for _, g := range []int{1, 3} {
		cat := keysCatalog(t, path, fmt.Sprintf("    privacy_unit: {column: uid, max_rows: 10, max_groups: %d}\n", g))
		set, err := Open(ctx, cat, Options{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		key, err := loadUnitKey(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, col := range []string{"ref", "item"} {
			// Go's replay: per unit its distinct keys, least hash first.
			per := map[int64]map[string]bool{}
			for _, w := range rows {
				if w.u == nil || (col == "ref" && w.ref == nil) {
					continue
				}
				k := strconv.FormatInt(w.item, 10)
				if col == "ref" {
					k = w.ref.(string)
				}
				u := w.u.(int64)
				if per[u] == nil {
					per[u] = map[string]bool{}
				}
				per[u][k] = true
			}
			want := map[string]int64{}
			for u, ks := range per {
				type hk struct{ h, k string }
				var l []hk
				for k := range ks {
					var v any = k
					if col == "item" {
						n, _ := strconv.ParseInt(k, 10, 64)
						v = n
					}
					l = append(l, hk{UnitHash(key, u, v), k})
				}
				slices.SortFunc(l, func(a, b hk) int {
					if c := strings.Compare(a.h, b.h); c != 0 {
						return c
					}
					return strings.Compare(a.k, b.k)
				})
				for _, x := range l[:min(g, len(l))] {
					want[x.k]++
				}
			}
			got := map[string]int64{}
			if err := set.KeyUnits(ctx, cat.Table("e"), col, func(k string, n int64) error { got[k] = n; return nil }); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("max_groups %d, %s:\n got %v\nwant %v", g, col, got, want)
			}
		}
		set.Close()
	}

	cat := keysCatalog(t, path, "")
	set, err := Open(ctx, cat, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	want := map[string]int64{}
	for _, w := range rows {
		if w.ref != nil {
			want[w.ref.(string)]++
		}
	}
	got := map[string]int64{}
	if err := set.KeyUnits(ctx, cat.Table("e"), "ref", func(k string, n int64) error { got[k] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("row privacy:\n got %v\nwant %v", got, want)
	}
	if err := set.KeyUnits(ctx, cat.Table("e"), "n", func(string, int64) error { return nil }); err == nil {
		t.Error("KeyUnits over a declared column")
	}
}

// BenchmarkKeySelection times partition selection over a 1,000,000-row
// table with 100,000 distinct keys (each key once, then 900,000 rows of a
// Zipf law over them), row privacy, ε = 1, δ = 10⁻⁶: the pushed-down count
// per key plus one release decision per key, against SQLite's own plain
// GROUP BY of the same column in the same run (ratio = selection / plain),
// and how many keys are released. DPPROXY_BENCH_DIR keeps the file.
func BenchmarkKeySelection(b *testing.B) {
	const rows, keys = 1_000_000, 100_000
	dir := os.Getenv("DPPROXY_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	path := filepath.Join(dir, "keys-1m.sqlite")
	ctx := context.Background()
	if _, err := os.Stat(path); err != nil {
		db, err := sql.Open("sqlite", path)
		if err != nil {
			b.Fatal(err)
		}
		db.Exec("CREATE TABLE e (uid INTEGER, ref TEXT, item INTEGER, n INTEGER)")
		tx, _ := db.Begin()
		st, _ := tx.Prepare("INSERT INTO e (ref) VALUES (?)")
		z := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.07, 1, keys-1)
		for i := 0; i < rows; i++ {
			k := uint64(i)
			if i >= keys {
				k = z.Uint64()
			}
			if _, err := st.Exec("r" + strconv.FormatUint(k, 36) + ".example.com"); err != nil {
				b.Fatal(err)
			}
		}
		tx.Commit()
		db.Close()
	}
	cat := keysCatalog(b, path, "")
	set, err := Open(ctx, cat, Options{DataDir: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer set.Close()
	m, err := selection.Choose(1, 0, 1e-6, 1)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	var sel, plain time.Duration
	released, distinct := 0, 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		rnd := noise.NewRand()
		released, distinct = 0, 0
		if err := set.KeyUnits(ctx, cat.Table("e"), "ref", func(k string, n int64) error {
			distinct++
			if m.Keep(rnd, n) {
				released++
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		sel += time.Since(start)
		start = time.Now()
		rs, err := raw.QueryContext(ctx, "SELECT ref, COUNT(*) FROM e GROUP BY ref")
		if err != nil {
			b.Fatal(err)
		}
		var k string
		var n int64
		for rs.Next() {
			rs.Scan(&k, &n)
		}
		rs.Close()
		plain += time.Since(start)
	}
	b.ReportMetric(float64(sel)/float64(plain), "selection/plain")
	b.ReportMetric(float64(sel.Milliseconds())/float64(b.N), "selection-ms")
	b.ReportMetric(float64(plain.Milliseconds())/float64(b.N), "plain-ms")
	b.ReportMetric(float64(distinct), "keys")
	b.ReportMetric(float64(released), "released")
}
