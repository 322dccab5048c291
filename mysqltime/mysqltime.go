package mysqltime

import (
	"strconv"
	"strings"
	"time"
)

// Day is the seconds of one day.
const Day = 86400

// Week modes of WEEK(t, mode): MySQL's flag bits.
const (
	WeekMondayFirst  = 1
	WeekYear         = 2
	WeekFirstWeekday = 4
)

func DaysInMonth(y, m int) int { return time.Date(y, time.Month(m)+1, 0, 0, 0, 0, 0, time.UTC).Day() }

func FloorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// FormatUnits lists the calendar units a DATE_FORMAT string reads, and
// whether it reads a week number that restarts with the year (%U, %u).
func FormatUnits(format string) (units []string, sameYear bool) {
	for i := 0; i+1 < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		i++
		switch format[i] {
		case 's', 'S', 'f', 'T', 'r':
			units = append(units, "second")
		case 'i':
			units = append(units, "minute")
		case 'H', 'k', 'h', 'I', 'l', 'p':
			units = append(units, "hour")
		case 'd', 'e', 'j', 'a', 'W', 'w', 'D':
			units = append(units, "day")
		case 'U', 'X', 'V':
			units = append(units, "week0")
			sameYear = sameYear || format[i] == 'U'
		case 'u', 'x', 'v':
			units = append(units, "week1")
			sameYear = sameYear || format[i] == 'u'
		case 'm', 'c', 'b', 'M':
			units = append(units, "month")
		case 'Y', 'y':
			units = append(units, "year")
		}
	}
	return units, sameYear
}

// DateFormat is MySQL's DATE_FORMAT in English.
func DateFormat(t time.Time, format string) string {
	var b strings.Builder
	two := func(n int) { b.WriteString(pad(n, 2)) }
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		switch format[i] {
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'b':
			b.WriteString(t.Month().String()[:3])
		case 'c':
			b.WriteString(strconv.Itoa(int(t.Month())))
		case 'D':
			d := t.Day()
			suffix := "th"
			if d/10 != 1 {
				switch d % 10 {
				case 1:
					suffix = "st"
				case 2:
					suffix = "nd"
				case 3:
					suffix = "rd"
				}
			}
			b.WriteString(strconv.Itoa(d) + suffix)
		case 'd':
			two(t.Day())
		case 'e':
			b.WriteString(strconv.Itoa(t.Day()))
		case 'f':
			b.WriteString("000000")
		case 'H':
			two(t.Hour())
		case 'h', 'I':
			two((t.Hour()+11)%12 + 1)
		case 'i':
			two(t.Minute())
		case 'j':
			b.WriteString(pad(t.YearDay(), 3))
		case 'k':
			b.WriteString(strconv.Itoa(t.Hour()))
		case 'l':
			b.WriteString(strconv.Itoa((t.Hour()+11)%12 + 1))
		case 'M':
			b.WriteString(t.Month().String())
		case 'm':
			two(int(t.Month()))
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'r':
			b.WriteString(DateFormat(t, "%h:%i:%s %p"))
		case 'S', 's':
			two(t.Second())
		case 'T':
			b.WriteString(DateFormat(t, "%H:%i:%s"))
		case 'U':
			w, _ := CalcWeek(t, WeekMode(0))
			two(w)
		case 'u':
			w, _ := CalcWeek(t, WeekMode(1))
			two(w)
		case 'V':
			w, _ := CalcWeek(t, WeekMode(2)|WeekYear)
			two(w)
		case 'v':
			w, _ := CalcWeek(t, WeekMode(3)|WeekYear)
			two(w)
		case 'W':
			b.WriteString(t.Weekday().String())
		case 'w':
			b.WriteString(strconv.Itoa(int(t.Weekday())))
		case 'X':
			_, y := CalcWeek(t, WeekMode(2)|WeekYear)
			b.WriteString(pad(y, 4))
		case 'x':
			_, y := CalcWeek(t, WeekMode(3)|WeekYear)
			b.WriteString(pad(y, 4))
		case 'Y':
			b.WriteString(pad(t.Year(), 4))
		case 'y':
			two(t.Year() % 100)
		default:
			b.WriteByte(format[i])
		}
	}
	return b.String()
}

func pad(n, w int) string {
	s := strconv.Itoa(n)
	for len(s) < w {
		s = "0" + s
	}
	return s
}

// WeekMode turns WEEK()'s mode argument into calc_week's flags.
func WeekMode(mode int) int {
	m := mode & 7
	if m&WeekMondayFirst == 0 {
		m ^= WeekFirstWeekday
	}
	return m
}

// Daynr is MySQL's day number (days since year 0).
func Daynr(t time.Time) int { return int(FloorDiv(t.Unix(), Day)) + 719528 }

