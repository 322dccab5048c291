package sources

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/internal/flight"
)

// backend is one engine's way to count.
type backend interface {
	// dataVersion returns a value that changes whenever the data does;
	// known is false when the engine has no cheap way to tell.
	dataVersion(ctx context.Context) (v string, known bool, err error)
	// count adds t's rows binned by cols into counts (row-major, last
	// column fastest), dropping rows some column's policy drops, and adds
	// the rows it read to rows (progress).
	count(ctx context.Context, t *catalog.Table, cols []*catalog.Column, counts []float64, rows *atomic.Int64) error
	// rowReader is the source's pool and identifier quoting, for reading
	// public tables (public.go).
	rowReader() (*sql.DB, func(string) string)
	close() error
}

// DefaultServerCacheTTL is how long a PostgreSQL or MySQL source reuses a
// histogram without asking its data version, unless the catalog sets
// cache_ttl: their versions (the WAL position, the InnoDB log sequence
// number) move with any write anywhere on the server, so on a busy server a
// histogram would otherwise never be reused. A histogram may then lag
// committed changes by up to this long; cache_ttl: 0 follows every change.
// SQLite's data_version is exact and per file: its default is 0.
const DefaultServerCacheTTL = 30 * time.Second

// DefaultUnknownVersionTTL is how long a histogram of a source whose data
// version cannot be known (and whose catalog sets no cache_ttl) is reused.
const DefaultUnknownVersionTTL = 30 * time.Second

// ProgressInterval is how often a running build logs its progress.
const ProgressInterval = 2 * time.Second

// Set is the opened sources of a catalog. It builds histograms, caches them
// (bounded in bytes, least recently used first) until the source's data
// changes, and is safe for concurrent use: different histograms build at
// once (at most max_connections per source), identical requests share one
// build, and a cached histogram answers while others build.
type Set struct {
	log     *slog.Logger
	sources map[string]*source
	cache   histograms
	// builds merges identical builds (its Joined hook lets tests hold a
	// build until every caller has joined it).
	builds flight.Group[string, []float64]
}

type source struct {
	name  string
	cfg   *catalog.Source
	be    backend
	slots chan struct{} // one token per concurrent build
	// ttl is how long a histogram is reused without asking the version.
	ttl time.Duration
}

// Options configure Open.
type Options struct {
	// DataDir resolves relative SQLite paths.
	DataDir string
	// CacheBytes bounds the histogram cache (0: the catalog's
	// cache.histograms, else catalog.DefaultHistogramCacheBytes).
	CacheBytes int64
	// BoundBytes caps the state of contribution bounding inside SQLite's
	// file scan (0: DefaultBoundBytes); see sqlite_bound.go.
	BoundBytes int64
	// UnitKey is the key of the unit hash when the proxy's state keeps it
	// (a shared PostgreSQL state, package state), so that every proxy
	// bounds contributions to the same rows; "" reads, or creates,
	// DataDir's UnitKeyFile.
	UnitKey string
	Logger  *slog.Logger
}

// Open connects to every source of the catalog. Errors name the source,
// never its DSN.
func Open(ctx context.Context, cat *catalog.Catalog, opt Options) (*Set, error) {
	log := opt.Logger
	if log == nil {
		log = slog.Default()
	}
	limit := opt.CacheBytes
	if limit == 0 {
		limit = cat.Cache.HistogramBytes()
	}
	s := &Set{log: log.With("component", "sources"), sources: map[string]*source{}, cache: newHistograms(limit)}
	names := make([]string, 0, len(cat.Sources))
	for name := range cat.Sources {
		names = append(names, name)
	}
	sort.Strings(names)
	key := opt.UnitKey
	for _, t := range cat.Tables {
		if t.Unit != nil && key == "" {
			var err error
			if key, err = loadUnitKey(opt.DataDir); err != nil {
				return nil, err
			}
			break
		}
	}
	for _, name := range names {
		src, err := open(ctx, cat.Sources[name], opt, key)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("source %s (%s): %w", name, cat.Sources[name].Driver, err)
		}
		s.sources[name] = src
	}
	return s, nil
}

