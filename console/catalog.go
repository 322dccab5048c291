package console

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/catalog"
)

// The catalog as the console shows it (/catalog, /api/catalog): every
// user sees it, as every user browses the same schema over MySQL. Domains
// are public by construction; passwords and sources are not shown.

type tableView struct {
	Name   string     `json:"name"`
	Noise  string     `json:"noise"`
	Budget budgetView `json:"budget"`
	// PrivacyUnit is the column whose values are the privacy unit, with its
	// contribution bounds ("" when every row is its own unit).
	PrivacyUnit string       `json:"privacy_unit,omitempty"`
	Columns     []columnView `json:"columns"`
}

type budgetView struct {
	Total              float64 `json:"total_epsilon"`
	PerUser            float64 `json:"per_user_epsilon"`
	DefaultPerQuery    float64 `json:"default_per_query_epsilon"`
	MaxPerQuery        float64 `json:"max_per_query_epsilon,omitempty"`
	Delta              float64 `json:"delta,omitempty"`
	TopKSelectionShare float64 `json:"topk_selection_share,omitempty"`
}

type columnView struct {
	Name        string    `json:"name"`
	Type        string    `json:"type"` // categorical, integer, numeric
	Domain      string    `json:"domain"`
	Values      []string  `json:"values,omitempty"`
	Min         *int64    `json:"min,omitempty"`
	Max         *int64    `json:"max,omitempty"`
	Width       int64     `json:"width,omitempty"`
	Edges       []float64 `json:"edges,omitempty"`
	Cells       int       `json:"cells"`
	Null        string    `json:"null"`
	OutOfDomain string    `json:"out_of_domain"`
}

// privacyUnit describes a table's privacy unit and its contribution
// bounds, "" when each row is its own unit.
func privacyUnit(t *catalog.Table) string {
	if t.Unit == nil {
		return ""
	}
	return t.Unit.String() + "; rows with a NULL " + t.Unit.Column + " are not counted"
}

func catalogView(cat *catalog.Catalog) []tableView {
	out := make([]tableView, 0, len(cat.Tables))
	for _, t := range cat.Tables {
		tv := tableView{Name: t.Name, Noise: string(t.Noise), PrivacyUnit: privacyUnit(t), Budget: budgetView{
			Total: t.Budget.Total, PerUser: t.Budget.PerUser, DefaultPerQuery: t.Budget.DefaultPerQuery,
			MaxPerQuery: t.Budget.MaxPerQuery, Delta: t.Budget.Delta, TopKSelectionShare: t.Budget.TopKSelectionShare}}
		for _, c := range t.Columns {
			tv.Columns = append(tv.Columns, columnOf(c))
		}
		out = append(out, tv)
	}
	return out
}

func columnOf(c *catalog.Column) columnView {
	cv := columnView{Name: c.Name, Cells: c.Size(), Null: string(c.Null), OutOfDomain: string(c.OutOfDomain)}
	switch c.Kind {
	case catalog.Categorical:
		cv.Type, cv.Values = "categorical", c.Values
		cv.Domain = fmt.Sprintf("%d values", len(c.Values))
	case catalog.IntegerRange:
		lo, hi := c.Min, c.Max
		cv.Type, cv.Min, cv.Max, cv.Width = "integer", &lo, &hi, c.Width
		cv.Domain = fmt.Sprintf("%d … %d", c.Min, c.Max)
		if c.Width > 1 {
			cv.Domain += fmt.Sprintf(", bins of %d", c.Width)
		}
	case catalog.Binned:
		cv.Type, cv.Edges = "numeric", c.Edges
		parts := make([]string, len(c.Edges))
		for i, e := range c.Edges {
			parts[i] = strconv.FormatFloat(e, 'g', -1, 64)
		}
		cv.Domain = "edges " + strings.Join(parts, ", ")
	case catalog.TimeRange:
		cv.Type = c.TimeUnit()
		cv.Domain = fmt.Sprintf("%s … %s (UTC), bins of %s", catalog.FormatTime(c.Min, c.DateOnly), catalog.FormatTime(c.Max, c.DateOnly), c.FormatWidth())
	}
	return cv
}
