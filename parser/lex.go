package parser

import "strings"

// A small MySQL lexer, used only to split a request into statements, to
// strip the comments around each statement, to find the token a syntax
// error points at, and to look for protected table names in text that the
// SQL parser could not parse. It follows the vitess tokenizer on the points
// where the two could disagree: `--` starts a comment with or without a
// following space, `#` starts a comment, `/*! ... */` is executable (kept as
// a token), other `/* ... */` are comments, and `'...'` / `"..."` strings
// honour backslash escapes and doubled quotes.

type tokKind int

const (
	tokWord   tokKind = iota // identifier, keyword or number
	tokIdent                 // `quoted identifier` (text unquoted)
	tokString                // '...' or "..." (text unquoted, escapes kept)
	tokPunct                 // any other single byte, or an executable /*! */ comment
	tokSemicolon
)

type token struct {
	kind       tokKind
	start, end int    // byte offsets in the lexed text
	open       bool   // an unterminated quote or comment, running to the end
	text       string // tokWord, tokIdent: the identifier; tokString: the unquoted body; tokPunct: the byte
}

// lex returns the significant tokens of s (comments and white space dropped).
// Unterminated quotes and comments run to the end of s and are kept as
// tokens, so that the statement keeps them and fails to parse.
func lex(s string) []token { return lexMode(s, false) }

// lexMode is lex; with noBackslash a backslash in a string is a plain
// character (sql_mode NO_BACKSLASH_ESCAPES).
func lexMode(s string, noBackslash bool) []token {
	var toks []token
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '#' || (c == '-' && i+1 < len(s) && s[i+1] == '-'):
			j := strings.IndexByte(s[i:], '\n')
			if j < 0 {
				i = len(s)
			} else {
				i += j + 1
			}
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			j := strings.Index(s[i+2:], "*/")
			executable := i+2 < len(s) && s[i+2] == '!'
			end := len(s)
			if j >= 0 {
				end = i + 2 + j + 2
			}
			if executable || j < 0 {
				toks = append(toks, token{kind: tokPunct, start: i, end: end, open: j < 0})
			}
			i = end
		case c == '\'' || c == '"':
			j := i + 1
			closed := false
			var b strings.Builder
			for j < len(s) {
				if s[j] == '\\' && j+1 < len(s) && !noBackslash {
					b.WriteByte(s[j])
					b.WriteByte(s[j+1])
					j += 2
					continue
				}
				if s[j] == c {
					if j+1 < len(s) && s[j+1] == c {
						b.WriteByte(c)
						j += 2
						continue
					}
					j++
					closed = true
					break
				}
				b.WriteByte(s[j])
				j++
			}
			toks = append(toks, token{kind: tokString, start: i, end: j, text: b.String(), open: !closed})
			i = j
		case c == '`':
			j := i + 1
			closed := false
			var b strings.Builder
			for j < len(s) {
				if s[j] == '`' {
					if j+1 < len(s) && s[j+1] == '`' {
						b.WriteByte('`')
						j += 2
						continue
					}
					j++
					closed = true
					break
				}
				b.WriteByte(s[j])
				j++
			}
			toks = append(toks, token{kind: tokIdent, start: i, end: j, text: b.String(), open: !closed})
			i = j
		case isWordByte(c):
			j := i + 1
			for j < len(s) && isWordByte(s[j]) {
				j++
			}
			toks = append(toks, token{kind: tokWord, start: i, end: j, text: s[i:j]})
			i = j
		case c == ';':
			toks = append(toks, token{kind: tokSemicolon, start: i, end: i + 1})
			i++
		default:
			toks = append(toks, token{kind: tokPunct, start: i, end: i + 1, text: s[i : i+1]})
			i++
		}
	}
	return toks
}

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || c >= 0x80 ||
		('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

// piece is one statement of a request: its text without the comments and
// white space around it, and its tokens (offsets relative to text).
type piece struct {
	text string
	toks []token
}

// split cuts a request at the semicolons that are outside quotes and
// comments. Pieces holding nothing but comments are dropped.
func split(sql string) []piece {
	var out []piece
	var cur []token
	flush := func() {
		if len(cur) == 0 {
			return
		}
		start, end := cur[0].start, cur[len(cur)-1].end
		p := piece{text: sql[start:end]}
		for _, t := range cur {
			t.start -= start
			t.end -= start
			p.toks = append(p.toks, t)
		}
		out = append(out, p)
		cur = nil
	}
	for _, t := range lex(sql) {
		if t.kind == tokSemicolon {
			flush()
			continue
		}
		cur = append(cur, t)
	}
	flush()
	return out
}

// mentionsProtected reports whether any identifier in toks, alone or as
// `schema`.`table`, names a protected table. It is deliberately generous:
// it decides whether text that failed to parse gets a syntax error from
// dpproxy (true) or goes to the schema-only database (false).
func mentionsProtected(toks []token, protected Protected) bool {
	isName := func(t token) bool { return t.kind == tokWord || t.kind == tokIdent }
	for i, t := range toks {
		if !isName(t) {
			continue
		}
		if protected("", strings.ToLower(t.text)) {
			return true
		}
		if i >= 2 && toks[i-1].kind == tokPunct && toks[i-1].text == "." && isName(toks[i-2]) &&
			protected(toks[i-2].text, strings.ToLower(t.text)) {
			return true
		}
	}
	return false
}
