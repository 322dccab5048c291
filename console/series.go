package console

import (
	"context"
	"sync"

	"github.com/dpproxy/dpproxy/budget"
)

// seriesCache keeps, per table and user, the spending series as last
// shown (at most plotBuckets buckets) and the ledger entry it was summed
// to, and brings it up to date by asking the ledger only for the charges
// appended since (a range on the sequence number), summed at the cached
// bucket width, then coarsened again (budget.Coarsen: the bucket widths
// divide one another, so this is exact). A plot then costs the new entries,
// not a scan of the whole ledger; only the first view of a table after
// start-up sums it all, in SQLite.
//
// It relies on the ledger only growing, which the hash chain guarantees
// (a rewritten ledger fails verification); a ledger whose head is behind
// the cache is summed anew. Memory is bounded: at most maxSeriesKeys
// series of at most plotBuckets buckets per user; when full, it starts over.
type seriesCache struct {
	mu sync.Mutex
	m  map[seriesKey]budget.Series
}

type seriesKey struct{ table, user string }

const (
	maxSeriesKeys = 64
	plotBuckets   = 120
)

func newSeriesCache() *seriesCache { return &seriesCache{m: map[seriesKey]budget.Series{}} }

// get returns the table's series (one user's, or everyone's for user ""),
// in at most plotBuckets buckets.
func (c *seriesCache) get(ctx context.Context, l Ledger, table, user string) (budget.Series, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := seriesKey{table, user}
	cur, ok := c.m[k]
	if ok {
		head, _, err := l.Head(ctx)
		if err != nil {
			return budget.Series{}, err
		}
		ok = head >= cur.LastSeq // else not the ledger the cache was built from
	}
	q := budget.SeriesQuery{Table: table, User: user, Buckets: plotBuckets}
	if ok && len(cur.Points) > 0 {
		q.Width, q.AfterSeq = cur.Width, cur.LastSeq
	} else if ok {
		q.AfterSeq = cur.LastSeq // nothing charged yet: the first charges choose the width
	}
	delta, err := l.Spending(ctx, q)
	if err != nil {
		return budget.Series{}, err
	}
	next := delta
	if ok && len(cur.Points) > 0 {
		next = cur
		next.Points = append(append([]budget.SpendPoint(nil), cur.Points...), delta.Points...)
		next.LastSeq = delta.LastSeq
		if delta.To.After(next.To) {
			next.To = delta.To
		}
		next = budget.Coarsen(next, plotBuckets)
	}
	if len(c.m) >= maxSeriesKeys && !ok {
		clear(c.m)
	}
	c.m[k] = next
	return next, nil
}
