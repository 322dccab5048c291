// Package docscheck holds the test that keeps the Markdown documentation
// (README.md and docs/*.md) whole: every code fence is closed, and every
// relative link and #anchor points at a file and a heading that exist.
package docscheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// root is the repository, two levels up from this package.
const root = "../.."

func docs(t *testing.T) []string {
	t.Helper()
	files := []string{filepath.Join(root, "README.md")}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append(files, more...)
}

// doc is one Markdown file: its lines outside code fences (with their
// numbers), its anchors, and its fence problems.
type doc struct {
	prose   []line
	anchors map[string]bool
	fences  []string
}

type line struct {
	n    int
	text string
}

var (
	fenceRe   = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})(.*)$")
	headingRe = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	htmlIDRe  = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	codeRe    = regexp.MustCompile("`+[^`]*`+")
	linkRe    = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	refDefRe  = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*(\S+)`)
	mdLinkRe  = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// parse splits a Markdown file into prose and fenced code, CommonMark's
// way: a fence closes on a line of the same character, at least as long,
// with nothing after it.
func parse(text string) *doc {
	d := &doc{anchors: map[string]bool{}}
	seen := map[string]int{}
	var open string
	openAt := 0
	for i, l := range strings.Split(text, "\n") {
		n := i + 1
		if m := fenceRe.FindStringSubmatch(l); m != nil {
			switch {
			case open == "":
				if m[1][0] == '`' && strings.Contains(m[2], "`") {
					break // an inline code span, not a fence
				}
				open, openAt = m[1], n
				continue
			case m[1][0] == open[0] && len(m[1]) >= len(open) && strings.TrimSpace(m[2]) == "":
				open = ""
				continue
			case strings.TrimSpace(m[2]) != "" && m[1][0] == open[0]:
				// "```lang" inside an open fence: almost always a fence that
				// was meant to close before this one opens.
				d.fences = append(d.fences, fmt.Sprintf("line %d: %q inside the code fence opened at line %d (is that fence closed?)", n, strings.TrimSpace(l), openAt))
			}
		}
		if open != "" {
			continue
		}
		d.prose = append(d.prose, line{n, l})
		if m := headingRe.FindStringSubmatch(l); m != nil {
			a := slug(m[2])
			if k := seen[a]; k > 0 {
				d.anchors[fmt.Sprintf("%s-%d", a, k)] = true
			} else {
				d.anchors[a] = true
			}
			seen[a]++
		}
		for _, m := range htmlIDRe.FindAllStringSubmatch(l, -1) {
			d.anchors[m[1]] = true
		}
	}
	if open != "" {
		d.fences = append(d.fences, fmt.Sprintf("line %d: the code fence %s opened here is never closed", openAt, open))
	}
	return d
}

// slug is GitHub's anchor for a heading: its text as rendered (links as
// their text, code without backticks), lower-cased, with every character
// that is not a letter, a digit, a space, '-' or '_' dropped and each
// space made a '-'.
func slug(heading string) string {
	heading = mdLinkRe.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Catalog file format":                   "catalog-file-format",
		"`EXPLAIN` and `SET @dp_epsilon`":       "explain-and-set-dp_epsilon",
		"Dates and times":                       "dates-and-times",
		"Joins: public tables (dimensions)":     "joins-public-tables-dimensions",
		"Grafana, Superset & Metabase":          "grafana-superset--metabase",
		"[Privacy units](#privacy-units) — ε/ρ": "privacy-units--ερ",
	} {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseFences(t *testing.T) {
	d := parse("# A\n```\ncode\n```\n## B\n```sql\n# not a heading\n\n## C\n")
	if len(d.fences) != 1 || !strings.Contains(d.fences[0], "line 6") {
		t.Errorf("fences: %q", d.fences)
	}
	if !d.anchors["a"] || !d.anchors["b"] || d.anchors["not-a-heading"] || d.anchors["c"] {
		t.Errorf("anchors: %v", d.anchors)
	}
	if d := parse("````\n```\n````\n"); len(d.fences) != 0 {
		t.Errorf("a longer fence holding a shorter one: %q", d.fences)
	}
	if d := parse("```\na\n```sql\nb\n```\n"); len(d.fences) == 0 {
		t.Error("an opening fence inside an open one was not reported")
	}
	if d := parse("# X\n# X\n"); !d.anchors["x"] || !d.anchors["x-1"] {
		t.Errorf("duplicate headings: %v", d.anchors)
	}
}

// TestDocs: every fence of README.md and docs/*.md is closed, and every
// relative link and #anchor resolves.
func TestDocs(t *testing.T) {
	parsed := map[string]*doc{}
	load := func(path string) (*doc, error) {
		path = filepath.Clean(path)
		if d, ok := parsed[path]; ok {
			return d, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		d := parse(string(b))
		parsed[path] = d
		return d, nil
	}
	for _, file := range docs(t) {
		d, err := load(file)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(root, file)
		for _, f := range d.fences {
			t.Errorf("%s: %s", name, f)
		}
		for _, l := range d.prose {
			text := codeRe.ReplaceAllString(l.text, "")
			var targets []string
			for _, m := range linkRe.FindAllStringSubmatch(text, -1) {
				targets = append(targets, m[1])
			}
			if m := refDefRe.FindStringSubmatch(text); m != nil {
				targets = append(targets, m[1])
			}
			for _, target := range targets {
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				if err := resolve(file, target, load); err != nil {
					t.Errorf("%s:%d: link %s: %v", name, l.n, target, err)
				}
			}
		}
	}
}

func resolve(from, target string, load func(string) (*doc, error)) error {
	path, anchor, _ := strings.Cut(target, "#")
	file := from
	if path != "" {
		file = filepath.Join(filepath.Dir(from), filepath.FromSlash(path))
		if _, err := os.Stat(file); err != nil {
			return fmt.Errorf("no file %s", path)
		}
	}
	if anchor == "" {
		return nil
	}
	if !strings.HasSuffix(file, ".md") {
		return fmt.Errorf("an anchor into a file that is not Markdown")
	}
	d, err := load(file)
	if err != nil {
		return err
	}
	if !d.anchors[anchor] {
		return fmt.Errorf("no heading with anchor #%s", anchor)
	}
	return nil
}
