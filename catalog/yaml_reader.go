package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The YAML reader the section loaders share: a parser walks yaml.Node
// trees, reports every error with its line and path, and reads scalars,
// words, numbers, lists and the fields a section allows (fields: anything
// else is an unknown key).

func (p *yamlReader) errorf(line int, path, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Field: path, Msg: fmt.Sprintf(format, args...)})
}

func (p *yamlReader) document(data []byte) (node, bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.errorf(1, "", "empty file: expected a mapping with database, sources, tables and users")
		} else {
			p.syntax(err)
		}
		return node{}, false
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		p.errorf(extra.Line, "", "a catalog file holds one YAML document; found a second one")
		return node{}, false
	} else if !errors.Is(err, io.EOF) {
		p.syntax(err)
		return node{}, false
	}
	y := resolve(&doc)
	if y.Kind == yaml.DocumentNode && len(y.Content) == 1 {
		y = resolve(y.Content[0])
	}
	if y.Kind == yaml.ScalarNode && y.ShortTag() == "!!null" {
		p.errorf(1, "", "empty file: expected a mapping with database, sources, tables and users")
		return node{}, false
	}
	return node{y: y, line: y.Line}, true
}

func (p *yamlReader) syntax(err error) {
	msg := err.Error()
	line := 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
		if parserProblems[msg] {
			line++
		}
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	p.errorf(line, "", "YAML syntax error: %s", msg)
}

// resolve follows aliases.
func resolve(y *yaml.Node) *yaml.Node {
	for i := 0; y.Kind == yaml.AliasNode && y.Alias != nil && i < 100; i++ {
		y = y.Alias
	}
	return y
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// entries returns the pairs of a mapping in document order. With names set,
// keys are names: lower-cased, and checked for duplicates after lower-casing.
func (p *yamlReader) entries(n node, names bool) ([]entry, bool) {
	if n.y.Kind == yaml.ScalarNode && n.y.ShortTag() == "!!null" {
		return nil, true // "key:" with nothing after it: an empty mapping
	}
	if n.y.Kind != yaml.MappingNode {
		p.errorf(n.line, n.path, "must be a mapping (key: value, ...), not %s", kind(n.y))
		return nil, false
	}
	var out []entry
	first := map[string]int{}
	for i := 0; i+1 < len(n.y.Content); i += 2 {
		k, v := resolve(n.y.Content[i]), n.y.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.errorf(k.Line, n.path, "keys must be plain names, not %s", kind(k))
			continue
		}
		key := k.Value
		if names {
			key = strings.ToLower(key)
		}
		path := join(n.path, key)
		if line, dup := first[key]; dup {
			p.errorf(k.Line, path, "duplicate key (first at line %d)", line)
			continue
		}
		first[key] = k.Line
		out = append(out, entry{key: key, val: node{y: resolve(v), line: k.Line, path: path}})
	}
	return out, true
}

// fields reads a mapping with a fixed set of keys.
func (p *yamlReader) fields(n node, allowed ...string) (map[string]node, bool) {
	es, ok := p.entries(n, false)
	if !ok {
		return nil, false
	}
	out := make(map[string]node, len(es))
	for _, e := range es {
		known := false
		for _, a := range allowed {
			if e.key == a {
				known = true
				break
			}
		}
		if !known {
			p.errorf(e.val.line, e.val.path, "unknown key (expected one of %s)", strings.Join(allowed, ", "))
			continue
		}
		out[e.key] = e.val
	}
	return out, true
}

func kind(y *yaml.Node) string {
	switch y.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if y.ShortTag() == "!!null" {
			return "null"
		}
		return fmt.Sprintf("the value %q", y.Value)
	}
	return "this node"
}

func (p *yamlReader) required(parent node, key string) {
	p.errorf(parent.line, join(parent.path, key), "required")
}

