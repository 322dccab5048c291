package console

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"net/http"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
)

// Plots of spending over time, drawn on the server as SVG with gonum/plot
// from the ledger's per-bucket sums (budget.Ledger.Spending), so a page
// costs the same with 10 entries or 10⁵.
//
//	/plot/{table}/epsilon.svg  cumulative ε by user, stacked (pure ε adds up);
//	                           on a Gaussian table, the ε at δ of the
//	                           cumulative spend, which does not add up by user
//	/plot/{table}/rho.svg      cumulative ρ by user, stacked (Gaussian tables)
//
// An auditor sees every user and the table's total limit; an analyst sees
// their own spending against their per-user limit.

// palette is Tableau 10: distinct, colour-blind-friendly series colours.
var palette = []color.RGBA{
	{0x4e, 0x79, 0xa7, 0xff}, {0xf2, 0x8e, 0x2b, 0xff}, {0x59, 0xa1, 0x4f, 0xff}, {0xe1, 0x57, 0x59, 0xff},
	{0x76, 0xb7, 0xb2, 0xff}, {0xed, 0xc9, 0x48, 0xff}, {0xb0, 0x7a, 0xa1, 0xff}, {0xff, 0x9d, 0xa7, 0xff},
	{0x9c, 0x75, 0x5f, 0xff}, {0xba, 0xb0, 0xac, 0xff},
}

var limitColor = color.RGBA{0xc0, 0x39, 0x2b, 0xff}

