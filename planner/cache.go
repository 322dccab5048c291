package planner

import (
	"errors"
	"sync"
	"time"

	"github.com/dpproxy/dpproxy/catalog"
)

// Planner chooses strategies and remembers what it optimised. It caches
// optimised per-column strategies by workload shape — the noise family and
// the column's effective Gram matrix (its hash, which includes the size) —
// and whole plans by workload fingerprint, so a repeated dashboard query
// plans in microseconds. A Planner is safe for concurrent use; the package
// holds no mutable global state.
type Planner struct {
	// Budget bounds the time one Choose may spend optimising per-column
	// strategies (the optimisers stop at their deadline with the best
	// strategy so far). Zero means DefaultBudget.
	Budget time.Duration
	// ColumnFloor is the least time one column's optimiser is given when
	// Budget allows it (zero: 50 ms, 150 ms from 128 cells). A slow
	// machine, or the race detector, may need more for the optimiser to
	// beat the enumerated strategies; the plan is never worse for it.
	ColumnFloor time.Duration
	// MaxEntries bounds each cache (oldest entries are evicted first).
	// Zero means 256.
	MaxEntries int
	// MaxBytes bounds the memory both caches hold together, estimated from
	// their matrices (oldest entries are evicted first). Zero means
	// catalog.DefaultPlanCacheBytes.
	MaxBytes int64

	mu       sync.Mutex
	columns  map[string]*columnEntry
	colFIFO  []string
	plans    map[string]*Plan
	planFIFO []string
	bytes    map[string]int64 // per cached key ("c"+column key or "p"+plan key)
	used     int64
	noCache  bool
	// optimiser replaces runOptimiser in tests (nil: runOptimiser).
	optimiser func(Gram, catalog.NoiseFamily, time.Time) (*colOpt, optInfo, error)
}

// errOptimiserPanicked is what requests waiting on a column get when the
// optimiser computing it panicked.
var errOptimiserPanicked = errors.New("planner: the strategy optimiser failed")

// DefaultBudget is the optimisation budget of a Planner with Budget unset.
const DefaultBudget = 300 * time.Millisecond

// New returns a Planner with caches.
func New() *Planner { return &Planner{} }

type columnEntry struct {
	ready chan struct{}
	opt   *colOpt
	extra optInfo
	err   error
}

// optInfo is what an optimiser reports besides the strategy.
type optInfo struct {
	real    float64 // objective of the real-valued optimum (Δ = 1)
	cert    *GaussCertificate
	seconds float64
}

func (pl *Planner) budget() time.Duration {
	if pl.Budget > 0 {
		return pl.Budget
	}
	return DefaultBudget
}

func (pl *Planner) maxEntries() int {
	if pl.MaxEntries > 0 {
		return pl.MaxEntries
	}
	return 256
}

// optimised returns the optimised strategy for Gram g under the noise
// family, computing it (once, even under concurrent requests) with the
// given deadline when it is not cached. It returns nil when the column is
// too small for optimisation to help.
func (pl *Planner) optimised(g Gram, fam catalog.NoiseFamily, deadline time.Time) (*colOpt, optInfo, error) {
	key := string(fam) + "|" + g.Key()
	if pl.noCache {
		return runOptimiser(g, fam, deadline)
	}
	pl.mu.Lock()
	if pl.columns == nil {
		pl.columns = map[string]*columnEntry{}
	}
	if e, ok := pl.columns[key]; ok {
		pl.mu.Unlock()
		<-e.ready
		info := e.extra
		info.seconds = 0 // a cache hit costs nothing
		return e.opt, info, e.err
	}
	e := &columnEntry{ready: make(chan struct{})}
	pl.columns[key] = e
	pl.colFIFO = append(pl.colFIFO, key)
	if len(pl.colFIFO) > pl.maxEntries() {
		pl.forget("c" + pl.colFIFO[0])
		delete(pl.columns, pl.colFIFO[0])
		pl.colFIFO = pl.colFIFO[1:]
	}
	pl.mu.Unlock()
	// Waiters block on e.ready: release them however the optimiser ends.
	// A panic reaches this caller; the waiters see an error, and the entry
	// is dropped so that a later request runs the optimiser again.
	returned := false
	defer func() {
		if !returned {
			e.opt, e.err = nil, errOptimiserPanicked
		}
		close(e.ready)
		if e.err != nil {
			pl.mu.Lock()
			if pl.columns[key] == e {
				delete(pl.columns, key)
			}
			pl.mu.Unlock()
		}
	}()
	run := runOptimiser
	if pl.optimiser != nil {
		run = pl.optimiser
	}
	e.opt, e.extra, e.err = run(g, fam, deadline)
	returned = true
	if e.err == nil && e.opt != nil {
		pl.mu.Lock()
		if pl.columns[key] == e {
			// An optimised column keeps dense n × n matrices: A, A⁺ and the Gram.
			n := int64(e.opt.n)
			pl.charge("c"+key, 3*8*n*n+8*n+256)
		}
		pl.mu.Unlock()
	}
	return e.opt, e.extra, e.err
}