func open(ctx context.Context, cfg *catalog.Source, opt Options, key string) (*source, error) {
	src := &source{name: cfg.Name, cfg: cfg, ttl: cfg.CacheTTL}
	if !cfg.CacheTTLSet && cfg.Driver != catalog.DriverSQLite {
		src.ttl = DefaultServerCacheTTL
	}
	var conns int
	switch cfg.Driver {
	case catalog.DriverSQLite:
		be, err := openSQLite(ctx, cfg, opt.DataDir)
		if err != nil {
			return nil, err
		}
		be.key = key
		be.boundBytes = opt.BoundBytes
		src.be, conns = be, sqliteDefaultConnections
	case catalog.DriverPostgres, catalog.DriverMySQL:
		d, err := dsn(cfg)
		if err != nil {
			return nil, err
		}
		var srv *server
		if cfg.Driver == catalog.DriverPostgres {
			srv, err = openPostgres(ctx, d, cfg.MaxConnections)
			conns = pgDefaultConnections
		} else {
			srv, err = openMySQL(ctx, d, cfg.MaxConnections)
			conns = mysqlDefaultConnections
		}
		if err != nil {
			return nil, err
		}
		srv.key = key
		srv.version = cfg.VersionQuery
		if srv.version == "" {
			srv.version = srv.d.defaultVersion()
		}
		src.be = srv
	case catalog.DriverClickHouse:
		d, err := dsn(cfg)
		if err != nil {
			return nil, err
		}
		ch, err := openClickHouse(ctx, d, cfg.MaxConnections)
		if err != nil {
			return nil, err
		}
		ch.key, ch.version = key, cfg.VersionQuery
		src.be, conns = ch, chDefaultConnections
	default:
		return nil, fmt.Errorf("unsupported driver %q", cfg.Driver)
	}
	if cfg.MaxConnections > 0 {
		conns = cfg.MaxConnections
	}
	src.slots = make(chan struct{}, conns)
	return src, nil
}

// Close releases every source's connections.
func (s *Set) Close() error {
	var errs []error
	for _, src := range s.sources {
		errs = append(errs, src.be.close())
	}
	return errors.Join(errs...)
}

// Histogram returns the counts of t's rows over the product domain of cols
// (row-major, last column fastest). Rows whose value in some column is
// dropped by that column's policy are not counted. The slice is the
// caller's.
func (s *Set) Histogram(ctx context.Context, t *catalog.Table, cols []*catalog.Column) ([]float64, error) {
	src := s.sources[t.Source]
	if src == nil {
		return nil, fmt.Errorf("table %s: unknown source %q", t.Name, t.Source)
	}
	tk := tableKey(t)
	ck := columnKeys(cols)
	key := tk + "\x00" + strings.Join(ck, "\x00")
	now := time.Now()
	young := func(e *entry) bool { return now.Sub(e.built) < src.ttl }
	if e := s.cache.get(key); e != nil && young(e) {
		return strip(e.counts, cols), nil
	}
	// Truncation per cell (max_groups, max_rows_per_group) depends on the
	// columns binned: such a histogram is never summed from another.
	sums := !t.Unit.CellBounded()
	if e := s.cache.superset(tk, ck, young); sums && e != nil {
		return s.marginal(e, key, tk, ck, cols), nil
	}
	version, known, err := src.be.dataVersion(ctx)
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", t.Name, err)
	}
	fresh := func(e *entry) bool {
		if young(e) {
			return true
		}
		if known {
			return e.version == version && e.known
		}
		ttl := src.ttl
		if ttl == 0 {
			ttl = DefaultUnknownVersionTTL
		}
		return !e.known && now.Sub(e.built) < ttl
	}
	if e := s.cache.get(key); e != nil && fresh(e) {
		return strip(e.counts, cols), nil
	}
	// A cached histogram over more columns of the same table and version
	// holds this one: sum it down in memory, no round trip.
	if e := s.cache.superset(tk, ck, fresh); sums && e != nil {
		return s.marginal(e, key, tk, ck, cols), nil
	}
	internal, err := s.build(ctx, src, t, cols, key, tk, ck, version, known)
	if err != nil {
		return nil, err
	}
	return strip(internal, cols), nil
}

