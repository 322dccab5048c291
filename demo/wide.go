package demo

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
)

// WideTable is the name of the table GenerateWide writes.
const WideTable = "wide"

// WideColumns are the wide table's twenty columns and their domains, as
// catalog YAML lines (indented for a table's columns block): the demo's
// nine adult columns and eleven more, so that the product domain
// (≈ 1.4·10¹⁹ cells) is far beyond any histogram while every marginal of a
// few columns is small.
const WideColumns = `      age: {type: integer, min: 17, max: 90, width: 1}
      workclass: {type: categorical, values: [Private, Self-emp-not-inc, Self-emp-inc, Federal-gov, Local-gov, State-gov, Without-pay, Never-worked]}
      education: {type: categorical, values: [Preschool, 1st-4th, 5th-6th, 7th-8th, 9th, 10th, 11th, 12th, HS-grad, Some-college, Assoc-voc, Assoc-acdm, Bachelors, Masters, Prof-school, Doctorate]}
      marital_status: {type: categorical, values: [Married-civ-spouse, Divorced, Never-married, Separated, Widowed, Married-spouse-absent, Married-AF-spouse]}
      occupation: {type: categorical, values: [Tech-support, Craft-repair, Other-service, Sales, Exec-managerial, Prof-specialty, Handlers-cleaners, Machine-op-inspct, Adm-clerical, Farming-fishing, Transport-moving, Priv-house-serv, Protective-serv, Armed-Forces]}
      race: {type: categorical, values: [White, Asian-Pac-Islander, Amer-Indian-Eskimo, Other, Black]}
      sex: {type: categorical, values: [Female, Male]}
      hours_per_week: {type: integer, min: 1, max: 99, width: 1}
      income: {type: categorical, values: ["<=50K", ">50K"]}
      relationship: {type: categorical, values: [Husband, Wife, Own-child, Not-in-family, Other-relative, Unmarried]}
      region: {type: categorical, values: [North, North-east, East, South-east, South, South-west, West, North-west, Center]}
      capital_gain: {type: integer, min: 0, max: 99999, width: 10000}
      capital_loss: {type: integer, min: 0, max: 4999, width: 500}
      children: {type: integer, min: 0, max: 5, width: 1}
      vehicles: {type: integer, min: 0, max: 4, width: 1}
      housing: {type: categorical, values: [Own, Mortgage, Rent, Other]}
      health: {type: categorical, values: [Excellent, Very-good, Good, Fair, Poor]}
      language: {type: categorical, values: [English, Spanish, Chinese, French, German, Other]}
      years_employed: {type: integer, min: 0, max: 40, width: 1}
      internet: {type: categorical, values: [Fiber, Cable, DSL, Mobile, None]}
`

var (
	relationships = []string{"Husband", "Wife", "Own-child", "Not-in-family", "Other-relative", "Unmarried"}
	regions       = []string{"North", "North-east", "East", "South-east", "South", "South-west", "West", "North-west", "Center"}
	housings      = []string{"Own", "Mortgage", "Rent", "Other"}
	healths       = []string{"Excellent", "Very-good", "Good", "Fair", "Poor"}
	languages     = []string{"English", "Spanish", "Chinese", "French", "German", "Other"}
	internets     = []string{"Fiber", "Cable", "DSL", "Mobile", "None"}
)

// GenerateWide writes a new SQLite database at path holding the table
// wide with the given number of rows: the demo's adult rows (same
// generator) with eleven more columns, some drawn from the person's age,
// sex, marital status and income. It refuses to overwrite an existing
// file. Test and benchmark fixture only: deterministic, not a noise source.
func GenerateWide(ctx context.Context, path string, rows int) error {
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("demo: %s exists", path)
	}
	db, err := sql.Open("sqlite", path+"?_pragma=journal_mode(OFF)&_pragma=synchronous(OFF)")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	cols := []string{"age", "workclass", "education", "marital_status", "occupation", "race", "sex", "hours_per_week", "income",
		"relationship", "region", "capital_gain", "capital_loss", "children", "vehicles", "housing", "health", "language", "years_employed", "internet"}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "CREATE TABLE "+WideTable+" ("+strings.Join(cols, ", ")+")"); err != nil {
		return err
	}
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + ")"
	insert := func(n int) string {
		return "INSERT INTO " + WideTable + " VALUES " + strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
	}
	full, err := tx.PrepareContext(ctx, insert(batch))
	if err != nil {
		return err
	}
	defer full.Close()
	g := &generator{r: rng{s: seed ^ 0x1de}}
	args := make([]any, 0, len(cols)*batch)
	for done := 0; done < rows; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(batch, rows-done)
		args = args[:0]
		for range n {
			p := g.person()
			r := &g.r
			rel := 3 // Not-in-family
			switch {
			case p.marital == mMarriedCiv && p.sex == sMale:
				rel = 0
			case p.marital == mMarriedCiv:
				rel = 1
			case p.age < 25:
				rel = []int{2, 3, 4}[r.pick([]int64{6, 3, 1})]
			case r.below(4) == 0:
				rel = 5
			}
			gain := int64(0)
			if r.below(100) < 8+uint64(7*p.income) {
				gain = int64(r.below(100000))
			}
			loss := int64(0)
			if r.below(100) < 5 {
				loss = int64(r.below(5000))
			}
			kids := int64(0)
			if p.age > 22 && p.age < 60 {
				kids = int64(r.pick([]int64{40, 20, 25, 10, 4, 1}))
			}
			years := min(int64(40), max(0, p.age-18-int64(r.below(8))))
			args = append(args,
				p.age, workclasses[p.workclass], educations[p.education], maritalStatuses[p.marital],
				occupations[p.occupation], races[p.race], sexes[p.sex], p.hours, incomes[p.income],
				relationships[rel], regions[r.pick([]int64{12, 10, 14, 11, 13, 9, 15, 8, 8})], gain, loss, kids,
				int64(r.pick([]int64{8, 35, 40, 12, 5})), housings[r.pick([]int64{25 + int64(p.income)*20, 35, 35, 5})],
				healths[r.pick([]int64{20, 30, 30, 15, 5})], languages[r.pick([]int64{80, 10, 3, 2, 2, 3})], years,
				internets[r.pick([]int64{25, 30, 15, 20, 10})])
		}
		stmt := full
		if n < batch {
			if stmt, err = tx.PrepareContext(ctx, insert(n)); err != nil {
				return err
			}
			defer stmt.Close()
		}
		if _, err := stmt.ExecContext(ctx, args...); err != nil {
			return err
		}
		done += n
	}
	return tx.Commit()
}
