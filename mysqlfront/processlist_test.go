package mysqlfront

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestSessionsArePrivate: while bob runs a statement, no other user sees
// it, or his session at all, in any listing of sessions; bob sees his own.
func TestSessionsArePrivate(t *testing.T) {
	h := start(t)
	bobDB := h.db("bob", "bob", "")
	bob, err := bobDB.Conn(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	bobID := connID(t, bob)
	const secret = "SELECT COUNT(*) FROM adult WHERE sex = 'slow' /* bob's secret filter */"
	errc := make(chan error, 1)
	go func() {
		rows, err := bob.QueryContext(context.Background(), secret)
		if err == nil {
			rows.Close()
		}
		errc <- err
	}()
	select {
	case <-h.fb.slow:
	case <-time.After(5 * time.Second):
		t.Fatal("backend never reached")
	}
	defer func() {
		close(h.fb.release)
		if err := <-errc; err != nil {
			t.Errorf("bob's statement: %v", err)
		}
	}()

	listings := []string{
		"SELECT ID, USER, COMMAND, INFO FROM information_schema.PROCESSLIST",
		"SELECT id, user, command, info FROM information_schema.processlist ORDER BY id",
		"SELECT ID, USER, COMMAND, INFO FROM INFORMATION_SCHEMA.PROCESSLIST WHERE USER = 'bob' OR INFO LIKE '%secret%'",
		"SHOW FULL PROCESSLIST",
		"SHOW PROCESSLIST",
	}
	for _, who := range []struct{ user, pw string }{{"analyst", "analyst"}, {"auditor", "audit pw"}} {
		db := h.db(who.user, who.pw, "")
		db.SetMaxOpenConns(1)
		for _, q := range listings {
			rows := queryStrings(t, db, q)
			if len(rows) != 1 {
				t.Fatalf("%s: %s: %v, want only the own session", who.user, q, rows)
			}
			for _, r := range rows {
				info := r[3]
				if strings.HasPrefix(q, "SHOW") {
					info = r[7]
				}
				if r[0] == fmt.Sprint(bobID) || r[1] != who.user || info == secret {
					t.Fatalf("%s sees another session: %s: %v", who.user, q, r)
				}
			}
		}
		var n int64
		if err := db.QueryRowContext(ctx(t), "SELECT COUNT(*) FROM information_schema.PROCESSLIST").Scan(&n); err != nil || n != 1 {
			t.Fatalf("%s: count: %v %d", who.user, err, n)
		}
	}

	// bob's other connection sees both of his sessions, the running
	// statement included, the same in both listings.
	other := h.db("bob", "bob", "")
	other.SetMaxOpenConns(1)
	for _, q := range []string{"SELECT ID, USER, COMMAND, INFO FROM information_schema.PROCESSLIST ORDER BY ID", "SHOW FULL PROCESSLIST"} {
		rows := queryStrings(t, other, q)
		if len(rows) != 2 {
			t.Fatalf("bob: %s: %v", q, rows)
		}
		info := 3
		if strings.HasPrefix(q, "SHOW") {
			info = 7
		}
		found := false
		for _, r := range rows {
			if r[0] == fmt.Sprint(bobID) {
				found = r[info] == secret
			}
		}
		if !found {
			t.Fatalf("bob: %s: his running statement is missing: %v", q, rows)
		}
	}
}