func (s *Server) plot(w http.ResponseWriter, r *http.Request, v *viewer) {
	cat := s.cfg.Catalog()
	t := cat.Table(r.PathValue("table"))
	metric := r.PathValue("metric")
	if t == nil || (metric != "epsilon.svg" && metric != "rho.svg") || (metric == "rho.svg" && t.Noise != catalog.Gaussian) {
		http.NotFound(w, r)
		return
	}
	series, err := s.spending(r.Context(), cat, v, t.Name, "")
	if err != nil {
		s.fail(w, r, err, false)
		return
	}
	limit, scope := t.Budget.Total, "table"
	if !v.Auditor {
		limit, scope = t.Budget.PerUser, "your"
	}
	svg, err := spendingSVG(t, series, metric == "rho.svg", limit, scope)
	if err != nil {
		s.fail(w, r, err, false)
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Write(svg) //nolint:errcheck // the client went away
}

// cumulative is one user's running total at the end of each bucket.
type cumulative struct {
	user  string
	costs []budget.Cost
}

// accumulate turns per-bucket sums into running totals per user, over the
// series' buckets in time order; ends are the buckets' starts (unix
// seconds): the running total steps up there.
func accumulate(s budget.Series) (ends []float64, users []cumulative) {
	var starts []time.Time
	for _, p := range s.Points {
		if len(starts) == 0 || !starts[len(starts)-1].Equal(p.Start) {
			starts = append(starts, p.Start)
		}
	}
	idx := map[string]int{}
	for _, p := range s.Points {
		if _, ok := idx[p.User]; !ok {
			idx[p.User] = len(users)
			users = append(users, cumulative{user: p.User, costs: make([]budget.Cost, len(starts))})
		}
	}
	slices.SortFunc(users, func(a, b cumulative) int {
		if a.user < b.user {
			return -1
		}
		return 1
	})
	for i, u := range users {
		idx[u.user] = i
	}
	b := 0
	for _, p := range s.Points {
		for !starts[b].Equal(p.Start) {
			b++
		}
		u := &users[idx[p.User]]
		u.costs[b] = u.costs[b].Add(p.Cost)
	}
	for _, u := range users {
		for i := 1; i < len(u.costs); i++ {
			u.costs[i] = u.costs[i-1].Add(u.costs[i])
		}
	}
	ends = make([]float64, len(starts))
	for i, st := range starts {
		ends[i] = unixSeconds(st)
	}
	return ends, users
}

// spendingSVG draws one table's cumulative spending. rho selects the ρ
// plot; limit is the ε limit the viewer's scope has (the table's total or
// the user's per-user budget). It writes one SVG document top to bottom
// (axes, limit, steps, labels); split, its coordinates would be threaded
// through every piece.
func spendingSVG(t *catalog.Table, s budget.Series, rho bool, limit float64, scope string) ([]byte, error) {
	p := plot.New()
	styleFonts(p)
	p.X.Label.Text = "time (UTC)"
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.ThumbnailWidth = vg.Points(12)
	p.Add(plotter.NewGrid())

	ends, users := accumulate(s)
	unit := "ε"
	if rho {
		unit = "ρ"
	}
	p.Y.Label.Text = "cumulative " + unit
	// value is what is plotted for a cumulative spend; stacked says whether
	// users' values add up (pure ε and ρ do; ε at δ of a ρ spend does not).
	gaussian := t.Noise == catalog.Gaussian
	value := func(c budget.Cost) float64 { return c.Epsilon }
	stacked := true
	limitY := limit
	limitLabel := fmt.Sprintf("%s limit ε=%g", scope, limit)
	switch {
	case rho:
		value = func(c budget.Cost) float64 { return c.Rho }
		limitY = budget.RhoForEpsilon(limit, t.Budget.Delta)
		limitLabel = fmt.Sprintf("%s limit: ρ=%.4g (ε=%g at δ=%g)", scope, limitY, limit, t.Budget.Delta)
	case gaussian:
		stacked = false
		value = func(c budget.Cost) float64 { return budget.EpsilonFor(c, t.Budget.Delta) }
		p.Y.Label.Text = fmt.Sprintf("cumulative ε at δ=%g", t.Budget.Delta)
	}

	top := 0.0
	if len(ends) == 0 {
		now := float64(time.Now().Unix())
		p.X.Min, p.X.Max = now-3600, now
		p.Title.Text = fmt.Sprintf("%s: no charges yet", t.Name)
	} else {
		x0 := unixSeconds(s.From)
		xEnd := ends[len(ends)-1] + s.Width.Seconds()
		// A running total is a step function: flat, then up at each bucket.
		xy := func(vals []float64) plotter.XYs {
			pts := plotter.XYs{{X: x0, Y: 0}}
			prev := 0.0
			for i, e := range ends {
				pts = append(pts, plotter.XY{X: e, Y: prev}, plotter.XY{X: e, Y: vals[i]})
				prev = vals[i]
			}
			return append(pts, plotter.XY{X: xEnd, Y: prev})
		}
		// Running sums over users, bottom to top; drawn top first so each
		// filled area covers the one above it down to the axis.
		lower := make([]float64, len(ends))
		var layers []*plotter.Line
		for k, u := range users {
			vals := make([]float64, len(ends))
			for i, c := range u.costs {
				vals[i] = value(c)
				if stacked {
					vals[i] += lower[i]
				}
			}
			l, err := plotter.NewLine(xy(vals))
			if err != nil {
				return nil, err
			}
			col := palette[k%len(palette)]
			l.LineStyle.Width = vg.Points(1.2)
			l.LineStyle.Color = darker(col)
			if stacked {
				l.FillColor = col
			} else {
				l.LineStyle.Color = col
				l.LineStyle.Width = vg.Points(2)
			}
			layers = append(layers, l)
			p.Legend.Add(u.user, l)
			top = math.Max(top, slices.Max(vals))
			if stacked {
				lower = vals
			}
		}
		if gaussian && !rho && len(users) > 1 {
			// The table's total at δ: compose all users' spends, then convert.
			total := make([]float64, len(ends))
			for i := range ends {
				var c budget.Cost
				for _, u := range users {
					c = c.Add(u.costs[i])
				}
				total[i] = value(c)
			}
			l, err := plotter.NewLine(xy(total))
			if err != nil {
				return nil, err
			}
			l.LineStyle.Width = vg.Points(2)
			l.LineStyle.Color = color.Black
			layers = append(layers, l)
			p.Legend.Add("all users", l)
			top = math.Max(top, slices.Max(total))
		}
		for _, l := range slices.Backward(layers) {
			p.Add(l)
		}
		if !stacked {
			p.Title.Text = fmt.Sprintf("%s: ε=%s spent at δ=%g, %s remaining of %s", t.Name, format(top), t.Budget.Delta, format(limitY-top), format(limitY))
		} else {
			p.Title.Text = fmt.Sprintf("%s: %s=%s spent, %s remaining of %s", t.Name, unit, format(top), format(limitY-top), format(limitY))
		}
		p.X.Tick.Marker = plot.TimeTicks{Format: timeFormat(xEnd - x0), Time: func(f float64) time.Time {
			return time.UnixMilli(int64(math.Round(f * 1000))).UTC() // ticks fall on float multiples
		}}
	}
	p.Y.Min = 0
	// The limit is drawn when it is in sight (within 1.5× of the spend);
	// otherwise it would flatten the spend into the axis, and the title
	// says what remains.
	if top == 0 || limitY <= 1.5*top {
		ln, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: limitY}, {X: p.X.Max, Y: limitY}})
		if err != nil {
			return nil, err
		}
		if len(ends) > 0 {
			ln.XYs[0].X, ln.XYs[1].X = unixSeconds(s.From), ends[len(ends)-1]+s.Width.Seconds()
		}
		ln.LineStyle.Color = limitColor
		ln.LineStyle.Width = vg.Points(1.5)
		ln.LineStyle.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		p.Add(ln)
		p.Legend.Add(limitLabel, ln)
		p.Y.Max = math.Max(p.Y.Max, limitY*1.08)
	} else {
		p.Y.Max = top * 1.25 // room for the legend
	}

	c := vgsvg.New(vg.Points(540), vg.Points(230))
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// styleFonts sets a sans-serif face on every text of p.
func styleFonts(p *plot.Plot) {
	sans := func(size vg.Length) font.Font {
		return font.Font{Typeface: "Liberation", Variant: "Sans", Size: size}
	}
	p.Title.TextStyle.Font = sans(11)
	p.Title.Padding = vg.Points(6)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = sans(9)
		a.Tick.Label.Font = sans(8)
	}
	p.Legend.TextStyle.Font = sans(8)
}

func darker(c color.RGBA) color.RGBA {
	return color.RGBA{c.R * 3 / 4, c.G * 3 / 4, c.B * 3 / 4, 0xff}
}

// unixSeconds is t in seconds since the epoch, to the millisecond.
func unixSeconds(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }

// timeFormat picks tick labels for a span of seconds.
func timeFormat(span float64) string {
	switch {
	case span < 10:
		return "15:04:05.000"
	case span < 600:
		return "15:04:05"
	case span < 2*86400:
		return "15:04"
	case span < 300*86400:
		return "Jan 02"
	}
	return "2006-01"
}

// format prints a budget amount briefly: four significant digits.
func format(f float64) string {
	if math.Abs(f) >= 1e6 {
		return fmt.Sprintf("%.3g", f)
	}
	return fmt.Sprintf("%.4g", f)
}
