package sources

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/internal/testdb"
)

// chServer is a three-shard ClickHouse cluster (testdb.StartClickHouse):
// node 0 holds the Distributed tables, every node a local MergeTree table
// under each.
var chServer = testdb.NewLazy(testdb.StartClickHouse)

// conformanceCHTypes are the conformance columns' ClickHouse types, in
// conformanceSQLTypes' order. 18.16 has no DateTime64: the times' fractions
// of a second are cut on insert, which moves none of them across a bin edge
// (the edges are whole seconds).
var conformanceCHTypes = []string{
	"Nullable(Int64)", "Nullable(Int64)", "Nullable(Int64)",
	"Nullable(Float64)", "Nullable(Float64)", "Nullable(Float64)",
	"Nullable(String)", "Nullable(String)",
	"Nullable(DateTime)", "Nullable(DateTime)", "Nullable(Date)",
}

// chDistributed creates db.name as a Distributed table on node 0 over
// db.name_local on every node (columns defs, ORDER BY orderBy, sharded by
// the expression shardBy), and inserts each row into the local table of
// node shardOf(i, row).
func chDistributed(t testing.TB, srv *testdb.Server, db, name string, defs []string, orderBy, shardBy string, rows [][]any, shardOf func(i int, row []any) int) {
	t.Helper()
	ctx := context.Background()
	local := db + "." + name + "_local"
	if err := srv.ExecShards(ctx, "CREATE DATABASE IF NOT EXISTS "+db, "DROP TABLE IF EXISTS "+local,
		"CREATE TABLE "+local+" ("+strings.Join(defs, ", ")+") ENGINE = MergeTree ORDER BY "+orderBy); err != nil {
		t.Fatal(err)
	}
	if err := srv.Exec(ctx, "DROP TABLE IF EXISTS "+db+"."+name,
		fmt.Sprintf("CREATE TABLE %s.%s AS %s ENGINE = Distributed(%s, %s, %s_local, %s)", db, name, local, testdb.ClickHouseCluster, db, name, shardBy)); err != nil {
		t.Fatal(err)
	}
	parts := make([][][]any, len(srv.Shards))
	for i, r := range rows {
		s := shardOf(i, r)
		parts[s] = append(parts[s], r)
	}
	var names []string
	for _, d := range defs {
		names = append(names, strings.Fields(d)[0])
	}
	for s, part := range parts {
		conn, err := sql.Open("clickhouse", srv.Shards[s])
		if err != nil {
			t.Fatal(err)
		}
		// The driver's batch (18.16 answers it only with the column list).
		tx, err := conn.Begin()
		if err != nil {
			t.Fatal(err)
		}
		stmt, err := tx.Prepare("INSERT INTO " + local + " (" + strings.Join(names, ", ") + ")")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range part {
			if _, err := stmt.Exec(r...); err != nil {
				t.Fatalf("%v: %v", r, err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		conn.Close()
	}
}

// chTimes writes the conformance rows' date-times as time.Time in UTC
// (whole seconds), which the driver sends as instants; dates stay text.
func chTimes(rows [][]any) [][]any {
	out := make([][]any, len(rows))
	for i, r := range rows {
		out[i] = append([]any(nil), r...)
		for _, j := range timeColumns {
			s, ok := r[j].(string)
			if !ok {
				continue
			}
			tm, err := time.Parse("2006-01-02 15:04:05.999999999", s)
			if err != nil {
				continue // a date: its text is the Date literal
			}
			out[i][j] = tm.Truncate(time.Second)
		}
	}
	return out
}

// The conformance suite on a three-shard cluster behind a Distributed
// table (rows spread over the shards at random), read with the server's
// time zone not UTC: every column kind and policy, every pair of columns,
// against catalog.Column.CellOf.
func TestConformanceClickHouse(t *testing.T) {
	srv := chServer.Get(t)
	rows := conformanceRows(conformanceRowCount)
	var defs []string
	for i, c := range conformanceSQLTypes {
		defs = append(defs, c.name+" "+conformanceCHTypes[i])
	}
	defs = append(defs, "id UInt64")
	var loaded [][]any
	for i, r := range chTimes(rows) {
		loaded = append(loaded, append(r, uint64(i)))
	}
	r := rand.New(rand.NewPCG(3, 5))
	chDistributed(t, srv, "conf", "t1", defs, "id", "rand()", loaded, func(int, []any) int { return r.IntN(testdb.ClickHouseShards) })
	checkConformance(t, conformanceCatalog(t, "main: {driver: clickhouse, dsn: \""+srv.AdminDSN+"\"}", "conf.t1"), rows)
}

// chUnits loads the unit fixture (unitRows) into two Distributed tables:
// units.by_unit, each unit's rows on shard uid % 3 (sharded by the unit),
// and units.random, every row on a shard drawn at random.
func chUnits(t *testing.T) (*testdb.Server, [][]any) {
	srv := chServer.Get(t)
	rows := unitRows()
	defs := []string{"uid Nullable(Int64)", "a Int64", "b Nullable(String)", "c Int64", "id UInt64"}
	var loaded [][]any
	for i, r := range rows {
		loaded = append(loaded, append(append([]any(nil), r...), uint64(i)))
	}
	chDistributed(t, srv, "units", "by_unit", defs, "id", "assumeNotNull(uid)", loaded, func(i int, r []any) int {
		if r[0] == nil {
			return i % testdb.ClickHouseShards
		}
		return int(r[0].(int64) % testdb.ClickHouseShards)
	})
	rnd := rand.New(rand.NewPCG(9, 1))
	chDistributed(t, srv, "units", "random", defs, "id", "rand()", loaded, func(int, []any) int { return rnd.IntN(testdb.ClickHouseShards) })
	return srv, rows
}

// Contribution bounding on the cluster equals the brute-force truncation
// (each unit's max_rows rows of least keyed hash, then its max_groups
// cells and max_rows_per_group rows per cell), histograms and unit cells:
// bounded on each shard for the table sharded by its unit and declared so,
// globally for the table sharded at random, and globally for the table
// sharded by its unit but not declared so.
func TestTruncationClickHouse(t *testing.T) {
	srv, rows := chUnits(t)
	dsn := "main: {driver: clickhouse, dsn: \"" + srv.AdminDSN + "\"}"
	for _, tc := range []struct{ name, table string }{
		{"per shard", "units.by_unit\n    shard_key: uid"},
		{"global, sharded at random", "units.random"},
		{"global, sharded at random, shard key declared", "units.random\n    shard_key: a"},
		{"global, sharded by the unit, undeclared", "units.by_unit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The source_table line also carries shard_key.
			checkTruncation(t, dsn, tc.table, rows)
		})
	}
}

// A table sharded at random but declared sharded by its unit is bounded
// on each shard: a unit spread over the three shards keeps up to three
// times max_rows rows. This is the catalog's declaration taken at its word
// (the README says so); the test shows the per-shard path really is what
// runs when the declaration says it may.
func TestClickHouseMisdeclaredShardKey(t *testing.T) {
	srv, rows := chUnits(t)
	y := "database: conf\nsources:\n  main: {driver: clickhouse, dsn: \"" + srv.AdminDSN + "\"}\ntables:\n  t:\n    source_table: units.random\n    shard_key: uid\n" +
		"    budget: {total: 1, per_user: 1, default_per_query: 0.1}\n    privacy_unit: {column: uid, max_rows: 3}\n" + unitColumns
	cat, err := catalog.Parse("units.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
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
	got, err := set.Histogram(ctx, tab, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := truncation(key, tab, nil, rows)
	// The heavy unit (150 rows) and the four with 13–22 rows each lie on all
	// three shards at random with overwhelming probability (the seed is
	// fixed): each keeps 9 rows instead of 3.
	if got[0] <= want[0] || got[0] > want[0]+5*6 {
		t.Fatalf("per-shard bounding of a randomly sharded table: %v rows, truth %v (expected more, at most 30 more)", got[0], want[0])
	}
}

// The shard declaration: only for ClickHouse sources.
func TestShardKeyOnlyForClickHouse(t *testing.T) {
	y := "database: conf\nsources:\n  main: {driver: postgres, dsn: \"postgres://x@localhost/db\"}\ntables:\n  t:\n    shard_key: uid\n" +
		"    budget: {total: 1, per_user: 1, default_per_query: 0.1}\n    privacy_unit: {column: uid, max_rows: 3}\n" + unitColumns
	_, err := catalog.Parse("units.yaml", []byte(y))
	if err == nil || !strings.Contains(err.Error(), "shard_key") || !strings.Contains(err.Error(), "only for driver clickhouse") {
		t.Fatalf("err = %v", err)
	}
}

// A histogram whose context ends stops its query on the server and on
// every shard it reads (the driver sends ClickHouse's Cancel packet): a
// bounded histogram over a large Distributed table is cancelled after
// 300 ms and, within seconds, no node runs it any more.
func TestCancelStopsClickHouseQuery(t *testing.T) {
	srv := chServer.Get(t)
	ctx := context.Background()
	if err := srv.ExecShards(ctx, "CREATE DATABASE IF NOT EXISTS slow", "DROP TABLE IF EXISTS slow.t_local",
		"CREATE TABLE slow.t_local (uid Int64, a Int64) ENGINE = MergeTree ORDER BY uid",
		"INSERT INTO slow.t_local SELECT number, number % 7 FROM numbers(3000000)"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Exec(ctx, "DROP TABLE IF EXISTS slow.t",
		"CREATE TABLE slow.t AS slow.t_local ENGINE = Distributed("+testdb.ClickHouseCluster+", slow, t_local, uid)"); err != nil {
		t.Fatal(err)
	}
	y := "database: conf\nsources:\n  main: {driver: clickhouse, dsn: \"" + srv.AdminDSN + "\"}\ntables:\n  t:\n    source_table: slow.t\n" +
		"    budget: {total: 1, per_user: 1, default_per_query: 0.1}\n    privacy_unit: {column: uid, max_rows: 1, max_groups: 1}\n" +
		"    columns:\n      a: {type: integer, min: 0, max: 6}\n"
	cat, err := catalog.Parse("slow.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	set, err := Open(ctx, cat, Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := set.Histogram(cctx, cat.Table("t"), cat.Table("t").Columns); err == nil {
		t.Fatal("the histogram finished in 300 ms: make the table larger")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("cancelled after %v", d)
	}
	deadline := time.Now().Add(15 * time.Second)
	for i, dsn := range srv.Shards {
		db, err := sql.Open("clickhouse", dsn)
		if err != nil {
			t.Fatal(err)
		}
		for {
			var n uint64
			if err := db.QueryRow("SELECT count() FROM system.processes WHERE query LIKE '%dpproxy_hash%' AND query NOT LIKE '%system.processes%'").Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d still runs %d histogram queries", i, n)
			}
			time.Sleep(50 * time.Millisecond)
		}
		db.Close()
	}
}

// Sessions read only: the source's settings forbid writes (readonly 2),
// whatever the user may do.
func TestClickHouseReadOnly(t *testing.T) {
	srv := chServer.Get(t)
	ctx := context.Background()
	ch, err := openClickHouse(ctx, srv.AdminDSN, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.close()
	if _, err := ch.db.ExecContext(ctx, "CREATE TABLE default.dpproxy_write (a Int8) ENGINE = Memory"); err == nil || !strings.Contains(err.Error(), "readonly") {
		t.Fatalf("a write through the source: %v", err)
	}
}

// A DSN's password never shows in an error.
func TestClickHouseDSNRedacted(t *testing.T) {
	_, err := openClickHouse(context.Background(), "clickhouse://default:s3cret-pw@127.0.0.1:1/default?dial_timeout=200ms", 1)
	if err == nil {
		t.Fatal("connected to port 1")
	}
	if strings.Contains(err.Error(), "s3cret-pw") {
		t.Fatalf("the password is in %q", err)
	}
	_, err = openClickHouse(context.Background(), "clickhouse://default:s3cret-pw@127.0.0.1:1/default?dial_timeout=bad", 1)
	if err == nil || strings.Contains(err.Error(), "s3cret-pw") {
		t.Fatalf("parse error %v", err)
	}
	_, err = openClickHouse(context.Background(), "http://default:s3cret-pw@127.0.0.1:8123/default", 1)
	if err == nil || strings.Contains(err.Error(), "s3cret-pw") {
		t.Fatalf("http dsn: %v", err)
	}
}

// BenchmarkClickHouseUnitHistogram times a cold unit-bounded histogram of
// kind × hour (max_rows 5) over DPPROXY_BENCH_ROWS rows (default
// 10,000,000; 10 rows per unit, so bounding keeps half) on the three-shard
// cluster, against ClickHouse's own plain GROUP BY of the same cells over
// the same Distributed table in the same iteration, and reports each as a
// ratio to it: bounded on each shard (shard_key: uid, the table being
// sharded by uid) and bounded globally (no shard_key).
//
//	go test ./sources -run XXX -bench ClickHouseUnitHistogram -benchtime 3x
func BenchmarkClickHouseUnitHistogram(b *testing.B) {
	rows := 10_000_000
	if v, err := strconv.Atoi(os.Getenv("DPPROXY_BENCH_ROWS")); err == nil && v > 0 {
		rows = v
	}
	srv := chServer.Get(b)
	ctx := context.Background()
	if err := srv.ExecShards(ctx, "CREATE DATABASE IF NOT EXISTS bench", "DROP TABLE IF EXISTS bench.ev_local",
		"CREATE TABLE bench.ev_local (uid Int64, kind String, hour Int64) ENGINE = MergeTree ORDER BY uid"); err != nil {
		b.Fatal(err)
	}
	if err := srv.Exec(ctx, "DROP TABLE IF EXISTS bench.ev",
		"CREATE TABLE bench.ev AS bench.ev_local ENGINE = Distributed("+testdb.ClickHouseCluster+", bench, ev_local, uid)"); err != nil {
		b.Fatal(err)
	}
	units := max(rows/10, 1)
	start := time.Now()
	for i, dsn := range srv.Shards {
		db, err := sql.Open("clickhouse", dsn)
		if err != nil {
			b.Fatal(err)
		}
		// Each node generates its own units' rows (uid % 3 = node).
		_, err = db.ExecContext(ctx, fmt.Sprintf(`INSERT INTO bench.ev_local SELECT (number * 7919) %% %d AS uid,
			['view', 'cart', 'buy'][number %% 3 + 1], intDiv(number, 3) %% 24 FROM numbers(%d) WHERE uid %% %d = %d`, units, rows, len(srv.Shards), i))
		db.Close()
		if err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("loaded %d rows in %v", rows, time.Since(start).Round(time.Millisecond))
	y := `database: b
sources: {main: {driver: clickhouse, dsn: "` + srv.AdminDSN + `"}}
tables:
  per_shard:
    source_table: bench.ev
    shard_key: uid
    budget: {total: 1, per_user: 1, default_per_query: 0.1}
    privacy_unit: {column: uid, max_rows: 5}
    columns: &cols
      kind: {type: categorical, values: [view, cart, buy]}
      hour: {type: integer, min: 0, max: 23}
  global:
    source_table: bench.ev
    budget: {total: 1, per_user: 1, default_per_query: 0.1}
    privacy_unit: {column: uid, max_rows: 5}
    columns: *cols
`
	cat, err := catalog.Parse("b.yaml", []byte(y))
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	plain, err := sql.Open("clickhouse", srv.AdminDSN)
	if err != nil {
		b.Fatal(err)
	}
	defer plain.Close()
	var groupBy, perShard, global time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		r, err := plain.QueryContext(ctx, "SELECT kind, hour, count() FROM bench.ev GROUP BY kind, hour")
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for r.Next() {
			n++
		}
		if err := r.Err(); err != nil || n != 72 {
			b.Fatalf("plain GROUP BY: %d groups, %v", n, err)
		}
		r.Close()
		groupBy += time.Since(t0)
		for _, tc := range []struct {
			table string
			d     *time.Duration
		}{{"per_shard", &perShard}, {"global", &global}} {
			set, err := Open(ctx, cat, Options{DataDir: dir})
			if err != nil {
				b.Fatal(err)
			}
			t := cat.Table(tc.table)
			t0 := time.Now()
			h, err := set.Histogram(ctx, t, t.Columns)
			*tc.d += time.Since(t0)
			set.Close()
			if err != nil {
				b.Fatal(err)
			}
			total := 0.0
			for _, x := range h {
				total += x
			}
			if want := float64(units * 5); total != want {
				b.Fatalf("%s: %v rows kept, want %v", tc.table, total, want)
			}
		}
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Milliseconds()) / float64(b.N) }
	b.ReportMetric(float64(rows), "rows")
	b.ReportMetric(ms(groupBy), "groupby-ms")
	b.ReportMetric(ms(perShard), "pershard-ms")
	b.ReportMetric(ms(global), "global-ms")
	b.ReportMetric(float64(perShard)/float64(groupBy), "pershard/groupby")
	b.ReportMetric(float64(global)/float64(groupBy), "global/groupby")
}
