package main

import (
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"
)

// The `mysql>` sessions of README.md and docs/*.md are replayed against
// the demo, so that what the docs show is what the product does:
//
//	go test ./cmd/dpproxy -run TestDocSessions                 # check
//	go test ./cmd/dpproxy -run TestDocSessions -update-docs    # rewrite the outputs from a fresh demo
//
// Checked: the same columns, row counts, group labels (unless the rows are
// ordered by noisy values), error codes and messages; where the docs show
// an excerpt (a `...` row, or rows without the table's header), that each
// shown row is a row of the result. Numbers are noisy and not compared.
// -update-docs rewrites every shown output with the fresh one (an excerpt
// keeps its rows, refreshed), so outputs never go stale.

var updateDocs = flag.Bool("update-docs", false, "rewrite the docs' mysql> sessions with a fresh demo's output")

// docStatement is one `mysql>` statement of a session shown in the docs,
// and what the docs say it returned.
type docStatement struct {
	section string // the nearest heading: each section is replayed on a fresh demo
	chapter string // the nearest level-2 heading
	sql     string
	user    string // the user of the session ($ mysql ... -u user), analyst by default
	// errCode and errMsg are the ERROR line's code and message, if any.
	errCode int
	errMsg  string
	// columns and rows are the table shown (nil columns: no header).
	columns []string
	rows    [][]string
	// excerpt is set when the docs show only some rows (a `...` row, or
	// rows without the table's header); ellipses are the indexes among
	// rows before which a `...` row stands (len(rows): at the end).
	excerpt  bool
	ellipses []int
	// out is the line range [out[0], out[1]) of the output shown.
	out [2]int
	// skip, when not empty, is why the statement is not replayed.
	skip string
	// hidden is a statement the docs run without showing it, written
	// `<!-- replay as USER: SQL -->` outside a code block: what the session
	// shown assumes was done before (the auditor's view of spending).
	// One written directly under a level-2 heading (prelude) runs at the
	// start of each of its sections.
	hidden, prelude bool
}

var docHidden = regexp.MustCompile(`^<!-- replay as (\w+): (.*) -->$`)

// docSkip, outside a code block, keeps the next block from being replayed:
// `<!-- not replayed: the catalog of this example, shown above -->`.
var docSkip = regexp.MustCompile(`^<!-- not replayed: (.*) -->$`)

var docError = regexp.MustCompile(`^ERROR (\d+) \(([0-9A-Z]{5})\)(?: at line \d+)?: (.*)$`)
var docUser = regexp.MustCompile(`^\$ mysql .*-u\s*(\w+)`)

func isEllipsisRow(cells []string) bool {
	return len(cells) > 0 && (strings.HasSuffix(cells[0], "...") || strings.HasSuffix(cells[0], "…"))
}

