package engine

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/sources"
)

// Each aggregate keeps MySQL's meaning whatever it shares a statement or a
// batch with. On random tables whose columns drop, keep (in a NULL cell) or
// clamp NULLs and out-of-domain values, or count them in an other cell, by
// every policy, random batches of random statements — several aggregates
// side by side (COUNT(*), COUNT(c), COUNT(CASE …), SUM and AVG of columns,
// of arithmetic and of CASE), WHERE with NULL tests and three-valued
// logic, GROUP BY a column, a CASE or a public table's column, HAVING,
// inner and left joins to a public table — go through the whole Engine
// (parser, compile, the real planner, measurement, stored measurements and
// stored answers, result assembly) with the noise switched off
// (withoutNoise), and every answer must equal (a) the same statement
// answered alone by another engine and (b) the truth: SQLite's own SQL
// over the rows with the catalog's policies applied (see meaningTruthSQL).
// Seeded, so a failure is reproducible; no tolerance but floating-point
// rounding, so no false failures.
func TestBatchesKeepMySQLMeaning(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	const trials = 7 // every NULL/out-of-domain policy pair of a and of b (7), and of s (5)
	var kinds = map[string]int{}
	for trial := range trials {
		meaningTrial(t, rng, trial, kinds)
	}
	// The property covers the reuse paths too: later batches answered
	// from stored measurements (derived) and stored answers (reuse); and
	// statements read through derived tables and CTEs (wrapped).
	t.Logf("ledger entries by kind: %v", kinds)
	if kinds[budget.KindDerived] == 0 || kinds[budget.KindReuse] == 0 || kinds[budget.KindCharge] == 0 || kinds["wrapped"] == 0 {
		t.Fatalf("ledger entries by kind %v: some path of the engine was not exercised", kinds)
	}
}

// meaningPolicies are the allowed (null, out_of_domain) pairs of an integer
// column and of a categorical one.
var (
	meaningNumeric = [][2]catalog.Policy{
		{catalog.PolicyDrop, catalog.PolicyDrop}, {catalog.PolicyCell, catalog.PolicyDrop},
		{catalog.PolicyDrop, catalog.PolicyClamp}, {catalog.PolicyCell, catalog.PolicyClamp},
		{catalog.PolicyDrop, catalog.PolicyOther}, {catalog.PolicyCell, catalog.PolicyOther}, {catalog.PolicyOther, catalog.PolicyOther},
	}
	meaningCategorical = [][2]catalog.Policy{
		{catalog.PolicyDrop, catalog.PolicyDrop}, {catalog.PolicyCell, catalog.PolicyDrop},
		{catalog.PolicyDrop, catalog.PolicyOther}, {catalog.PolicyCell, catalog.PolicyOther}, {catalog.PolicyOther, catalog.PolicyOther},
	}
)

// meaningTable is one trial's table t(a, s, b) — a integer 1..6, s in
// {p, q, r}, b integer 0..3 — and the public table d(code, grp, w) that s
// joins.
type meaningTable struct {
	pol  map[string][2]catalog.Policy
	rows [][]any
}

const meaningPublic = `
public_tables:
  d:
    columns: {code: text, grp: text, w: integer}
    rows:
      - [p, G1, 2]
      - [q, G1, 5]
      - [r, G2, ~]
      - [x, G3, 7]
`

func (m *meaningTable) yaml() string {
	col := func(name, decl string) string {
		p := m.pol[name]
		return fmt.Sprintf("      %s: {%s, null: %s, out_of_domain: %s}\n", name, decl, p[0], p[1])
	}
	return `database: demo
sources: {main: {driver: sqlite, path: d.sqlite}}
tables:
  t:
    noise: laplace
    budget: {total: 1000000000, per_user: 1000000000, default_per_query: 1, max_per_query: 1000}
    columns:
` + col("a", "type: integer, min: 1, max: 6") + col("s", "type: categorical, values: [p, q, r]") + col("b", "type: integer, min: 0, max: 3") +
		meaningPublic + `users:
  analyst: {password: analyst, role: analyst}
`
}

