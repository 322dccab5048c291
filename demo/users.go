package demo

import (
	"context"
	"database/sql"
	"strings"
	"time"
)

const createUsers = `CREATE TABLE users (
	user_id INTEGER PRIMARY KEY,
	signup_date TEXT,
	plan TEXT,
	country TEXT,
	age_band TEXT
)`

// UsersStart is the first possible signup date; signups run to the end of
// the events' year.
var UsersStart = time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)

// Domains of the users table, in the order of the demo catalog.
var (
	Plans    = []string{"free", "plus", "pro"}
	AgeBands = []string{"18-24", "25-34", "35-44", "45-54", "55-64", "65+"}
)

var (
	ageBandTable = newCumulative([]int64{16, 30, 22, 15, 10, 7})
	// planWeights by activity: shoppers with more events pay more often.
	planLight = newCumulative([]int64{80, 15, 5})
	planHeavy = newCumulative([]int64{45, 35, 20})
)

type user struct {
	id      int64
	signup  int64 // days since UsersStart
	plan    int
	country int
	ageBand int
}

// users derives one row per user of evs (ids 1, 2, …, in order): the
// user's home country (every event of a user has it), a signup day before
// the user's first event (up to two years earlier, not before UsersStart),
// a plan drawn more often paid for users with more events, and an age
// band. It draws from its own stream r, so that the events do not depend
// on it.
func users(r *rng, evs []event) []user {
	type seen struct {
		first   int64
		n       int
		country int
	}
	var by []seen
	for _, e := range evs {
		for int64(len(by)) < e.user {
			by = append(by, seen{first: -1})
		}
		s := &by[e.user-1]
		if s.first < 0 || e.at < s.first {
			s.first = e.at
		}
		s.n++
		s.country = e.country
	}
	offset := int64(EventsStart.Sub(UsersStart).Hours() / 24)
	out := make([]user, 0, len(by))
	for i, s := range by {
		if s.n == 0 {
			continue
		}
		last := offset + s.first/86400 // the first event's day
		signup := last - int64(r.below(731))
		if signup < 0 {
			signup = int64(r.below(uint64(last) + 1))
		}
		plans := planLight
		if s.n > 5 {
			plans = planHeavy
		}
		out = append(out, user{id: int64(i + 1), signup: signup, plan: plans.draw(r), country: s.country, ageBand: ageBandTable.draw(r)})
	}
	return out
}

func insertUsers(n int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO users (user_id, signup_date, plan, country, age_band) VALUES ")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?)")
	}
	return b.String()
}

// fillUsers writes the users table for the events evs.
func fillUsers(ctx context.Context, tx *sql.Tx, evs []event, seed uint64) error {
	if _, err := tx.ExecContext(ctx, createUsers); err != nil {
		return err
	}
	us := users(&rng{s: seed ^ 0x05e7_05e7_05e7_05e7}, evs)
	done := 0
	return insertBatched(ctx, tx, len(us), insertUsers, func(args []any, n int) []any {
		for _, u := range us[done : done+n] {
			args = append(args, u.id, UsersStart.AddDate(0, 0, int(u.signup)).Format(time.DateOnly),
				Plans[u.plan], Countries[u.country], AgeBands[u.ageBand])
		}
		done += n
		return args
	})
}