// docSessions reads the `mysql>` sessions of a Markdown file, section by
// section (the nearest heading above each code block).
func docSessions(t *testing.T, lines []string) []docStatement {
	t.Helper()
	var out []docStatement
	section, chapter, inBlock, user, skip := "", "", false, "analyst", ""
	var cur *docStatement
	var table []string
	cells := func(l string) []string {
		l = strings.TrimSpace(l)
		l = strings.TrimPrefix(strings.TrimSuffix(l, "|"), "|")
		var cs []string
		for _, c := range strings.Split(l, "|") {
			cs = append(cs, strings.TrimSpace(c))
		}
		return cs
	}
	flushTable := func() {
		if cur == nil || len(table) == 0 {
			table = nil
			return
		}
		headed := len(table) >= 3 && strings.HasPrefix(table[0], "+-") && strings.HasPrefix(table[2], "+-")
		body := table
		if headed {
			cur.columns = cells(table[1])
			body = table[3:]
		} else {
			cur.excerpt = true
		}
		for _, l := range body {
			if !strings.HasPrefix(l, "|") {
				continue
			}
			c := cells(l)
			if isEllipsisRow(c) {
				cur.excerpt, cur.ellipses = true, append(cur.ellipses, len(cur.rows))
				continue
			}
			cur.rows = append(cur.rows, c)
		}
		table = nil
	}
	finish := func(end int) {
		flushTable()
		if cur != nil {
			cur.out[1] = end
			out = append(out, *cur)
		}
		cur = nil
	}
	for n, line := range lines {
		if strings.HasPrefix(line, "```") {
			if inBlock {
				finish(n)
			}
			if inBlock {
				skip = "" // a skip covers one block
			}
			inBlock, user = !inBlock, "analyst"
			continue
		}
		if !inBlock {
			if strings.HasPrefix(line, "#") {
				section = strings.TrimSpace(strings.TrimLeft(line, "#"))
				if strings.HasPrefix(line, "## ") || strings.HasPrefix(line, "# ") {
					chapter = section
				}
			}
			if m := docSkip.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
				skip = m[1]
			}
			if m := docHidden.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
				out = append(out, docStatement{section: section, chapter: chapter, user: m[1], sql: m[2], hidden: true, prelude: section == chapter})
			}
			continue
		}
		switch {
		case strings.HasPrefix(line, "$ "):
			finish(n)
			if m := docUser.FindStringSubmatch(line); m != nil {
				user = m[1]
			}
		case strings.HasPrefix(line, "mysql> "):
			finish(n)
			cur = &docStatement{section: section, chapter: chapter, user: user, sql: strings.TrimPrefix(line, "mysql> "), skip: skip}
			cur.out[0] = n + 1
		case strings.HasPrefix(line, "    -> ") && cur != nil && cur.out[0] == n && table == nil:
			cur.sql += " " + strings.TrimSpace(strings.TrimPrefix(line, "    -> "))
			cur.out[0] = n + 1
		case cur == nil:
		case docError.MatchString(line):
			m := docError.FindStringSubmatch(line)
			cur.errCode, _ = strconv.Atoi(m[1])
			cur.errMsg = m[3]
		case strings.HasPrefix(line, "+-") || strings.HasPrefix(line, "|"):
			table = append(table, line)
		case strings.TrimSpace(line) == "..." || strings.TrimSpace(line) == "…":
			table = append(table, "| ... |")
		}
	}
	return out
}

// docsOtherCatalogs are tables that docs' examples read from catalogs of
// their own, shown beside them, not the demo's: those statements are not
// replayed here (the tests named say where they are checked).
var docsOtherCatalogs = map[string]string{
	"visits":      "the time catalog of Dates and times (cmd/dpproxy clients_time_test.go)",
	"t":           "the NULL-semantics table of Supported SQL (engine TestReadmeNullSemantics)",
	"events_rows": "a row-level copy of events (privacy units: engine units tests)",
}

var fromTable = regexp.MustCompile(`(?i)\b(?:FROM|JOIN)\s+` + "`?" + `(\w+)`)

// otherCatalog reports which catalog of docsOtherCatalogs a statement reads.
func otherCatalog(sqlText string) (string, bool) {
	for _, m := range fromTable.FindAllStringSubmatch(sqlText, -1) {
		if why, ok := docsOtherCatalogs[strings.ToLower(m[1])]; ok {
			return why, true
		}
	}
	return "", false
}

// noisyOrder reports whether a statement orders its rows by noisy values
// (ORDER BY an aggregate, DESC, a top-k): its labels' order is not fixed.
func noisyOrder(sqlText string) bool {
	i := strings.LastIndex(strings.ToUpper(sqlText), "ORDER BY")
	if i < 0 {
		return false
	}
	clause := strings.ToUpper(sqlText[i:])
	return strings.Contains(clause, "DESC") || strings.Contains(clause, "(") || strings.Contains(clause, "LIMIT")
}

// docResult is what a statement returned through the Go driver.
type docResult struct {
	err  error
	sets []docSet
}

type docSet struct {
	columns []string
	numeric []bool
	rows    [][]string
}