// marginal sums cached entry e down to cols and caches the result (with
// e's version and age).
func (s *Set) marginal(e *entry, key, tk string, ck []string, cols []*catalog.Column) []float64 {
	counts := marginal(e.counts, e.cols, e.sizes, ck, internalSizes(cols))
	s.cache.put(key, &entry{table: tk, cols: ck, sizes: internalSizes(cols), counts: counts, version: e.version, known: e.known, built: e.built})
	return strip(counts, cols)
}

// build counts the histogram once for every caller asking for it at the
// same data version. The build runs on its own context, cancelled when the
// last caller waiting for it gives up, so one client's disconnect does not
// fail the others, and nobody's disconnect leaves a query running.
func (s *Set) build(ctx context.Context, src *source, t *catalog.Table, cols []*catalog.Column, key, tk string, ck []string, version string, known bool) ([]float64, error) {
	counts, err := s.builds.Detached(ctx, key+"\x00"+version, func(bctx context.Context) ([]float64, error) {
		counts, err := s.run(bctx, src, t, cols)
		if err == nil {
			s.cache.put(key, &entry{table: tk, cols: ck, sizes: internalSizes(cols), counts: counts, version: version, known: known, built: time.Now()})
		}
		return counts, err
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("table %s: histogram: %w", t.Name, err)
	}
	return counts, nil
}

// run takes one of the source's build slots and counts, logging progress
// while it takes long.
func (s *Set) run(ctx context.Context, src *source, t *catalog.Table, cols []*catalog.Column) ([]float64, error) {
	select {
	case src.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-src.slots }()
	n := cells(cols)
	counts := make([]float64, n)
	var rows atomic.Int64
	start := time.Now()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(ProgressInterval)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				s.log.Info("histogram build in progress", "table", t.Name, "source", src.name, "columns", len(cols), "cells", n,
					"rows_read", rows.Load(), "elapsed", time.Since(start).Round(time.Millisecond))
			}
		}
	}()
	if err := src.be.count(ctx, t, cols, counts, &rows); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	if d := time.Since(start); d >= ProgressInterval {
		s.log.Info("histogram built", "table", t.Name, "source", src.name, "cells", n, "rows_read", rows.Load(), "elapsed", d.Round(time.Millisecond))
	}
	return counts, nil
}

// tableKey identifies a table's row source: the catalog table, its source
// and its table in the source (two catalog tables over different source
// tables never share histograms).
func tableKey(t *catalog.Table) string {
	return t.Name + "\x00" + t.Source + "\x00" + sourceTable(t) + "\x00" + t.Unit.String()
}

// sourceTable is t's table in the source: source_table, by default the
// table's own name.
func sourceTable(t *catalog.Table) string {
	if t.SourceTable == "" {
		return t.Name
	}
	return t.SourceTable
}

// columnKeys holds each column's whole definition (domain, bins, policies),
// not just its name: a histogram binned for another definition of the
// column is another histogram.
func columnKeys(cols []*catalog.Column) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = fmt.Sprintf("%+v", *c)
	}
	return out
}

// DataVersion reports the data version of t's source, the value its
// cached histograms are keyed by (see dataVersion); known is false when
// the source cannot tell (its histograms are then reused for a time
// instead). The engine keys stored measurements by it.
func (s *Set) DataVersion(ctx context.Context, t *catalog.Table) (version string, known bool, err error) {
	src := s.sources[t.Source]
	if src == nil {
		return "", false, fmt.Errorf("table %s: unknown source %q", t.Name, t.Source)
	}
	version, known, err = src.be.dataVersion(ctx)
	if err != nil {
		return "", false, fmt.Errorf("table %s: %w", t.Name, err)
	}
	return version, known, nil
}
