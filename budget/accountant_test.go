package budget

import (
	"math"
	"testing"
)

func near(a, b, rel float64) bool {
	if a == b {
		return true
	}
	return math.Abs(a-b) <= rel*math.Max(math.Abs(a), math.Abs(b))
}

func TestCostAdd(t *testing.T) {
	got := Cost{Epsilon: 0.25, Rho: 0.5}.Add(Cost{Epsilon: 0.5, Rho: 0.125})
	if got != (Cost{Epsilon: 0.75, Rho: 0.625}) {
		t.Fatalf("Add = %+v", got)
	}
	if !(Cost{}).IsZero() || (Cost{Rho: 1e-300}).IsZero() {
		t.Fatal("IsZero wrong")
	}
}

func TestEpsilonFor(t *testing.T) {
	// δ = e^-2 and e^-8 make ln(1/δ) = 2 and 8, so the square roots are exact.
	d2, d8 := math.Exp(-2), math.Exp(-8)
	tests := []struct {
		name  string
		cost  Cost
		delta float64
		want  float64
	}{
		{"pure ε, δ unused", Cost{Epsilon: 0.5}, 0, 0.5},
		{"pure ε ignores δ", Cost{Epsilon: 0.7}, 0.3, 0.7},
		{"zero", Cost{}, 0, 0},
		// ρ + 2√(ρL) = 0.5 + 2√1 = 2.5; (a) and (b) agree when ε = 0.
		{"zCDP only", Cost{Rho: 0.5}, d2, 2.5},
		// 2 + 2√16 = 10
		{"zCDP only L=8", Cost{Rho: 2}, d8, 10},
		// (a) 1 + 0.5 + 2√1 = 3.5; (b) ρ' = 1, 1 + 2√2 = 3.83: (a) wins.
		{"mixed, (a) smaller", Cost{Epsilon: 1, Rho: 0.5}, d2, 3.5},
		// (a) 0.2 + 0.125 + 2√0.25 = 1.325; (b) ρ' = 0.145, 0.145 + 2√0.29 = 1.22203...: (b) wins.
		{"mixed, (b) smaller", Cost{Epsilon: 0.2, Rho: 0.125}, d2, 0.145 + 2*math.Sqrt(0.29)},
		{"δ = 0 with ρ", Cost{Rho: 0.1}, 0, math.Inf(1)},
		{"δ = 1 with ρ", Cost{Rho: 0.1}, 1, math.Inf(1)},
		{"δ < 0 with ρ", Cost{Rho: 0.1}, -0.1, math.Inf(1)},
		{"δ NaN with ρ", Cost{Rho: 0.1}, math.NaN(), math.Inf(1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := EpsilonFor(tc.cost, tc.delta)
			if !near(got, tc.want, 1e-14) {
				t.Fatalf("EpsilonFor(%+v, %g) = %.17g, want %.17g", tc.cost, tc.delta, got, tc.want)
			}
		})
	}
	if got := 0.145 + 2*math.Sqrt(0.29); !near(got, 1.2220329614269008, 1e-15) {
		t.Fatalf("hand value drifted: %.17g", got)
	}
}

func TestRhoForEpsilon(t *testing.T) {
	tests := []struct {
		name       string
		eps, delta float64
		want       float64
	}{
		{"L=2", 2.5, math.Exp(-2), 0.5},              // (√4.5 − √2)² = (3/√2 − 2/√2)² = 1/2
		{"L=8", 10, math.Exp(-8), 2},                 // (√18 − √8)² = (√2)² = 2
		{"δ=1e-5", 1, 1e-5, 0.020819938339535462},    // (√(ln 1e5 + 1) − √ln 1e5)², by hand
		{"eps 0", 0, 1e-5, 0},                        // nothing affordable
		{"eps negative", -1, 1e-5, 0},                //
		{"eps NaN", math.NaN(), 1e-5, 0},             //
		{"δ invalid", 1, 0, 0},                       // no finite conversion
		{"δ invalid high", 1, 1, 0},                  //
		{"eps +Inf", math.Inf(1), 1e-5, math.Inf(1)}, //
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := RhoForEpsilon(tc.eps, tc.delta)
			if !near(got, tc.want, 1e-13) {
				t.Fatalf("RhoForEpsilon(%g, %g) = %.17g, want %.17g", tc.eps, tc.delta, got, tc.want)
			}
		})
	}
}

func TestRhoForEpsilonRoundTrip(t *testing.T) {
	for _, delta := range []float64{1e-12, 1e-9, 1e-5, 0.01, 0.5, 0.999} {
		for _, eps := range []float64{1e-9, 1e-6, 0.01, 0.1, 0.5, 1, 3, 10, 100, 1e4} {
			rho := RhoForEpsilon(eps, delta)
			back := EpsilonFor(Cost{Rho: rho}, delta)
			if !near(back, eps, 1e-12) {
				t.Errorf("δ=%g ε=%g: ρ=%g converts back to ε=%.17g", delta, eps, rho, back)
			}
			// Largest: a little more ρ costs more than eps.
			if EpsilonFor(Cost{Rho: rho * (1 + 1e-9)}, delta) <= eps {
				t.Errorf("δ=%g ε=%g: ρ=%g is not the largest", delta, eps, rho)
			}
		}
	}
}

// Composition in zCDP is tighter than adding converted ε's: k Gaussian
// releases at ε each cost less than k·ε in total, which is why the ledger
// sums ρ and converts once.
func TestZCDPComposesSublinearly(t *testing.T) {
	const delta = 1e-5
	r := RhoForEpsilon(0.5, delta)
	want := []float64{0.5, 0.7102195942157811, 0.8727631643625003, 1.010627808461541}
	for k, w := range want {
		if got := EpsilonFor(Cost{Rho: float64(k+1) * r}, delta); !near(got, w, 1e-12) {
			t.Errorf("%d releases: ε=%.17g, want %.17g", k+1, got, w)
		}
	}
}
