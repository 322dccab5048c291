package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/demo"
	"github.com/dpproxy/dpproxy/internal/heappeak"
	"github.com/dpproxy/dpproxy/internal/testdb"
	"github.com/dpproxy/dpproxy/sources"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
)

// benchColumns are the histogram's columns: 74 × 16 × 99 = 117,216 cells.
var benchColumns = []string{"age", "education", "hours_per_week"}

// benchSource: `dpproxy-bench source --rows N [--data-dir DIR]
// [--start-servers] [--postgres DSN] [--mysql DSN]`. It generates N rows of
// the demo table (an SQLite file under DIR, kept for the next run), copies
// them into each server given (or started), and for every source prints the
// time of a cold histogram of age × education × hours_per_week (a fresh
// source set: nothing cached in dpproxy), a warm one (another fresh set:
// the engine's own caches warm), a repeat (the same set: cached, only the
// data version asked), the engine's own exact GROUP BY of the same columns
// in the same run as the baseline, and the peak Go heap of the cold build
// per cell. A DSN must be able to create the table dpproxy_bench_adult.
func benchSource(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("source", flag.ContinueOnError)
	rows := fs.Int("rows", 1_000_000, "rows to generate")
	dataDir := fs.String("data-dir", filepath.Join(defaultDataDir(), "bench"), "directory for the generated SQLite file")
	start := fs.Bool("start-servers", false, "start a local PostgreSQL and MariaDB (Debian packages) in temporary directories")
	pgDSN := fs.String("postgres", "", "a PostgreSQL DSN (pgx) to benchmark")
	myDSN := fs.String("mysql", "", "a MySQL/MariaDB DSN (go-sql-driver) to benchmark")
	if err := fs.Parse(args); err != nil {
		return err
	}
	path := filepath.Join(*dataDir, fmt.Sprintf("adult-%d.sqlite", *rows))
	t0 := time.Now()
	if err := demo.Generate(ctx, path, *rows); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d rows of adult in %s (ready in %.1fs); histogram over %s (%d cells)\n",
		*rows, path, time.Since(t0).Seconds(), strings.Join(benchColumns, " × "), 74*16*99)
	if *start {
		for _, s := range []func(context.Context) (*testdb.Server, error){testdb.StartPostgres, testdb.StartMariaDB} {
			srv, err := s(ctx)
			if err != nil {
				return err
			}
			defer srv.Stop()
			if srv.Kind == "postgres" && *pgDSN == "" {
				*pgDSN = srv.AdminDSN
			}
			if srv.Kind == "mariadb" && *myDSN == "" {
				*myDSN = strings.Replace(srv.AdminDSN, "?multiStatements=true", "mysql?allowAllFiles=true", 1)
			}
		}
	}
	type target struct{ name, driver, sqlDriver, dsn, table string }
	targets := []target{{"sqlite", catalog.DriverSQLite, "sqlite", path, "adult"}}
	if *pgDSN != "" {
		targets = append(targets, target{"postgres", catalog.DriverPostgres, "pgx", *pgDSN, "dpproxy_bench_adult"})
	}
	if *myDSN != "" {
		targets = append(targets, target{"mysql", catalog.DriverMySQL, "mysql", *myDSN, "dpproxy_bench_adult"})
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "source\tcold\twarm\trepeat\tengine GROUP BY\twarm ÷ GROUP BY\tpeak heap/cell")
	baselines := map[string]time.Duration{}
	colds := map[string]time.Duration{}
	for _, tg := range targets {
		if tg.driver != catalog.DriverSQLite {
			if err := ensureBenchTable(ctx, tg.sqlDriver, tg.dsn, path, *rows); err != nil {
				return fmt.Errorf("%s: %w", tg.name, err)
			}
		}
		res, err := benchOne(ctx, tg.driver, tg.sqlDriver, tg.dsn, tg.table)
		if err != nil {
			return fmt.Errorf("%s: %w", tg.name, err)
		}
		baselines[tg.name], colds[tg.name] = res.baseline, res.cold
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.2f\t%.1f B\n", tg.name, secs(res.cold), secs(res.warm), secs(res.repeat),
			secs(res.baseline), res.warm.Seconds()/res.baseline.Seconds(), res.peakPerCell)
	}
	tw.Flush()
	if b, ok := baselines["mysql"]; ok {
		fmt.Fprintf(stdout, "sqlite cold histogram ÷ MySQL/MariaDB GROUP BY: %.2f\n", colds["sqlite"].Seconds()/b.Seconds())
	}
	return nil
}

