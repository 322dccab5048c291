package demo

import "testing"

// TestUsers checks the users table against the events: one row per events
// user with the same id and the country of all their events, a signup day
// before their first event, and values inside the demo catalog's domains.
func TestUsers(t *testing.T) {
	db := open(t, sharedDB(t))
	var users, evUsers, mismatched, late, outside int64
	if err := db.QueryRow("SELECT count(*) FROM users").Scan(&users); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("SELECT count(DISTINCT user_id) FROM events").Scan(&evUsers); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM events e LEFT JOIN users u USING (user_id)
		WHERE u.user_id IS NULL OR u.country <> e.country`).Scan(&mismatched); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM users u JOIN (SELECT user_id, min(date(ts)) AS first FROM events GROUP BY user_id) f USING (user_id)
		WHERE u.signup_date > f.first`).Scan(&late); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM users WHERE signup_date < '2023-01-01' OR signup_date > '2025-12-31'
		OR plan NOT IN ('free', 'plus', 'pro') OR age_band NOT IN ('18-24', '25-34', '35-44', '45-54', '55-64', '65+')`).Scan(&outside); err != nil {
		t.Fatal(err)
	}
	if users != evUsers || mismatched != 0 || late != 0 || outside != 0 {
		t.Fatalf("%d users for %d events users; %d events without their user or country, %d signups after a first event, %d values outside the domains",
			users, evUsers, mismatched, late, outside)
	}
}
