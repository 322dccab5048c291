package compile

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/internal/testdb"
	"github.com/dpproxy/dpproxy/parser"

	_ "github.com/go-sql-driver/mysql"
)

var mariaServer = testdb.NewLazy(testdb.StartMariaDB)

func TestMain(m *testing.M) {
	code := m.Run()
	mariaServer.Stop()
	os.Exit(code)
}

// The date functions dpproxy evaluates give what a real MySQL-family
// server gives (MariaDB, session in UTC), on every day around two year
// ends (where week numbering is hardest) and at times of day that cross
// the hour and noon: the oracle for WEEK's eight modes, YEARWEEK,
// DATE_FORMAT, STR_TO_DATE, DATE_ADD's month clamping and TIMESTAMPDIFF.
func TestTimeFunctionsMatchMariaDB(t *testing.T) {
	srv := mariaServer.Get(t)
	db, err := srv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET time_zone = '+00:00'"); err != nil {
		t.Fatal(err)
	}
	exprs := []string{
		"WEEK({x})", "WEEK({x}, 1)", "WEEK({x}, 2)", "WEEK({x}, 3)", "WEEK({x}, 4)", "WEEK({x}, 5)", "WEEK({x}, 6)", "WEEK({x}, 7)",
		"YEARWEEK({x})", "YEARWEEK({x}, 1)", "YEARWEEK({x}, 3)", "WEEKOFYEAR({x})", "DAYOFWEEK({x})", "WEEKDAY({x})", "DAYOFYEAR({x})",
		"QUARTER({x})", "MONTHNAME({x})", "DAYNAME({x})", "TO_DAYS({x})", "UNIX_TIMESTAMP({x})", "LAST_DAY({x})",
		"DATE_FORMAT({x}, '%a %b %c %D %d %e %H %h %I %i %j %k %l %M %m %p %r %S %s %T %U %u %V %v %W %w %X %x %Y %y %%')",
		"STR_TO_DATE(CONCAT(YEARWEEK({x}), ' Sunday'), '%X%V %W')",
		"STR_TO_DATE(DATE_FORMAT({x}, '%x%v %W'), '%x%v %W')",
		"STR_TO_DATE(DATE_FORMAT({x}, '%Y-%m-%d %H'), '%Y-%m-%d %H')",
		"STR_TO_DATE(DATE_FORMAT({x}, '%b %e %y %l%p'), '%b %e %y %l%p')",
		"{x} + INTERVAL 1 MONTH", "{x} - INTERVAL 1 QUARTER", "{x} + INTERVAL 13 HOUR", "DATE_ADD({x}, INTERVAL -1 YEAR)",
		"TIMESTAMPDIFF(MONTH, '2024-01-31 12:00:00', {x})", "TIMESTAMPDIFF(WEEK, {x}, '2025-01-01')", "TIMESTAMPDIFF(HOUR, {x}, '2025-01-01')",
		"DATEDIFF({x}, '2024-02-29')", "EXTRACT(WEEK FROM {x})", "FROM_UNIXTIME(UNIX_TIMESTAMP({x}) DIV 3600 * 3600)",
	}
	var times []time.Time
	for _, start := range []time.Time{time.Date(2024, 12, 20, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 20, 0, 0, 0, 0, time.UTC), time.Date(2027, 12, 25, 0, 0, 0, 0, time.UTC), time.Date(2024, 2, 26, 0, 0, 0, 0, time.UTC)} {
		for d := 0; d < 16; d++ {
			for _, h := range []time.Duration{0, 11*time.Hour + 59*time.Minute + 59*time.Second, 12*time.Hour + 30*time.Minute, 23*time.Hour + 1} {
				times = append(times, start.AddDate(0, 0, d).Add(h))
			}
		}
	}
	ev := newEvaluator(&catalog.Table{Name: "t"})
	protected := func(_, table string) bool { return table == "t" }
	for _, e := range exprs {
		sts, err := parser.Parse("SELECT COUNT(*) FROM t WHERE "+strings.ReplaceAll(e, "{x}", "ts")+" IS NULL", protected)
		if err != nil {
			t.Fatalf("%s: %v", e, err)
		}
		expr := sts[0].Query.Where.(parser.ExprIsNull).X
		for _, x := range times {
			lit := "TIMESTAMP '" + x.Format(time.DateTime) + "'"
			var want *string
			if err := conn.QueryRowContext(ctx, "SELECT "+strings.ReplaceAll(e, "{x}", lit)).Scan(&want); err != nil {
				t.Fatalf("%s: %v", e, err)
			}
			v, err := ev.expr(expr, env{"ts": timeVal(x.Unix(), tDatetime)})
			if err != nil {
				t.Fatalf("%s at %s: %v", e, x, err)
			}
			got := fmt.Sprint(v.label())
			if v.kind == vNull {
				got = "<nil>"
			}
			w := "<nil>"
			if want != nil {
				w = *want
			}
			if got != w {
				t.Errorf("%s at %s: dpproxy %q, MariaDB %q", e, x.Format(time.DateTime), got, w)
			}
		}
	}
}
