package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/parser"
	"github.com/dpproxy/dpproxy/planner"
)

// objectivesCatalog is the demo's adult table with an income column in
// dollars, 0–500,000, so that a SUM's scale dwarfs a COUNT's. Planning
// reads no data, so its source is never opened.
const objectivesCatalog = `
database: bench
sources:
  main: {driver: sqlite, path: bench.sqlite}
tables:
  people:
    noise: laplace
    budget: {total: 100, per_user: 100, default_per_query: 1}
    columns:
      age: {type: integer, min: 17, max: 90, width: 1}
      education:
        type: categorical
        values: [Preschool, 1st-4th, 5th-6th, 7th-8th, 9th, 10th, 11th, 12th, HS-grad, Some-college,
                 Assoc-voc, Assoc-acdm, Bachelors, Masters, Prof-school, Doctorate]
      race: {type: categorical, values: [White, Asian-Pac-Islander, Amer-Indian-Eskimo, Other, Black]}
      sex: {type: categorical, values: [Female, Male]}
      hours_per_week: {type: integer, min: 1, max: 99, width: 1}
      income: {type: integer, min: 0, max: 500000, width: 1000}
users:
  analyst: {password: analyst, role: analyst}
`

// mixedBatches are the batches of `dpproxy-bench fairness`: answers of very
// different scales and group counts measured together.
var mixedBatches = []struct{ name, sql string }{
	{"COUNT + SUM(income)", "SELECT COUNT(*), SUM(income) FROM people"},
	{"COUNT + AVG(income)", "SELECT COUNT(*) FROM people WHERE sex = 'Female'; SELECT AVG(income) FROM people"},
	{"GROUP BY + range count", "SELECT education, COUNT(*) FROM people GROUP BY education; SELECT COUNT(*) FROM people WHERE age BETWEEN 30 AND 40"},
	{"74 groups + one count", "SELECT age, COUNT(*) FROM people GROUP BY age; SELECT COUNT(*) FROM people WHERE sex = 'Female'"},
	{"SUM per group + counts", "SELECT sex, SUM(hours_per_week) FROM people GROUP BY sex; SELECT race, COUNT(*) FROM people GROUP BY race"},
	{"dashboard", "SELECT sex, COUNT(*) FROM people GROUP BY sex; SELECT education, COUNT(*) FROM people GROUP BY education; SELECT race, sex, COUNT(*) FROM people GROUP BY race, sex"},
}

// benchCompile parses a batch (statements separated by ;) and compiles it.
func benchCompile(cat *catalog.Catalog, table, sql string) (*compile.Workload, []*parser.Statement, error) {
	protected := func(schema, t string) bool { return cat.Table(t) != nil }
	var sts []*parser.Statement
	for _, text := range strings.Split(sql, ";") {
		if strings.TrimSpace(text) == "" {
			continue
		}
		ps, err := parser.Parse(text, protected)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", text, err)
		}
		for i := range ps {
			sts = append(sts, &ps[i])
		}
	}
	w, err := compile.Compile(cat.Table(table), sts)
	return w, sts, err
}

// answerVariance is the mean over groups of an answer's variance: an
// aggregate's own, or for an AVG the delta-method numerator
// Var S + m²·Var C (m the midpoint of the column's range), which is the
// AVG's variance times its count².
func answerVariance(p *planner.Plan, q int, it compile.Item) float64 {
	w := p.Workload
	qu := w.Queries[q]
	group := make([]int, len(qu.GroupCols))
	n := qu.Groups(w)
	m := (it.Lo + it.Hi) / 2
	sum := 0.0
	for g := 0; g < n; g++ {
		qu.GroupCells(w, g, group)
		v := p.Variance(q, it.Agg, group)
		if it.Kind == compile.ItemRatio {
			v += m * m * p.Variance(q, it.Den, group)
		}
		sum += v
	}
	return sum / float64(n)
}

