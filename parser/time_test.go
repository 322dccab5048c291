package parser

import (
	"reflect"
	"testing"
	"time"
)

// The request's time is one constant in every statement of a request, and
// INTERVAL arithmetic, DATE_ADD/DATE_SUB/ADDDATE, EXTRACT, TIMESTAMPADD,
// TIMESTAMPDIFF and CAST AS DATE/DATETIME have one form each in the IR.
func TestTimeExpressions(t *testing.T) {
	now := time.Date(2025, 3, 4, 5, 6, 7, 890, time.FixedZone("x", 3600))
	str := func(s string) Value { return Value{Lit: Literal{Text: s, Quoted: true}} }
	num := func(s string) Value { return Value{Lit: Literal{Text: s}} }
	ts := Col{Name: "age"}
	nowExpr := Call{Name: "timestamp", Args: []Expr{str("2025-03-04 04:06:07")}}
	for _, tc := range []struct {
		where string
		want  Expr
	}{
		{"NOW() - INTERVAL 7 DAY", Call{Name: "date_add", Args: []Expr{nowExpr, Neg{X: num("7")}, str("day")}}},
		{"CURRENT_TIMESTAMP", nowExpr},
		{"NOW(6)", nowExpr},
		{"UTC_TIMESTAMP()", nowExpr},
		{"CURDATE()", Call{Name: "date", Args: []Expr{str("2025-03-04")}}},
		{"UNIX_TIMESTAMP()", num("1741061167")},
		{"INTERVAL 1 HOUR + age", Call{Name: "date_add", Args: []Expr{ts, num("1"), str("hour")}}},
		{"DATE_SUB(age, INTERVAL DAYOFWEEK(age) - 1 DAY)", Call{Name: "date_add", Args: []Expr{ts, Neg{X: Arith{Op: "-", Left: Call{Name: "dayofweek", Args: []Expr{ts}}, Right: num("1")}}, str("day")}}},
		{"ADDDATE(age, 3)", Call{Name: "date_add", Args: []Expr{ts, num("3"), str("day")}}},
		{"EXTRACT(MONTH FROM age)", Call{Name: "extract", Args: []Expr{str("month"), ts}}},
		{"TIMESTAMPADD(MINUTE, 5, age)", Call{Name: "date_add", Args: []Expr{ts, num("5"), str("minute")}}},
		{"TIMESTAMPDIFF(DAY, age, NOW())", Call{Name: "timestampdiff", Args: []Expr{str("day"), ts, nowExpr}}},
		{"CAST(age AS DATE)", Call{Name: "date", Args: []Expr{ts}}},
		{"CONVERT(age, DATETIME)", Call{Name: "timestamp", Args: []Expr{ts}}},
		{"DAY(age)", Call{Name: "dayofmonth", Args: []Expr{ts}}},
	} {
		sts, err := ParseAt("SELECT COUNT(*) FROM adult WHERE "+tc.where+" > 1", protectedAdult, nil, now)
		if err != nil {
			t.Errorf("%s: %v", tc.where, err)
			continue
		}
		got := sts[0].Query.Where.(ExprCompare).Left
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %#v\nwant %#v", tc.where, got, tc.want)
		}
	}
}
