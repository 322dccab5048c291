package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/planner"
)

// benchPlanner: `dpproxy-bench planner --workload allrange|prefix|marginals2|marginals3
// --domain 1024|256x256|8x8x8x8x8|10^100 [--noise laplace|gaussian] [--json]`.
// It plans a standard workload and prints, for every strategy the planner
// tried, its expected total squared error (ε = 1 for Laplace; per unit
// noise variance, i.e. Δ₂²·Σ w(AᵀA)⁻¹wᵀ, for Gaussian), the SVD lower bound
// in the same units, their ratio and the strategy's planning time.
func benchPlanner(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("planner", flag.ContinueOnError)
	workload := fs.String("workload", "allrange", "allrange, prefix (Kronecker products over several columns), marginals2 or marginals3")
	domain := fs.String("domain", "1024", "column sizes joined by x, e.g. 1024, 256x256, 8x8x8x8x8; n^d is d columns of n, e.g. 10^100")
	noiseName := fs.String("noise", "laplace", "laplace (ε = 1) or gaussian (per unit noise variance)")
	asJSON := fs.Bool("json", false, "print one JSON object per strategy")
	if err := fs.Parse(args); err != nil {
		return err
	}
	sizes, err := parseDomain(*domain)
	if err != nil {
		return exitError{Code: 2, Err: err}
	}
	cells := 1.0
	for _, n := range sizes {
		cells *= float64(n)
	}
	opt := planner.Options{Noise: catalog.Laplace, Epsilon: 1, Rho: 0.5}
	switch *noiseName {
	case "laplace":
	case "gaussian":
		opt.Noise = catalog.Gaussian
	default:
		return exitError{Code: 2, Err: fmt.Errorf("bad --noise %q", *noiseName)}
	}
	pl := planner.New()
	var plan *planner.GramPlan
	switch *workload {
	case "allrange", "prefix":
		var grams []planner.Gram
		for _, n := range sizes {
			if *workload == "allrange" {
				grams = append(grams, planner.AllRangeGram{Size: n})
			} else {
				grams = append(grams, planner.PrefixGram{Size: n})
			}
		}
		plan, err = pl.ChooseKronecker(context.Background(), grams, opt)
	case "marginals2", "marginals3":
		k := 2
		if *workload == "marginals3" {
			k = 3
		}
		if k > len(sizes) {
			return exitError{Code: 2, Err: fmt.Errorf("%s needs at least %d columns in --domain", *workload, k)}
		}
		plan, err = pl.ChooseMarginals(context.Background(), planner.AllMarginals(sizes, k), opt)
	default:
		return exitError{Code: 2, Err: fmt.Errorf("bad --workload %q", *workload)}
	}
	if err != nil {
		return err
	}
	bound := plan.SVDBound
	if opt.Noise == catalog.Laplace {
		bound *= 2 // a Laplace draw of scale 1 has variance 2
	}
	type row struct {
		Workload          string  `json:"workload"`
		Domain            string  `json:"domain"`
		Cells             float64 `json:"cells"`
		Noise             string  `json:"noise"`
		Strategy          string  `json:"strategy"`
		TotalSquaredError float64 `json:"total_squared_error"`
		SVDBound          float64 `json:"svd_bound"`
		Ratio             float64 `json:"ratio_to_svd_bound"`
		Seconds           float64 `json:"seconds"`
		Sensitivity       float64 `json:"sensitivity"`
		DualityGap        float64 `json:"duality_gap,omitempty"`
		MaxVariance       float64 `json:"max_variance,omitempty"`
		PlanSeconds       float64 `json:"planning_seconds_total"`
	}
	var rows []row
	for _, c := range plan.Candidates {
		tse := c.TotalSquaredError
		if opt.Noise == catalog.Gaussian {
			tse = c.Unit
		}
		rows = append(rows, row{
			Workload: *workload, Domain: *domain, Cells: cells, Noise: *noiseName, Strategy: c.Name,
			TotalSquaredError: tse, SVDBound: bound, Ratio: tse / bound, Seconds: c.Seconds,
			Sensitivity: c.Sensitivity, DualityGap: c.Gap, MaxVariance: c.MaxVariance, PlanSeconds: plan.Seconds,
		})
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "workload %s, domain %s (%.4g cells), noise %s; SVD bound %.4g; planned in %s\n",
		*workload, *domain, cells, *noiseName, bound, time.Duration(plan.Seconds*float64(time.Second)).Round(time.Millisecond))
	fmt.Fprintln(tw, "strategy\ttotal squared error\t× SVD bound\tmax variance\tseconds\tgap")
	for _, r := range rows {
		gap, mv := "", ""
		if r.DualityGap > 0 {
			gap = fmt.Sprintf("%.1e", r.DualityGap)
		}
		if r.MaxVariance > 0 {
			mv = fmt.Sprintf("%.4g", r.MaxVariance)
		}
		fmt.Fprintf(tw, "%s\t%.4g\t%.7g\t%s\t%.3f\t%s\n", r.Strategy, r.TotalSquaredError, r.Ratio, mv, r.Seconds, gap)
	}
	return tw.Flush()
}

// parseDomain reads column sizes joined by x, where n^d stands for d
// columns of n cells ("10^100" is 100 columns of 10).
func parseDomain(spec string) ([]int, error) {
	var sizes []int
	for _, p := range strings.Split(strings.ToLower(spec), "x") {
		base, rep, pow := strings.Cut(strings.TrimSpace(p), "^")
		n, err := strconv.Atoi(base)
		d := 1
		if err == nil && pow {
			d, err = strconv.Atoi(rep)
		}
		if err != nil || n < 1 || d < 1 || d > 1024 {
			return nil, fmt.Errorf("bad --domain %q", spec)
		}
		for i := 0; i < d; i++ {
			sizes = append(sizes, n)
		}
	}
	return sizes, nil
}
