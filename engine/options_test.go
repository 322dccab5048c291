package engine

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/planner"
)

const gaussCatalog = `
database: demo
sources: {main: {driver: sqlite, path: demo.sqlite}}
tables:
  adult:
    noise: laplace
    budget: {total: 1e12, per_user: 1e12, default_per_query: 0.1}
    columns:
      age: {type: integer, min: 17, max: 90}
      sex: {type: categorical, values: [Female, Male]}
      occupation: {type: categorical, values: [Tech-support, Craft-repair, Other-service, Sales, Exec-managerial, Prof-specialty, Handlers-cleaners, Machine-op-inspct, Adm-clerical, Farming-fishing, Transport-moving, Priv-house-serv, Protective-serv, Armed-Forces]}
  gauss:
    source_table: adult
    noise: gaussian
    budget: {total: 100000, per_user: 100000, default_per_query: 0.1, delta: 1e-6}
    columns:
      age: {type: integer, min: 17, max: 90}
      hours_per_week: {type: integer, min: 1, max: 99}
      sex: {type: categorical, values: [Female, Male]}
users:
  analyst: {password: analyst, role: analyst}
`

// Privacy options outside their documented ranges are refused with 3900
// naming the range, never 3902 (issue 10: SET @dp_epsilon = 1e-20 panicked
// in the noise calibration), and nothing is charged.
func TestPrivacyOptionRanges(t *testing.T) {
	f := newFixtureCatalog(t, gaussCatalog)
	ctx := context.Background()
	const count = "SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 40"
	const gcount = "SELECT age, hours_per_week, COUNT(*) FROM gauss WHERE sex = 'Male' GROUP BY age, hours_per_week"
	cases := []struct {
		name string
		sql  string
		vars map[string]any
		msg  string
	}{
		{"tiny ε", count, map[string]any{VarEpsilon: 1e-20}, "@dp_epsilon must be a number in [1e-06, 100], got 1e-20"},
		{"huge ε", count, map[string]any{VarEpsilon: 1e300}, "@dp_epsilon must be a number in [1e-06, 100]"},
		{"negative ε", count, map[string]any{VarEpsilon: -1.0}, "@dp_epsilon must be a number in"},
		{"ε as text", count, map[string]any{VarEpsilon: "0.1x"}, "@dp_epsilon must be a number in"},
		{"tiny ρ", gcount, map[string]any{VarRho: 1e-30}, "@dp_rho must be a number in [1e-12, 100], got 1e-30"},
		{"tiny stderr", count, map[string]any{VarMaxStderr: 1e-30}, "@dp_max_stderr must be a number in [1e-06, 1e+15]"},
		{"huge stderr", count, map[string]any{VarMaxStderr: 1e300}, "@dp_max_stderr must be a number in"},
		// ε in range, but a Gaussian table's ρ from it is not.
		{"ρ from a tiny ε", gcount, map[string]any{VarEpsilon: 1e-6}, "is outside [1e-12, 100]; set @dp_rho or @dp_epsilon"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.eng.Answer(ctx, session("analyst", c.vars), []string{c.sql})
			refusal(t, err, parser.CodeDPRefused, c.msg)
			_, err = f.eng.Answer(ctx, session("analyst", c.vars), []string{"EXPLAIN " + c.sql})
			refusal(t, err, parser.CodeDPRefused, c.msg)
		})
	}
	if n := len(f.entries(t)); n != 0 {
		t.Fatalf("refusals charged: %d entries", n)
	}
	// The ends of the ranges are accepted.
	for _, vars := range []map[string]any{
		{VarEpsilon: 1e-6}, {VarEpsilon: 100}, {VarMaxStderr: 1e-6}, {VarMaxStderr: 1e15},
	} {
		if _, err := f.eng.Answer(ctx, session("analyst", vars), []string{"EXPLAIN " + count}); err != nil {
			t.Errorf("%v: %v", vars, err)
		}
	}
}

