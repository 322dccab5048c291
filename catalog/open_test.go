package catalog

import "testing"

// Like is exact, character by character: % and _ over characters (not
// bytes), case and trailing spaces counting, an escape making the next
// character literal and matching itself at the end of a pattern.
func TestLike(t *testing.T) {
	for _, c := range []struct {
		s, p, esc string
		want      bool
	}{
		{"Male", "%ale", `\`, true},
		{"Male ", "%ale", `\`, false},
		{"MALE", "%ale", `\`, false},
		{"Ünïcödé", "_n%", `\`, true},
		{"ünïcödé", "%Ü%", `\`, false},
		{"", "%", `\`, true},
		{"", "_", `\`, false},
		{"a_b", `a\_b`, `\`, true},
		{"axb", `a\_b`, `\`, false},
		{"50%", "50!%", "!", true},
		{"500", "50!%", "!", false},
		{"ab!", "ab!", "!", true},
		{"ab", "ab!", "!", false},
		{"abc", "a%%c", `\`, true},
		{"x'y", "x'%", "", true},
	} {
		if got := Like(c.s, c.p, c.esc); got != c.want {
			t.Errorf("Like(%q, %q, %q) = %v", c.s, c.p, c.esc, got)
		}
	}
	tab := &Table{Name: "t", Columns: []*Column{{Name: "c", Kind: Categorical, Open: true, Null: PolicyCell, OutOfDomain: PolicyOther}}}
	c := tab.WithPatterns("c", []string{"Male"}, []Pattern{{"%ale", `\`}, {"M%", `\`}}).Column("c")
	// Cells: Male, match 00, 01, 10, 11, other, NULL.
	if c.Size() != 7 || !c.OpenCopy {
		t.Fatalf("size %d, open copy %v", c.Size(), c.OpenCopy)
	}
	for v, want := range map[any]int{"Male": 0, "x": 1, "Female": 2, "Mx": 3, "Mxale": 4, nil: 6} {
		if got := c.CellOf(v); got != want {
			t.Errorf("CellOf(%v) = %d, want %d", v, got, want)
		}
	}
}
