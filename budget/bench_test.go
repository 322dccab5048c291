package budget

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
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
// The test server runs with fsync=off and synchronous_commit=off, while
// the SQLite ledger commits with synchronous=FULL (an fsync per charge):
// "postgres" is PostgreSQL without durability, "postgres-durable" turns
// fsync and synchronous_commit on for its run (ALTER SYSTEM and a reload,
// reset afterwards), so that both engines wait for the disk at each
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
		"postgres": func(b *testing.B, n int) []*Ledger {
			dsn := newPGDatabase(b)
			out := make([]*Ledger, n)
			for i := range out {
				out[i] = openPG(b, openPGPool(b, dsn, 8))
			}
			return out
		},
	}
	for _, name := range []string{"sqlite", "postgres", "postgres-durable"} {
		for _, par := range []bool{false, true} {
			mode := "seq"
			if par {
				mode = "par"
			}
			b.Run(name+"/"+mode, func(b *testing.B) {
				ctx := context.Background()
				kind := name
				if name == "postgres-durable" {
					kind = "postgres"
					durable(b)
				}
				n := 1
				if par {
					n = 3
				}
				ls := open[kind](b, n)
				c := lapCharge("analyst", 1e-9, "adult")
				lim := []Limit{userTable("analyst", "adult", 1), {Scope: ScopeTable, Table: "adult", Epsilon: 1}}
				b.ResetTimer()
				if par {
					var next atomic.Int64
					b.SetParallelism(8)
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
				if kind == "sqlite" {
					sqliteRate[par] = rate
				} else if s := sqliteRate[par]; s > 0 {
					b.ReportMetric(rate/s, "x_sqlite")
				}
			})
		}
	}
}

// durable turns fsync and synchronous_commit on in the test PostgreSQL
// server until the benchmark ends.
func durable(b *testing.B) {
	srv := pg.Get(b)
	ctx := context.Background()
	if err := srv.Exec(ctx, "ALTER SYSTEM SET fsync = on", "ALTER SYSTEM SET synchronous_commit = on",
		"ALTER SYSTEM SET full_page_writes = on", "SELECT pg_reload_conf()"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := srv.Exec(ctx, "ALTER SYSTEM RESET ALL", "SELECT pg_reload_conf()"); err != nil {
			b.Error(err)
		}
	})
	// The reload reaches the backends at their next command.
	time.Sleep(200 * time.Millisecond)
}
