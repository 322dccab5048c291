package parser

import "testing"

// The front rewrites a session's sql_mode quoting to the default reading
// before anything parses it.
func TestNormaliseQuotes(t *testing.T) {
	for _, c := range []struct {
		in         string
		ansi, nobs bool
		want       string
	}{
		{`SELECT COUNT(*) FROM "adult" WHERE "sex" = 'Male'`, true, false, "SELECT COUNT(*) FROM `adult` WHERE `sex` = 'Male'"},
		{`SELECT "a""b", 'it''s "quoted"' FROM t`, true, false, "SELECT `a\"b`, 'it''s \"quoted\"' FROM t"},
		{"SELECT \"x`y\" FROM t -- \"comment\"", true, false, "SELECT `x``y` FROM t -- \"comment\""},
		{`SELECT 'a\' FROM t`, false, true, `SELECT 'a\\' FROM t`},
		{`SELECT 'a\', "b\" FROM t`, true, true, "SELECT 'a\\\\', `b\\` FROM t"},
		{`SELECT "unterminated`, true, false, `SELECT "unterminated`},
		{`SELECT "a" FROM t`, false, false, `SELECT "a" FROM t`},
	} {
		if got := NormaliseQuotes(c.in, c.ansi, c.nobs); got != c.want {
			t.Errorf("NormaliseQuotes(%q, %v, %v) = %q, want %q", c.in, c.ansi, c.nobs, got, c.want)
		}
	}
}

// The tokens the front reads: ? markers outside quotes and comments, and
// a first word.
func TestTokensAndFirstWord(t *testing.T) {
	var marks []int
	sql := "SELECT ? , '?', `?` /* ? */ -- ?\n# ?\n, ?"
	for _, tok := range Tokens(sql, false) {
		if tok.Quote == 0 && tok.Text == "?" {
			marks = append(marks, tok.Start)
		}
	}
	if len(marks) != 2 || marks[0] != 7 {
		t.Fatalf("markers at %v", marks)
	}
	for in, want := range map[string]string{"  select 1": "select", "/*!40101 SET x=1 */ KILL 3": "kill", "'x'": "", "": ""} {
		if got := FirstWord(in); got != want {
			t.Errorf("FirstWord(%q) = %q, want %q", in, got, want)
		}
	}
}
