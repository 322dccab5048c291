package planner

import (
	"fmt"
	"slices"

	"github.com/dpproxy/dpproxy/compile"
)

// CellsError refuses a batch whose histograms would exceed the cell limit
// even measured in marginal space. Its message depends only on the
// workload's shape and the catalog.
type CellsError struct {
	Cells, Limit float64
}

func (e *CellsError) Error() string {
	return fmt.Sprintf("the batch needs histograms of %.4g cells, more than the table's limit of %.4g; group by fewer or coarser columns, or split the batch", e.Cells, e.Limit)
}

// productCells is the size of the product domain, as a float (it can pass
// the int range on wide tables).
func productCells(sizes []int) float64 {
	n := 1.0
	for _, s := range sizes {
		n *= float64(s)
	}
	return n
}

// queryTables are the maximal supports of the queries (the tables a
// Direct plan in marginal space counts) and their cells.
func (s *space) queryTables() ([][]int, float64) {
	var sets []colSet
	for q := range s.w.Queries {
		m := s.querySupport(q)
		if !slices.Contains(sets, m) {
			sets = append(sets, m)
		}
	}
	sizes := s.w.Sizes()
	var tables [][]int
	cells := 0.0
	for _, a := range sets {
		covered := false
		for _, b := range sets {
			if a != b && a.subsetOf(b) {
				covered = true
				break
			}
		}
		if covered {
			continue
		}
		cols := a.cols()
		tables = append(tables, cols)
		c := 1.0
		for _, j := range cols {
			c *= float64(sizes[j])
		}
		cells += c
	}
	slices.SortFunc(tables, slices.Compare)
	return tables, cells
}

// CountedCells is the number of histogram cells a batch's measurement
// needs at least: the product domain when it fits in maxCells (0:
// DefaultMaxCells), else the cells of the queries' own column sets. A
// batch whose CountedCells exceeds the limit is refused.
func CountedCells(w *compile.Workload, maxCells float64) float64 {
	if maxCells <= 0 {
		maxCells = DefaultMaxCells
	}
	if p := productCells(w.Sizes()); p <= maxCells {
		return p
	}
	_, cells := newSpace(w).queryTables()
	return cells
}
