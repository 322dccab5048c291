package postproc

import (
	"context"
	"reflect"
	"testing"
)

func TestEval(t *testing.T) {
	counts := Table{Name: "t", Columns: []Column{{"sex", Text}, {"n", Int}}, Rows: [][]any{{"Female", int64(10)}, {"Male", int64(30)}, {nil, int64(2)}}}
	days := Table{Name: "d", Columns: []Column{{"day", Date}, {"n", Float}}, Rows: [][]any{{"2025-06-01", 3.5}, {"2025-06-02", 4.5}}}
	tests := []struct {
		query string
		cols  []Column
		rows  [][]any
	}{
		{"SELECT AVG(n) FROM t", []Column{{"AVG(n)", Float}}, [][]any{{14.0}}},
		{"SELECT SUM(n) AS s, COUNT(*) AS c, MAX(n) AS m FROM t", []Column{{"s", Float}, {"c", Int}, {"m", Int}}, [][]any{{42.0, int64(3), int64(30)}}},
		{"SELECT sex FROM t WHERE n > 5 ORDER BY sex", []Column{{"sex", Text}}, [][]any{{"Female"}, {"Male"}}},
		{"SELECT day, n FROM d ORDER BY day DESC LIMIT 1", []Column{{"day", Date}, {"n", Float}}, [][]any{{"2025-06-02", 4.5}}},
		{"SELECT * FROM t WHERE sex IS NULL UNION ALL SELECT 'x', 1", []Column{{"sex", Text}, {"n", Int}}, [][]any{{nil, int64(2)}, {"x", int64(1)}}},
	}
	for _, tc := range tests {
		res, err := Eval(context.Background(), tc.query, []Table{counts, days})
		if err != nil {
			t.Fatalf("%s: %v", tc.query, err)
		}
		if !reflect.DeepEqual(res.Columns, tc.cols) {
			t.Errorf("%s: columns %v, want %v", tc.query, res.Columns, tc.cols)
		}
		if !reflect.DeepEqual(res.Rows, tc.rows) {
			t.Errorf("%s: rows %v, want %v", tc.query, res.Rows, tc.rows)
		}
	}
}

func TestEvalSeesOnlyItsTables(t *testing.T) {
	for _, q := range []string{"SELECT * FROM adult", "SELECT * FROM mysql.user", "SELECT * FROM nosuch.t"} {
		if _, err := Eval(context.Background(), q, nil); err == nil {
			t.Errorf("%s: no error", q)
		}
	}
}
