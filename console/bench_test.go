package console

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/engine"
)

// benchEntries is the size of the benchmarks' ledger.
const benchEntries = 100_000

// filledLedger is set once bigLedger has run (TestMain must not fill it).
var filledLedger bool

// bigLedger is a ledger of benchEntries entries (20 users on the test
// catalog's two tables; every fifth entry a zero-cost reuse), filled once per
// test binary through the real Charge and Record calls, on /dev/shm when
// there is one (each charge is an fsync'ed transaction).
var bigLedger = sync.OnceValues(func() (string, error) {
	filledLedger = true
	ctx := context.Background()
	dir, err := os.MkdirTemp(shmDir(), "dpproxy-console-bench-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "ledger.sqlite")
	l, err := budget.Open(ctx, path)
	if err != nil {
		return "", err
	}
	defer l.Close()
	cat, err := catalog.Parse("bench.yaml", []byte(testCatalog))
	if err != nil {
		return "", err
	}
	if _, err := l.RecordLimits(ctx, engine.Limits(cat), nil); err != nil {
		return "", err
	}
	start := time.Now()
	for i := 0; i < benchEntries-4; i++ {
		c := budget.Charge{User: fmt.Sprintf("u%02d", i%20), ConnID: uint32(i), Tables: []string{"orders"},
			Mechanism: "laplace", Strategy: "workload", Cost: budget.Cost{Epsilon: 1e-5}}
		if i%3 == 0 {
			c.Tables, c.Mechanism, c.Cost = []string{"visits"}, "gaussian", budget.Cost{Rho: 1e-7}
		}
		if i%5 == 4 {
			c.Cost = budget.Cost{}
			_, err = l.Record(ctx, budget.KindReuse, c)
		} else {
			_, err = l.Charge(ctx, c, nil)
		}
		if err != nil {
			return "", err
		}
	}
	fmt.Fprintf(os.Stderr, "filled a ledger of %d entries in %v (%s)\n", benchEntries, time.Since(start).Round(time.Millisecond), path)
	return path, nil
})

// TestMain removes the benchmarks' ledger, and stops the PostgreSQL of the
// shared-session tests if they started one.
func TestMain(m *testing.M) {
	code := m.Run()
	pg.Stop()
	if filledLedger {
		if path, err := bigLedger(); err == nil {
			os.RemoveAll(filepath.Dir(path))
		}
	}
	os.Exit(code)
}

func shmDir() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

// BenchmarkConsole times the console's pages and API over a ledger of 10⁵
// entries, against baselines in the same run: reading every entry (what
// `dpproxy audit list` does), a raw SQL COUNT(*) over the ledger file, and
// the checks of `dpproxy audit verify`. The benchmark's ledger is opened
// read-only, except by the "growing" case's own writer.
//
//	go test -run '^$' -bench Console -benchtime 20x ./console
func BenchmarkConsole(b *testing.B) {
	ctx := context.Background()
	path, err := bigLedger()
	if err != nil {
		b.Fatal(err)
	}
	l, err := budget.OpenReadOnly(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	cat, err := catalog.Parse("bench.yaml", []byte(testCatalog+"\n  u07: {password: u07, role: analyst}\n"))
	if err != nil {
		b.Fatal(err)
	}
	srv, err := New(Config{Catalog: func() *catalog.Catalog { return cat }, Ledger: l, Logger: testLogger()})
	if err != nil {
		b.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()

	b.Run("baseline/audit-list-all-entries", func(b *testing.B) {
		for b.Loop() {
			es, err := l.Entries(ctx, budget.Filter{})
			if err != nil || len(es) < benchEntries {
				b.Fatalf("%d entries, %v", len(es), err)
			}
		}
	})
	b.Run("baseline/sql-count", func(b *testing.B) {
		for b.Loop() {
			var n int
			if err := db.QueryRow("SELECT COUNT(*) FROM entries").Scan(&n); err != nil || n < benchEntries {
				b.Fatalf("%d, %v", n, err)
			}
		}
	})
	b.Run("baseline/audit-verify", func(b *testing.B) {
		for b.Loop() {
			if err := l.Verify(ctx); err != nil {
				b.Fatal(err)
			}
			es, err := l.Entries(ctx, budget.Filter{})
			if err != nil {
				b.Fatal(err)
			}
			if err := budget.CheckSpending(es, engine.Limits(cat)); err != nil {
				b.Fatal(err)
			}
		}
	})
	get := func(b *testing.B, srv *Server, user, path string) {
		pw := passwords[user]
		if pw == "" {
			pw = user
		}
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.SetBasicAuth(user, pw)
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("%s: %d %s", path, w.Code, w.Body.String())
		}
	}
	// A plot on a console that has just started: the series is summed
	// from the whole ledger.
	b.Run("plot/orders-epsilon-cold", func(b *testing.B) {
		for b.Loop() {
			fresh, err := New(Config{Catalog: func() *catalog.Catalog { return cat }, Ledger: l, Logger: testLogger()})
			if err != nil {
				b.Fatal(err)
			}
			get(b, fresh, "audrey", "/plot/orders/epsilon.svg")
		}
	})
	// A plot while a proxy charges: one new entry before each request
	// (the charge, an fsync'ed transaction, is timed too).
	b.Run("plot/orders-epsilon-growing", func(b *testing.B) {
		w, err := budget.Open(ctx, path)
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close()
		get(b, srv, "audrey", "/plot/orders/epsilon.svg")
		for b.Loop() {
			if _, err := w.Charge(ctx, budget.Charge{User: "u01", Tables: []string{"orders"}, Mechanism: "laplace",
				Strategy: "workload", Cost: budget.Cost{Epsilon: 1e-5}}, nil); err != nil {
				b.Fatal(err)
			}
			get(b, srv, "audrey", "/plot/orders/epsilon.svg")
		}
	})
	// The rest on a warm console: what a page costs when it is viewed again.
	for _, tc := range []struct{ name, user, path string }{
		{"api/budgets", "audrey", "/api/budgets"},
		{"api/budgets-analyst", "u07", "/api/budgets"},
		{"api/ledger-first-page", "audrey", "/api/ledger"},
		{"api/ledger-deep-page", "audrey", "/api/ledger?before=50000"},
		{"api/ledger-table-kind", "audrey", "/api/ledger?table=visits&kind=reuse"},
		{"api/ledger-analyst", "u07", "/api/ledger"},
		{"api/spending", "audrey", "/api/spending?table=orders"},
		{"api/verify", "audrey", "/api/verify"},
		{"page/budgets", "audrey", "/"},
		{"page/ledger", "audrey", "/ledger"},
		{"page/ledger-filtered", "audrey", "/ledger?table=orders&kind=charge&user=u03"},
		{"plot/orders-epsilon", "audrey", "/plot/orders/epsilon.svg"},
		{"plot/visits-rho", "audrey", "/plot/visits/rho.svg"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			get(b, srv, tc.user, tc.path)
			for b.Loop() {
				get(b, srv, tc.user, tc.path)
			}
		})
	}
}
