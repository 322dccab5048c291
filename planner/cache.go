package planner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/internal/cache"
	"github.com/dpproxy/dpproxy/internal/flight"
)

// Planner chooses strategies and remembers what it optimised. It caches
// optimised per-column strategies by workload shape — the noise family and
// the column's effective Gram matrix (its hash, which includes the size) —
// and whole plans by workload fingerprint, so a repeated dashboard query
// plans in microseconds. A Planner is safe for concurrent use; the package
// holds no mutable global state. Its caches change how fast it plans, never
// what: the optimisers stop by counted work (effort.go), so a plan is the
// same from a warm Planner, a cold one and the package-level Choose.
type Planner struct {
	// MaxBytes bounds the memory the cached columns and plans hold
	// together, estimated from their matrices; the least recently used go
	// first. Zero means catalog.DefaultPlanCacheBytes.
	MaxBytes int64

	// mu guards the creation of entries, at first use: MaxBytes may be set
	// after New.
	mu sync.Mutex
	// entries holds both caches in one LRU, so that one bound covers
	// them: optimised columns under "c"+column key, plans under
	// "p"+fingerprint.
	entries *cache.LRU[string, cached]
	noCache bool
	// optimising merges concurrent optimisations of one column key.
	optimising flight.Group[string, *columnEntry]
	// optimiser replaces runOptimiser in tests (nil: runOptimiser).
	optimiser func(context.Context, Gram, catalog.NoiseFamily, float64) (*colOpt, optInfo, error)
}

// cached is one entry of the Planner's cache: an optimised column or a
// plan.
type cached struct {
	column *columnEntry
	plan   *Plan
}

// entryBytes is what any cached entry costs besides its matrices (its key,
// the entry, the cache's bookkeeping), so that entries without matrices
// (a column too small to optimise) are bounded too.
const entryBytes = 256

// errOptimiserPanicked is what requests waiting on a column get when the
// optimiser computing it panicked.
var errOptimiserPanicked = errors.New("planner: the strategy optimiser failed")

// New returns a Planner with caches.
func New() *Planner { return &Planner{} }

// columnEntry is an optimiser's outcome for one column key.
type columnEntry struct {
	opt   *colOpt
	extra optInfo
}

// optInfo is what an optimiser reports besides the strategy.
type optInfo struct {
	real    float64 // objective of the real-valued optimum (Δ = 1)
	cert    *GaussCertificate
	seconds float64
	work    float64 // estimated work spent (a cache hit reports it too)
}

// optimised returns the optimised strategy for Gram g under the noise
// family within the given work, computing it (once, even under concurrent
// requests) when it is not cached. It returns nil when the column is too
// small for optimisation to help. The result depends on (g, fam, work)
// alone, which is the cache key. A request waits for another computing the
// same key only until its own ctx is done, and computes the key itself if
// that other request was cancelled.
func (pl *Planner) optimised(ctx context.Context, g Gram, fam catalog.NoiseFamily, work float64) (*colOpt, optInfo, error) {
	key := fmt.Sprintf("%s|%g|%s", fam, work, g.Key())
	run := runOptimiser
	if pl.optimiser != nil {
		run = pl.optimiser
	}
	if pl.noCache {
		return run(ctx, g, fam, work)
	}
	for {
		if err := stopped(ctx); err != nil {
			return nil, optInfo{}, err
		}
		if e := pl.cachedColumn(key); e != nil {
			return e.opt, e.hit(), nil
		}
		e, err, joined := pl.optimising.Do(ctx, key, func(ctx context.Context) (*columnEntry, error) {
			// An optimisation of key that ended since the lookup above
			// cached its outcome: look again, now that this one is key's.
			if e := pl.cachedColumn(key); e != nil {
				return &columnEntry{opt: e.opt, extra: e.hit()}, nil
			}
			opt, extra, err := run(ctx, g, fam, work)
			e := &columnEntry{opt: opt, extra: extra}
			if err == nil {
				pl.cacheColumn(key, e) // before the waiters wake
			}
			return e, err
		})
		if !joined {
			return e.opt, e.extra, err
		}
		switch {
		case ctx.Err() != nil:
			return nil, optInfo{}, stopped(ctx)
		case errors.Is(err, flight.ErrPanicked):
			return nil, optInfo{}, errOptimiserPanicked
		case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
			continue // the request computing it was cancelled, not this one
		}
		return e.opt, e.hit(), err
	}
}

// hit is what a request answered by e's optimisation reports: a cache hit
// costs nothing.
func (e *columnEntry) hit() optInfo {
	info := e.extra
	info.seconds = 0
	return info
}

// lru is the Planner's cache, made at its first use.
func (pl *Planner) lru() *cache.LRU[string, cached] {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.entries == nil {
		limit := pl.MaxBytes
		if limit <= 0 {
			limit = catalog.DefaultPlanCacheBytes
		}
		pl.entries = cache.New[string, cached](limit)
	}
	return pl.entries
}

// cachedColumn returns the cached outcome of column key, or nil.
func (pl *Planner) cachedColumn(key string) *columnEntry {
	c, _ := pl.lru().Get("c" + key)
	return c.column
}

// cacheColumn caches a successful optimisation of column key, unless one
// is cached already; least recently used entries go past MaxBytes.
func (pl *Planner) cacheColumn(key string, e *columnEntry) {
	pl.lru().Add("c"+key, cached{column: e}, columnBytes(e))
}

