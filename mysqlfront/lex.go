package mysqlfront

import (
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/dolthub/vitess/go/mysql"
	"github.com/dolthub/vitess/go/vt/sqlparser"
	"github.com/dolthub/vitess/go/vt/vterrors"

	"github.com/dpproxy/dpproxy/parser"
)

// A small MySQL lexer for the front's own needs: the first keyword of a
// statement, the token a syntax error points at, and rewriting the quotes
// of sessions whose sql_mode changes how text is read.

type lexToken struct {
	start, end int
	open       bool // an unterminated quote or comment running to the end
	quote      byte // ' " ` for quoted tokens, 0 otherwise
}

// lexSQL returns the significant tokens of s (white space and comments
// dropped; executable /*! */ comments are one token). Strings honour
// backslash escapes unless noBackslash.
func lexSQL(s string, noBackslash bool) []lexToken {
	var toks []lexToken
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case isSpace(c):
			i++
		case c == '#' || (c == '-' && i+1 < len(s) && s[i+1] == '-' && (i+2 == len(s) || isSpace(s[i+2]))):
			i = skipLine(s, i)
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			end := len(s)
			j := strings.Index(s[i+2:], "*/")
			if j >= 0 {
				end = i + 2 + j + 2
			}
			if j < 0 || (i+2 < len(s) && s[i+2] == '!') {
				toks = append(toks, lexToken{start: i, end: end, open: j < 0})
			}
			i = end
		case c == '\'' || c == '"' || c == '`':
			j, closed := i+1, false
			for j < len(s) {
				if s[j] == '\\' && c != '`' && !noBackslash {
					j += 2
					continue
				}
				if s[j] == c {
					if j+1 < len(s) && s[j+1] == c {
						j += 2
						continue
					}
					j++
					closed = true
					break
				}
				j++
			}
			if j > len(s) {
				j = len(s)
			}
			toks = append(toks, lexToken{start: i, end: j, open: !closed, quote: c})
			i = j
		case isWordByte(c):
			j := i + 1
			for j < len(s) && isWordByte(s[j]) {
				j++
			}
			toks = append(toks, lexToken{start: i, end: j})
			i = j
		default:
			toks = append(toks, lexToken{start: i, end: i + 1})
			i++
		}
	}
	return toks
}

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || c == '@' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// firstWord is the statement's first keyword, lower-cased ("" if none).
func firstWord(s string) string {
	for _, t := range lexSQL(s, false) {
		if t.quote != 0 {
			return ""
		}
		w := s[t.start:t.end]
		if strings.HasPrefix(w, "/*!") {
			continue
		}
		return strings.ToLower(w)
	}
	return ""
}

// errParserPanic: vitess's parser panicked on the text.
var errParserPanic = errors.New("the SQL parser failed on this statement")

// safeParse is sqlparser.Parse, with a panic of the parser (vitess
// panics on some malformed text, such as SELECT”) as errParserPanic.
func safeParse(text string) (tree sqlparser.Statement, err error) {
	defer func() {
		if recover() != nil {
			tree, err = nil, errParserPanic
		}
	}()
	return sqlparser.Parse(text)
}

// syntaxError is MySQL's 1064 for a statement vitess cannot parse: "near"
// quotes the statement from the offending token on (80 characters at most),
// ” when the statement ended too early, and an unterminated quote from
// its opening quote.
func syntaxError(text string) error {
	text = strings.TrimRight(strings.TrimSpace(text), ";")
	toks := lexSQL(text, false)
	pos := len(text) + 1 // past the end: the statement ended too early
	if _, err := safeParse(text); errors.Is(err, errParserPanic) {
		pos = 0 // no position: quote the whole statement
	} else if err != nil {
		if se, ok := vterrors.AsSyntaxError(err); ok && se.Position-1 < len(text) {
			pos = se.Position - 1
		} else if ok {
			// vitess reports the same position for an error on the last
			// token and at the end of input: a token that can never
			// continue a statement tells the two apart.
			if _, err2 := safeParse(text + " \x01"); err2 != nil {
				if se2, ok := vterrors.AsSyntaxError(err2); ok && se2.Position-1 <= len(text) {
					pos = se2.Position - 1
				}
			}
		}
	}
	if n := len(toks); n > 0 && toks[n-1].open && pos > toks[n-1].start {
		pos = toks[n-1].start + 1
	}
	near, start := "", len(text)
	if pos <= len(text) {
		for _, t := range toks {
			if t.start < pos {
				start = t.start
			}
		}
		if start < len(text) {
			near = text[start:]
		}
	}
	if utf8.RuneCountInString(near) > 80 {
		near = string([]rune(near)[:80])
	}
	line := 1 + strings.Count(text[:start], "\n")
	return mysql.NewSQLError(parser.CodeParseError, mysql.SSClientError,
		"You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near '%s' at line %d", near, line)
}

// normaliseQuotes rewrites text written under a session's sql_mode into the
// default reading the backend's parser assumes: with ANSI_QUOTES, "x" is an
// identifier and becomes `x`; with NO_BACKSLASH_ESCAPES, a backslash in a
// string is a plain character and is doubled. Nothing else changes.
func normaliseQuotes(text string, ansiQuotes, noBackslash bool) string {
	if !ansiQuotes && !noBackslash {
		return text
	}
	var b strings.Builder
	last := 0
	for _, t := range lexSQL(text, noBackslash) {
		if t.open {
			continue // a syntax error either way; leave it to the parser
		}
		switch {
		case t.quote == '"' && ansiQuotes:
			body := strings.ReplaceAll(text[t.start+1:t.end-1], `""`, `"`)
			b.WriteString(text[last:t.start])
			b.WriteByte('`')
			b.WriteString(strings.ReplaceAll(body, "`", "``"))
			b.WriteByte('`')
			last = t.end
		case (t.quote == '\'' || t.quote == '"') && noBackslash && strings.IndexByte(text[t.start:t.end], '\\') >= 0:
			b.WriteString(text[last:t.start])
			b.WriteString(strings.ReplaceAll(text[t.start:t.end], `\`, `\\`))
			last = t.end
		}
	}
	if last == 0 {
		return text
	}
	b.WriteString(text[last:])
	return b.String()
}
