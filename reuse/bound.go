package reuse

import (
	"github.com/dpproxy/dpproxy/compile"
	"github.com/dpproxy/dpproxy/measure"
	"github.com/dpproxy/dpproxy/planner"
)

// A public bound that shows, without solving, that a candidate combined
// with the stored measurements cannot meet the accuracy asked. For an
// answer w identified by the combined information J = J_stored + J_new,
// Cauchy–Schwarz gives (wᵀw)² = (wᵀJ^½·J^+½w)² ≤ (wᵀJw)(wᵀJ⁺w), so its
// variance wᵀJ⁺w is at least ‖w‖⁴ / wᵀJw; an answer not identified
// (wᵀJw = 0 puts w in J's null space) fails anyway. When that lower
// bound, plus the rounding's variance, exceeds some answer's target, the
// combination is not a candidate: the O(n³) solve is skipped, and the
// decision is the one the solve would have made. It reads the stored
// measurements' structure and noise variances, the candidate's and the
// targets: public things only.

// boundWork bounds the bound's work, Σ over answers of their cells
// squared, in units of the domain's cells squared (one information
// matrix costs n² to build): past it the combination is solved.
const boundWork = 4

// cannotMeet reports whether the bound shows that recs (a candidate's
// structure, at weight 1; none: the stored measurements alone) combined
// with doms' stored measurements miss some answer's target, margin
// added to every variance (the rounding's, when several measurements
// combine).
func cannotMeet(w *compile.Workload, doms []*domain, recs []*measure.Measurement, target func(q, a, g int) float64, margin float64) bool {
	for _, d := range doms {
		n := d.cells()
		vecs := make(map[int][][]vector, len(d.queries))
		work := 0
		for _, q := range d.queries {
			vecs[q] = d.vectors(w, q)
			for _, groups := range vecs[q] {
				for _, v := range groups {
					work += len(v.cells) * len(v.cells)
				}
			}
		}
		if work > boundWork*n*n {
			continue
		}
		gp, ok := planner.NewGLS(d.mcols)
		if !ok {
			continue
		}
		for _, r := range recs {
			if r, ok := d.reduce(r); ok {
				gp.Add(r, 1)
			}
		}
		for _, q := range d.queries {
			qu := w.Queries[q]
			for a, groups := range vecs[q] {
				for g, v := range groups {
					if !qu.IsLive(a, g) || len(v.cells) == 0 {
						continue
					}
					info := d.g.Quad(v.cells, v.ws) + gp.Quad(v.cells, v.ws)
					if !(info > 0) {
						return true // not identified
					}
					norm := 0.0
					for _, x := range v.ws {
						norm += x * x
					}
					// The bound is tight for a diagonal J: a relative 10⁻⁶
					// keeps its rounding from deciding.
					if lower := norm * norm / info * (1 - 1e-6); lower+margin > target(q, a, g)*(1+1e-9) {
						return true
					}
				}
			}
		}
	}
	return false
}
