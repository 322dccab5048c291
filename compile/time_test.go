package compile

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/parser"
)

// timeTable has an hourly datetime over eleven days (with NULL and other
// cells), a daily date over four months, a monthly datetime over two years
// and a weekly date whose weeks start on Sunday.
func timeTable(t testing.TB) *catalog.Table {
	t.Helper()
	y := `database: d
sources:
  s: {driver: sqlite, path: x.sqlite}
tables:
  t:
    budget: {total: 1, per_user: 1, default_per_query: 0.1}
    columns:
      ts: {type: datetime, min: '2024-12-30 00:00:00', max: '2025-01-09 23:59:59', width: 1h, null: cell, out_of_domain: other}
      d: {type: date, min: 2024-12-01, max: 2025-03-31, width: 1d}
      mo: {type: datetime, min: 2024-01-01, max: 2025-12-31, width: 1mo}
      wk: {type: date, min: 2024-12-29, max: 2025-03-01, width: 7d}
      n: {type: integer, min: 0, max: 9}
`
	cat, err := catalog.Parse("t.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return cat.Tables[0]
}

// timeCase: a WHERE predicate or a GROUP BY key over one time column, and
// its brute-force value at a second of the column (a bool, or a label as
// fmt prints it); or a refusal.
type timeCase struct {
	col       string
	pred, key string
	want      func(t time.Time) any
	msg       string
}

func ymd(t time.Time) string { return t.Format(time.DateOnly) }

func TestTimeExpressionsMatchBruteForce(t *testing.T) {
	sunday := func(t time.Time) time.Time { return t.AddDate(0, 0, -int(t.Weekday())) }
	monthStart := func(t time.Time) time.Time { return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC) }
	cases := []timeCase{
		// Predicates: ranges on bin edges, in every spelling BI tools use.
		{col: "ts", pred: "ts BETWEEN '2025-01-01' AND '2025-01-03 23:59:59'", want: func(t time.Time) any {
			return !t.Before(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)) && t.Before(time.Date(2025, 1, 4, 0, 0, 0, 0, time.UTC))
		}},
		{col: "ts", pred: "ts >= TIMESTAMP('2025-01-09 12:00:00') - INTERVAL 7 DAY", want: func(t time.Time) any { return !t.Before(time.Date(2025, 1, 2, 12, 0, 0, 0, time.UTC)) }},
		{col: "ts", pred: "ts BETWEEN FROM_UNIXTIME(1735689600) AND FROM_UNIXTIME(1735775999)", want: func(t time.Time) any { return t.Unix() >= 1735689600 && t.Unix() <= 1735775999 }},
		{col: "ts", pred: "UNIX_TIMESTAMP(ts) >= 1735776000 AND UNIX_TIMESTAMP(ts) < 1735862400", want: func(t time.Time) any { return t.Unix() >= 1735776000 && t.Unix() < 1735862400 }},
		{col: "ts", pred: "ts >= STR_TO_DATE('2025-01-05 00:00:00.000000', '%Y-%m-%d %H:%i:%s.%f') AND ts < STR_TO_DATE('2025-01-06 06:00:00', '%Y-%m-%d %H:%i:%s')", want: func(t time.Time) any {
			return !t.Before(time.Date(2025, 1, 5, 0, 0, 0, 0, time.UTC)) && t.Before(time.Date(2025, 1, 6, 6, 0, 0, 0, time.UTC))
		}},
		{col: "ts", pred: "ts >= DATE(DATE_ADD(TIMESTAMP('2025-01-09 13:14:15'), INTERVAL -3 day)) AND ts < DATE(TIMESTAMP('2025-01-09 13:14:15'))", want: func(t time.Time) any {
			return !t.Before(time.Date(2025, 1, 6, 0, 0, 0, 0, time.UTC)) && t.Before(time.Date(2025, 1, 9, 0, 0, 0, 0, time.UTC))
		}},
		{col: "ts", pred: "DATE(ts) = '2025-01-02'", want: func(t time.Time) any { return ymd(t) == "2025-01-02" }},
		{col: "ts", pred: "HOUR(ts) BETWEEN 9 AND 17 AND DAYOFWEEK(ts) NOT IN (1, 7)", want: func(t time.Time) any {
			return t.Hour() >= 9 && t.Hour() <= 17 && t.Weekday() != time.Sunday && t.Weekday() != time.Saturday
		}},
		{col: "ts", pred: "YEAR(ts) = 2025", want: func(t time.Time) any { return t.Year() == 2025 }},
		{col: "ts", pred: "DATE(ts) LIKE '2025-01-0%'", want: func(t time.Time) any { return strings.HasPrefix(t.Format(time.DateTime), "2025-01-0") }},
		{col: "ts", pred: "ts LIKE '2025-01-0%'", msg: "finer than the bins of ts"},
		{col: "d", pred: "d < '2025-01-15'", want: func(t time.Time) any { return ymd(t) < "2025-01-15" }},
		{col: "d", pred: "d > CURDATE() - INTERVAL 1 MONTH", want: func(t time.Time) any { return ymd(t) > "2025-02-10" }},
		{col: "d", pred: "DATEDIFF('2025-03-01', d) BETWEEN 0 AND 6", want: func(t time.Time) any {
			d := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC).Sub(t).Hours() / 24
			return d >= 0 && d <= 6
		}},
		{col: "d", pred: "TIMESTAMPDIFF(MONTH, d, '2025-03-15') = 1", want: func(t time.Time) any {
			return !t.After(time.Date(2025, 2, 15, 0, 0, 0, 0, time.UTC)) && t.After(time.Date(2025, 1, 15, 0, 0, 0, 0, time.UTC))
		}},
		{col: "mo", pred: "mo >= '2025-01-01' AND mo < '2025-07-01'", want: func(t time.Time) any { return t.Year() == 2025 && t.Month() < 7 }},
		{col: "mo", pred: "EXTRACT(QUARTER FROM mo) = 2", want: func(t time.Time) any { return (t.Month()-1)/3 == 1 }},
		// Buckets: Grafana, Superset and Metabase over bins at least as coarse.
		{col: "ts", key: "UNIX_TIMESTAMP(ts) DIV 3600 * 3600", want: func(t time.Time) any { return t.Unix() / 3600 * 3600 }},
		{col: "ts", key: "UNIX_TIMESTAMP(ts) DIV 86400 * 86400", want: func(t time.Time) any { return t.Unix() / 86400 * 86400 }},
		// CAST(x AS SIGNED) rounds a DECIMAL: Grafana's newer $__timeGroup
		// buckets are centred on multiples of the interval.
		{col: "ts", key: "CAST(CAST(UNIX_TIMESTAMP(ts)/(7200) AS SIGNED)*7200 AS SIGNED)", want: func(t time.Time) any { return int64(math.Round(float64(t.Unix())/7200)) * 7200 }},
		{col: "ts", key: "CAST(CAST(UNIX_TIMESTAMP(ts)/(3600) AS SIGNED)*3600 AS SIGNED)", msg: "finer than the bins of ts (width 1h)"},
		{col: "ts", key: "DATE(ts)", want: func(t time.Time) any { return ymd(t) }},
		{col: "ts", key: "DATE_ADD(DATE(ts), INTERVAL HOUR(ts) HOUR)", want: func(t time.Time) any { return t.Truncate(time.Hour).Format(time.DateTime) }},
		{col: "ts", key: "DATE(DATE_SUB(ts, INTERVAL DAYOFWEEK(ts) - 1 DAY))", want: func(t time.Time) any { return ymd(sunday(t)) }},
		{col: "ts", key: "DATE(DATE_SUB(ts, INTERVAL DAYOFMONTH(ts) - 1 DAY))", want: func(t time.Time) any { return ymd(monthStart(t)) }},
		{col: "ts", key: "STR_TO_DATE(DATE_FORMAT(ts, '%Y-%m-%d %H'), '%Y-%m-%d %H')", want: func(t time.Time) any { return t.Truncate(time.Hour).Format(time.DateTime) }},
		{col: "ts", key: "STR_TO_DATE(CONCAT(YEARWEEK(ts), ' Sunday'), '%X%V %W')", want: func(t time.Time) any { return ymd(sunday(t)) }},
		{col: "ts", key: "STR_TO_DATE(CONCAT(DATE_FORMAT(ts, '%Y-%m'), '-01'), '%Y-%m-%d')", want: func(t time.Time) any { return ymd(monthStart(t)) }},
		{col: "ts", key: "DATE(DATE_SUB(ts, INTERVAL DAYOFYEAR(ts) - 1 DAY))", want: func(t time.Time) any { return fmt.Sprintf("%d-01-01", t.Year()) }},
		{col: "ts", key: "DATE(DATE_SUB(ts, INTERVAL DAYOFWEEK(DATE_SUB(ts, INTERVAL 1 DAY)) - 1 DAY))", want: func(t time.Time) any {
			return ymd(t.AddDate(0, 0, -(int(t.Weekday())+6)%7)) // Superset's Monday weeks
		}},
		{col: "ts", key: "MAKEDATE(YEAR(ts), 1)", want: func(t time.Time) any { return fmt.Sprintf("%d-01-01", t.Year()) }},
		{col: "ts", key: "HOUR(ts)", want: func(t time.Time) any { return t.Hour() }},
		{col: "ts", key: "DAYNAME(ts)", want: func(t time.Time) any { return t.Weekday().String() }},
		{col: "ts", key: "DATE_FORMAT(ts, '%Y-%m-%d %H:00')", want: func(t time.Time) any { return t.Format("2006-01-02 15:00") }},
		{col: "ts", key: "FROM_UNIXTIME(UNIX_TIMESTAMP(ts) DIV 21600 * 21600)", want: func(t time.Time) any {
			return time.Unix(t.Unix()/21600*21600, 0).UTC().Format(time.DateTime)
		}},
		{col: "ts", key: "MINUTE(ts)", msg: "GROUP BY MINUTE(ts) is finer than the bins of ts (width 1h)"},
		{col: "ts", key: "STR_TO_DATE(DATE_FORMAT(ts, '%Y-%m-%d %H:%i'), '%Y-%m-%d %H:%i')", msg: "finer than the bins of ts (width 1h)"},
		{col: "d", key: "TO_DAYS(d)", want: func(t time.Time) any { return t.Unix()/day + 719528 }},
		{col: "d", key: "FROM_DAYS(TO_DAYS(d) + 1)", want: func(t time.Time) any { return ymd(t.AddDate(0, 0, 1)) }},
		{col: "d", key: "TIMESTAMP(d)", want: func(t time.Time) any { return t.Format(time.DateTime) }},
		{col: "d", key: "DAYOFYEAR(d)", want: func(t time.Time) any { return t.YearDay() }},
		{col: "d", key: "QUARTER(d)", want: func(t time.Time) any { return int(t.Month()-1)/3 + 1 }},
		{col: "d", key: "MONTHNAME(d)", want: func(t time.Time) any { return t.Month().String() }},
		{col: "d", key: "DAY(d) + 0", want: func(t time.Time) any { return t.Day() }},
		{col: "d", key: "WEEKOFYEAR(d)", want: func(t time.Time) any { _, w := t.ISOWeek(); return w }},
		{col: "d", key: "EXTRACT(YEAR FROM d)", want: func(t time.Time) any { return t.Year() }},
		{col: "ts", key: "TO_SECONDS(ts) DIV 86400", want: func(t time.Time) any { return t.Unix()/day + 719528 }},
		{col: "ts", key: "SECOND(ts)", msg: "GROUP BY SECOND(ts) is finer than the bins of ts (width 1h)"},
		{col: "ts", key: "DATE_FORMAT(ts, '%Y week %U')", want: func(t time.Time) any {
			jan1 := time.Date(t.Year(), 1, 1, 0, 0, 0, 0, time.UTC)
			firstSunday := jan1.AddDate(0, 0, (7-int(jan1.Weekday()))%7)
			w := 0
			if !t.Before(firstSunday) {
				w = int(t.Sub(firstSunday).Hours()/24/7) + 1
			}
			return fmt.Sprintf("%d week %02d", t.Year(), w)
		}},
		{col: "d", key: "MONTH(d)", want: func(t time.Time) any { return int(t.Month()) }},
		{col: "d", key: "LAST_DAY(d)", want: func(t time.Time) any { return ymd(monthStart(t).AddDate(0, 1, -1)) }},
		{col: "d", key: "WEEKDAY(d)", want: func(t time.Time) any { return (int(t.Weekday()) + 6) % 7 }},
		{col: "d", key: "HOUR(d)", want: func(t time.Time) any { return 0 }},
		{col: "d", key: "STR_TO_DATE(CONCAT(YEAR(d), '-', ((QUARTER(d) * 3) - 2), '-01'), '%Y-%m-%d')", want: func(t time.Time) any {
			return ymd(time.Date(t.Year(), (t.Month()-1)/3*3+1, 1, 0, 0, 0, 0, time.UTC))
		}},
		{col: "mo", key: "MAKEDATE(YEAR(mo), 1) + INTERVAL QUARTER(mo) QUARTER - INTERVAL 1 QUARTER", want: func(t time.Time) any {
			return ymd(time.Date(t.Year(), (t.Month()-1)/3*3+1, 1, 0, 0, 0, 0, time.UTC))
		}},
		{col: "mo", key: "DATE_FORMAT(mo, '%b %Y')", want: func(t time.Time) any { return t.Format("Jan 2006") }},
		{col: "mo", key: "DATE(mo)", msg: "GROUP BY DATE(mo) is finer than the bins of mo (width 1mo): it splits the bin [2024-01-01 00:00:00, 2024-02-01 00:00:00)"},
		{col: "wk", key: "DATE(DATE_SUB(wk, INTERVAL DAYOFWEEK(wk) - 1 DAY))", want: func(t time.Time) any { return ymd(sunday(t)) }},
		{col: "wk", key: "YEARWEEK(wk)", want: func(t time.Time) any {
			s := sunday(t)
			first := time.Date(s.Year(), 1, 1, 0, 0, 0, 0, time.UTC)
			firstSunday := first.AddDate(0, 0, (7-int(first.Weekday()))%7)
			return s.Year()*100 + int(s.Sub(firstSunday).Hours()/24/7) + 1
		}},
		{col: "wk", key: "WEEK(wk)", msg: "finer than the bins of wk (width 7d): it splits the bin [2024-12-29, 2025-01-05)"},
		{col: "wk", key: "MONTH(wk)", msg: "finer than the bins of wk (width 7d)"},
		// Refusals that say what to write instead.
		{col: "ts", pred: "ts >= '2025-01-03 12:30:00'", msg: "ts >= '2025-01-03 12:30:00' is finer than the bins of ts (width 1h): it splits the bin [2025-01-03 12:00:00, 2025-01-03 13:00:00)"},
		{col: "ts", pred: "ts > 1735689600", msg: "FROM_UNIXTIME(1735689600)"},
		{col: "ts", pred: "ts = 'yesterday'", msg: "'yesterday' is not a date or time"},
		{col: "ts", pred: "ts + 0 > 5", msg: "arithmetic on a date or datetime is not supported"},
		{col: "ts", pred: "FLOOR(ts) > 5", msg: "FLOOR of a DATETIME is not supported"},
		{col: "n", pred: "YEAR(n) = 2025", msg: "YEAR takes a date or datetime"},
	}
	protected := func(_, table string) bool { return table == "t" }
	now := time.Date(2025, 3, 10, 8, 0, 0, 0, time.UTC)
	tab := timeTable(t)
	for _, tc := range cases {
		sql := "SELECT COUNT(*) FROM t WHERE " + tc.pred
		if tc.key != "" {
			sql = "SELECT " + tc.key + " AS k, COUNT(*) FROM t GROUP BY k"
		}
		t.Run(sql, func(t *testing.T) {
			sts, err := parser.ParseAt(sql, protected, nil, now)
			if err != nil {
				t.Fatal(err)
			}
			w, err := Compile(tab, []*parser.Statement{&sts[0]})
			if tc.msg != "" {
				if e, ok := err.(*parser.Error); !ok || !strings.Contains(e.Message, tc.msg) {
					t.Fatalf("got %v, want a refusal containing %q", err, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(w.Columns) != 1 || w.Columns[0].Name != tc.col {
				t.Fatalf("columns %v", w.Columns)
			}
			col, q := w.Columns[0], w.Queries[0]
			for i, cell := range col.Cells() {
				if cell.Kind != catalog.CellBin {
					continue
				}
				// The brute force: the value at seconds across the bin,
				// which must agree (else compile had to refuse).
				last := int64(cell.Hi) - 1
				if col.DateOnly {
					last = int64(cell.Hi) - day
				}
				var want any
				for k, s := range []int64{int64(cell.Lo), int64(cell.Lo) + 1, (int64(cell.Lo) + last) / 2, last} {
					if col.DateOnly {
						s -= s % day
					}
					v := fmt.Sprint(tc.want(time.Unix(s, 0).UTC()))
					if k > 0 && v != want {
						t.Fatalf("bin %d: the brute force varies (%v, %v) but compile accepted", i, want, v)
					}
					want = v
				}
				c := []int{i}
				if tc.pred != "" {
					if got := fmt.Sprint(q.Aggregates[0].Eval(c) == 1); got != want {
						t.Fatalf("bin %d [%s]: truth %v, brute force %v", i, catalog.FormatTime(int64(cell.Lo), false), got, want)
					}
					continue
				}
				found := false
				for r := 0; r < q.RowCount(w); r++ {
					if q.Aggregates[q.Agg(0, int(q.RowAt(r).Expr))].Eval(c) != 0 {
						if found {
							t.Fatalf("bin %d in two groups", i)
						}
						found = true
						if got := fmt.Sprint(q.Label(w, q.Items[0], r)); got != want {
							t.Fatalf("bin %d [%s]: group %q, brute force %q", i, catalog.FormatTime(int64(cell.Lo), false), got, want)
						}
					}
				}
				if !found {
					t.Fatalf("bin %d in no group", i)
				}
			}
		})
	}
}

// Time group keys are DATE and DATETIME columns (MySQL's types), numbers
// stay numbers, and the groups a time filter excludes by construction are
// not returned (Grafana's time filter around its time group).
func TestTimeLabelTypes(t *testing.T) {
	protected := func(_, table string) bool { return table == "t" }
	for _, tc := range []struct {
		sql  string
		typ  LabelType
		rows int
		last any
	}{
		{"SELECT DATE(ts) AS day, COUNT(*) FROM t WHERE ts BETWEEN '2025-01-01 00:00:00' AND '2025-01-03 23:59:59' GROUP BY 1", LabelDate, 3, "2025-01-03"},
		{"SELECT DATE_ADD(DATE(ts), INTERVAL HOUR(ts) HOUR) AS h, COUNT(*) FROM t WHERE ts >= '2025-01-09' GROUP BY 1", LabelDatetime, 24, "2025-01-09 23:00:00"},
		{"SELECT UNIX_TIMESTAMP(ts) DIV 3600 * 3600 AS time, COUNT(*) FROM t WHERE ts BETWEEN FROM_UNIXTIME(1736380800) AND FROM_UNIXTIME(1736395199) GROUP BY 1 ORDER BY 1", LabelInt, 4, int64(1736391600)},
		{"SELECT ts, COUNT(*) FROM t WHERE ts >= '2025-01-09 20:00' GROUP BY ts", LabelDatetime, 4, "2025-01-09 23:00:00"},
		{"SELECT mo, COUNT(*) FROM t GROUP BY mo", LabelDatetime, 24, "2025-12-01 00:00:00"},
	} {
		sts, err := parser.ParseAt(tc.sql, protected, nil, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		w, err := Compile(timeTable(t), []*parser.Statement{&sts[0]})
		if err != nil {
			t.Fatalf("%s: %v", tc.sql, err)
		}
		q := w.Queries[0]
		if q.Items[0].LabelType != tc.typ || q.RowCount(w) != tc.rows {
			t.Errorf("%s: label type %d, %d rows; want %d, %d", tc.sql, q.Items[0].LabelType, q.RowCount(w), tc.typ, tc.rows)
			continue
		}
		if got := q.Label(w, q.Items[0], tc.rows-1); got != tc.last {
			t.Errorf("%s: last label %#v, want %#v", tc.sql, got, tc.last)
		}
	}
}

// FuzzTimeLiteral: reading a time constant never panics, and what it reads
// prints back to a constant it reads as the same time.
func FuzzTimeLiteral(f *testing.F) {
	for _, s := range []string{"2025-01-01", "2025/1/2 3:04:05", "20250101", "20250101123456", "25-01-01", "2025-01-01T10:00:00.123Z", "2025-02-30", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sec, dateOnly, ok := parseTimeLiteral(s)
		if !ok {
			return
		}
		back, _, ok := parseTimeLiteral(catalog.FormatTime(sec, dateOnly))
		if !ok || back != sec {
			t.Fatalf("%q -> %d -> %q", s, sec, catalog.FormatTime(sec, dateOnly))
		}
	})
}

// FuzzStrToDate: STR_TO_DATE never panics on any text and format.
func FuzzStrToDate(f *testing.F) {
	f.Add("202530 Sunday", "%X%V %W")
	f.Add("2025-01-31 10:11:12.5", "%Y-%m-%d %H:%i:%s.%f")
	f.Add("Jan 5 25 3PM", "%b %e %y %l%p")
	f.Fuzz(func(t *testing.T, s, format string) {
		v := strToDate(s, format)
		if v.kind != vNull && !v.isTime() {
			t.Fatalf("STR_TO_DATE(%q, %q) = %+v", s, format, v)
		}
	})
}

// The group limit counts the groups the WHERE admits: Grafana's hourly
// bucket over a year of hourly bins (8,760 groups over the domain) with a
// one-week time filter has 168, and compiles; without the filter it is
// refused. The admitted groups' counts match a brute force over the hours.
func TestGroupLimitCountsAdmittedGroups(t *testing.T) {
	y := `database: d
sources:
  s: {driver: sqlite, path: x.sqlite}
tables:
  t:
    budget: {total: 1, per_user: 1, default_per_query: 0.1}
    columns:
      ts: {type: datetime, min: '2025-01-01 00:00:00', max: '2025-12-31 23:59:59', width: 1h}
`
	cat, err := catalog.Parse("t.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	protected := func(_, table string) bool { return table == "t" }
	compileSQL := func(sql string) (*Workload, error) {
		sts, err := parser.ParseAt(sql, protected, nil, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return Compile(cat.Tables[0], []*parser.Statement{&sts[0]})
	}
	const bucket = "SELECT UNIX_TIMESTAMP(ts) DIV 3600 * 3600 AS time, COUNT(*) FROM t "
	w, err := compileSQL(bucket + "WHERE ts BETWEEN '2025-12-01 00:00:00' AND '2025-12-07 23:59:59' GROUP BY 1 ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	q := w.Queries[0]
	if n := q.RowCount(w); n != 168 {
		t.Fatalf("%d rows, want 168", n)
	}
	first := time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC).Unix()
	if got := q.Label(w, q.Items[0], 0); got != first {
		t.Errorf("first label %#v, want %d", got, first)
	}
	if got := q.Label(w, q.Items[0], 167); got != first+167*3600 {
		t.Errorf("last label %#v, want %d", got, first+167*3600)
	}
	_, err = compileSQL(bucket + "GROUP BY 1")
	if err == nil || !strings.Contains(err.Error(), "more than 4096 groups") {
		t.Fatalf("unfiltered: %v, want the group limit", err)
	}
}

// The indicators of a batch's expression groups are bounded in all, from
// public sizes: DATE(ts) over a year of hourly bins compiles, over a year
// of minutes (365 × 525,600 entries) it is refused with the sizes and
// what to do, before any indicator is built. (engine's
// BenchmarkLongTimePanels compiles DATE(ts) over five years of hours,
// 1,826 × 43,824, within the limit.)
func TestIndicatorLimit(t *testing.T) {
	compileAt := func(width, from string, sqls ...string) (*Workload, error) {
		y := fmt.Sprintf(`database: d
sources:
  s: {driver: sqlite, path: x.sqlite}
tables:
  t:
    budget: {total: 1, per_user: 1, default_per_query: 0.1}
    columns:
      ts: {type: datetime, min: '%s 00:00:00', max: '2025-12-31 23:59:59', width: %s}
`, from, width)
		cat, err := catalog.Parse("t.yaml", []byte(y))
		if err != nil {
			t.Fatal(err)
		}
		var sts []*parser.Statement
		for _, sql := range sqls {
			st, err := parser.ParseAt(sql, func(_, table string) bool { return table == "t" }, nil, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			sts = append(sts, &st[0])
		}
		return Compile(cat.Tables[0], sts)
	}
	const days = "SELECT DATE(ts) AS d, COUNT(*) FROM t GROUP BY 1"
	if _, err := compileAt("1h", "2025-01-01", days); err != nil {
		t.Fatalf("a year of hours: %v", err)
	}
	_, err := compileAt("1m", "2025-01-01", days)
	var pe *parser.Error
	if !errors.As(err, &pe) || pe.Code != parser.CodeDPRefused || !strings.Contains(err.Error(), "365 groups × 525600 cells") || !strings.Contains(err.Error(), "coarser width") {
		t.Fatalf("a year of minutes: %v, want the indicator limit", err)
	}
}
