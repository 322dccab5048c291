package demo

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestEvents checks the events table's shape against what the demo
// catalog declares and the README describes: the row count, values inside
// the declared domains, heavy-tailed events per user, daily and weekly
// cycles, mostly zero amounts.
func TestEvents(t *testing.T) {
	db := open(t, sharedDB(t))
	var n, users, maxPer, zero int64
	if err := db.QueryRow("SELECT count(*), count(DISTINCT user_id), sum(amount = 0) FROM events").Scan(&n, &users, &zero); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("SELECT max(c) FROM (SELECT count(*) AS c FROM events GROUP BY user_id)").Scan(&maxPer); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d events, %d users, at most %d per user, %d zero amounts", n, users, maxPer, zero)
	if n != int64(sharedEvents) {
		t.Errorf("%d events, want %d", n, sharedEvents)
	}
	if mean := float64(n) / float64(users); mean < 3 || mean > 8 || maxPer < 200 {
		t.Errorf("events per user: mean %.1f, max %d; want a heavy tail (mean 3-8, max ≥ 200)", mean, maxPer)
	}
	if float64(zero) < 0.9*float64(n) {
		t.Errorf("%d of %d amounts are 0, want most", zero, n)
	}
	in := func(col string, vals []string) {
		args := []any{}
		q := "SELECT count(*) FROM events WHERE " + col + " NOT IN ("
		for i, v := range vals {
			if i > 0 {
				q += ", "
			}
			q += "?"
			args = append(args, v)
		}
		var bad int64
		if err := db.QueryRow(q+")", args...).Scan(&bad); err != nil || bad != 0 {
			t.Errorf("%s: %d values outside the domain (%v)", col, bad, err)
		}
	}
	in("country", Countries)
	in("device", Devices)
	in("page", Pages)
	var lo, hi string
	var badAmount int64
	if err := db.QueryRow("SELECT min(ts), max(ts), sum(amount < 0 OR amount >= 1500 OR duration_s < 0) FROM events").Scan(&lo, &hi, &badAmount); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{lo, hi} {
		ts, err := time.Parse(time.DateTime, s)
		if err != nil || ts.Year() != EventsStart.Year() {
			t.Errorf("ts %q outside %d (%v)", s, EventsStart.Year(), err)
		}
	}
	if badAmount != 0 {
		t.Errorf("%d amounts or durations outside the declared domain", badAmount)
	}
	// Daily cycle: 20:00 busier than 04:00; weekly: Saturday busier than Tuesday.
	var evening, night, sat, tue int64
	if err := db.QueryRow(`SELECT sum(substr(ts, 12, 2) = '20'), sum(substr(ts, 12, 2) = '04'),
		sum(strftime('%w', ts) = '6'), sum(strftime('%w', ts) = '2') FROM events`).Scan(&evening, &night, &sat, &tue); err != nil {
		t.Fatal(err)
	}
	if evening < 5*night || sat*100 < tue*115 {
		t.Errorf("cycles: %d events at 20h vs %d at 4h, %d on Saturdays vs %d on Tuesdays", evening, night, sat, tue)
	}
}

// generateBound bounds the time of the default demo database (adult and
// EventsPerRow times as many events) without the race detector: about 1 s
// on an idle machine, so a regression that would make the first start of
// `dpproxy serve` slow fails BenchmarkGenerate.
const generateBound = 5 * time.Second

// BenchmarkGenerate times the demo database that `dpproxy serve` writes on
// first start (adult and events), against adult alone, its size before the
// events table: go test ./demo -run '^$' -bench Generate (.ci/run runs it
// once). Without the race detector, the default database must take less
// than generateBound.
func BenchmarkGenerate(b *testing.B) {
	for _, bc := range []struct {
		name   string
		events int
	}{{"adult", 0}, {"adult+events", EventsPerRow * DefaultRows}} {
		b.Run(bc.name, func(b *testing.B) {
			dir := b.TempDir()
			for i := 0; b.Loop(); i++ {
				if err := build(context.Background(), filepath.Join(dir, fmt.Sprintf("d%d.sqlite", i)), DefaultRows, bc.events, seed); err != nil {
					b.Fatal(err)
				}
			}
			if per := b.Elapsed() / time.Duration(b.N); bc.events > 0 && !raceEnabled && per > generateBound {
				b.Errorf("generating %d rows and %d events took %v (bound %v)", DefaultRows, bc.events, per, generateBound)
			}
		})
	}
}

// TestEventsTraffic checks the open columns: search_term is set on search
// page views only, referrer is NULL for direct visits, and both are
// heavy-tailed over shoppers (a head that partition selection releases,
// a long tail of keys one or two shoppers hold).
func TestEventsTraffic(t *testing.T) {
	db := open(t, sharedDB(t))
	var bad int64
	if err := db.QueryRow("SELECT count(*) FROM events WHERE (search_term IS NULL) = (page = 'search')").Scan(&bad); err != nil || bad != 0 {
		t.Errorf("%d views with a search term off the search page or none on it (%v)", bad, err)
	}
	for _, c := range []struct {
		col        string
		head, tail int64 // at least head keys held by ≥ many shoppers, tail by one
	}{{"referrer", 15, 100}, {"search_term", 10, 300}} {
		many := sharedEvents / 1000 // 200 in the default demo
		var big, single, keys int64
		err := db.QueryRow("SELECT sum(u >= ?), sum(u = 1), count(*) FROM (SELECT count(DISTINCT user_id) AS u FROM events WHERE "+
			c.col+" IS NOT NULL GROUP BY "+c.col+")", many).Scan(&big, &single, &keys)
		if err != nil || big < c.head || single < c.tail {
			t.Errorf("%s: %d keys, %d held by ≥ %d shoppers, %d by one (%v); want ≥ %d and ≥ %d", c.col, keys, big, many, single, err, c.head, c.tail)
		}
	}
	var direct, n int64
	if err := db.QueryRow("SELECT sum(referrer IS NULL), count(*) FROM events").Scan(&direct, &n); err != nil || direct < n/4 || direct > n/2 {
		t.Errorf("%d of %d views direct (%v); want a quarter to a half", direct, n, err)
	}
}
