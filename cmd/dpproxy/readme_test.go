package main

import (
	"database/sql"
	"errors"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// docStatement is one `mysql>` statement of a session shown in the docs,
// and what the docs say it returned.
type docStatement struct {
	section string
	sql     string
	// errCode and errMsg are the ERROR line's code and message, if any.
	errCode int
	errMsg  string
	// columns and rows are the table shown (nil columns: no table).
	columns []string
	rows    [][]string
}

var docError = regexp.MustCompile(`^ERROR (\d+) \(([0-9A-Z]{5})\)(?: at line \d+)?: (.*)$`)

// docSessions reads the `mysql>` sessions of a Markdown file, section by
// section (the nearest heading above each code block).
func docSessions(t *testing.T, path string) []docStatement {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []docStatement
	section, inBlock := "", false
	var cur *docStatement
	var table []string
	flushTable := func() {
		if cur == nil || len(table) < 3 {
			table = nil
			return
		}
		cells := func(l string) []string {
			l = strings.TrimSpace(l)
			l = strings.TrimPrefix(strings.TrimSuffix(l, "|"), "|")
			var cs []string
			for _, c := range strings.Split(l, "|") {
				cs = append(cs, strings.TrimSpace(c))
			}
			return cs
		}
		cur.columns = cells(table[1])
		for _, l := range table[3:] {
			if strings.HasPrefix(l, "|") {
				cur.rows = append(cur.rows, cells(l))
			}
		}
		table = nil
	}
	finish := func() {
		flushTable()
		if cur != nil {
			out = append(out, *cur)
		}
		cur = nil
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "```") {
			if inBlock {
				finish()
			}
			inBlock = !inBlock
			continue
		}
		if !inBlock {
			if strings.HasPrefix(line, "#") {
				section = strings.TrimSpace(strings.TrimLeft(line, "#"))
			}
			continue
		}
		switch {
		case strings.HasPrefix(line, "mysql> "):
			finish()
			cur = &docStatement{section: section, sql: strings.TrimPrefix(line, "mysql> ")}
		case strings.HasPrefix(line, "    -> ") && cur != nil && cur.columns == nil && table == nil:
			cur.sql += " " + strings.TrimSpace(strings.TrimPrefix(line, "    -> "))
		case cur == nil:
		case docError.MatchString(line):
			m := docError.FindStringSubmatch(line)
			cur.errCode, _ = strconv.Atoi(m[1])
			cur.errMsg = m[3]
		case strings.HasPrefix(line, "+-") || strings.HasPrefix(line, "|"):
			table = append(table, line)
		}
	}
	return out
}

// readmeSections are the README sections whose sessions are replayed
// against the demo (the embedded default that `dpproxy serve` runs).
var readmeSections = []string{
	"Derived tables, CTEs and UNION: queries as BI tools wrap them",
	"Refusals that say what to write instead",
}

// The README's sessions, statement by statement, against the demo: the
// same columns, row counts, group labels and error codes and messages
// (values are noisy, so numbers are not compared).
func TestReadmeSessions(t *testing.T) {
	_, addr := startProxy(t, "")
	db := connect(t, addr, "analyst", "analyst", "")
	db.SetMaxOpenConns(1) // one session: SET applies to what follows
	if _, err := db.Exec("SET @dp_epsilon = 0.5"); err != nil {
		t.Fatal(err)
	}
	replayed := 0
	for _, st := range docSessions(t, "../../README.md") {
		if !slices.Contains(readmeSections, st.section) && os.Getenv("DPPROXY_README_ALL") == "" {
			continue
		}
		replayed++
		checkDocStatement(t, db, st)
	}
	if replayed < 9 {
		t.Fatalf("only %d statements replayed from %v", replayed, readmeSections)
	}
}

func checkDocStatement(t *testing.T, db *sql.DB, st docStatement) {
	t.Helper()
	sqlText := strings.TrimSuffix(strings.TrimSpace(st.sql), ";")
	rows, err := db.Query(sqlText)
	if st.errCode != 0 {
		var me *mysql.MySQLError
		if !errors.As(err, &me) || int(me.Number) != st.errCode || me.Message != st.errMsg {
			t.Errorf("[%s] %s: got %v, the docs show ERROR %d: %s", st.section, sqlText, err, st.errCode, st.errMsg)
		}
		if rows != nil {
			rows.Close()
		}
		return
	}
	if err != nil {
		t.Errorf("[%s] %s: %v", st.section, sqlText, err)
		return
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var got [][]string
	for rows.Next() {
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := make([]string, len(vals))
		for i, v := range vals {
			row[i] = string(v)
			if v == nil {
				row[i] = "NULL"
			}
		}
		got = append(got, row)
	}
	if st.columns == nil {
		return
	}
	if !slices.Equal(cols, st.columns) || len(got) != len(st.rows) {
		t.Errorf("[%s] %s: columns %v, %d rows; the docs show %v, %d rows", st.section, sqlText, cols, len(got), st.columns, len(st.rows))
		return
	}
	for i := range got {
		for k := range got[i] {
			shown := st.rows[i][k]
			if _, err := strconv.ParseFloat(shown, 64); err == nil || shown == "NULL" {
				continue // a noisy number
			}
			if got[i][k] != shown {
				t.Errorf("[%s] %s: row %d column %s is %q; the docs show %q", st.section, sqlText, i, cols[k], got[i][k], shown)
			}
		}
	}
}
