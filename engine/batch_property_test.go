package engine

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/exec"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/sources"
)

// A query means the same thing whatever it is batched with: on random
// tables whose columns drop, keep or clamp NULLs and out-of-domain values
// by every policy, random batches of queries (predicates with NULL tests,
// COUNT(*), COUNT(c), SUM, AVG, GROUP BY) answered without noise from the
// pushed-down histogram equal the same queries answered alone, and a
// brute-force evaluation over the real rows.
func TestBatchedQueriesKeepTheirMeaning(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 11))
	const trials = 20
	for trial := 0; trial < trials; trial++ {
		tab, rows := randomTable(rng, trial)
		dir := t.TempDir()
		writeRows(t, filepath.Join(dir, "d.sqlite"), tab, rows)
		cat := &catalog.Catalog{Database: "demo", Sources: map[string]*catalog.Source{"main": {Name: "main", Driver: "sqlite", Path: "d.sqlite"}}, Tables: []*catalog.Table{tab}}
		h, err := sources.Open(ctx, cat, sources.Options{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		protected := func(schema, table string) bool { return table == "t" }
		columns := func(table, column string) bool { return tab.Column(column) != nil }
		for batch := 0; batch < 10; batch++ {
			var texts []string
			for k := 2 + rng.IntN(3); k > 0; k-- {
				texts = append(texts, randomQuery(rng, tab))
			}
			var sts []*parser.Statement
			for _, text := range texts {
				st, err := parser.ParseWithColumns(text, protected, columns)
				if err != nil {
					t.Fatalf("%s: %v", text, err)
				}
				sts = append(sts, &st[0])
			}
			together, err := exactAnswers(ctx, h, tab, sts)
			if err != nil {
				t.Fatalf("batch %q: %v", texts, err)
			}
			for i, st := range sts {
				alone, err := exactAnswers(ctx, h, tab, []*parser.Statement{st})
				if err != nil {
					t.Fatalf("%s: %v", texts[i], err)
				}
				if fmt.Sprint(alone[0].Rows) != fmt.Sprint(together[i].Rows) {
					t.Fatalf("trial %d: %s\nalone    %v\nin batch %v\nbatch %q", trial, texts[i], alone[0].Rows, together[i].Rows, texts)
				}
				checkBrute(t, tab, rows, texts[i], st.Query, together[i])
			}
		}
		h.Close()
	}
}

// exactAnswers answers a batch from the pushed-down histogram without
// noise: every aggregate's exact value.
func exactAnswers(ctx context.Context, h *sources.Set, tab *catalog.Table, sts []*parser.Statement) ([]*Result, error) {
	w, err := compile.Compile(tab, sts)
	if err != nil {
		return nil, err
	}
	x, err := h.Histogram(ctx, tab, w.Columns)
	if err != nil {
		return nil, err
	}
	var out []*Result
	for _, q := range w.Queries {
		m := &measured{}
		for _, a := range q.Aggregates {
			v := exec.Contract(a, x, w.Sizes(), q.GroupCols)
			m.vals = append(m.vals, v)
			m.vars = append(m.vars, make([]float64, len(v)))
			m.half = append(m.half, make([]float64, len(v)))
		}
		out = append(out, assemble(w, q, m, nil))
	}
	return out, nil
}

// A random table: an integer column, a categorical one, and a second
// integer one. Their (NULL, out-of-domain) policies cycle with the trial
// through every allowed pair (7 for integers, 5 for categorical values),
// so that the trials cover them all.
func randomTable(rng *rand.Rand, trial int) (*catalog.Table, [][]any) {
	numeric := [][2]catalog.Policy{
		{catalog.PolicyDrop, catalog.PolicyDrop}, {catalog.PolicyCell, catalog.PolicyDrop},
		{catalog.PolicyDrop, catalog.PolicyClamp}, {catalog.PolicyCell, catalog.PolicyClamp},
		{catalog.PolicyDrop, catalog.PolicyOther}, {catalog.PolicyCell, catalog.PolicyOther}, {catalog.PolicyOther, catalog.PolicyOther},
	}
	categorical := [][2]catalog.Policy{
		{catalog.PolicyDrop, catalog.PolicyDrop}, {catalog.PolicyCell, catalog.PolicyDrop},
		{catalog.PolicyDrop, catalog.PolicyOther}, {catalog.PolicyCell, catalog.PolicyOther}, {catalog.PolicyOther, catalog.PolicyOther},
	}
	cols := []*catalog.Column{
		{Name: "a", Kind: catalog.IntegerRange, Min: 1, Max: 6, Width: 1},
		{Name: "s", Kind: catalog.Categorical, Values: []string{"p", "q", "r"}},
		{Name: "b", Kind: catalog.IntegerRange, Min: 0, Max: 3, Width: 1},
	}
	pa, ps, pb := numeric[trial%7], categorical[trial%5], numeric[(trial/7+trial)%7]
	cols[0].Null, cols[0].OutOfDomain = pa[0], pa[1]
	cols[1].Null, cols[1].OutOfDomain = ps[0], ps[1]
	cols[2].Null, cols[2].OutOfDomain = pb[0], pb[1]
	tab := &catalog.Table{Name: "t", Source: "main", Noise: catalog.Laplace, Columns: cols}
	var rows [][]any
	for i := 0; i < 300; i++ {
		row := make([]any, 3)
		switch r := rng.IntN(10); {
		case r == 0:
		case r == 1:
			row[0] = int64(9 + rng.IntN(3)) // above the domain
		case r == 2:
			row[0] = int64(-rng.IntN(2)) // below
		default:
			row[0] = int64(1 + rng.IntN(6))
		}
		switch r := rng.IntN(10); {
		case r == 0:
		case r == 1:
			row[1] = "zz"
		case r == 2:
			row[1] = "P" // the same value under the collation
		default:
			row[1] = []string{"p", "q", "r"}[rng.IntN(3)]
		}
		switch r := rng.IntN(8); {
		case r == 0:
		case r == 1:
			row[2] = int64(7)
		default:
			row[2] = int64(rng.IntN(4))
		}
		rows = append(rows, row)
	}
	return tab, rows
}

func writeRows(t *testing.T, path string, tab *catalog.Table, rows [][]any) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE t (a INTEGER, s TEXT, b INTEGER)`); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if _, err := tx.Exec(`INSERT INTO t VALUES (?, ?, ?)`, r...); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func randomPred(rng *rand.Rand, depth int) string {
	if depth > 0 && rng.IntN(3) == 0 {
		l, r := randomPred(rng, depth-1), randomPred(rng, depth-1)
		switch rng.IntN(3) {
		case 0:
			return "(" + l + " AND " + r + ")"
		case 1:
			return "(" + l + " OR " + r + ")"
		}
		return "NOT (" + l + ")"
	}
	num := func(col string) string {
		v := rng.IntN(9) - 1
		switch rng.IntN(6) {
		case 0:
			return fmt.Sprintf("%s = %d", col, v)
		case 1:
			return fmt.Sprintf("%s < %d", col, v)
		case 2:
			return fmt.Sprintf("%s >= %d", col, v)
		case 3:
			return fmt.Sprintf("%s BETWEEN %d AND %d", col, v, v+rng.IntN(3)-1)
		case 4:
			return fmt.Sprintf("%s IN (%d, %d)", col, v, rng.IntN(9)-1)
		}
		return fmt.Sprintf("%s <> %d", col, v)
	}
	switch rng.IntN(7) {
	case 0:
		return num("a")
	case 1:
		return num("b")
	case 2:
		v := []string{"p", "q", "r", "zz"}[rng.IntN(4)]
		if rng.IntN(2) == 0 {
			return fmt.Sprintf("s = '%s'", v)
		}
		return fmt.Sprintf("s IN ('%s', 'q')", v)
	case 3:
		return "s <> 'p'"
	case 4:
		c := []string{"a", "s", "b"}[rng.IntN(3)]
		if rng.IntN(2) == 0 {
			return c + " IS NULL"
		}
		return c + " IS NOT NULL"
	case 5:
		return "a > b"
	}
	return num("a")
}

func randomQuery(rng *rand.Rand, tab *catalog.Table) string {
	aggs := []string{"COUNT(*)", "COUNT(a)", "COUNT(s)", "COUNT(b)"}
	// A SUM over an other cell is refused (its values are unknown).
	if tab.Column("a").OutOfDomain != catalog.PolicyOther && tab.Column("a").Null != catalog.PolicyOther {
		aggs = append(aggs, "SUM(a)", "AVG(a)")
	}
	if tab.Column("b").OutOfDomain != catalog.PolicyOther && tab.Column("b").Null != catalog.PolicyOther {
		aggs = append(aggs, "SUM(b)", "SUM(CASE WHEN s = 'q' THEN b ELSE 0 END)")
	}
	var sel []string
	group := ""
	if rng.IntN(2) == 0 {
		group = []string{"a", "s", "b"}[rng.IntN(3)]
		sel = append(sel, group)
	}
	for k := 1 + rng.IntN(2); k > 0; k-- {
		sel = append(sel, aggs[rng.IntN(len(aggs))])
	}
	q := "SELECT " + strings.Join(sel, ", ") + " FROM t"
	if rng.IntN(4) != 0 {
		q += " WHERE " + randomPred(rng, 2)
	}
	if group != "" {
		q += " GROUP BY " + group
	}
	return q
}

// effective is a row's value in a column once the column's policies apply:
// its cell's value, NULL, the other cell, or dropped.
type effective struct {
	null, other, dropped bool
	num                  float64
	str                  string
}

func effectiveValue(c *catalog.Column, raw any) effective {
	if raw == nil {
		switch c.Null {
		case catalog.PolicyDrop:
			return effective{dropped: true}
		case catalog.PolicyOther:
			return effective{other: true}
		}
		return effective{null: true}
	}
	if c.Kind == catalog.Categorical {
		for _, v := range c.Values {
			if v == raw.(string) { // the sources bin text exactly
				return effective{str: v}
			}
		}
	} else {
		x := float64(raw.(int64))
		if x >= float64(c.Min) && x <= float64(c.Max) {
			return effective{num: x}
		}
		if c.OutOfDomain == catalog.PolicyClamp {
			return effective{num: math.Min(math.Max(x, float64(c.Min)), float64(c.Max))}
		}
	}
	if c.OutOfDomain == catalog.PolicyDrop {
		return effective{dropped: true}
	}
	return effective{other: true}
}

// brute evaluates a parsed predicate on one row's effective values with
// SQL's three-valued logic (1 true, 0 false, -1 unknown): the other cell
// is unknown under comparisons.
func brute(p parser.Pred, tab *catalog.Table, vals map[string]effective) int {
	cmpNum := func(v effective, op parser.CompareOp, y float64) int {
		if v.null || v.other {
			return -1
		}
		ok := map[parser.CompareOp]bool{parser.OpEq: v.num == y, parser.OpNe: v.num != y, parser.OpLt: v.num < y,
			parser.OpLe: v.num <= y, parser.OpGt: v.num > y, parser.OpGe: v.num >= y}[op]
		if ok {
			return 1
		}
		return 0
	}
	eqStr := func(c string, v effective, lit string) int {
		if v.null || v.other {
			return -1
		}
		if strings.EqualFold(v.str, lit) {
			return 1
		}
		return 0
	}
	not := func(x int) int {
		if x < 0 {
			return x
		}
		return 1 - x
	}
	atom := func(col string, op parser.CompareOp, lit parser.Literal) int {
		v := vals[col]
		if tab.Column(col).Kind == catalog.Categorical {
			r := eqStr(col, v, lit.Text)
			if op == parser.OpNe {
				return not(r)
			}
			return r
		}
		var y float64
		fmt.Sscan(lit.Text, &y)
		return cmpNum(v, op, y)
	}
	and := func(xs ...int) int {
		r := 1
		for _, x := range xs {
			if x == 0 {
				return 0
			}
			if x < 0 {
				r = -1
			}
		}
		return r
	}
	or := func(xs ...int) int {
		r := 0
		for _, x := range xs {
			if x == 1 {
				return 1
			}
			if x < 0 {
				r = -1
			}
		}
		return r
	}
	switch p := p.(type) {
	case nil:
		return 1
	case parser.Const:
		if p.Value {
			return 1
		}
		return 0
	case parser.Not:
		return not(brute(p.Term, tab, vals))
	case parser.And:
		var xs []int
		for _, t := range p.Terms {
			xs = append(xs, brute(t, tab, vals))
		}
		return and(xs...)
	case parser.Or:
		var xs []int
		for _, t := range p.Terms {
			xs = append(xs, brute(t, tab, vals))
		}
		return or(xs...)
	case parser.Compare:
		return atom(p.Column, p.Op, p.Value)
	case parser.Between:
		r := and(atom(p.Column, parser.OpGe, p.Lo), atom(p.Column, parser.OpLe, p.Hi))
		if p.Negated {
			return not(r)
		}
		return r
	case parser.In:
		var xs []int
		for _, l := range p.Values {
			xs = append(xs, atom(p.Column, parser.OpEq, l))
		}
		r := or(xs...)
		if p.Negated {
			return not(r)
		}
		return r
	case parser.IsNull:
		if vals[p.Column].null != p.Negated {
			return 1
		}
		return 0
	case parser.ExprCompare: // a > b
		l, r := vals[p.Left.(parser.Col).Name], vals[p.Right.(parser.Col).Name]
		if l.null || l.other || r.null || r.other {
			return -1
		}
		return cmpNum(l, p.Op, r.num)
	}
	panic(fmt.Sprintf("brute: %T", p))
}

// checkBrute compares a query's exact answer with a count over the rows.
func checkBrute(t *testing.T, tab *catalog.Table, rows [][]any, text string, q *parser.Query, res *Result) {
	t.Helper()
	// A dropped value drops its row from the whole query when the WHERE
	// or GROUP BY reads the column, else from the aggregates that read it.
	refs := map[string]bool{}
	for _, c := range parser.PredColumns(q.Where) {
		refs[c] = true
	}
	for _, g := range q.GroupBy {
		refs[g] = true
	}
	type acc struct{ count, sum, n float64 }
	groups := map[string][]acc{}
	names := []string{"a", "s", "b"}
	for _, raw := range rows {
		vals := map[string]effective{}
		dropped := false
		for i, n := range names {
			v := effectiveValue(tab.Column(n), raw[i])
			vals[n] = v
			dropped = dropped || (refs[n] && v.dropped)
		}
		if dropped || brute(q.Where, tab, vals) != 1 {
			continue
		}
		key := ""
		if len(q.GroupBy) > 0 {
			v := vals[q.GroupBy[0]]
			switch {
			case v.null:
				key = "<nil>"
			case v.other:
				key = "other"
			case tab.Column(q.GroupBy[0]).Kind == catalog.Categorical:
				key = v.str
			default:
				key = fmt.Sprint(int64(v.num))
			}
		}
		accs := groups[key]
		if accs == nil {
			accs = make([]acc, len(q.Select))
		}
		for i, it := range q.Select {
			col := it.Column
			argDropped := false
			for _, c := range parser.ItemColumns(it) {
				argDropped = argDropped || (it.Agg != parser.AggNone && vals[c].dropped)
			}
			switch {
			case argDropped:
			case it.Agg == parser.AggCount:
				accs[i].count++
			case it.Agg == parser.AggCountCol:
				if v := vals[col]; !v.null {
					accs[i].count++
				}
			case it.Arg != nil: // SUM(CASE WHEN s = 'q' THEN b ELSE 0 END)
				isQ := vals["s"].str == "q" && !vals["s"].other && !vals["s"].null
				switch {
				case !isQ:
					accs[i].n++ // ELSE 0
				case !vals["b"].null:
					accs[i].sum += vals["b"].num
					accs[i].n++
				}
			case it.Agg == parser.AggSum || it.Agg == parser.AggAvg:
				if v := vals[col]; !v.null {
					accs[i].sum += v.num
					accs[i].n++
				}
			}
		}
		groups[key] = accs
	}
	seen := map[string]bool{}
	for _, row := range res.Rows {
		key, start := "", 0
		if len(q.GroupBy) > 0 {
			key, start = fmt.Sprint(row[0]), 1
		}
		seen[key] = true
		accs := groups[key]
		for i := start; i < len(q.Select); i++ {
			it := q.Select[i]
			var want float64
			var a acc
			if accs != nil {
				a = accs[i]
			}
			switch it.Agg {
			case parser.AggCount, parser.AggCountCol:
				want = a.count
			case parser.AggSum:
				if a.n == 0 && row[i] == nil {
					continue // over no non-NULL value: NULL, as in MySQL
				}
				want = a.sum
			case parser.AggAvg:
				if a.n == 0 {
					continue // an empty group's AVG: dpproxy cannot know it is empty
				}
				want = a.sum / a.n
			}
			got, ok := toFloat(row[i])
			if !ok {
				if row[i] == nil && a.n == 0 && it.Agg != parser.AggCount && it.Agg != parser.AggCountCol {
					continue // NULL over no value by construction
				}
				t.Fatalf("%s: row %v column %d = %v", text, row, i, row[i])
			}
			if math.Abs(got-want) > 1e-3 {
				t.Fatalf("%s: group %q column %d: got %v, brute force %v (rows %v)", text, key, i, got, want, res.Rows)
			}
		}
	}
	for key, accs := range groups {
		if seen[key] {
			continue
		}
		for _, a := range accs {
			if a.count > 0 || a.n > 0 {
				t.Fatalf("%s: brute force has group %q (%+v), the answer does not: %v", text, key, accs, res.Rows)
			}
		}
	}
}
