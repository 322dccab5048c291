package demo

import (
	"cmp"
	"context"
	"database/sql"
	"slices"
	"sort"
	"strings"
	"time"
)

// EventsPerRow is the number of events rows Generate writes per adult row:
// the default demo has 200,000 events.
const EventsPerRow = 4

const createEvents = `CREATE TABLE events (
	user_id INTEGER,
	ts TEXT,
	country TEXT,
	device TEXT,
	page TEXT,
	duration_s INTEGER,
	amount REAL,
	referrer TEXT,
	search_term TEXT
)`

// EventsStart is the first second of the events' year (UTC); ts runs over
// that year.
var EventsStart = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// eventsDays is the number of days of the events' year.
const eventsDays = 365

// Domains of the events table, in the order of the demo catalog.
var (
	// Countries are the country codes; the demo's public table countries
	// names them.
	Countries = []string{"US", "GB", "DE", "FR", "ES", "IT", "NL", "SE", "PL", "CA", "MX", "BR", "AR", "JP", "KR", "IN", "CN", "AU", "ZA", "NG"}
	Devices   = []string{"desktop", "mobile", "tablet"}
	Pages     = []string{"home", "search", "product", "cart", "checkout", "account", "help"}
)

var (
	countryWeights = []int64{300, 90, 100, 70, 45, 40, 25, 15, 20, 40, 25, 45, 12, 40, 20, 40, 20, 25, 8, 6}
	deviceWeights  = []int64{38, 54, 8}
	pageWeights    = []int64{25, 20, 35, 10, 4, 4, 2}
	// pageSeconds is the typical time on each page.
	pageSeconds = []uint64{20, 30, 60, 40, 90, 45, 120}
	// hourWeights is the daily cycle: quiet nights, an evening peak.
	hourWeights = []int64{20, 12, 8, 6, 6, 10, 20, 40, 60, 75, 85, 90, 100, 95, 90, 90, 95, 105, 120, 140, 150, 135, 90, 45}
	// weekdayWeights is the weekly cycle, Monday first: busier weekends.
	weekdayWeights = []int64{95, 100, 100, 105, 110, 130, 125}
	// priceCents are basket prices.
	priceCents   = []uint64{999, 1499, 1999, 2499, 2999, 3999, 4999, 7999, 9999, 14999, 19999, 29999, 49999}
	priceWeights = []int64{120, 110, 140, 90, 100, 80, 90, 50, 45, 25, 15, 8, 4}
)

// cumulative is a weight table for drawing by binary search.
type cumulative []int64

func newCumulative(w []int64) cumulative {
	c := make(cumulative, len(w))
	var s int64
	for i, x := range w {
		s += x
		c[i] = s
	}
	return c
}

func (c cumulative) draw(r *rng) int {
	x := int64(r.below(uint64(c[len(c)-1])))
	return sort.Search(len(c), func(i int) bool { return c[i] > x })
}

var (
	// eventsPerUser draws a user's number of events: Zipf with exponent 2
	// on 1..1000 (mean ≈ 4.6, a few users with hundreds).
	eventsPerUser = func() cumulative {
		w := make([]int64, 1000)
		for k := range w {
			w[k] = 1_000_000_000_000 / int64((k+1)*(k+1))
		}
		return newCumulative(w)
	}()
	// dayWeights is the weekly cycle times a season: the year-end shopping
	// weeks busier, Black Friday (2025-11-28) three times a normal day.
	dayWeights = func() cumulative {
		w := make([]int64, eventsDays)
		for d := range w {
			day := EventsStart.AddDate(0, 0, d)
			wd := (int(day.Weekday()) + 6) % 7 // Monday = 0
			w[d] = weekdayWeights[wd]
			switch {
			case day.Month() == time.November && day.Day() == 28:
				w[d] *= 3
			case day.Month() == time.December && day.Day() <= 24, day.Month() == time.November && day.Day() > 20:
				w[d] = w[d] * 3 / 2
			case day.Month() == time.August:
				w[d] = w[d] * 4 / 5
			}
		}
		return newCumulative(w)
	}()
	countryTable = newCumulative(countryWeights)
	deviceTable  = newCumulative(deviceWeights)
	pageTable    = newCumulative(pageWeights)
	hourTable    = newCumulative(hourWeights)
	priceTable   = newCumulative(priceWeights)
)

type event struct {
	seq      int // position in generation order
	user     int64
	at       int64 // seconds since EventsStart
	country  int
	device   int
	page     int
	duration int64
	amount   int64 // cents
}

// events draws n events of synthetic web-shop users: each user has a home
// country and a usual device, a heavy-tailed number of events, in sessions
// of consecutive page views at a day and hour drawn from the daily and
// weekly cycles. Sorted by time.
func events(r *rng, n int) []event {
	out := make([]event, 0, n)
	const year = eventsDays * 86400
	for user := int64(1); len(out) < n; user++ {
		k := min(eventsPerUser.draw(r)+1, n-len(out))
		country := countryTable.draw(r)
		device := deviceTable.draw(r)
		var at int64 = -1
		for range k {
			if at < 0 || r.below(10) < 3 {
				at = int64(dayWeights.draw(r))*86400 + int64(hourTable.draw(r))*3600 + int64(r.below(3600))
			}
			e := event{seq: len(out), user: user, at: at, country: country, device: device, page: pageTable.draw(r)}
			if r.below(10) == 0 {
				e.device = deviceTable.draw(r)
			}
			m := pageSeconds[e.page]
			e.duration = int64(r.below(m) + r.below(m))
			if r.below(20) == 0 {
				e.duration += int64(r.below(600))
			}
			if Pages[e.page] == "checkout" && r.below(10) < 8 {
				e.amount = int64(priceCents[priceTable.draw(r)] * (1 + r.below(3)))
			}
			out = append(out, e)
			at += e.duration + 1 + int64(r.below(30))
			if at >= year {
				at = -1
			}
		}
	}
	// By time, ties in generation order: a total order, so the result does
	// not depend on the sort algorithm.
	slices.SortFunc(out, func(a, b event) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	return out
}

// insertEvents is an INSERT of n events rows.
func insertEvents(n int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO events (user_id, ts, country, device, page, duration_s, amount, referrer, search_term) VALUES ")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?)")
	}
	return b.String()
}

// fillEvents writes the events table: rows rows from the generator seeded
// with seed (its own stream, so that the adult rows do not depend on it),
// and the users table of their users (users.go).
func fillEvents(ctx context.Context, tx *sql.Tx, rows int, seed uint64) error {
	if _, err := tx.ExecContext(ctx, createEvents); err != nil {
		return err
	}
	r := &rng{s: seed ^ 0xe7e7_e7e7_e7e7_e7e7}
	evs := events(r, rows)
	if err := fillUsers(ctx, tx, evs, seed); err != nil {
		return err
	}
	// The open columns from a stream of their own (traffic.go).
	tr := drawTraffic(&rng{s: seed ^ 0x7ea_ff1c_7ea_ff1c}, evs)
	null := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	start := EventsStart.Unix()
	done := 0
	return insertBatched(ctx, tx, len(evs), insertEvents, func(args []any, n int) []any {
		for i, e := range evs[done : done+n] {
			t := tr[done+i]
			args = append(args, e.user, time.Unix(start+e.at, 0).UTC().Format(time.DateTime),
				Countries[e.country], Devices[e.device], Pages[e.page], e.duration, float64(e.amount)/100,
				null(t.referrer), null(t.search))
		}
		done += n
		return args
	})
}
