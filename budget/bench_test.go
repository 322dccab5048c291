package budget

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/dpproxy/dpproxy/internal/testdb"
)

func BenchmarkCharge(b *testing.B) {
	ctx := context.Background()
	l, err := Open(ctx, b.TempDir()+"/ledger.sqlite")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	c := lapCharge("analyst", 1e-9, "adult")
	lim := []Limit{userTable("analyst", "adult", 1), {Scope: ScopeTable, Table: "adult", Epsilon: 1}}
	for b.Loop() {
		if _, err := l.Charge(ctx, c, lim); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkChargeRefused(b *testing.B) {
	ctx := context.Background()
	l, err := Open(ctx, b.TempDir()+"/ledger.sqlite")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	c := lapCharge("analyst", 2, "adult")
	lim := []Limit{userTable("analyst", "adult", 1)}
	for b.Loop() {
		if _, err := l.Charge(ctx, c, lim); err == nil {
			b.Fatal("charged")
		}
	}
}

// BenchmarkChargeStates measures charges per second through a SQLite
// ledger file and through a ledger in PostgreSQL, one caller after another
// (seq) and with parallel callers spread over three Ledgers on one ledger,
// as three proxies would be (par: 8×GOMAXPROCS goroutines). Each
// PostgreSQL figure also reports its ratio to SQLite's in the same mode
// (x_sqlite).
//
// The test server runs with fsync=off (and synchronous_commit=off, which
// the ledger's write transactions turn on, see lockHead), while the SQLite
// ledger commits with synchronous=FULL (an fsync per charge): "postgres"
// is PostgreSQL whose commits wait for a WAL write but no fsync;
// "postgres-durable" runs on a second server with PostgreSQL's durable
// defaults (fsync on), so that both engines wait for the disk at each
// commit. Run it alone:
//
//	CI=true go test -run '^$' -bench ChargeStates -benchtime 2s ./budget/
func BenchmarkChargeStates(b *testing.B) {
	sqliteRate := map[bool]float64{}
	open := map[string]func(b *testing.B, n int) []*Ledger{
		"sqlite": func(b *testing.B, n int) []*Ledger {
			path := b.TempDir() + "/ledger.sqlite"
			out := make([]*Ledger, n)
			for i := range out {
				l, err := Open(context.Background(), path)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { l.Close() })
				out[i] = l
			}
			return out
		},
		"postgres":         func(b *testing.B, n int) []*Ledger { return pgLedgers(b, pg, n) },
		"postgres-durable": func(b *testing.B, n int) []*Ledger { return pgLedgers(b, pgDurable, n) },
	}
	for _, name := range []string{"sqlite", "postgres", "postgres-durable"} {
		for _, par := range []bool{false, true} {
			mode := "seq"
			if par {
				mode = "par"
			}
			b.Run(name+"/"+mode, func(b *testing.B) {
				ctx := context.Background()
				n := 1
				if par {
					n = 3
				}
				ls := open[name](b, n)
				c := lapCharge("analyst", 1e-9, "adult")
				lim := []Limit{userTable("analyst", "adult", 1), {Scope: ScopeTable, Table: "adult", Epsilon: 1}}
				b.ResetTimer()
				if par {
					var next atomic.Int64
					b.SetParallelism(parallelism())
					b.RunParallel(func(pb *testing.PB) {
						l := ls[next.Add(1)%int64(len(ls))]
						for pb.Next() {
							if _, err := l.Charge(ctx, c, lim); err != nil {
								b.Error(err)
								return
							}
						}
					})
				} else {
					for b.Loop() {
						if _, err := ls[0].Charge(ctx, c, lim); err != nil {
							b.Fatal(err)
						}
					}
				}
				rate := float64(b.N) / b.Elapsed().Seconds()
				b.ReportMetric(rate, "charges/s")
				if name == "sqlite" {
					sqliteRate[par] = rate
				} else if s := sqliteRate[par]; s > 0 {
					b.ReportMetric(rate/s, "x_sqlite")
				}
			})
		}
	}
}

// parallelism is BenchmarkChargeStates' callers per GOMAXPROCS: 8, or
// DPPROXY_BENCH_PARALLELISM.
func parallelism() int {
	if n, err := strconv.Atoi(os.Getenv("DPPROXY_BENCH_PARALLELISM")); err == nil && n > 0 {
		return n
	}
	return 8
}

// pgLedgers opens n Ledgers, each with a pool of its own (as n proxies),
// on one new database of server.
func pgLedgers(b *testing.B, server *testdb.Lazy, n int) []*Ledger {
	dsn := newPGDatabaseOn(b, server)
	out := make([]*Ledger, n)
	for i := range out {
		out[i] = openPG(b, openPGPool(b, dsn, 8))
	}
	return out
}
