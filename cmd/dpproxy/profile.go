package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/dpproxy/dpproxy/sources"
)

// profileUnits is `dpproxy profile-units`: the data owner's view of how
// many rows each privacy unit has, to choose max_rows. It reads exact data
// and prints it without noise, so it is an administrator's command run on
// the data owner's side with the catalog and data directory; the MySQL
// front never runs it.
func profileUnits(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("profile-units", flag.ContinueOnError)
	var cf commonFlags
	cf.register(fs)
	table := fs.String("table", "", "table to profile (default: every table with a privacy_unit)")
	column := fs.String("column", "", "unit column, for a table without privacy_unit (requires -table)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *column != "" && *table == "" {
		return exitError{Code: 2, Err: errors.New("profile-units: -column needs -table")}
	}
	cat, err := cf.load(ctx)
	if err != nil {
		return err
	}
	set, err := sources.Open(ctx, cat, sources.Options{DataDir: cf.dataDir, Logger: newLogger(io.Discard)})
	if err != nil {
		return err
	}
	defer set.Close()
	fmt.Fprintln(stdout, "EXACT DATA: for the data owner only; do not share these figures with analysts.")
	n := 0
	for _, t := range cat.Tables {
		if *table != "" && t.Name != *table || *table == "" && t.Unit == nil {
			continue
		}
		n++
		p, err := set.ProfileUnits(ctx, t, *column)
		if err != nil {
			return err
		}
		col := *column
		if col == "" {
			col = t.Unit.Column
		}
		fmt.Fprintf(stdout, "\ntable %s, unit %s: %d units, %d rows, %d rows with a NULL unit (not counted)\n", t.Name, col, p.Units, p.Rows, p.NullRows)
		if p.Units == 0 {
			continue
		}
		fmt.Fprintf(stdout, "rows per unit: median %d, p90 %d, p99 %d, max %d\n", p.Quantile(0.5), p.Quantile(0.9), p.Quantile(0.99), p.Quantile(1))
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "max_rows\tunits truncated\trows kept\t")
		for _, k := range []int64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000} {
			if k > p.Quantile(1)*2 {
				break
			}
			over := int64(0)
			for _, ru := range p.RowsUnits {
				if ru.Rows > k {
					over += ru.Units
				}
			}
			fmt.Fprintf(tw, "%d\t%d (%.1f%%)\t%.1f%%\t\n", k, over, 100*float64(over)/float64(p.Units), 100*float64(p.Kept(k))/float64(p.Rows))
		}
		tw.Flush()
		if t.Unit != nil {
			fmt.Fprintf(stdout, "declared: %s; noise grows with max_rows (each unit's rows are one neighbour)\n", t.Unit)
		}
	}
	if n == 0 {
		return exitError{Code: 2, Err: errors.New("profile-units: no table with a privacy_unit (use -table and -column)")}
	}
	return nil
}
