package engine

import (
	"context"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/budget"
)

// BenchmarkReuseYearDecisionCost answers a daily panel over a year of
// hourly bins (8,760 cells, solved as blocks) with stored-measurement
// reuse on — an hourly panel stored before the first — and off
// (reuse_measurements: false), alternately in the same run on the same
// data, through Engine.Answer, and reports the mean latency of each and
// their ratio (on/off), and the ε each charged per batch.
//
// derivable: @dp_max_stderr = 30, which a day summed from the stored
// hours meets: every batch with reuse on is answered free (derived, then
// the stored answer re-released). combined:
// @dp_max_stderr = 1.5·0.8^i, tighter each time, so the stored hours and
// dailies never meet it alone: every batch with reuse on is measured
// combined with them (365 blocks of 24 hours), and stored. Up to 15
// iterations: past them the target needs more than the table's largest
// ε per query (50).
//
//	go test ./engine/ -run '^$' -bench ReuseYearDecisionCost -benchtime 5x
func BenchmarkReuseYearDecisionCost(b *testing.B) {
	for _, mode := range []struct {
		name   string
		stderr func(i int) float64
	}{
		{"derivable", func(int) float64 { return 30 }},
		{"combined", func(i int) float64 { return 1.5 * math.Pow(0.8, float64(i)) }},
	} {
		b.Run(mode.name, func(b *testing.B) {
			dir := b.TempDir()
			writeVisits(b, filepath.Join(dir, "visits.sqlite"), 50_000)
			ctx := context.Background()
			on, doneOn := newTimeEngine(b, dir)
			defer doneOn()
			off, doneOff := newTimeEngine(b, dir)
			defer doneOff()
			off.measures = nil
			if _, err := on.Answer(ctx, session("analyst", map[string]any{"dp_epsilon": 1.0}), []string{yearHourly}); err != nil {
				b.Fatal(err)
			}
			on.reuse.Wait()
			var took [2]time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s := session("analyst", map[string]any{"dp_epsilon": 1.0, "dp_max_stderr": mode.stderr(i)})
				for k, eng := range []*Engine{on, off} {
					start := time.Now()
					if _, err := eng.Answer(ctx, s, []string{yearDaily}); err != nil {
						b.Fatal(err)
					}
					took[k] += time.Since(start)
				}
				b.StopTimer()
				on.reuse.Wait()
				b.StartTimer()
			}
			var spent [2]float64 // ε charged by the timed batches
			derived := 0
			for k, eng := range []*Engine{on, off} {
				es, err := eng.ledger.Entries(ctx, budget.Filter{})
				if err != nil {
					b.Fatal(err)
				}
				if k == 0 {
					es = es[1:] // the stored hourly panel
				}
				for _, e := range es {
					spent[k] += e.Cost.Epsilon
					if k == 0 && (e.Kind == budget.KindDerived || e.Kind == budget.KindReuse) {
						derived++
					}
				}
			}
			b.ReportMetric(float64(derived)/float64(b.N), "free/op") // derived or re-released
			b.ReportMetric(spent[0]/float64(b.N), "eps_on/op")
			b.ReportMetric(spent[1]/float64(b.N), "eps_off/op")
			b.ReportMetric(float64(took[0].Microseconds())/1e3/float64(b.N), "ms_reuse_on")
			b.ReportMetric(float64(took[1].Microseconds())/1e3/float64(b.N), "ms_reuse_off")
			b.ReportMetric(float64(took[0])/float64(took[1]), "on/off")
		})
	}
}