func (pl *Planner) maxBytes() int64 {
	if pl.MaxBytes > 0 {
		return pl.MaxBytes
	}
	return catalog.DefaultPlanCacheBytes
}

// charge records a cached entry's bytes and evicts the oldest entries of
// either cache while the total is over MaxBytes. pl.mu is held.
func (pl *Planner) charge(key string, n int64) {
	if pl.bytes == nil {
		pl.bytes = map[string]int64{}
	}
	pl.forget(key)
	pl.bytes[key] = n
	pl.used += n
	for pl.used > pl.maxBytes() && (len(pl.colFIFO) > 0 || len(pl.planFIFO) > 0) {
		if len(pl.planFIFO) > 0 && (len(pl.colFIFO) == 0 || pl.bytes["p"+pl.planFIFO[0]] >= pl.bytes["c"+pl.colFIFO[0]]) {
			pl.forget("p" + pl.planFIFO[0])
			delete(pl.plans, pl.planFIFO[0])
			pl.planFIFO = pl.planFIFO[1:]
			continue
		}
		pl.forget("c" + pl.colFIFO[0])
		delete(pl.columns, pl.colFIFO[0])
		pl.colFIFO = pl.colFIFO[1:]
	}
}

func (pl *Planner) forget(key string) {
	pl.used -= pl.bytes[key]
	delete(pl.bytes, key)
}

// planBytes estimates what a cached plan holds: its matrices.
func planBytes(p *Plan) int64 {
	n := int64(512)
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

func runOptimiser(g Gram, fam catalog.NoiseFamily, deadline time.Time) (*colOpt, optInfo, error) {
	start := time.Now()
	if fam == catalog.Gaussian {
		r, err := optimizeGauss(g, deadline)
		if err != nil || r == nil {
			return nil, optInfo{}, err
		}
		cert := r.cert
		return optFromStrategy(r.strategy), optInfo{real: cert.Dual, cert: &cert, seconds: time.Since(start).Seconds()}, nil
	}
	r, err := optimizeLaplace(g, deadline)
	if err != nil || r == nil {
		return nil, optInfo{}, err
	}
	return optFromStrategy(r.strategy), optInfo{real: r.Real, seconds: time.Since(start).Seconds()}, nil
}

// cachedPlan returns a copy of a cached plan for the fingerprint.
func (pl *Planner) cachedPlan(key string) *Plan {
	if pl.noCache {
		return nil
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	p := pl.plans[key]
	if p == nil {
		return nil
	}
	cp := *p
	cp.Candidates = append([]Candidate(nil), p.Candidates...)
	return &cp
}

func (pl *Planner) storePlan(key string, p *Plan) {
	if pl.noCache {
		return
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.plans == nil {
		pl.plans = map[string]*Plan{}
	}
	if _, ok := pl.plans[key]; !ok {
		pl.planFIFO = append(pl.planFIFO, key)
		if len(pl.planFIFO) > pl.maxEntries() {
			pl.forget("p" + pl.planFIFO[0])
			delete(pl.plans, pl.planFIFO[0])
			pl.planFIFO = pl.planFIFO[1:]
		}
	}
	cp := *p
	pl.plans[key] = &cp
	pl.charge("p"+key, planBytes(p))
}
