package selection_test

import (
	"fmt"

	"github.com/dpproxy/dpproxy/selection"
)

// A unit that contributes to one key, at ε = 1 and δ = 10⁻⁶: the truncated
// geometric mechanism, and the counts of distinct units at which a key is
// released with probability 50% and 99%.
func ExampleChoose() {
	m, err := selection.Choose(1, 0, 1e-6, 1)
	if err != nil {
		panic(err)
	}
	fmt.Println(m.Kind, m.UnitsFor(0.5), m.UnitsFor(0.99), m.Threshold())
	m, _ = selection.Choose(1, 0, 1e-6, 10)
	fmt.Println(m.Kind, m.UnitsFor(0.5), m.UnitsFor(0.99), m.Threshold())
	// Output:
	// truncated_geometric 14 18 28
	// laplace_threshold 164 203 164
}
