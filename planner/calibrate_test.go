package planner

import (
	"context"
	"errors"
	"testing"

	"github.com/dpproxy/dpproxy/catalog"
)

// A privacy parameter so small that every strategy's noise scale reaches
// noise.MaxScale is an error wrapping ErrScale, not a panic in the
// sampler's calibration.
func TestChooseRefusesScalesBeyondTheSamplers(t *testing.T) {
	w := dashWorkload(t)
	for _, opt := range []Options{
		{Noise: catalog.Laplace, Epsilon: 1e-20},
		{Noise: catalog.Gaussian, Rho: 1e-40},
	} {
		p, err := New().Choose(context.Background(), w, opt)
		if !errors.Is(err, ErrScale) {
			t.Errorf("%+v: plan %v, err %v; want ErrScale", opt, p, err)
		}
	}
	// Just inside the bound, the plan exists.
	if _, err := New().Choose(context.Background(), w, Options{Noise: catalog.Laplace, Epsilon: 1e-6}); err != nil {
		t.Errorf("ε = 1e-6: %v", err)
	}
}
