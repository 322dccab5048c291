package parser

import (
	"strings"

	"github.com/dolthub/vitess/go/vt/vterrors"
)

// nonReserved are words that MySQL 8.0 lets a query use as identifiers
// without quotes (non-reserved keywords, and function names) but that the
// vitess grammar takes for keywords wherever they stand, so that
// `SELECT u.plan, COUNT(*) FROM users u GROUP BY u.plan` would be a syntax
// error. TestNonReservedIdentifiers checks each against vitess.
var nonReserved = map[string]bool{
	"plan": true, "copy": true, "encrypted": true, "escape": true, "exclusive": true, "inplace": true,
	"next": true, "off": true, "shared": true, "yes": true, "transactional": true, "versioning": true,
	"std": true, "stddev": true, "stddev_pop": true, "stddev_samp": true, "variance": true, "var_pop": true,
	"var_samp": true, "substr": true, "substring": true, "bit_and": true, "bit_or": true, "bit_xor": true,
	"group_concat": true, "now": true,
}

// quoteIdentifiers returns p with the word that a vitess syntax error
// points at backquoted, when MySQL would take that word for an identifier
// there: a word of nonReserved that is qualified (MySQL: "a word that
// follows a period in a qualified name must be an identifier") or not
// followed by '(' (which would make it a function call).
func quoteIdentifiers(p piece, err error) (piece, bool) {
	se, ok := vterrors.AsSyntaxError(err)
	if !ok {
		return piece{}, false
	}
	pos := se.Position - 1 // just past the offending token
	// The word is the offending token, or the one before it when vitess
	// took it for a complete keyword and failed on what follows.
	at := -1
	for i, t := range p.toks {
		if t.start < pos {
			at = i
		}
	}
	for _, i := range []int{at, at - 1} {
		if i < 0 || i >= len(p.toks) || p.toks[i].kind != tokWord {
			continue
		}
		t := p.toks[i]
		qualified := i >= 2 && p.toks[i-1].kind == tokPunct && p.toks[i-1].text == "." && (p.toks[i-2].kind == tokWord || p.toks[i-2].kind == tokIdent)
		call := i+1 < len(p.toks) && p.toks[i+1].kind == tokPunct && p.toks[i+1].text == "("
		if !nonReserved[strings.ToLower(t.text)] || (call && !qualified) {
			continue
		}
		text := p.text[:t.start] + "`" + t.text + "`" + p.text[t.end:]
		return piece{text: text, toks: lex(text)}, true
	}
	return piece{}, false
}
