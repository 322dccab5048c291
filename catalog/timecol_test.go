package catalog

import (
	"strings"
	"testing"
	"time"
)

func timeCatalog(t *testing.T, cols string) *Table {
	t.Helper()
	y := "database: d\nsources:\n  s: {driver: sqlite, path: x.sqlite}\ntables:\n  t:\n    budget: {total: 1, per_user: 1, default_per_query: 0.1}\n    columns:\n" + cols
	cat, err := Parse("t.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return cat.Tables[0]
}

func sec(s string) int64 {
	v, _, ok := ParseTime(s)
	if !ok {
		panic(s)
	}
	return v
}

func TestTimeColumns(t *testing.T) {
	tab := timeCatalog(t, `
      ts: {type: datetime, min: '2025-01-01 00:00:00', max: '2025-01-02 23:59:59', width: 6h, out_of_domain: other, null: cell}
      d: {type: date, min: 2025-01-01, max: 2025-03-31, width: 1mo}
      w: {type: timestamp, min: 2025-01-06, max: 2025-01-31, width: 7d, out_of_domain: drop}
`)
	ts, d, w := tab.Column("ts"), tab.Column("d"), tab.Column("w")
	if ts.Declared() != 8 || ts.Size() != 10 || ts.SQLType() != "datetime" || ts.FormatWidth() != "6h" {
		t.Fatalf("ts: %d declared, %d cells, %s, %s", ts.Declared(), ts.Size(), ts.SQLType(), ts.FormatWidth())
	}
	if d.Declared() != 3 || d.Max != sec("2025-03-31 23:59:59") || d.SQLType() != "date" || d.FormatWidth() != "1mo" {
		t.Fatalf("d: %d bins, max %d", d.Declared(), d.Max)
	}
	// 2025-01-06 .. 2025-01-31 23:59:59 in weeks: 4 bins, the last cut at max.
	cells := w.Cells()
	if len(cells) != 4 || cells[3].Hi != float64(sec("2025-02-01")) || cells[3].Lo != float64(sec("2025-01-27")) {
		t.Fatalf("w cells %v", cells)
	}
	for _, tc := range []struct {
		col  *Column
		v    any
		want int
	}{
		{ts, "2025-01-01 00:00:00", 0},
		{ts, "2025-01-01 05:59:59", 0},
		{ts, "2025-01-01 05:59:59.999", 0},
		{ts, "2025-01-01T06:00:00Z", 1},
		{ts, "2025-01-01 08:00:00+02:00", 1}, // 06:00 UTC
		{ts, "2025-01-01", 0},
		{ts, "2025-01-02 23:59:59.5", 7},
		{ts, "2025-01-03", 8}, // other
		{ts, "2024-12-31 23:59:59", 8},
		{ts, "not a time", 8},
		{ts, nil, 9},
		{ts, sec("2025-01-01 12:00:00"), 2},
		{ts, float64(sec("2025-01-01 12:00:00")) - 0.5, 1},
		{ts, time.Date(2025, 1, 2, 18, 0, 0, 0, time.UTC), 7},
		{ts, []byte("2025-01-02 17:59:59.000000"), 6},
		{d, "2025-02-28", 1},
		{d, "2025-03-31 23:00:00", 2},
		{d, "2025-04-01", 2}, // clamped
		{d, "1999-04-01", 0},
		{d, "garbage", -1}, // no nearest bin: dropped under clamp
		{d, nil, -1},
		{w, "2025-01-12 23:59:59", 0},
		{w, "2025-01-13", 1},
		{w, "2025-02-01", -1},
	} {
		if got := tc.col.CellOf(tc.v); got != tc.want {
			t.Errorf("%s: CellOf(%v) = %d, want %d", tc.col.Name, tc.v, got, tc.want)
		}
	}
}

func TestTimeColumnErrors(t *testing.T) {
	for _, tc := range []struct{ col, want string }{
		{`{type: date, min: 2025-01-01, max: '2025-02-01 10:00'}`, "must be a date"},
		{`{type: datetime, min: 2025-01-15, max: 2025-03-01, width: 1mo}`, "start of a month"},
		{`{type: date, min: 2025-01-01, max: 2025-03-01, width: 1h}`, "whole days or months"},
		{`{type: datetime, min: 2025-01-01, max: 2025-03-01, width: 5 fortnights}`, "unknown unit"},
		{`{type: datetime, min: 2025-03-01, max: 2025-01-01}`, "before max"},
		{`{type: datetime, min: 2025-02-30, max: 2025-03-01}`, "must be a time"},
		{`{type: datetime, min: 2025-01-01, max: 2026-01-01, width: 1s}`, "more than"},
		{`{type: datetime, max: 2026-01-01}`, "min: required"},
	} {
		y := "database: d\nsources:\n  s: {driver: sqlite, path: x.sqlite}\ntables:\n  t:\n    budget: {total: 1, per_user: 1, default_per_query: 0.1}\n    columns:\n      c: " + tc.col + "\n"
		_, err := Parse("t.yaml", []byte(y))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.col, err, tc.want)
		}
	}
}

func TestParseWidth(t *testing.T) {
	for _, tc := range []struct {
		in     string
		s, m   int64
		failed bool
	}{
		{"1h", 3600, 0, false}, {"15min", 900, 0, false}, {"15m", 900, 0, false}, {"7d", 604800, 0, false},
		{"2w", 1209600, 0, false}, {"1mo", 0, 1, false}, {"3 months", 0, 3, false}, {"1y", 0, 12, false},
		{"0h", 0, 0, true}, {"h", 0, 0, true}, {"1.5h", 0, 0, true}, {"-1d", 0, 0, true},
	} {
		s, m, err := ParseWidth(tc.in)
		if (err != nil) != tc.failed || s != tc.s || m != tc.m {
			t.Errorf("ParseWidth(%q) = %d, %d, %v", tc.in, s, m, err)
		}
	}
}

// FuzzParseTime: ParseTime never panics, and what it accepts formats back
// to a time it reads again as the same second.
func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"2025-01-01", "2025-01-01 10:00", "2025-01-01T10:00:00.5Z", "2025-01-01 10:00:00-05:30", "9999-12-31 23:59:59", "2024-02-29", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sec, dateOnly, ok := ParseTime(s)
		if !ok {
			return
		}
		back, _, ok := ParseTime(FormatTime(sec, dateOnly))
		if !ok || back != sec {
			t.Fatalf("%q -> %d -> %q -> %d", s, sec, FormatTime(sec, dateOnly), back)
		}
	})
}

// FuzzParseWidth: ParseWidth never panics and gives exactly one of a
// positive number of seconds or months.
func FuzzParseWidth(f *testing.F) {
	for _, s := range []string{"1h", "7d", "1mo", "12 years", "99999999999999999999s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sec, months, err := ParseWidth(s)
		if err == nil && (sec > 0) == (months > 0) {
			t.Fatalf("%q: %d seconds, %d months", s, sec, months)
		}
	})
}
