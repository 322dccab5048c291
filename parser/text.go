package parser

import (
	"errors"
	"strings"

	"github.com/dolthub/vitess/go/vt/sqlparser"
)

// The SQL text services the MySQL front needs, on the parser's one lexer
// (lex.go), so that the front and the parser never read a statement
// differently: its tokens, its first word, MySQL's syntax error for it, and
// its text rewritten from a session's sql_mode to the default reading.

// Token is one significant token of SQL text: a word, a quoted string or
// identifier, a punctuation byte, an executable /*! */ comment, or a
// semicolon. Comments and white space are not tokens.
type Token struct {
	Start, End int    // byte offsets in the text
	Open       bool   // an unterminated quote or comment, running to the end
	Quote      byte   // ' " or ` for a quoted token, 0 otherwise
	Text       string // the token as written
}

// Tokens lexes s as Parse does. With noBackslash, a backslash in a string
// is a plain character (sql_mode NO_BACKSLASH_ESCAPES).
func Tokens(s string, noBackslash bool) []Token {
	toks := lexMode(s, noBackslash)
	out := make([]Token, len(toks))
	for i, t := range toks {
		out[i] = Token{Start: t.start, End: t.end, Open: t.open, Text: s[t.start:t.end]}
		if t.kind == tokString || t.kind == tokIdent {
			out[i].Quote = s[t.start]
		}
	}
	return out
}

// FirstWord is the statement's first keyword, lower-cased ("" if it starts
// with a quoted token or has none); executable comments are skipped.
func FirstWord(s string) string {
	for _, t := range lex(s) {
		switch {
		case t.kind == tokString || t.kind == tokIdent:
			return ""
		case strings.HasPrefix(s[t.start:t.end], "/*!"):
			continue
		}
		return strings.ToLower(s[t.start:t.end])
	}
	return ""
}

// SyntaxError is MySQL's 1064 for a statement that vitess cannot parse:
// "near" quotes the statement from the offending token on (80 characters at
// most), ” when it ended too early, an unterminated quote from its opening
// quote, and the whole statement when the parser itself failed on it. It
// returns nil for a statement that parses.
func SyntaxError(text string) *Error {
	text = strings.TrimRight(strings.TrimSpace(text), ";")
	_, err := vitessParse(text)
	if err == nil {
		return nil
	}
	return syntaxError(piece{text: text, toks: lex(text)}, err)
}

// NormaliseQuotes rewrites text written under a session's sql_mode into the
// default reading the parser assumes: with ANSI_QUOTES, "x" is an identifier
// and becomes `x`; with NO_BACKSLASH_ESCAPES, a backslash in a string is a
// plain character and is doubled. Nothing else changes.
func NormaliseQuotes(text string, ansiQuotes, noBackslash bool) string {
	if !ansiQuotes && !noBackslash {
		return text
	}
	var b strings.Builder
	last := 0
	for _, t := range Tokens(text, noBackslash) {
		if t.Open {
			continue // a syntax error either way; leave it to the parser
		}
		switch {
		case t.Quote == '"' && ansiQuotes:
			body := strings.ReplaceAll(text[t.Start+1:t.End-1], `""`, `"`)
			b.WriteString(text[last:t.Start])
			b.WriteByte('`')
			b.WriteString(strings.ReplaceAll(body, "`", "``"))
			b.WriteByte('`')
			last = t.End
		case (t.Quote == '\'' || t.Quote == '"') && noBackslash && strings.IndexByte(t.Text, '\\') >= 0:
			b.WriteString(text[last:t.Start])
			b.WriteString(strings.ReplaceAll(t.Text, `\`, `\\`))
			last = t.End
		}
	}
	if last == 0 {
		return text
	}
	b.WriteString(text[last:])
	return b.String()
}

// errParserPanic: vitess's parser panicked on the text (it does on some
// malformed text, such as SELECT”); syntaxError then quotes the whole
// statement.
var errParserPanic = errors.New("the SQL parser failed on this statement")

// ParserFailed reports whether text is text on which the SQL parser itself
// fails (a panic), rather than one it rejects.
func ParserFailed(text string) bool {
	_, err := vitessParse(text)
	return errors.Is(err, errParserPanic)
}

// ParseAST parses one statement with the vitess MySQL grammar, as Parse
// does, a parser panic being an error (ParserFailed reports which).
func ParseAST(text string) (sqlparser.Statement, error) { return vitessParse(text) }