// columnBytes estimates what a cached column holds: an optimised column
// keeps dense n × n matrices, A, A⁺ and the Gram, or with classes A, A⁺
// and an n × r factor.
func columnBytes(e *columnEntry) int64 {
	if e.opt == nil {
		return entryBytes
	}
	n := int64(e.opt.n)
	if e.opt.classOf != nil {
		m, _ := e.opt.cs.A.Dims()
		_, r := e.opt.cs.gramFactor.Dims()
		return 8*(2*int64(m)*n+n*int64(r)+2*n) + entryBytes
	}
	return 3*8*n*n + 8*n + entryBytes
}

// planBytes estimates what a cached plan holds: its matrices.
func planBytes(p *Plan) int64 {
	n := int64(2 * entryBytes)
	dense := func(m interface{ Dims() (int, int) }) int64 {
		if m == nil {
			return 0
		}
		r, c := m.Dims()
		return int64(8 * r * c)
	}
	for _, f := range p.Factors {
		if f == nil {
			continue
		}
		if f.A != nil {
			n += dense(f.A)
		}
		n += 8 * int64(len(f.Classes))
		if f.Pinv != nil {
			n += dense(f.Pinv)
		}
		if f.Gram != nil {
			n += dense(f.Gram)
		}
		if f.gramFactor != nil {
			n += dense(f.gramFactor)
		}
	}
	for _, s := range p.Scale {
		n += int64(8 * len(s))
	}
	return n
}

// runOptimiser optimises a strategy for g within the given work: the
// certified convex optimum for Gaussian noise, p-Identity for Laplace.
func runOptimiser(ctx context.Context, g Gram, fam catalog.NoiseFamily, work float64) (*colOpt, optInfo, error) {
	if lr, ok := g.(*LowRankGram); ok && lr.Size > compressAbove {
		if classOf, r := gramClasses(lr); r < lr.Size {
			o, info, err := runOptimiser(ctx, reduceGram(lr, classOf, r), fam, work)
			if err != nil || o == nil {
				return nil, info, err
			}
			cs, err := o.strategy()
			if err != nil {
				return nil, info, err
			}
			x, err := expandOpt(cs, classOf, r)
			if x == nil || err != nil {
				return nil, info, err
			}
			return x, info, nil
		}
	}
	start := time.Now()
	if fam == catalog.Gaussian {
		r, err := optimizeGauss(ctx, g, work)
		if err != nil || r == nil {
			return nil, optInfo{}, err
		}
		cert := r.cert
		return optFromStrategy(r.strategy), optInfo{real: cert.Dual, cert: &cert, seconds: time.Since(start).Seconds(), work: r.work}, nil
	}
	r, err := optimizeLaplace(ctx, g, work)
	if err != nil || r == nil {
		return nil, optInfo{}, err
	}
	return optFromStrategy(r.strategy), optInfo{real: r.Real, seconds: time.Since(start).Seconds(), work: r.Work}, nil
}

// cachedPlan returns a copy of a cached plan for the fingerprint.
func (pl *Planner) cachedPlan(key string) *Plan {
	if pl.noCache {
		return nil
	}
	c, _ := pl.lru().Get("p" + key)
	if c.plan == nil {
		return nil
	}
	cp := *c.plan
	cp.Candidates = append([]Candidate(nil), c.plan.Candidates...)
	return &cp
}

// storePlan caches a copy of p for the fingerprint, replacing any plan
// there; least recently used entries go past MaxBytes.
func (pl *Planner) storePlan(key string, p *Plan) {
	if pl.noCache {
		return
	}
	cp := *p
	pl.lru().Put("p"+key, cached{plan: &cp}, planBytes(p))
}

// fingerprint identifies a workload's structure and the options: equal
// fingerprints get equal plans.
func fingerprint(w *compile.Workload, opt Options) string {
	var rows [][]float64
	sizes := make([]float64, 0, len(w.Columns))
	for _, s := range w.Sizes() {
		sizes = append(sizes, float64(s))
	}
	rows = append(rows, sizes, []float64{opt.Epsilon, opt.Rho})
	for _, q := range w.Queries {
		g := []float64{-1}
		for _, j := range q.GroupCols {
			g = append(g, float64(j))
		}
		rows = append(rows, g)
		for _, agg := range q.Aggregates {
			rows = append(rows, []float64{-2, float64(len(agg))})
			for _, t := range agg {
				rows = append(rows, []float64{-3, t.Coef})
				for _, f := range t.Factors {
					if f == nil {
						rows = append(rows, nil)
					} else {
						rows = append(rows, f)
					}
				}
			}
		}
	}
	// The objective, the cell limit and the answers' items (which weight
	// the objective) change the plan.
	rows = append(rows, []float64{-4, float64(opt.Objective), opt.maxCells()})
	for _, q := range w.Queries {
		rows = append(rows, []float64{-6, float64(len(q.ExprGroups))})
		for _, it := range q.Items {
			if it.Kind == compile.ItemAgg || it.Kind == compile.ItemRatio || it.Kind == compile.ItemVariance {
				rows = append(rows, []float64{-5, float64(it.Kind), float64(it.Agg), float64(it.Den), float64(it.Sq), it.Lo, it.Hi})
			}
		}
	}
	names := string(opt.Noise)
	for _, c := range w.Columns {
		names += "|" + c.Name
	}
	return names + "|" + hashFloats(len(rows), rows, nil, nil)
}
