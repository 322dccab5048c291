package unitjoin

import "testing"

func TestName(t *testing.T) {
	for _, c := range []struct {
		tables []Table
		want   string
	}{
		{nil, ""},
		{[]Table{{Table: "events", Unit: "user_id"}}, "events"},
		{[]Table{{Table: "events", Unit: "user_id"}, {Table: "users", Unit: "user_id"}},
			"events JOIN users ON users.user_id = events.user_id"},
		{[]Table{{Table: "events", Unit: "uid"}, {Table: "users", Unit: "id"}, {Table: "plans", Unit: "owner", Left: true, On: 1}},
			"events JOIN users ON users.id = events.uid LEFT JOIN plans ON plans.owner = users.id"},
	} {
		if got := Name(c.tables); got != c.want {
			t.Errorf("Name(%v) = %q, want %q", c.tables, got, c.want)
		}
	}
}