// benchFairness: `dpproxy-bench fairness [--noise laplace|gaussian]
// [--epsilon E]`. For each mixed batch it plans with the total-error
// objective (dpproxy's before) and the fair one (now), and prints each
// answer's variance relative to the answer measured alone at the same ε,
// against the fair share Q² (Q answers, each measured alone at ε/Q).
func benchFairness(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("fairness", flag.ContinueOnError)
	noiseName := fs.String("noise", "laplace", "laplace or gaussian")
	eps := fs.Float64("epsilon", 1, "ε of each batch (Gaussian: ρ = ε²/2)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cat, err := catalog.Parse("bench", []byte(objectivesCatalog))
	if err != nil {
		return err
	}
	base := planner.Options{Noise: catalog.Laplace, Epsilon: *eps}
	if *noiseName == "gaussian" {
		base = planner.Options{Noise: catalog.Gaussian, Rho: *eps * *eps / 2}
	} else if *noiseName != "laplace" {
		return exitError{Code: 2, Err: fmt.Errorf("bad --noise %q", *noiseName)}
	}
	pl := planner.New()
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "noise %s, ε = %g; factor = mean variance in the batch ÷ variance measured alone at the same ε; fair share = Q² (Q answers, each alone at ε/Q)\n", *noiseName, *eps)
	fmt.Fprintln(tw, "batch\tanswer\tstderr alone\ttotal-error objective: stderr\tfactor\tfair objective: stderr\tfactor\tfair share\tfair ÷ share")
	worst := 0.0
	for _, b := range mixedBatches {
		w, sts, err := benchCompile(cat, "people", b.sql)
		if err != nil {
			return err
		}
		plans := map[planner.Objective]*planner.Plan{}
		for _, obj := range []planner.Objective{planner.ObjectiveTotal, planner.ObjectiveFair} {
			o := base
			o.Objective = obj
			if plans[obj], err = pl.Choose(context.Background(), w, o); err != nil {
				return err
			}
		}
		type answer struct {
			q    int
			it   compile.Item
			name string
		}
		var answers []answer
		for q, qu := range w.Queries {
			for _, it := range qu.Items[:qu.Visible] {
				if it.Kind == compile.ItemAgg || it.Kind == compile.ItemRatio {
					answers = append(answers, answer{q, it, it.Name})
				}
			}
		}
		share := float64(len(answers) * len(answers))
		for _, a := range answers {
			// The answer alone: its statement with only its group columns and it.
			src := *sts[a.q].Query
			var sel []parser.SelectItem
			for _, s := range src.Select {
				if (s.Agg == parser.AggNone && s.Expr == nil) || s.Alias == a.name {
					sel = append(sel, s)
				}
			}
			src.Select, src.Having, src.OrderBy, src.Limit = sel, nil, nil, nil
			aw, err := compile.Compile(cat.Table("people"), []*parser.Statement{{Kind: parser.KindAggregate, Query: &src}})
			if err != nil {
				return err
			}
			o := base
			alonePlan, err := pl.Choose(context.Background(), aw, o)
			if err != nil {
				return err
			}
			var ait compile.Item
			for _, it := range aw.Queries[0].Items {
				if it.Kind == compile.ItemAgg || it.Kind == compile.ItemRatio {
					ait = it
				}
			}
			alone := answerVariance(alonePlan, 0, ait)
			tot := answerVariance(plans[planner.ObjectiveTotal], a.q, a.it)
			fair := answerVariance(plans[planner.ObjectiveFair], a.q, a.it)
			sd := func(v float64) string {
				if a.it.Kind == compile.ItemRatio {
					return "(AVG)"
				}
				return fmt.Sprintf("%.4g", math.Sqrt(v))
			}
			worst = math.Max(worst, fair/alone/share)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.3g\t%s\t%.3g\t%.0f\t%.2f\n", b.name, a.name, sd(alone), sd(tot), tot/alone, sd(fair), fair/alone, share, fair/alone/share)
		}
	}
	fmt.Fprintf(tw, "largest fair-objective factor ÷ fair share: %.2f\n", worst)
	return tw.Flush()
}

