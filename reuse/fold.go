package reuse

import (
	"slices"
	"sync"

	"github.com/dpproxy/dpproxy/measure"
)

// Folding a new measurement into the stored system, off the request
// path. A batch over a domain too large to combine (Decision.Alone) is
// answered from its new measurement alone; once that measurement is
// stored, the next batch over the domain finds it among the stored ones,
// and its stored system is this batch's plus the new measurement, added
// last (stored oldest first, then these, whose IDs come after): the same
// information matrix bit for bit as one built anew. Fold builds that
// system, and solves it, in the background, and puts it in the cache
// under the key the next batch will look up, so a later batch that the
// stored measurements answer is answered without paying the O(n³) solve
// itself.
//
// Nothing released depends on it: a batch that looks the system up
// before the fold has put it there builds the same system itself, one
// that finds it being solved waits for that solve (solved.once), and the
// cache keeps the first entry put under a key. Folding is bounded: at
// most maxFolds at a time, and a fold asked for while they run is
// dropped (the next batch builds what it needs). It does no I/O, so it
// holds nothing a shutdown waits for; Wait lets tests (and a caller that
// wants the CPU back) wait for it.

// maxFolds bounds the folds running at a time: each solves one system of
// up to planner.MaxKnownCells cells (about 0.1 s of one core), or blocks
// of a blocked system that cost about as much as eight of those.
const maxFolds = 1

// Folding is when Fold does its work.
type Folding int

const (
	FoldBackground Folding = iota // in the background, at most maxFolds at a time (serving)
	FoldNow                       // on the caller's goroutine, before Fold returns
	FoldOff                       // never: each batch builds and solves what it needs
)

// folds runs folds in the background, at most maxFolds at a time.
type folds struct {
	slots chan struct{}
	wg    sync.WaitGroup
	mode  Folding
}

// SetFolding sets when Fold does its work (FoldBackground unless set):
// tests compare the three, which must release the same answers. Not
// safe to call while the policy decides.
func (pol *Policy) SetFolding(m Folding) { pol.folds.mode = m }

func newFolds() *folds { return &folds{slots: make(chan struct{}, maxFolds)} }

// Fold puts the stored system of each of d's domains with recs added
// (recs: what d's plan measured, stored, their IDs set) in the cache,
// solved, for the next batch; it returns at once, the work done in the
// background. Only for a batch answered alone (d.Alone > 0): a combined
// batch's systems are put by Remember.
func (pol *Policy) Fold(d *Decision, recs []*measure.Measurement) {
	if d.Alone == 0 || pol.solved.lru == nil || len(recs) == 0 {
		return
	}
	for _, r := range recs {
		if r.ID == 0 {
			return // not stored: no batch will find this system
		}
	}
	f := pol.folds
	switch f.mode {
	case FoldOff:
		return
	case FoldNow:
		pol.fold(d, recs)
		return
	}
	select {
	case f.slots <- struct{}{}:
	default:
		return // folds running: the next batch builds what it needs
	}
	f.wg.Add(1)
	go func() {
		defer func() { <-f.slots; f.wg.Done() }()
		pol.fold(d, recs)
	}()
}

// fold is Fold's work, on the calling goroutine.
func (pol *Policy) fold(d *Decision, recs []*measure.Measurement) {
	for _, dm := range d.doms {
		if dm.cls != nil {
			continue // the records would refine the classes: another key
		}
		joined := slices.Clone(dm.joined)
		var add []*measure.Measurement
		joins := dm.g.Joiner()
		for _, r := range recs {
			if rr, ok := dm.reduce(r); ok && joins(rr) {
				joined, add = append(joined, r), append(add, rr)
			}
		}
		if len(add) == 0 {
			continue // nothing joins: the stored system is unchanged
		}
		key := systemKey(dm.mcols, nil, dm.sub, joined)
		if _, ok := pol.solved.lru.Get(key); ok {
			continue // a batch got there first, with the same system
		}
		g := dm.g.Clone()
		for _, r := range add {
			g.Add(r, 1)
		}
		s := &solved{g: g}
		pol.solved.put(key, s)
		s.estimate()
	}
}

// Wait waits for the folds running to finish.
func (pol *Policy) Wait() { pol.folds.wg.Wait() }