// A parameter inside its range that is still too small for every strategy
// of a batch (planner.ErrScale: only possible with a large sensitivity) is
// a 3900 refusal too.
func TestChooseRefusesTooSmallParameters(t *testing.T) {
	f := newFixtureCatalog(t, gaussCatalog)
	tab := f.eng.cat.Table("gauss")
	sts, err := parser.Parse("SELECT age, COUNT(*) FROM gauss GROUP BY age", f.eng.protected)
	if err != nil {
		t.Fatal(err)
	}
	w, err := compile.Compile(tab, []*parser.Statement{&sts[0]})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.eng.choose(context.Background(), w, planner.Options{Noise: catalog.Gaussian, Rho: 1e-40})
	refusal(t, err, parser.CodeDPRefused, "ρ = 1e-40 is too small for this batch")
}

func TestCheckOption(t *testing.T) {
	for _, c := range []struct {
		name  string
		value any
		ok    bool
	}{
		{"dp_epsilon", 0.5, true},
		{"@DP_EPSILON", 1e-7, false},
		{"dp_epsilon", nil, true}, // NULL unsets it
		{"dp_rho", "0.001", true},
		{"dp_rho", 200.0, false},
		{"dp_max_stderr", 0.0, false},
		{"something_else", 1e-20, true},
	} {
		err := CheckOption(c.name, c.value)
		if (err == nil) != c.ok {
			t.Errorf("CheckOption(%s, %v) = %v, want ok=%v", c.name, c.value, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "must be a number in") {
			t.Errorf("CheckOption(%s, %v): %v", c.name, c.value, err)
		}
	}
}

// On a Laplace table @dp_rho does not apply: an over-limit ε is refused
// with a message about ε, not about @dp_rho (issue 10).
func TestOverLimitMessageIgnoresRhoOnLaplace(t *testing.T) {
	f := newFixture(t)
	_, err := f.eng.Answer(context.Background(), session("analyst", map[string]any{VarRho: 0.01, VarEpsilon: 6.0}),
		[]string{"SELECT COUNT(*) FROM adult"})
	refusal(t, err, parser.CodeDPRefused, "ε = 6, exceeds the per-query maximum ε = 5 on table adult")
	if strings.Contains(err.Error(), "rho") {
		t.Fatalf("message mentions ρ: %v", err)
	}
}

// EXPLAIN of a top-k without counts (a selection only) explains it
// instead of failing with 3902 (issue 10), and charges nothing.
func TestExplainTopKWithoutCounts(t *testing.T) {
	f := newFixture(t)
	r := f.answer(t, session("analyst", nil), "EXPLAIN SELECT occupation FROM adult GROUP BY occupation ORDER BY COUNT(*) DESC LIMIT 1")
	var got []string
	for _, row := range r.Rows {
		got = append(got, row[0].(string)+"="+row[1].(string))
	}
	text := strings.Join(got, "\n")
	if !strings.Contains(text, "top-k selection=exponential mechanism, 1 round without") || !strings.Contains(text, "noise=none (a selection only)") ||
		!strings.Contains(text, "charged=nothing (EXPLAIN)") || strings.Contains(text, "strategy=") || strings.Contains(text, "epsilon=0") {
		t.Fatalf("explanation:\n%s", text)
	}
	if n := len(f.entries(t)); n != 0 {
		t.Fatalf("EXPLAIN charged: %d entries", n)
	}
}

// An accuracy target is met within the ε range, from tiny targets (where
// the discrete noise's variance bends away from 1/ε²) to huge ones (planned
// at the smallest ε of the range).
func TestAccuracyTargetWithinRange(t *testing.T) {
	f := newFixtureCatalog(t, gaussCatalog)
	tab := f.eng.cat.Table("adult")
	sts, err := parser.Parse("SELECT COUNT(*) FROM adult WHERE sex = 'Male'", f.eng.protected)
	if err != nil {
		t.Fatal(err)
	}
	w, err := compile.Compile(tab, []*parser.Statement{&sts[0]})
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []float64{1e-6, 0.01, 0.3, 3, 1e15} {
		p, err := f.eng.forTarget(context.Background(), tab, w, target)
		if err != nil {
			t.Fatalf("target %g: %v", target, err)
		}
		if eps := p.Options.Epsilon; !EpsilonRange.Contains(eps) {
			t.Errorf("target %g: ε = %g outside %v", target, eps, EpsilonRange)
		}
		if sd := math.Sqrt(p.MaxVariance); sd > target {
			t.Errorf("target %g: ε = %g gives stderr %g", target, p.Options.Epsilon, sd)
		}
	}
}
