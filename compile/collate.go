package compile

import (
	"regexp"
	"strings"
	"unicode"

	"golang.org/x/text/collate"
	"golang.org/x/text/language"
	"golang.org/x/text/unicode/norm"
)

// Text semantics follow MySQL 8's default collation, utf8mb4_0900_ai_ci:
// comparisons, IN, LIKE and grouping of strings are case- and
// accent-insensitive ('é' = 'E'), and trailing spaces count (NO PAD).
// Ordering (<, >, BETWEEN on strings) is the Unicode Collation Algorithm's
// root order, which that collation implements too. REGEXP is
// case-insensitive as well (MySQL's ICU regular expressions under a _ci
// collation), with Go's RE2 syntax: no back-references or look-around.

// collation compares strings as utf8mb4_0900_ai_ci does. A Collator is
// not safe for concurrent use, so each compilation has its own, made when
// an ordering is first needed (equality needs only fold).
type collation struct {
	c     *collate.Collator
	re    map[string]*regexp.Regexp
	folds map[string]string
}

func newCollation() *collation {
	return &collation{re: map[string]*regexp.Regexp{}, folds: map[string]string{}}
}

// equal reports whether two strings are equal under the collation.
func (co *collation) equal(a, b string) bool {
	if a == b {
		return true
	}
	return co.fold(a) == co.fold(b)
}

// fold is fold(s), remembered.
func (co *collation) fold(s string) string {
	f, ok := co.folds[s]
	if !ok {
		f = fold(s)
		co.folds[s] = f
	}
	return f
}

// compare orders two strings: -1, 0 or 1.
func (co *collation) compare(a, b string) int {
	if co.equal(a, b) {
		return 0
	}
	if co.c == nil {
		co.c = collate.New(language.Und, collate.IgnoreCase, collate.IgnoreDiacritics)
	}
	if c := co.c.CompareString(a, b); c != 0 {
		return c
	}
	// Equal weights but different folds (rare: ignorable characters):
	// order by the folds, so that only equal folds compare equal.
	if fa, fb := co.fold(a), co.fold(b); fa < fb {
		return -1
	}
	return 1
}

// fold is a string's key for grouping and for matching LIKE patterns
// character by character: accents removed, lower-cased.
func fold(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToLower(s)
	}
	var b strings.Builder
	for _, r := range norm.NFD.String(s) {
		if unicode.Is(unicode.Mn, r) {
			continue
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return norm.NFC.String(b.String())
}

// like matches s against a LIKE pattern: % any run of characters, _ one
// character, esc escapes the next character; characters compare as the
// collation does (fold).
func like(s, pattern, esc string) bool {
	str := []rune(fold(s))
	var escR rune = -1
	if esc != "" {
		escR = []rune(esc)[0]
	}
	type tok struct {
		r   rune
		any bool // %
		one bool // _
	}
	var pat []tok
	pr := []rune(pattern)
	for i := 0; i < len(pr); i++ {
		switch {
		case pr[i] == escR && i+1 < len(pr):
			i++
			pat = append(pat, tok{r: []rune(fold(string(pr[i])))[0]})
		case pr[i] == '%':
			pat = append(pat, tok{any: true})
		case pr[i] == '_':
			pat = append(pat, tok{one: true})
		default:
			for _, r := range fold(string(pr[i])) {
				pat = append(pat, tok{r: r})
			}
		}
	}
	// Dynamic programming over (pattern position, string position).
	cur := make([]bool, len(str)+1)
	cur[0] = true
	for _, t := range pat {
		next := make([]bool, len(str)+1)
		switch {
		case t.any:
			seen := false
			for j := range cur {
				seen = seen || cur[j]
				next[j] = seen
			}
		default:
			for j := 0; j < len(str); j++ {
				if cur[j] && (t.one || str[j] == t.r) {
					next[j+1] = true
				}
			}
		}
		cur = next
	}
	return cur[len(str)]
}

// regexpMatch reports whether pattern matches somewhere in s,
// case-insensitively.
func (co *collation) regexpMatch(s, pattern string) (bool, error) {
	re, ok := co.re[pattern]
	if !ok {
		var err error
		re, err = regexp.Compile("(?i)" + pattern)
		if err != nil {
			return false, err
		}
		co.re[pattern] = re
	}
	return re.MatchString(s), nil
}