// scalar returns the text of a scalar that is not null.
func (p *yamlReader) scalar(n node) (string, bool) {
	if n.y.Kind != yaml.ScalarNode || n.y.ShortTag() == "!!null" {
		p.errorf(n.line, n.path, "must be a single value, not %s", kind(n.y))
		return "", false
	}
	return n.y.Value, true
}

// word returns a scalar lower-cased, checked against the allowed words.
func (p *yamlReader) word(n node, allowed ...string) (string, bool) {
	s, ok := p.scalar(n)
	if !ok {
		return "", false
	}
	w := strings.ToLower(s)
	for _, a := range allowed {
		if w == a {
			return w, true
		}
	}
	p.errorf(n.line, n.path, "must be %s (got %q)", oneOf(allowed), s)
	return "", false
}

func oneOf(words []string) string {
	switch len(words) {
	case 1:
		return words[0]
	case 2:
		return words[0] + " or " + words[1]
	}
	return "one of " + strings.Join(words, ", ")
}

func (p *yamlReader) number(n node) (float64, bool) {
	tag := n.y.ShortTag()
	if n.y.Kind != yaml.ScalarNode || (tag != "!!int" && tag != "!!float") {
		p.errorf(n.line, n.path, "must be a number, not %s", kind(n.y))
		return 0, false
	}
	var f float64
	if err := n.y.Decode(&f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		p.errorf(n.line, n.path, "must be a finite number (got %q)", n.y.Value)
		return 0, false
	}
	return f, true
}

func (p *yamlReader) integer(n node) (int64, bool) {
	if n.y.Kind != yaml.ScalarNode || n.y.ShortTag() != "!!int" {
		p.errorf(n.line, n.path, "must be an integer, not %s", kind(n.y))
		return 0, false
	}
	var i int64
	if err := n.y.Decode(&i); err != nil || i < -maxExact || i > maxExact {
		p.errorf(n.line, n.path, "must be an integer between -2^53 and 2^53 (got %s)", n.y.Value)
		return 0, false
	}
	return i, true
}

func (p *yamlReader) positive(n node) (float64, bool) {
	f, ok := p.number(n)
	if ok && f <= 0 {
		p.errorf(n.line, n.path, "must be > 0")
		return 0, false
	}
	return f, ok
}

func (p *yamlReader) list(n node) ([]node, bool) {
	if n.y.Kind != yaml.SequenceNode {
		p.errorf(n.line, n.path, "must be a list, not %s", kind(n.y))
		return nil, false
	}
	out := make([]node, len(n.y.Content))
	for i, y := range n.y.Content {
		out[i] = node{y: resolve(y), line: y.Line, path: fmt.Sprintf("%s[%d]", n.path, i)}
	}
	return out, true
}

// name checks a lower-cased database, source, table or column name.
func (p *yamlReader) name(n node, name string) bool {
	if !identifier.MatchString(name) || len(name) > 64 {
		p.errorf(n.line, n.path, "invalid name %q: use up to 64 letters, digits and underscores, not starting with a digit", name)
		return false
	}
	return true
}

func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// bytes reads a size: a number of bytes, or with a unit (KiB, MiB, GiB,
// TiB, or KB, MB, GB, TB in powers of ten).
func (p *yamlReader) bytes(n node) (int64, bool) {
	v, ok := p.scalar(n)
	if !ok {
		return 0, false
	}
	m := byteSize.FindStringSubmatch(strings.TrimSpace(v))
	if m == nil {
		p.errorf(n.line, n.path, "must be a size such as 512MiB or 1GiB (got %q)", v)
		return 0, false
	}
	x, err := strconv.ParseInt(m[1], 10, 64)
	mult := map[string]int64{"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}[m[2]]
	if err != nil || x <= 0 || x > math.MaxInt64/mult {
		p.errorf(n.line, n.path, "must be a positive size below 8 EiB (got %q)", v)
		return 0, false
	}
	return x * mult, true
}
