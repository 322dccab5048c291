package catalog

// OpenColumns lists t's open columns (Column.Open).
func (t *Table) OpenColumns() []*Column {
	var out []*Column
	for _, c := range t.Columns {
		if c.Open {
			out = append(out, c)
		}
	}
	return out
}

// WithValues returns a copy of t in which the open column named col is a
// categorical column over values (public: released keys, or literals a
// query names), with values outside them going where outOfDomain says
// (PolicyDrop or PolicyOther). The copy shares everything else with t.
func (t *Table) WithValues(col string, values []string, outOfDomain Policy) *Table {
	cp := *t
	cp.Columns = make([]*Column, len(t.Columns))
	for i, c := range t.Columns {
		if c.Open && c.Name == col {
			cc := *c
			cc.Open, cc.OpenCopy = false, true
			cc.Values = values
			cc.OutOfDomain = outOfDomain
			c = &cc
		}
		cp.Columns[i] = c
	}
	return &cp
}

// MaxPatterns bounds the LIKE patterns one batch tests an open column
// against: they split its values into 2^MaxPatterns match cells.
const MaxPatterns = 6

// Pattern is a LIKE pattern and its escape character (one character).
type Pattern struct {
	Text, Escape string
}

// WithPatterns returns a copy of t in which the open column named col is
// a categorical column over the public values (the literals a batch
// compares it with) and, for every other value, the match cell of the
// patterns it matches; NULL follows the column's null policy. len(pats)
// must be at most MaxPatterns.
func (t *Table) WithPatterns(col string, values []string, pats []Pattern) *Table {
	if len(pats) > MaxPatterns {
		panic("catalog: more than MaxPatterns patterns")
	}
	cp := t.WithValues(col, values, PolicyOther)
	for i, c := range cp.Columns {
		if c.OpenCopy && c.Name == col {
			cc := *c
			cc.Patterns = pats
			cp.Columns[i] = &cc
		}
	}
	return cp
}

// MatchOf is the set of c.Patterns that s matches, bit i for Patterns[i].
func (c *Column) MatchOf(s string) uint64 {
	var m uint64
	for i, p := range c.Patterns {
		if Like(s, p.Text, p.Escape) {
			m |= 1 << i
		}
	}
	return m
}

// Like reports whether s matches the SQL LIKE pattern: % matches any
// sequence of characters, _ one character, esc (one character, or ""
// for none) makes the next character literal; everything else matches
// itself exactly, character by character (case and accents count, no
// collation, no padding), as an open column's values are binned. An
// escape at the end of the pattern matches itself.
//
// Each source implements it (sources conformance tests): SQLite through
// CellOf, PostgreSQL as LIKE under the "C" collation, MariaDB as LIKE
// under utf8mb4_bin.
func Like(s, pattern, esc string) bool {
	type tok struct {
		r        rune
		any, one bool
	}
	var escR rune = -1
	if esc != "" {
		escR = []rune(esc)[0]
	}
	var pat []tok
	pr := []rune(pattern)
	for i := 0; i < len(pr); i++ {
		switch {
		case pr[i] == escR && i+1 < len(pr):
			i++
			pat = append(pat, tok{r: pr[i]})
		case pr[i] == '%':
			if len(pat) == 0 || !pat[len(pat)-1].any {
				pat = append(pat, tok{any: true})
			}
		case pr[i] == '_':
			pat = append(pat, tok{one: true})
		default:
			pat = append(pat, tok{r: pr[i]})
		}
	}
	str := []rune(s)
	// cur[j]: the pattern so far matches str[:j].
	cur := make([]bool, len(str)+1)
	next := make([]bool, len(str)+1)
	cur[0] = true
	for _, t := range pat {
		clear(next)
		for j := range cur {
			if !cur[j] {
				continue
			}
			switch {
			case t.any:
				for k := j; k <= len(str); k++ {
					next[k] = true
				}
			case j < len(str) && (t.one || str[j] == t.r):
				next[j+1] = true
			}
		}
		cur, next = next, cur
	}
	return cur[len(str)]
}
