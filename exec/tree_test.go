package exec

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/planner"
)

// TestMeasureTreeError: the empirical total squared error of the prefix
// counts from MeasureTree matches the plan's exact expectation, the node
// variance times Tree.PrefixError, for both noise families. Seeded
// (ChaCha8 through noise.NewRandFrom), so reproducible; the tolerance is
// 5 standard errors of the mean over the trials, a false failure rate
// below 10⁻⁶ under the normal approximation.
func TestMeasureTreeError(t *testing.T) {
	const n, trials = 100, 3000
	counts := make([]float64, n)
	for i := range counts {
		counts[i] = float64(i % 7)
	}
	for _, opt := range []planner.Options{
		{Noise: catalog.Laplace, Epsilon: 1},
		{Noise: catalog.Gaussian, Rho: 0.5},
	} {
		p, err := planner.PlanTree(n, opt)
		if err != nil {
			t.Fatal(err)
		}
		r := noise.NewRandFrom(rand.NewChaCha8([32]byte{'t', 'r', 'e', 'e'}))
		want := p.NodeVariance * p.Tree.PrefixError()
		sum, sum2 := 0.0, 0.0
		for trial := 0; trial < trials; trial++ {
			est, err := MeasureTree(p, &TreeInput{Counts: counts, Weight: 1}, r)
			if err != nil {
				t.Fatal(err)
			}
			se, acc, truth := 0.0, 0.0, 0.0
			for i, v := range est {
				acc += v
				truth += counts[i]
				se += (acc - truth) * (acc - truth)
			}
			sum += se
			sum2 += se * se
		}
		mean := sum / trials
		sd := math.Sqrt((sum2/trials - mean*mean) / trials)
		if math.Abs(mean-want) > 5*sd {
			t.Fatalf("%s: empirical total squared error %.4g ± %.2g, expected %.4g", opt.Noise, mean, sd, want)
		}
		t.Logf("%s (b=%d): empirical %.4g ± %.2g, expected %.4g", opt.Noise, p.Tree.B, mean, sd, want)
	}
}

// TestMeasureTreeRefuses: no noise is drawn for a plan whose noise is
// below its calibration or for counts weighted beyond it.
func TestMeasureTreeRefuses(t *testing.T) {
	p, err := planner.PlanTree(10, planner.Options{Noise: catalog.Laplace, Epsilon: 1})
	if err != nil {
		t.Fatal(err)
	}
	in := &TreeInput{Counts: make([]float64, 10), Weight: 1}
	bad := *p
	bad.NoiseNum /= 2
	if _, err := MeasureTree(&bad, in, noNoiseSampler{}); !errors.Is(err, planner.ErrTreeNoise) {
		t.Fatalf("under-calibrated plan: %v", err)
	}
	if _, err := MeasureTree(p, &TreeInput{Counts: in.Counts, Weight: 2}, noNoiseSampler{}); !errors.Is(err, ErrTreeWeights) {
		t.Fatalf("weight 2: %v", err)
	}
}

// noNoiseSampler draws zeros.
type noNoiseSampler struct{}

func (noNoiseSampler) DiscreteLaplace(uint64, uint64) int64  { return 0 }
func (noNoiseSampler) DiscreteGaussian(uint64, uint64) int64 { return 0 }