func runDocStatement(db *sql.DB, text string) docResult {
	rows, err := db.Query(text)
	if err != nil {
		return docResult{err: err}
	}
	defer rows.Close()
	var res docResult
	for {
		cols, _ := rows.Columns()
		types, _ := rows.ColumnTypes()
		set := docSet{columns: cols}
		for _, ct := range types {
			name := ct.DatabaseTypeName()
			set.numeric = append(set.numeric, strings.Contains(name, "INT") || strings.Contains(name, "DOUBLE") ||
				strings.Contains(name, "DECIMAL") || strings.Contains(name, "FLOAT") || name == "YEAR")
		}
		text, err := scanText(rows)
		if err != nil {
			return docResult{err: err}
		}
		for _, r := range text {
			row := make([]string, len(r))
			for i, v := range r {
				row[i] = "NULL"
				if v != nil {
					row[i] = *v
				}
			}
			set.rows = append(set.rows, row)
		}
		if len(cols) > 0 {
			res.sets = append(res.sets, set)
		}
		if !rows.NextResultSet() {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return docResult{err: err}
	}
	return res
}

// TestDocSessions replays the docs' sessions: each section (the nearest
// heading) on a fresh demo proxy, one session per user, statements in
// order. With -update-docs it rewrites the outputs that no longer match.
func TestDocSessions(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../../README.md"}, files...)
	total := 0
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		sts := docSessions(t, lines)
		if len(sts) == 0 {
			continue
		}
		total += len(sts)
		t.Run(filepath.Base(file), func(t *testing.T) {
			var edits []docEdit
			var dbs map[string]*sql.DB
			var addr, section string
			session := func(user string) *sql.DB {
				if dbs[user] == nil {
					dbs[user] = connect(t, addr, user, user, "multiStatements=true")
					dbs[user].SetMaxOpenConns(1) // one session: SET applies to what follows
				}
				return dbs[user]
			}
			for i, st := range sts {
				if st.section != section || dbs == nil {
					// A fresh demo for each section, with its chapter's prelude.
					section, dbs = st.section, map[string]*sql.DB{}
					_, addr = startProxy(t, "")
					for _, p := range sts[:i] {
						if p.prelude && p.chapter == st.chapter && p.section != st.section {
							if res := runDocStatement(session(p.user), p.sql); res.err != nil {
								t.Errorf("[%s] %s (prelude): %v", st.section, p.sql, res.err)
							}
						}
					}
				}
				if st.skip != "" {
					t.Logf("not replayed (%s): %s", st.skip, st.sql)
					continue
				}
				if why, skip := otherCatalog(st.sql); skip {
					t.Logf("not replayed, it reads %s: %s", why, st.sql)
					continue
				}
				text := strings.TrimSpace(st.sql)
				text = strings.TrimSpace(strings.TrimSuffix(strings.TrimSuffix(text, "//"), ";"))
				res := runDocStatement(session(st.user), text)
				if st.hidden {
					if res.err != nil {
						t.Errorf("[%s] %s (replayed, not shown): %v", st.section, text, res.err)
					}
					continue
				}
				problems := docProblems(st, text, res)
				switch {
				case len(problems) == 0:
				case *updateDocs && st.out[0] < st.out[1]:
					edits = append(edits, docEdit{from: st.out[0], to: st.out[1], lines: renderDocOutput(st, res)})
					t.Logf("rewritten: [%s] %s", st.section, text)
				default:
					for _, p := range problems {
						t.Errorf("[%s] %s: %s", st.section, text, p)
					}
				}
			}
			if len(edits) > 0 {
				for i := len(edits) - 1; i >= 0; i-- {
					e := edits[i]
					lines = append(lines[:e.from], append(e.lines, lines[e.to:]...)...)
				}
				if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	if total < 50 {
		t.Fatalf("only %d statements found in the docs' sessions", total)
	}
}

type docEdit struct {
	from, to int
	lines    []string
}

// docProblems lists how res differs from what the docs show for st.
func docProblems(st docStatement, sqlText string, res docResult) []string {
	var out []string
	if st.errCode != 0 {
		var me *mysql.MySQLError
		if !errors.As(res.err, &me) || int(me.Number) != st.errCode || me.Message != st.errMsg {
			out = append(out, fmt.Sprintf("got %v, the docs show ERROR %d: %s", res.err, st.errCode, st.errMsg))
		}
		return out
	}
	if res.err != nil {
		return append(out, res.err.Error())
	}
	if len(st.rows) == 0 && st.columns == nil {
		return nil
	}
	if len(res.sets) == 0 {
		return append(out, "no result; the docs show rows")
	}
	got := res.sets[0]
	if len(res.sets) > 1 {
		// Several result sets (a multi-statement request): the docs' first
		// header is the first set's.
		if st.columns != nil && strings.Join(got.columns, "|") != strings.Join(st.columns, "|") {
			out = append(out, fmt.Sprintf("columns %v; the docs show %v", got.columns, st.columns))
		}
		return out
	}
	if st.excerpt {
		first := map[string]bool{}
		for _, r := range got.rows {
			first[r[0]] = true
		}
		for _, r := range st.rows {
			if !first[r[0]] {
				out = append(out, fmt.Sprintf("the result has no row %q; the docs show one", r[0]))
			}
		}
		return out
	}
	if strings.Join(got.columns, "|") != strings.Join(st.columns, "|") || len(got.rows) != len(st.rows) {
		return append(out, fmt.Sprintf("columns %v, %d rows; the docs show %v, %d rows", got.columns, len(got.rows), st.columns, len(st.rows)))
	}
	if noisyOrder(sqlText) {
		return nil
	}
	for i := range got.rows {
		for k := range got.rows[i] {
			shown := st.rows[i][k]
			if _, err := strconv.ParseFloat(shown, 64); err == nil || shown == "NULL" {
				continue // a noisy number
			}
			if got.rows[i][k] != shown {
				out = append(out, fmt.Sprintf("row %d column %s is %q; the docs show %q", i, got.columns[k], got.rows[i][k], shown))
			}
		}
	}
	return out
}

// renderDocOutput is the mysql client's rendering of res, in the shape the
// docs showed: a full table, or the excerpt's rows (refreshed, in the
// docs' order, without the header if the docs had none).
func renderDocOutput(st docStatement, res docResult) []string {
	if res.err != nil {
		var me *mysql.MySQLError
		if errors.As(res.err, &me) {
			return []string{fmt.Sprintf("ERROR %d (%s): %s", me.Number, string(me.SQLState[:]), me.Message)}
		}
		return []string{"ERROR: " + res.err.Error()}
	}
	var out []string
	for _, set := range res.sets {
		rows := set.rows
		var ellipses []int
		if st.excerpt {
			byFirst := map[string][]string{}
			for _, r := range set.rows {
				if _, dup := byFirst[r[0]]; !dup {
					byFirst[r[0]] = r
				}
			}
			rows = nil
			for i, r := range st.rows {
				for _, e := range st.ellipses {
					if e == i {
						ellipses = append(ellipses, len(rows))
					}
				}
				if fresh, ok := byFirst[r[0]]; ok {
					rows = append(rows, fresh)
				}
			}
			for _, e := range st.ellipses {
				if e >= len(st.rows) {
					ellipses = append(ellipses, len(rows))
				}
			}
		}
		out = append(out, renderTable(set, rows, st.columns != nil || !st.excerpt, ellipses)...)
	}
	return out
}

func renderTable(set docSet, rows [][]string, header bool, ellipses []int) []string {
	width := make([]int, len(set.columns))
	for k, c := range set.columns {
		if header {
			width[k] = utf8.RuneCountInString(c)
		}
		for _, r := range rows {
			width[k] = max(width[k], utf8.RuneCountInString(r[k]))
		}
		if len(ellipses) > 0 && k == 0 {
			width[k] = max(width[k], 3)
		}
	}
	line := func(cells []string, right []bool) string {
		var b strings.Builder
		b.WriteString("|")
		for k, c := range cells {
			pad := strings.Repeat(" ", width[k]-utf8.RuneCountInString(c))
			if right != nil && right[k] {
				b.WriteString(" " + pad + c + " |")
			} else {
				b.WriteString(" " + c + pad + " |")
			}
		}
		return b.String()
	}
	var sep strings.Builder
	sep.WriteString("+")
	for _, w := range width {
		sep.WriteString(strings.Repeat("-", w+2) + "+")
	}
	var out []string
	if header {
		out = append(out, sep.String(), line(set.columns, nil), sep.String())
	}
	dots := make([]string, len(set.columns))
	dots[0] = "..."
	for i := 0; i <= len(rows); i++ {
		for _, e := range ellipses {
			if e == i {
				out = append(out, line(dots, nil))
			}
		}
		if i < len(rows) {
			out = append(out, line(rows[i], set.numeric))
		}
	}
	if header {
		out = append(out, sep.String())
	}
	return out
}