// targetBatches are the README's example queries and dashboards, each
// with the accuracy target its answers would be asked for.
var targetBatches = []struct {
	name, sql string
	target    float64
}{
	{"README: COUNT of one race", "SELECT COUNT(*) FROM adult WHERE race = 'Asian-Pac-Islander'", 20},
	{"README: GROUP BY sex, income", "SELECT sex, income, COUNT(*) FROM adult GROUP BY sex, income", 20},
	{"README: occupations over 50", "SELECT occupation, COUNT(*) FROM adult WHERE age > 50 GROUP BY occupation", 20},
	{"README: AVG hours by education", "SELECT education, AVG(hours_per_week) FROM adult WHERE age BETWEEN 25 AND 60 GROUP BY education", 500},
	{"dashboard sex; education; race×sex", "SELECT sex, COUNT(*) FROM adult GROUP BY sex; SELECT education, COUNT(*) FROM adult GROUP BY education; SELECT race, sex, COUNT(*) FROM adult GROUP BY race, sex", 20},
	{"dashboard age; sex; range; education×income", "SELECT age, COUNT(*) FROM adult GROUP BY age; SELECT sex, COUNT(*) FROM adult GROUP BY sex; SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 40; SELECT education, income, COUNT(*) FROM adult GROUP BY education, income", 20},
	{"ranges and a histogram of age", "SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 40; SELECT COUNT(*) FROM adult WHERE age < 25; SELECT COUNT(*) FROM adult WHERE age >= 65; SELECT age, COUNT(*) FROM adult GROUP BY age", 20},
	{"workclass × occupation and marital status", "SELECT workclass, occupation, COUNT(*) FROM adult GROUP BY workclass, occupation; SELECT marital_status, COUNT(*) FROM adult GROUP BY marital_status", 20},
}

// benchTarget: `dpproxy-bench target [--noise laplace|gaussian]`. For each
// batch over the demo table it finds the least ε at which every answer's
// standard error meets the target, with the strategy chosen for the total
// error (dpproxy's before), for the fair objective, and for the largest
// per-answer variance (what @dp_max_stderr uses now).
func benchTarget(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("target", flag.ContinueOnError)
	noiseName := fs.String("noise", "laplace", "laplace or gaussian (ε reported at the table's δ = 1e-6)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	fam := catalog.Laplace
	if *noiseName == "gaussian" {
		fam = catalog.Gaussian
	} else if *noiseName != "laplace" {
		return exitError{Code: 2, Err: fmt.Errorf("bad --noise %q", *noiseName)}
	}
	const delta = 1e-6
	cat := catalog.Demo()
	pl := planner.New()
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "noise %s; ε for every answer's stderr ≤ target (Gaussian: ε of ρ at δ = %g)\n", *noiseName, delta)
	fmt.Fprintln(tw, "batch\ttarget\tε total-error strategy\tε fair strategy\tε max-variance strategy\tsaved vs total-error\tstrategy")
	for _, b := range targetBatches {
		w, _, err := benchCompile(cat, "adult", b.sql)
		if err != nil {
			return err
		}
		var eps [3]float64
		var name string
		for i, obj := range []planner.Objective{planner.ObjectiveTotal, planner.ObjectiveFair, planner.ObjectiveMaxVariance} {
			p, err := pl.ForTarget(context.Background(), w, planner.Options{Noise: fam, Objective: obj}, b.target)
			if err != nil {
				return err
			}
			eps[i] = budget.EpsilonFor(budget.Cost{Epsilon: p.Options.Epsilon, Rho: p.Options.Rho}, delta)
			name = p.Name
		}
		if len(name) > 60 {
			name = name[:57] + "..."
		}
		fmt.Fprintf(tw, "%s\t%g\t%.4g\t%.4g\t%.4g\t%.1f%%\t%s\n", b.name, b.target, eps[0], eps[1], eps[2], 100*(1-eps[2]/eps[0]), name)
	}
	return tw.Flush()
}
