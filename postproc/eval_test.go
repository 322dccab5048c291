package postproc

import (
	"context"
	"reflect"
	"sync"
	"testing"

	"github.com/dolthub/go-mysql-server/sql"
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
	ev := NewEvaluator()
	defer ev.Close()
	for _, tc := range tests {
		res, err := ev.Eval(context.Background(), tc.query, []Table{counts, days})
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
	ev := NewEvaluator()
	defer ev.Close()
	for _, q := range []string{"SELECT * FROM adult", "SELECT * FROM mysql.user", "SELECT * FROM nosuch.t"} {
		if _, err := ev.Eval(context.Background(), q, nil); err == nil {
			t.Errorf("%s: no error", q)
		}
	}
}

// TestConcurrentEvaluationsSeeTheirOwnTables runs evaluations of the same
// table name with different rows at once on one Evaluator: each must see
// only its own.
func TestConcurrentEvaluationsSeeTheirOwnTables(t *testing.T) {
	ev := NewEvaluator()
	defer ev.Close()
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tab := Table{Name: "t", Columns: []Column{{"n", Int}}, Rows: [][]any{{int64(i)}, {int64(i)}}}
			for range 5 {
				res, err := ev.Eval(context.Background(), "SELECT SUM(n), COUNT(*) FROM t", []Table{tab})
				if err != nil {
					t.Error(err)
					return
				}
				if want := [][]any{{float64(2 * i), int64(2)}}; !reflect.DeepEqual(res.Rows, want) {
					t.Errorf("evaluation %d: rows %v, want %v", i, res.Rows, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestEvalKeepsStatusCounters checks that evaluating leaves
// go-mysql-server's process-wide status counters (which the front's SHOW
// GLOBAL STATUS reads) as they were: building an engine per evaluation
// reset them.
func TestEvalKeepsStatusCounters(t *testing.T) {
	ev := NewEvaluator()
	defer ev.Close()
	sql.StatusVariables.IncrementGlobal("Threads_connected", 3)
	defer sql.StatusVariables.IncrementGlobal("Threads_connected", -3)
	_, before, _ := sql.StatusVariables.GetGlobal("Threads_connected")
	for range 3 {
		if _, err := ev.Eval(context.Background(), "SELECT 1", nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, after, _ := sql.StatusVariables.GetGlobal("Threads_connected"); after != before {
		t.Errorf("Threads_connected %v after evaluating, %v before", after, before)
	}
}