// other reports whether column c counts values in an other cell (values
// there are unknown: no SUM over them, and a lookup through them is
// unknown).
func (m *meaningTable) other(c string) bool { return m.pol[c][1] == catalog.PolicyOther }

func newMeaningTable(rng *rand.Rand, trial int) *meaningTable {
	m := &meaningTable{pol: map[string][2]catalog.Policy{
		"a": meaningNumeric[trial%7], "s": meaningCategorical[trial%5], "b": meaningNumeric[(trial+3+trial/7)%7],
	}}
	for range 300 {
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
			row[1] = "P" // not a declared value: the sources bin text exactly
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
		m.rows = append(m.rows, row)
	}
	return m
}

// effective is a value once its column's policies apply: v the cell's
// value (nil for the NULL cell and the other cell), o the other cell, d
// dropped. These are the columns <c>_v, <c>_o, <c>_d of the truth table e.
func (m *meaningTable) effective(c string, raw any) (v any, o, d bool) {
	p := m.pol[c]
	if raw == nil {
		switch p[0] {
		case catalog.PolicyDrop:
			return nil, false, true
		case catalog.PolicyOther:
			return nil, true, false
		}
		return nil, false, false
	}
	in := false
	switch x := raw.(type) {
	case string:
		in = x == "p" || x == "q" || x == "r"
	case int64:
		lo, hi := int64(1), int64(6)
		if c == "b" {
			lo, hi = 0, 3
		}
		in = x >= lo && x <= hi
		if !in && p[1] == catalog.PolicyClamp {
			return min(max(x, lo), hi), false, false
		}
	}
	switch {
	case in:
		return raw, false, false
	case p[1] == catalog.PolicyDrop:
		return nil, false, true
	}
	return nil, true, false
}