func secs(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000)
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

type benchResult struct {
	cold, warm, repeat, baseline time.Duration
	peakPerCell                  float64
}

func benchOne(ctx context.Context, driver, sqlDriver, dsn, table string) (benchResult, error) {
	var res benchResult
	cat := catalog.Demo()
	src := &catalog.Source{Name: "bench", Driver: driver}
	if driver == catalog.DriverSQLite {
		src.Path = dsn
	} else {
		src.DSN = dsn
	}
	cat.Sources = map[string]*catalog.Source{"bench": src}
	t := cat.Table("adult")
	t.Source, t.SourceTable = "bench", table
	var cols []*catalog.Column
	for _, c := range benchColumns {
		cols = append(cols, t.Column(c))
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	build := func(set *sources.Set) (time.Duration, error) {
		start := time.Now()
		_, err := set.Histogram(ctx, t, cols)
		return time.Since(start), err
	}
	first, err := sources.Open(ctx, cat, sources.Options{Logger: quiet})
	if err != nil {
		return res, err
	}
	defer first.Close()
	var berr error
	peak := heappeak.During(func() { res.cold, berr = build(first) })
	if berr != nil {
		return res, berr
	}
	res.peakPerCell = float64(peak) / float64(74*16*99)
	if res.repeat, err = build(first); err != nil {
		return res, err
	}
	second, err := sources.Open(ctx, cat, sources.Options{Logger: quiet})
	if err != nil {
		return res, err
	}
	defer second.Close()
	if res.warm, err = build(second); err != nil {
		return res, err
	}
	// The engine's own exact GROUP BY of the same columns, twice; the
	// faster run counts (caches as warm as for the histogram).
	db, err := sql.Open(sqlDriver, dsn)
	if err != nil {
		return res, err
	}
	defer db.Close()
	q := fmt.Sprintf("SELECT %s, COUNT(*) FROM %s GROUP BY %s", strings.Join(benchColumns, ", "), table, strings.Join(benchColumns, ", "))
	for i := 0; i < 2; i++ {
		start := time.Now()
		rows, err := db.QueryContext(ctx, q)
		if err != nil {
			return res, err
		}
		var a, h, n int64
		var e string
		for rows.Next() {
			if err := rows.Scan(&a, &e, &h, &n); err != nil {
				rows.Close()
				return res, err
			}
		}
		if err := rows.Close(); err != nil {
			return res, err
		}
		if d := time.Since(start); i == 0 || d < res.baseline {
			res.baseline = d
		}
	}
	return res, nil
}

// ensureBenchTable copies the generated rows into dpproxy_bench_adult
// unless it already holds that many.
func ensureBenchTable(ctx context.Context, sqlDriver, dsn, sqlitePath string, rows int) error {
	db, err := sql.Open(sqlDriver, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM dpproxy_bench_adult").Scan(&n); err == nil && n == rows {
		return nil
	}
	db.ExecContext(ctx, "DROP TABLE IF EXISTS dpproxy_bench_adult")
	from, err := sql.Open("sqlite", "file:"+sqlitePath+"?mode=ro")
	if err != nil {
		return err
	}
	defer from.Close()
	start := time.Now()
	if _, err := testdb.CopyAdult(ctx, from, sqlDriver, db, "dpproxy_bench_adult"); err != nil {
		return err
	}
	if sqlDriver == "pgx" {
		if _, err := db.ExecContext(ctx, "VACUUM ANALYZE dpproxy_bench_adult"); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "loaded %d rows into %s in %.1fs\n", rows, sqlDriver, time.Since(start).Seconds())
	return nil
}