func DaysInYear(y int) int {
	if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
		return 366
	}
	return 365
}

// CalcWeek is MySQL's calc_week: the week number of t under the flags, and
// the year the week belongs to.
func CalcWeek(t time.Time, flags int) (week, year int) {
	mondayFirst := flags&WeekMondayFirst != 0
	wYear := flags&WeekYear != 0
	firstWeekday := flags&WeekFirstWeekday != 0
	dnr := Daynr(t)
	first := Daynr(time.Date(t.Year(), 1, 1, 0, 0, 0, 0, time.UTC))
	weekday := func(d int) int { // 0 = the first day of the week
		if mondayFirst {
			return (d + 5) % 7
		}
		return (d + 6) % 7
	}
	wd := weekday(first)
	year = t.Year()
	if t.Month() == 1 && t.Day() <= 7-wd {
		if !wYear && (firstWeekday && wd != 0 || !firstWeekday && wd >= 4) {
			return 0, year
		}
		wYear = true
		year--
		days := DaysInYear(year)
		first -= days
		wd = (wd + 53*7 - days) % 7
	}
	var days int
	if firstWeekday && wd != 0 || !firstWeekday && wd >= 4 {
		days = dnr - (first + (7 - wd))
	} else {
		days = dnr - (first - wd)
	}
	if wYear && days >= 52*7 {
		wd = (wd + DaysInYear(year)) % 7
		if !firstWeekday && wd < 4 || firstWeekday && wd == 0 {
			return 1, year + 1
		}
	}
	return days/7 + 1, year
}

// AddInterval is DATE_ADD(t, INTERVAL n unit): months and years keep the
// day, clamped to the month's last (MySQL's rule).
func AddInterval(t time.Time, n int64, unit string) time.Time {
	switch unit {
	case "second":
		return t.Add(time.Duration(n) * time.Second)
	case "minute":
		return t.Add(time.Duration(n) * time.Minute)
	case "hour":
		return t.Add(time.Duration(n) * time.Hour)
	case "day":
		return t.AddDate(0, 0, int(n))
	case "week":
		return t.AddDate(0, 0, 7*int(n))
	}
	months := n
	switch unit {
	case "quarter":
		months *= 3
	case "year":
		months *= 12
	}
	total := int64(t.Year())*12 + int64(t.Month()) - 1 + months
	y, m := int(FloorDiv(total, 12)), int(total-FloorDiv(total, 12)*12)+1
	d := min(t.Day(), DaysInMonth(y, m))
	return time.Date(y, time.Month(m), d, t.Hour(), t.Minute(), t.Second(), 0, time.UTC)
}

// TimestampDiff is TIMESTAMPDIFF(unit, a, b): whole units from a to b,
// truncated toward zero.
func TimestampDiff(unit string, a, b time.Time) int64 {
	secs := b.Unix() - a.Unix()
	switch unit {
	case "second":
		return secs
	case "minute":
		return secs / 60
	case "hour":
		return secs / 3600
	case "day":
		return secs / Day
	case "week":
		return secs / (7 * Day)
	}
	neg := b.Before(a)
	if neg {
		a, b = b, a
	}
	months := int64(b.Year()-a.Year())*12 + int64(b.Month()-a.Month())
	// A month is whole when b's day and time of month reach a's.
	if b.Day() < a.Day() || b.Day() == a.Day() && b.Sub(time.Date(b.Year(), b.Month(), b.Day(), 0, 0, 0, 0, time.UTC)) < a.Sub(time.Date(a.Year(), a.Month(), a.Day(), 0, 0, 0, 0, time.UTC)) {
		months--
	}
	switch unit {
	case "quarter":
		months /= 3
	case "year":
		months /= 12
	}
	if neg {
		return -months
	}
	return months
}