// writeData writes the rows as the source table t (dir/d.sqlite), and the
// truth database: e, the rows with the policies applied, and d.
func (m *meaningTable) writeData(t *testing.T, dir string) *sql.DB {
	t.Helper()
	src, err := sql.Open("sqlite", filepath.Join(dir, "d.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	truth, err := sql.Open("sqlite", filepath.Join(dir, "truth.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { truth.Close() })
	for _, s := range []string{
		`CREATE TABLE e (a_v INTEGER, a_o INTEGER, a_d INTEGER, s_v TEXT, s_o INTEGER, s_d INTEGER, b_v INTEGER, b_o INTEGER, b_d INTEGER)`,
		`CREATE TABLE d (code TEXT, grp TEXT, w INTEGER)`,
		`INSERT INTO d VALUES ('p', 'G1', 2), ('q', 'G1', 5), ('r', 'G2', NULL), ('x', 'G3', 7)`,
	} {
		if _, err := truth.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := src.Exec(`CREATE TABLE t (a INTEGER, s TEXT, b INTEGER)`); err != nil {
		t.Fatal(err)
	}
	// One transaction each: a commit per row would sync the disk 300 times.
	srcTx, err := src.Begin()
	if err != nil {
		t.Fatal(err)
	}
	truthTx, err := truth.Begin()
	if err != nil {
		t.Fatal(err)
	}
	b := func(x bool) int {
		if x {
			return 1
		}
		return 0
	}
	for _, r := range m.rows {
		if _, err := srcTx.Exec(`INSERT INTO t VALUES (?, ?, ?)`, r...); err != nil {
			t.Fatal(err)
		}
		var args []any
		for i, c := range []string{"a", "s", "b"} {
			v, o, d := m.effective(c, r[i])
			args = append(args, v, b(o), b(d))
		}
		if _, err := truthTx.Exec(`INSERT INTO e VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, args...); err != nil {
			t.Fatal(err)
		}
	}
	if err := srcTx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := truthTx.Commit(); err != nil {
		t.Fatal(err)
	}
	return truth
}

func meaningEngine(t *testing.T, dir, name string, cat *catalog.Catalog) (*Engine, *budget.Ledger) {
	t.Helper()
	ctx := context.Background()
	l, err := budget.Open(ctx, filepath.Join(dir, name+"-ledger.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	h, err := sources.Open(ctx, cat, sources.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	e := New(Config{Catalog: cat, Ledger: l, Histograms: h, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return e.withoutNoise(), l
}

func meaningTrial(t *testing.T, rng *rand.Rand, trial int, kinds map[string]int) {
	ctx := context.Background()
	m := newMeaningTable(rng, trial)
	dir := t.TempDir()
	truth := m.writeData(t, dir)
	cat, err := catalog.Parse("t.yaml", []byte(m.yaml()))
	if err != nil {
		t.Fatalf("%v\n%s", err, m.yaml())
	}
	batched, ledger := meaningEngine(t, dir, "batched", cat)
	alone, aloneLedger := meaningEngine(t, dir, "alone", cat)
	// A pool of statements, so that batches repeat and overlap: stored
	// answers and stored measurements answer some of them.
	var pool []*mStmt
	for range 10 {
		pool = append(pool, m.randomStmt(rng))
	}
	for batch := range 5 {
		var sts []*mStmt
		for k := 1 + rng.IntN(3); k > 0; k-- {
			if rng.IntN(4) == 0 {
				sts = append(sts, m.randomStmt(rng))
			} else {
				sts = append(sts, pool[rng.IntN(len(pool))])
			}
		}
		vars := map[string]any{VarEpsilon: 1.0}
		if rng.IntN(3) == 0 {
			vars["dp_max_stderr"] = 1000.0 // stored measurements answer whatever they join
		}
		s := session("analyst", vars)
		var texts []string
		for _, st := range sts {
			texts = append(texts, st.dp())
			if st.wrap != 0 {
				kinds["wrapped"]++
			}
		}
		where := fmt.Sprintf("trial %d (a %v, s %v, b %v) batch %d %q", trial, m.pol["a"], m.pol["s"], m.pol["b"], batch, texts)
		rs, err := batched.Answer(ctx, s, texts)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		for i, st := range sts {
			one, err := alone.Answer(ctx, s, texts[i:i+1])
			if err != nil {
				t.Fatalf("%s: alone: %s: %v", where, texts[i], err)
			}
			got, solo := rs[i].AllRows(), one[0].AllRows()
			if !sameRows(got, solo) {
				t.Fatalf("%s\n%s\nin the batch %v\nalone        %v", where, texts[i], got, solo)
			}
			q := st.truthSQL()
			want := queryRows(t, truth, q)
			if msg := st.matchTruth(got, want); msg != "" {
				t.Fatalf("%s\n%s\n%s\nengine %v\ntruth  %v (%s)", where, texts[i], msg, got, want, q)
			}
		}
	}
	for _, l := range []*budget.Ledger{ledger, aloneLedger} {
		es, err := l.Entries(ctx, budget.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			kinds[e.Kind]++
		}
	}
}

func queryRows(t *testing.T, db *sql.DB, q string) [][]any {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out [][]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, vals)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// near compares two answers: both NULL, or numbers equal up to
// floating-point rounding (reconstruction by least squares), or the same
// label.
func near(x, y any) bool {
	a, okA := toFloat(x)
	b, okB := toFloat(y)
	if okA && okB {
		return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b))
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

func sameRows(a, b [][]any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for j := range a[i] {
			if !near(a[i][j], b[i][j]) {
				return false
			}
		}
	}
	return true
}

// ---- Random statements, written both for dpproxy and as the truth's SQL.

// mExpr is an expression over t's columns and, through a join, d's.
type mExpr interface {
	dp() string    // as the analyst writes it
	truth() string // over the truth table e (and d)
	cols(add func(string))
}

type (
	mCol  string // a, s or b
	mDCol string // d.grp or d.w, a function of s
	mNum  int
	mBin  struct {
		op   string
		l, r mExpr
	}
	mCase struct {
		when       mPred
		then, els_ mExpr // els_ nil: no ELSE (NULL)
	}
	mStr string
)

func (c mCol) dp() string            { return string(c) }
func (c mCol) truth() string         { return string(c) + "_v" }
func (c mCol) cols(add func(string)) { add(string(c)) }

func (c mDCol) dp() string            { return "d." + string(c) }
func (c mDCol) truth() string         { return "d." + string(c) }
func (c mDCol) cols(add func(string)) { add("s") }

func (n mNum) dp() string          { return fmt.Sprint(int(n)) }
func (n mNum) truth() string       { return fmt.Sprint(int(n)) }
func (mNum) cols(func(string))     {}
func (s mStr) dp() string          { return "'" + string(s) + "'" }
func (s mStr) truth() string       { return "'" + string(s) + "'" }
func (mStr) cols(func(string))     {}
func (b mBin) dp() string          { return "(" + b.l.dp() + " " + b.op + " " + b.r.dp() + ")" }
func (b mBin) truth() string       { return "(" + b.l.truth() + " " + b.op + " " + b.r.truth() + ")" }
func (b mBin) cols(f func(string)) { b.l.cols(f); b.r.cols(f) }

func (c mCase) dp() string {
	s := "CASE WHEN " + c.when.dp() + " THEN " + c.then.dp()
	if c.els_ != nil {
		s += " ELSE " + c.els_.dp()
	}
	return s + " END"
}

func (c mCase) truth() string {
	s := "CASE WHEN " + c.when.truth() + " THEN " + c.then.truth()
	if c.els_ != nil {
		s += " ELSE " + c.els_.truth()
	}
	return s + " END"
}

func (c mCase) cols(f func(string)) {
	c.when.cols(f)
	c.then.cols(f)
	if c.els_ != nil {
		c.els_.cols(f)
	}
}

// mPred is a predicate with SQL's three-valued logic. The other cell is
// UNKNOWN under comparisons (its value in e is NULL) and neither NULL nor
// NOT NULL's opposite: IS NULL is false there.
type mPred interface {
	dp() string
	truth() string
	cols(add func(string))
}

type (
	mCmp struct {
		l  mExpr
		op string
		r  mExpr
	}
	mIsNull struct {
		c   mCol
		not bool
	}
	mIn struct {
		c    mCol
		list []mExpr
		not  bool
	}
	mLogic struct {
		op    string // AND, OR
		terms []mPred
	}
	mNot struct{ p mPred }
)

func (p mCmp) dp() string             { return p.l.dp() + " " + p.op + " " + p.r.dp() }
func (p mCmp) truth() string          { return p.l.truth() + " " + p.op + " " + p.r.truth() }
func (p mCmp) cols(f func(string))    { p.l.cols(f); p.r.cols(f) }
func (p mIsNull) cols(f func(string)) { f(string(p.c)) }

func (p mIsNull) dp() string {
	if p.not {
		return string(p.c) + " IS NOT NULL"
	}
	return string(p.c) + " IS NULL"
}

func (p mIsNull) truth() string {
	if p.not {
		return fmt.Sprintf("(%s_v IS NOT NULL OR %s_o = 1)", p.c, p.c)
	}
	return fmt.Sprintf("(%s_v IS NULL AND %s_o = 0)", p.c, p.c)
}

func (p mIn) text(col string, lit func(mExpr) string) string {
	var xs []string
	for _, x := range p.list {
		xs = append(xs, lit(x))
	}
	not := ""
	if p.not {
		not = "NOT "
	}
	return col + " " + not + "IN (" + strings.Join(xs, ", ") + ")"
}
func (p mIn) dp() string          { return p.text(p.c.dp(), mExpr.dp) }
func (p mIn) truth() string       { return p.text(p.c.truth(), mExpr.truth) }
func (p mIn) cols(f func(string)) { f(string(p.c)) }

func (p mLogic) join(term func(mPred) string) string {
	var xs []string
	for _, x := range p.terms {
		xs = append(xs, "("+term(x)+")")
	}
	return strings.Join(xs, " "+p.op+" ")
}
func (p mLogic) dp() string    { return p.join(mPred.dp) }
func (p mLogic) truth() string { return p.join(mPred.truth) }
func (p mLogic) cols(f func(string)) {
	for _, x := range p.terms {
		x.cols(f)
	}
}
func (p mNot) dp() string          { return "NOT (" + p.p.dp() + ")" }
func (p mNot) truth() string       { return "NOT (" + p.p.truth() + ")" }
func (p mNot) cols(f func(string)) { p.p.cols(f) }

// mAgg is one aggregate: COUNT(*) (arg nil), COUNT(arg), SUM(arg),
// AVG(arg).
type mAgg struct {
	fn  string
	arg mExpr
}

func (a mAgg) dp() string {
	if a.arg == nil {
		return a.fn + "(*)"
	}
	return a.fn + "(" + a.arg.dp() + ")"
}

// truth is the aggregate over e: its argument is NULL on a row where a
// column it reads is dropped (the drop policy removes the row from what
// reads the column), and COUNT of a column counts its other cell.
func (a mAgg) truth() string {
	if a.arg == nil {
		return a.fn + "(*)"
	}
	arg := a.arg.truth()
	if c, ok := a.arg.(mCol); ok && a.fn == "COUNT" {
		arg = fmt.Sprintf("CASE WHEN %s_v IS NOT NULL OR %s_o = 1 THEN 1 END", c, c)
	}
	if g := dropGuard(a.arg.cols); g != "" {
		arg = "CASE WHEN " + g + " THEN " + arg + " END"
	}
	return a.fn + "(" + arg + ")"
}

// dropGuard is the condition that no column cols lists is dropped.
func dropGuard(cols func(func(string))) string {
	seen := map[string]bool{}
	cols(func(c string) { seen[c] = true })
	var out []string
	for _, c := range []string{"a", "s", "b"} {
		if seen[c] {
			out = append(out, c+"_d = 0")
		}
	}
	return strings.Join(out, " AND ")
}

// mStmt is one statement over t: aggregates, an optional join to d, WHERE,
// one GROUP BY key (a column, a CASE or d.grp) and HAVING on an aggregate.
type mStmt struct {
	key    mExpr // nil: no GROUP BY
	aggs   []mAgg
	join   string // "", "JOIN" or "LEFT JOIN"
	where  mPred
	having *mAgg
	hop    string
	hval   int
	order  bool
	// wrap is how the statement reads t, as BI tools wrap it (#20): 0 as
	// t itself, 1 through a derived table, 2 through a CTE, 3 through a
	// derived table holding the WHERE. Each is merged into the same query.
	wrap int
}

func (s *mStmt) dp() string {
	var sel []string
	if s.key != nil {
		sel = append(sel, s.key.dp()+" AS k")
	}
	for _, a := range s.aggs {
		sel = append(sel, a.dp())
	}
	from, with, where := "t", "", s.where
	switch {
	case s.wrap == 1:
		from = "(SELECT * FROM t) AS t"
	case s.wrap == 2:
		with, from = "WITH w AS (SELECT * FROM t) ", "w AS t"
	case s.wrap == 3 && where != nil && s.join == "":
		from, where = "(SELECT * FROM t WHERE "+where.dp()+") AS t", nil
	}
	q := with + "SELECT " + strings.Join(sel, ", ") + " FROM " + from
	if s.join != "" {
		q += " " + s.join + " d ON t.s = d.code"
	}
	if where != nil {
		q += " WHERE " + where.dp()
	}
	if s.key != nil {
		q += " GROUP BY 1"
	}
	if s.having != nil {
		q += fmt.Sprintf(" HAVING %s %s %d", s.having.dp(), s.hop, s.hval)
	}
	if s.order {
		q += " ORDER BY 1"
	}
	return q
}

// truthSQL is the statement over e: the rows whose columns that decide
// the statement's rows (WHERE, an inner join's key, GROUP BY) are not
// dropped, each aggregate over its own argument (mAgg.truth); a plain
// column's group is labelled other on the other cell.
func (s *mStmt) truthSQL() string {
	var sel []string
	if s.key != nil {
		k := s.key.truth()
		if c, ok := s.key.(mCol); ok {
			k = fmt.Sprintf("CASE WHEN %s_o = 1 THEN 'other' ELSE %s_v END", c, c)
		}
		sel = append(sel, k+" AS k")
	}
	for _, a := range s.aggs {
		sel = append(sel, a.truth())
	}
	q := "SELECT " + strings.Join(sel, ", ") + " FROM e"
	if s.join != "" {
		q += " " + s.join + " d ON e.s_v = d.code"
	}
	rows := func(add func(string)) {
		if s.where != nil {
			s.where.cols(add)
		}
		if s.key != nil {
			s.key.cols(add)
		}
		if s.join == "JOIN" {
			add("s")
		}
	}
	var conds []string
	if g := dropGuard(rows); g != "" {
		conds = append(conds, g)
	}
	if s.where != nil {
		conds = append(conds, "("+s.where.truth()+")")
	}
	if len(conds) > 0 {
		q += " WHERE " + strings.Join(conds, " AND ")
	}
	if s.key != nil {
		q += " GROUP BY 1"
	}
	if s.having != nil {
		q += fmt.Sprintf(" HAVING %s %s %d", s.having.truth(), s.hop, s.hval)
	}
	return q
}

// matchTruth compares the engine's rows with the truth's. dpproxy returns
// every group of the declared domain the WHERE admits, so a group the
// truth lacks (no row) must be empty: counts 0, sums 0 or NULL. A SUM
// over no value is NULL in SQL; dpproxy knows that only by construction,
// else it is 0 (noiseless); an AVG over no value is NULL either way.
func (s *mStmt) matchTruth(got, want [][]any) string {
	off := 0
	if s.key != nil {
		off = 1
	}
	byKey := map[string][]any{}
	for _, r := range want {
		k := ""
		if s.key != nil {
			k = fmt.Sprint(r[0])
		}
		byKey[k] = r
	}
	seen := map[string]bool{}
	for _, r := range got {
		k := ""
		if s.key != nil {
			k = fmt.Sprint(r[0])
		}
		seen[k] = true
		w, ok := byKey[k]
		for i, a := range s.aggs {
			g := r[off+i]
			switch {
			case !ok: // a group without rows
				x, isNum := toFloat(g)
				if (a.fn == "COUNT" && (!isNum || x != 0)) || (a.fn == "SUM" && g != nil && (!isNum || x != 0)) {
					return fmt.Sprintf("group %q has no row, yet %s = %v", k, a.dp(), g)
				}
			case w[off+i] == nil && a.fn == "SUM":
				if x, isNum := toFloat(g); g != nil && (!isNum || x != 0) {
					return fmt.Sprintf("group %q: %s = %v, over no value", k, a.dp(), g)
				}
			case a.fn == "AVG" && g != nil && w[off+i] != nil:
				// MySQL's AVG of integers has 4 decimals more than its
				// argument (div_precision_increment), and so has dpproxy's.
				x, _ := toFloat(g)
				y, _ := toFloat(w[off+i])
				if math.Abs(x-y) > 0.5e-4+1e-9 {
					return fmt.Sprintf("group %q: %s = %v, truth %v", k, a.dp(), g, w[off+i])
				}
			case !near(g, w[off+i]):
				return fmt.Sprintf("group %q: %s = %v, truth %v", k, a.dp(), g, w[off+i])
			}
		}
	}
	var missing []string
	for k := range byKey {
		if !seen[k] {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Sprintf("groups %q are missing", missing)
	}
	return ""
}

func (m *meaningTable) randomPred(rng *rand.Rand, depth int, join bool) mPred {
	if depth > 0 && rng.IntN(3) == 0 {
		l, r := m.randomPred(rng, depth-1, join), m.randomPred(rng, depth-1, join)
		switch rng.IntN(3) {
		case 0:
			return mLogic{"AND", []mPred{l, r}}
		case 1:
			return mLogic{"OR", []mPred{l, r}}
		}
		return mNot{l}
	}
	num := func(c mCol) mPred {
		v := mNum(rng.IntN(9) - 1)
		switch rng.IntN(5) {
		case 0:
			return mIn{c, []mExpr{v, mNum(rng.IntN(9) - 1)}, rng.IntN(3) == 0}
		case 1:
			lo := mNum(rng.IntN(7))
			return mLogic{"AND", []mPred{mCmp{c, ">=", lo}, mCmp{c, "<=", lo + mNum(rng.IntN(3))}}}
		}
		return mCmp{c, []string{"=", "<>", "<", ">="}[rng.IntN(4)], v}
	}
	switch rng.IntN(8) {
	case 0:
		return num("a")
	case 1:
		return num("b")
	case 2:
		v := mStr([]string{"p", "q", "r", "zz"}[rng.IntN(4)])
		if rng.IntN(2) == 0 {
			return mCmp{mCol("s"), "=", v}
		}
		return mIn{"s", []mExpr{v, mStr("q")}, rng.IntN(3) == 0}
	case 3:
		return mCmp{mCol("s"), "<>", mStr("p")}
	case 4:
		return mIsNull{mCol([]string{"a", "s", "b"}[rng.IntN(3)]), rng.IntN(2) == 0}
	case 5:
		return mCmp{mCol("a"), ">", mCol("b")}
	case 6:
		if join {
			return mCmp{mDCol("grp"), "=", mStr([]string{"G1", "G2"}[rng.IntN(2)])}
		}
	}
	return num("a")
}

// randomStmt writes a random statement that dpproxy accepts: a SUM or AVG
// never reads a column's other cell (its values are unknown), nor a
// public column through one.
func (m *meaningTable) randomStmt(rng *rand.Rand) *mStmt {
	s := &mStmt{wrap: rng.IntN(4)}
	if rng.IntN(4) == 0 {
		s.join = []string{"JOIN", "LEFT JOIN"}[rng.IntN(2)]
	}
	dcols := s.join != "" && !m.other("s") // public columns reached through s
	var keys []mExpr
	for _, c := range []string{"a", "s", "b"} {
		keys = append(keys, mCol(c))
	}
	keys = append(keys, mCase{m.randomPred(rng, 1, s.join != ""), mStr("yes"), mStr("no")})
	if dcols {
		keys = append(keys, mDCol("grp"))
	}
	if rng.IntN(2) == 0 {
		s.key = keys[rng.IntN(len(keys))]
	}
	aggs := []func() mAgg{
		func() mAgg { return mAgg{"COUNT", nil} },
		func() mAgg { return mAgg{"COUNT", mCol([]string{"a", "s", "b"}[rng.IntN(3)])} },
		func() mAgg {
			return mAgg{"COUNT", mCase{m.randomPred(rng, 1, s.join != ""), mNum(1), nil}}
		},
		func() mAgg {
			return mAgg{"SUM", mCase{m.randomPred(rng, 1, s.join != ""), mNum(1), mNum(0)}}
		},
	}
	for _, c := range []string{"a", "b"} {
		if m.other(c) {
			continue
		}
		aggs = append(aggs,
			func() mAgg { return mAgg{[]string{"SUM", "AVG"}[rng.IntN(2)], mCol(c)} },
			func() mAgg { return mAgg{"SUM", mBin{"+", mBin{"*", mCol(c), mNum(2)}, mNum(1)}} },
			func() mAgg { return mAgg{"SUM", mCase{mCmp{mCol("s"), "=", mStr("q")}, mCol(c), mNum(0)}} },
		)
	}
	if !m.other("a") && !m.other("b") {
		aggs = append(aggs, func() mAgg { return mAgg{[]string{"SUM", "AVG"}[rng.IntN(2)], mBin{"+", mCol("a"), mCol("b")}} })
	}
	if dcols {
		aggs = append(aggs,
			func() mAgg { return mAgg{[]string{"SUM", "AVG"}[rng.IntN(2)], mDCol("w")} },
			func() mAgg { return mAgg{"COUNT", mDCol("grp")} },
		)
	}
	for k := 1 + rng.IntN(4); k > 0; k-- {
		s.aggs = append(s.aggs, aggs[rng.IntN(len(aggs))]())
	}
	if rng.IntN(4) != 0 {
		s.where = m.randomPred(rng, 2, s.join != "")
	}
	if s.key != nil && rng.IntN(3) == 0 {
		h := aggs[rng.IntN(len(aggs))]()
		s.having, s.hop, s.hval = &h, []string{">", "<=", ">="}[rng.IntN(3)], rng.IntN(40)
	}
	s.order = s.key != nil && rng.IntN(2) == 0
	return s
}
