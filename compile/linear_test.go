package compile

import (
	"math"
	"slices"
	"testing"
)

// mulFactor is the element-wise product, sharing an operand when the
// product equals it bit for bit (a window's indicator times a group's
// inside it), and copying otherwise.
func TestMulFactorSharesAnEqualOperand(t *testing.T) {
	window := Factor{0, 1, 1, 1, 0}
	cases := []struct {
		name  string
		a, b  Factor
		want  Factor
		share Factor // the operand the product is, nil when it is a copy
	}{
		{"group inside the window", window, Factor{0, 1, 1, 0, 0}, Factor{0, 1, 1, 0, 0}, nil},
		{"window inside the group", Factor{1, 1, 1, 1, 1}.withZero(0), window, window, nil},
		{"group across the window's edge", window, Factor{0, 0, 0, 1, 1}, Factor{0, 0, 0, 1, 0}, nil},
		{"weights", Factor{2, 2, 2, 2, 2}, window, Factor{0, 2, 2, 2, 0}, nil},
		{"negative zero is not zero", Factor{-1, 1, 1, 1, 1}, Factor{0, 1, 1, 1, 1}, Factor{math.Copysign(0, -1), 1, 1, 1, 1}, nil},
		{"disjoint", Factor{1, 1, 0, 0, 0}, Factor{0, 0, 0, 1, 1}, Factor{0, 0, 0, 0, 0}, nil},
	}
	cases[0].share = cases[0].b
	cases[1].share = cases[1].b
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a0, b0 := slices.Clone(tc.a), slices.Clone(tc.b)
			got, zero := mulFactor(tc.a, tc.b)
			if zero != !slices.ContainsFunc(tc.want, func(x float64) bool { return x != 0 }) {
				t.Fatalf("zero %v for the product %v", zero, got)
			}
			for i := range got {
				if math.Float64bits(got[i]) != math.Float64bits(tc.want[i]) {
					t.Fatalf("product %v, want %v", got, tc.want)
				}
			}
			shared := &got[0] == &tc.a[0] || &got[0] == &tc.b[0]
			if tc.share != nil && &got[0] != &tc.share[0] {
				t.Fatalf("product %v is a copy, want the operand shared", got)
			}
			if tc.share == nil && shared {
				t.Fatalf("product %v shares an operand it differs from", got)
			}
			if !slices.Equal(tc.a, a0) || !slices.Equal(tc.b, b0) {
				t.Fatal("operands changed")
			}
		})
	}
}

func (f Factor) withZero(i int) Factor {
	out := slices.Clone(f)
	out[i] = 0
	return out
}