// StrToDate is MySQL's STR_TO_DATE for the formats BI tools write: %Y %y
// %m %c %d %e %H %k %h %I %l %i %s %S %f %p %M %b %W %a %j %T, and %X%V
// or %x%v with a weekday (%W %a %w). The result is a DATE when the format
// reads no time of day, else a DATETIME; NULL when s does not match. It is
// one pass over the format with a case per specifier, as MySQL's is.
func StrToDate(s, format string) (sec int64, hasTime, ok bool) {
	y, mo, d, h, mi, se := 0, 0, 0, 0, 0, 0
	wy, wk, wd := -1, -1, -1
	sundayWeeks, pm, twelve, hasTime, yday := false, false, false, false, 0
	pos := 0
	num := func(maxDigits int) (int, bool) {
		start := pos
		for pos < len(s) && pos-start < maxDigits && s[pos] >= '0' && s[pos] <= '9' {
			pos++
		}
		if pos == start {
			return 0, false
		}
		n, _ := strconv.Atoi(s[start:pos])
		return n, true
	}
	word := func(names []string, short bool) (int, bool) {
		for i, n := range names {
			if short {
				n = n[:3]
			}
			if len(s)-pos >= len(n) && strings.EqualFold(s[pos:pos+len(n)], n) {
				pos += len(n)
				return i, true
			}
		}
		return 0, false
	}
	months := []string{"January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}
	days := []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c == ' ' {
			for pos < len(s) && s[pos] == ' ' {
				pos++
			}
			continue
		}
		if c != '%' || i+1 == len(format) {
			if pos >= len(s) || s[pos] != c {
				return 0, false, false
			}
			pos++
			continue
		}
		i++
		ok := true
		switch format[i] {
		case 'Y':
			y, ok = num(4)
		case 'y':
			y, ok = num(2)
			if y < 70 {
				y += 2000
			} else {
				y += 1900
			}
		case 'm', 'c':
			mo, ok = num(2)
		case 'd', 'e':
			d, ok = num(2)
		case 'j':
			yday, ok = num(3)
		case 'H', 'k':
			h, ok = num(2)
			hasTime = true
		case 'h', 'I', 'l':
			h, ok = num(2)
			twelve, hasTime = true, true
		case 'i':
			mi, ok = num(2)
			hasTime = true
		case 's', 'S':
			se, ok = num(2)
			hasTime = true
		case 'f':
			_, ok = num(6)
			hasTime = true
		case 'T':
			var ok1, ok2, ok3 bool
			h, ok1 = num(2)
			ok1 = ok1 && pos < len(s) && s[pos] == ':'
			pos++
			mi, ok2 = num(2)
			ok2 = ok2 && pos < len(s) && s[pos] == ':'
			pos++
			se, ok3 = num(2)
			ok, hasTime = ok1 && ok2 && ok3, true
		case 'p':
			switch {
			case len(s)-pos >= 2 && strings.EqualFold(s[pos:pos+2], "PM"):
				pm = true
			case len(s)-pos >= 2 && strings.EqualFold(s[pos:pos+2], "AM"):
			default:
				ok = false
			}
			pos += 2
		case 'M':
			mo, ok = word(months, false)
			mo++
		case 'b':
			mo, ok = word(months, true)
			mo++
		case 'W':
			wd, ok = word(days, false)
		case 'a':
			wd, ok = word(days, true)
		case 'w':
			wd, ok = num(1)
		case 'X':
			wy, ok = num(4)
			sundayWeeks = true
		case 'x':
			wy, ok = num(4)
		case 'V':
			wk, ok = num(2)
			sundayWeeks = true
		case 'v':
			wk, ok = num(2)
		case '%':
			ok = pos < len(s) && s[pos] == '%'
			pos++
		default:
			return 0, false, false
		}
		if !ok {
			return 0, false, false
		}
	}
	if twelve {
		if h < 1 || h > 12 {
			return 0, false, false
		}
		h %= 12
		if pm {
			h += 12
		}
	}
	var t time.Time
	switch {
	case wy >= 0 && wk >= 0 && wd >= 0:
		// %X%V: week 1 starts on the year's first Sunday; %x%v: ISO weeks,
		// week 1 holds the year's first Thursday, weeks start on Monday.
		jan1 := time.Date(wy, 1, 1, 0, 0, 0, 0, time.UTC)
		var start time.Time
		if sundayWeeks {
			start = jan1.AddDate(0, 0, (7-int(jan1.Weekday()))%7)
			start = start.AddDate(0, 0, 7*(wk-1)+wd)
		} else {
			off := (int(jan1.Weekday()) + 6) % 7 // days since Monday
			monday := jan1.AddDate(0, 0, -off)
			if off > 3 {
				monday = monday.AddDate(0, 0, 7)
			}
			start = monday.AddDate(0, 0, 7*(wk-1)+(wd+6)%7)
		}
		t = start.Add(time.Duration(h)*time.Hour + time.Duration(mi)*time.Minute + time.Duration(se)*time.Second)
	case yday > 0 && mo == 0 && d == 0:
		t = time.Date(y, 1, yday, h, mi, se, 0, time.UTC)
	default:
		if mo < 1 || mo > 12 || d < 1 || d > DaysInMonth(y, mo) || h > 23 || mi > 59 || se > 59 {
			return 0, false, false
		}
		t = time.Date(y, time.Month(mo), d, h, mi, se, 0, time.UTC)
	}
	if t.Year() < 1000 || t.Year() > 9999 {
		return 0, false, false
	}
	return t.Unix(), hasTime, true
}
