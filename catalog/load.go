package catalog

import (
	"bytes"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// DemoPath is the Path of the catalog returned by Demo.
const DemoPath = "<embedded demo>"

// MaxColumnCells bounds the number of domain cells one column may declare
// (declared values or bins, plus the other and NULL cells). It keeps a typo
// such as width: 1 over a range of a billion from exhausting memory.
const MaxColumnCells = 1_000_000

// maxExact bounds integer range ends so that they, and the bin edges derived
// from them, are exactly representable as float64.
const maxExact = 1 << 53

//go:embed demo.yaml
var demoYAML []byte

// Demo returns the embedded demo catalog (the census table adult over the
// SQLite source demo.sqlite, see package demo). Each call returns a fresh copy
// that the caller may modify. It panics only if the embedded file is invalid,
// which the package tests rule out.
func Demo() *Catalog {
	c, err := Parse(DemoPath, demoYAML)
	if err != nil {
		panic("catalog: embedded demo catalog is invalid: " + err.Error())
	}
	return c
}

// DemoYAML returns the embedded demo catalog's text (a copy).
func DemoYAML() []byte { return append([]byte(nil), demoYAML...) }

// Load reads and validates the catalog file at path. Validation errors are
// of type Errors and name path, the line and the field.
func Load(path string) (*Catalog, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	return Parse(path, data)
}

// Parse validates a catalog in YAML. name is the file name used in error
// messages and stored in Catalog.Path. Every problem found is reported, in
// document order, as an Errors value.
func Parse(name string, data []byte) (*Catalog, error) {
	p := &parser{file: name}
	root, ok := p.document(data)
	var cat *Catalog
	if ok {
		cat = p.catalog(root)
	}
	if len(p.errs) > 0 {
		sort.SliceStable(p.errs, func(i, j int) bool { return p.errs[i].Line < p.errs[j].Line })
		return nil, p.errs
	}
	cat.Path = name
	return cat, nil
}

// NativePasswordHash is the MySQL mysql_native_password hash of password:
// "*" followed by the upper-case hex of SHA1(SHA1(password)). (MySQL stores
// an empty password as an empty hash; the catalog refuses empty passwords, so
// that case never reaches a User.)
func NativePasswordHash(password string) string {
	h1 := sha1.Sum([]byte(password))
	h2 := sha1.Sum(h1[:])
	return "*" + strings.ToUpper(hex.EncodeToString(h2[:]))
}

// Error is one problem in a catalog file.
type Error struct {
	File  string // the name given to Parse, or the path given to Load
	Line  int    // 1-based; 0 if unknown
	Field string // dotted path such as tables.adult.columns.age.width; empty for syntax errors
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":")
		b.WriteString(strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in one catalog file, in document order.
type Errors []*Error

func (es Errors) Error() string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// node is a YAML node (aliases resolved) with the line where it is named and
// its dotted path in the document.
type node struct {
	y    *yaml.Node
	line int
	path string
}

type entry struct {
	key string // as written for fixed keys, lower-cased for names
	val node
}

type parser struct {
	file string
	errs Errors
	// spaceNodes holds where each table names its privacy unit space (or
	// the table's own node when it names none), for checkSpaces.
	spaceNodes map[*Table]node
}

func (p *parser) errorf(line int, path, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Field: path, Msg: fmt.Sprintf(format, args...)})
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

func (p *parser) document(data []byte) (node, bool) {
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

// parserProblems are the problems yaml v3's parser (as opposed to its
// scanner) reports. For those, go.yaml.in/yaml/v3 v3.0.6 (like gopkg.in/yaml.v3
// v3.0.1 before it) prints a 0-based line: that of
// the construct being parsed.
var parserProblems = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected <document start>": true,
	"did not find expected <stream-start>":   true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %TAG directive":         true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

func (p *parser) syntax(err error) {
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
func (p *parser) entries(n node, names bool) ([]entry, bool) {
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
func (p *parser) fields(n node, allowed ...string) (map[string]node, bool) {
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

func (p *parser) required(parent node, key string) {
	p.errorf(parent.line, join(parent.path, key), "required")
}

// scalar returns the text of a scalar that is not null.
func (p *parser) scalar(n node) (string, bool) {
	if n.y.Kind != yaml.ScalarNode || n.y.ShortTag() == "!!null" {
		p.errorf(n.line, n.path, "must be a single value, not %s", kind(n.y))
		return "", false
	}
	return n.y.Value, true
}

// word returns a scalar lower-cased, checked against the allowed words.
func (p *parser) word(n node, allowed ...string) (string, bool) {
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

func (p *parser) number(n node) (float64, bool) {
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

func (p *parser) integer(n node) (int64, bool) {
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

func (p *parser) positive(n node) (float64, bool) {
	f, ok := p.number(n)
	if ok && f <= 0 {
		p.errorf(n.line, n.path, "must be > 0")
		return 0, false
	}
	return f, ok
}

func (p *parser) list(n node) ([]node, bool) {
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

var identifier = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// name checks a lower-cased database, source, table or column name.
func (p *parser) name(n node, name string) bool {
	if !identifier.MatchString(name) || len(name) > 64 {
		p.errorf(n.line, n.path, "invalid name %q: use up to 64 letters, digits and underscores, not starting with a digit", name)
		return false
	}
	return true
}

func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func (p *parser) catalog(root node) *Catalog {
	f, ok := p.fields(root, "database", "sources", "tables", "public_tables", "users", "ledger", "tls", "auth_plugin", "server", "cache")
	if !ok {
		return nil
	}
	cat := &Catalog{Sources: map[string]*Source{}}
	if n, ok := f["database"]; !ok {
		p.required(root, "database")
	} else if s, ok := p.scalar(n); ok {
		cat.Database = strings.ToLower(s)
		p.name(n, cat.Database)
	}

	// sourceNames stays nil when the sources themselves are broken, so that
	// tables do not report a cascade of unknown sources.
	var sourceNames []string
	if n, ok := f["sources"]; !ok {
		p.required(root, "sources")
	} else if es, ok := p.entries(n, true); ok {
		sourceNames = []string{}
		if len(es) == 0 {
			p.errorf(n.line, n.path, "at least one source is required")
		}
		for _, e := range es {
			sourceNames = append(sourceNames, e.key)
			if s := p.source(e); s != nil {
				cat.Sources[s.Name] = s
			}
		}
	}

	if n, ok := f["tables"]; !ok {
		p.errorf(root.line, "tables", "at least one table is required")
	} else if es, ok := p.entries(n, true); ok {
		if len(es) == 0 {
			p.errorf(n.line, n.path, "at least one table is required")
		}
		for _, e := range es {
			if t := p.table(e, sourceNames); t != nil {
				if s := cat.Sources[t.Source]; t.ShardKey != "" && s != nil && s.Driver != DriverClickHouse {
					p.errorf(e.val.line, join(e.val.path, "shard_key"), "only for driver clickhouse (source %s is %s)", s.Name, s.Driver)
				}
				cat.Tables = append(cat.Tables, t)
			}
		}
		p.checkSpaces(cat.Tables)
	}

	if n, ok := f["public_tables"]; ok {
		p.publicTables(n, cat, sourceNames)
	}

	// The server section first: a user's max_user_connections is checked
	// against its max_connections (errors are sorted by line anyway).
	if n, ok := f["server"]; ok {
		p.server(n, &cat.Server)
	}
	cat.Server = cat.Server.WithDefaults()
	if n, ok := f["users"]; ok {
		if es, ok := p.entries(n, false); ok {
			for _, e := range es {
				if u := p.user(e, cat.Server.MaxConnections); u != nil {
					cat.Users = append(cat.Users, u)
				}
			}
		}
	}
	if n, ok := f["ledger"]; ok {
		p.ledger(n, &cat.Ledger)
	}
	if n, ok := f["tls"]; ok {
		p.tls(n, &cat.TLS)
	}
	if n, ok := f["cache"]; ok {
		p.cache(n, &cat.Cache)
	}
	if n, ok := f["auth_plugin"]; ok {
		if w, ok := p.word(n, "mysql_native_password", "caching_sha2_password"); ok {
			cat.AuthPlugin = w
		}
	}
	return cat
}

// tls reads the optional "tls" section: cert and key (PEM files, given
// together) and require (needs a certificate).
func (p *parser) tls(n node, t *TLS) {
	f, ok := p.fields(n, "cert", "key", "require")
	if !ok {
		return
	}
	for key, dst := range map[string]*string{"cert": &t.Cert, "key": &t.Key} {
		if v, has := f[key]; has {
			if s, ok := p.scalar(v); ok {
				if strings.TrimSpace(s) == "" {
					p.errorf(v.line, v.path, "must not be empty")
				}
				*dst = s
			}
		}
	}
	if (t.Cert == "") != (t.Key == "") {
		p.errorf(n.line, n.path, "give cert and key together")
	}
	if v, has := f["require"]; has {
		if w, ok := p.word(v, "true", "false"); ok {
			t.Require = w == "true"
		}
		if t.Require && t.Cert == "" {
			p.errorf(v.line, v.path, "require: true needs a cert and key")
		}
	}
}

// ledger reads the optional "ledger" section: signing_key (a file path) and
// public_key (the key's text). The key itself is read where it is used.
func (p *parser) ledger(n node, l *Ledger) {
	f, ok := p.fields(n, "signing_key", "public_key")
	if !ok {
		return
	}
	for key, dst := range map[string]*string{"signing_key": &l.SigningKey, "public_key": &l.PublicKey} {
		if v, has := f[key]; has {
			if s, ok := p.scalar(v); ok {
				if strings.TrimSpace(s) == "" {
					p.errorf(v.line, v.path, "must not be empty")
				}
				*dst = s
			}
		}
	}
}

func (p *parser) source(e entry) *Source {
	if !p.name(e.val, e.key) {
		return nil
	}
	f, ok := p.fields(e.val, "driver", "path", "dsn", "dsn_env", "max_connections", "version_query", "cache_ttl")
	if !ok {
		return nil
	}
	s := &Source{Name: e.key}
	if n, ok := f["driver"]; !ok {
		p.required(e.val, "driver")
	} else if d, ok := p.word(n, DriverSQLite, DriverPostgres, DriverMySQL, DriverClickHouse); ok {
		s.Driver = d
	}
	text := func(key string, dst *string) (node, bool) {
		n, has := f[key]
		if !has {
			return n, false
		}
		if v, ok := p.scalar(n); ok {
			if strings.TrimSpace(v) == "" {
				p.errorf(n.line, n.path, "must not be empty")
			}
			*dst = v
		}
		return n, true
	}
	pathN, hasPath := text("path", &s.Path)
	// A DSN's value never appears in a message: it may hold a password.
	dsnN, hasDSN := f["dsn"]
	if hasDSN {
		if dsnN.y.Kind != yaml.ScalarNode || dsnN.y.ShortTag() == "!!null" || strings.TrimSpace(dsnN.y.Value) == "" {
			p.errorf(dsnN.line, dsnN.path, "must be a non-empty connection string")
		} else {
			s.DSN = dsnN.y.Value
		}
	}
	envN, hasEnv := text("dsn_env", &s.DSNEnv)
	if hasEnv && s.DSNEnv != "" && !envName.MatchString(s.DSNEnv) {
		p.errorf(envN.line, envN.path, "invalid environment variable name %q", s.DSNEnv)
	}
	switch s.Driver {
	case DriverSQLite:
		if !hasPath {
			p.required(e.val, "path")
		}
		for _, k := range []string{"dsn", "dsn_env", "version_query", "cache_ttl"} {
			if n, has := f[k]; has {
				p.errorf(n.line, n.path, "not used by driver sqlite (it reads the file at path)")
			}
		}
	case DriverPostgres, DriverMySQL, DriverClickHouse:
		if hasPath {
			p.errorf(pathN.line, pathN.path, "not used by driver %s (give dsn or dsn_env)", s.Driver)
		}
		switch {
		case hasDSN && hasEnv:
			p.errorf(e.val.line, e.val.path, "give dsn or dsn_env, not both")
		case !hasDSN && !hasEnv:
			p.errorf(e.val.line, join(e.val.path, "dsn"), "required for driver %s (or dsn_env: the environment variable holding it)", s.Driver)
		}
	}
	if n, has := f["max_connections"]; has {
		if v, ok := p.integer(n); ok {
			if v < 1 || v > 1000 {
				p.errorf(n.line, n.path, "must be between 1 and 1000")
			} else {
				s.MaxConnections = int(v)
			}
		}
	}
	text("version_query", &s.VersionQuery)
	if n, has := f["cache_ttl"]; has {
		if v, ok := p.scalar(n); ok {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				p.errorf(n.line, n.path, "must be a duration such as 30s or 5m (got %q)", v)
			} else {
				s.CacheTTL, s.CacheTTLSet = d, true
			}
		}
	}
	return s
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// cache reads the optional "cache" section: byte bounds such as 512MiB.
func (p *parser) cache(n node, c *Cache) {
	f, ok := p.fields(n, "histograms", "answers", "plans", "measurements")
	if !ok {
		return
	}
	for key, dst := range map[string]*int64{"histograms": &c.Histograms, "answers": &c.Answers, "plans": &c.Plans, "measurements": &c.Measurements} {
		if v, has := f[key]; has {
			if b, ok := p.bytes(v); ok {
				*dst = b
			}
		}
	}
}

var byteSize = regexp.MustCompile(`^([0-9]+)\s*([KMGT]i?B|B)?$`)

// bytes reads a size: a number of bytes, or with a unit (KiB, MiB, GiB,
// TiB, or KB, MB, GB, TB in powers of ten).
func (p *parser) bytes(n node) (int64, bool) {
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

var sourceTable = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

func (p *parser) table(e entry, sources []string) *Table {
	nameOK := p.name(e.val, e.key)
	f, ok := p.fields(e.val, "source", "source_table", "noise", "budget", "columns", "max_cells", "reuse_measurements", "private_columns", "privacy_unit", "shard_key")
	if !ok {
		return nil
	}
	t := &Table{Name: e.key, SourceTable: e.key, Noise: Laplace, MaxCells: DefaultMaxCells}
	if n, ok := f["reuse_measurements"]; ok {
		if w, ok := p.word(n, "true", "false"); ok {
			t.NoMeasurementReuse = w == "false"
		}
	}
	if n, ok := f["max_cells"]; ok {
		if v, ok := p.integer(n); ok {
			if v < 1 {
				p.errorf(n.line, n.path, "must be ≥ 1")
			} else {
				t.MaxCells = v
			}
		}
	}

	if n, ok := f["source"]; ok {
		if s, ok := p.scalar(n); ok {
			t.Source = strings.ToLower(s)
			known := sources == nil
			for _, name := range sources {
				known = known || name == t.Source
			}
			if !known {
				p.errorf(n.line, n.path, "unknown source %q (declared: %s)", s, strings.Join(sources, ", "))
			}
		}
	} else if len(sources) == 1 {
		t.Source = sources[0]
	} else if len(sources) > 1 {
		p.errorf(e.val.line, join(e.val.path, "source"), "required when the catalog declares several sources (%s)", strings.Join(sources, ", "))
	}

	if n, ok := f["source_table"]; ok {
		if s, ok := p.scalar(n); ok {
			if !sourceTable.MatchString(s) {
				p.errorf(n.line, n.path, "invalid table name %q: use letters, digits and underscores, optionally qualified as schema.table", s)
			}
			t.SourceTable = s
		}
	}

	noiseOK := true
	if n, ok := f["noise"]; ok {
		var w string
		if w, noiseOK = p.word(n, string(Laplace), string(Gaussian)); noiseOK {
			t.Noise = NoiseFamily(w)
		}
	}

	if n, ok := f["budget"]; !ok {
		p.required(e.val, "budget")
	} else {
		t.Budget = p.budget(n, t.Noise, noiseOK)
	}

	if n, ok := f["columns"]; !ok {
		p.required(e.val, "columns")
	} else if es, ok := p.entries(n, true); ok {
		if len(es) == 0 {
			p.errorf(n.line, n.path, "at least one column is required")
		}
		for _, ce := range es {
			if c := p.column(ce); c != nil {
				t.Columns = append(t.Columns, c)
			}
		}
	}
	if n, ok := f["private_columns"]; ok {
		p.privateColumns(n, t)
	}
	if n, ok := f["privacy_unit"]; ok {
		t.Unit = p.privacyUnit(n, t)
	}
	if n, ok := f["shard_key"]; ok {
		if s, ok := p.scalar(n); ok && p.name(n, strings.ToLower(s)) {
			t.ShardKey = strings.ToLower(s)
		}
	}
	if p.spaceNodes == nil {
		p.spaceNodes = map[*Table]node{}
	}
	if _, ok := p.spaceNodes[t]; !ok {
		p.spaceNodes[t] = e.val
	}
	if !nameOK {
		return nil
	}
	return t
}

// privacyUnit reads a table's privacy_unit: {column, space, max_rows,
// max_groups, max_rows_per_group}. The column must not be a domain column;
// max_rows is required (bounds are declared, never learned from the data).
func (p *parser) privacyUnit(n node, t *Table) *PrivacyUnit {
	f, ok := p.fields(n, "column", "space", "max_rows", "max_groups", "max_rows_per_group")
	if !ok {
		return nil
	}
	u := &PrivacyUnit{}
	good := true
	if sn, ok := f["space"]; ok {
		if s, ok := p.scalar(sn); !ok {
			good = false
		} else if u.Space = strings.ToLower(s); !p.name(sn, u.Space) {
			good = false
		} else {
			if p.spaceNodes == nil {
				p.spaceNodes = map[*Table]node{}
			}
			p.spaceNodes[t] = sn
		}
	}
	if cn, ok := f["column"]; !ok {
		p.required(n, "column")
		good = false
	} else if s, ok := p.scalar(cn); !ok {
		good = false
	} else {
		u.Column = strings.ToLower(s)
		if !p.name(cn, u.Column) {
			good = false
		} else if t.Column(u.Column) != nil {
			p.errorf(cn.line, cn.path, "%q is a domain column of table %s: the privacy unit column is never a domain column (remove it from columns)", s, t.Name)
			good = false
		} else if t.IsPrivate(u.Column) {
			p.errorf(cn.line, cn.path, "%q is listed in private_columns of table %s: the privacy unit column is private already, and COUNT(DISTINCT %s) counts it (remove it from private_columns)", s, t.Name, u.Column)
			good = false
		}
	}
	bound := func(key string, required bool) (int64, node, bool) {
		bn, has := f[key]
		if !has {
			if required {
				p.errorf(n.line, join(n.path, key), "required: the most rows one unit keeps (declare it; dpproxy never learns it from the data — dpproxy profile-units shows the data owner the distribution)")
			}
			return 0, bn, !required
		}
		v, ok := p.integer(bn)
		if !ok {
			return 0, bn, false
		}
		if v < 1 || v > MaxUnitRows {
			p.errorf(bn.line, bn.path, "must be between 1 and %d (got %d)", MaxUnitRows, v)
			return 0, bn, false
		}
		return v, bn, true
	}
	k, _, kOK := bound("max_rows", true)
	g, gn, gOK := bound("max_groups", false)
	r, rn, rOK := bound("max_rows_per_group", false)
	if kOK && gOK && g > k {
		p.errorf(gn.line, gn.path, "must be ≤ max_rows (%d): a unit keeping at most %d rows touches at most %d cells", k, k, k)
		gOK = false
	}
	if kOK && rOK && r > k {
		p.errorf(rn.line, rn.path, "must be ≤ max_rows (%d)", k)
		rOK = false
	}
	if !good || !kOK || !gOK || !rOK {
		return nil
	}
	u.MaxRows, u.MaxGroups, u.MaxRowsPerGroup = k, g, r
	return u
}

func (p *parser) budget(n node, noise NoiseFamily, noiseOK bool) Budget {
	var b Budget
	f, ok := p.fields(n, "total", "per_user", "default_per_query", "max_per_query", "delta", "delta_per_query", "topk_selection_share", "selection_share")
	if !ok {
		return b
	}
	get := func(key string, required bool) (float64, node, bool) {
		v, ok := f[key]
		if !ok {
			if required {
				p.required(n, key)
			}
			return 0, v, false
		}
		x, ok := p.positive(v)
		return x, v, ok
	}
	total, _, totalOK := get("total", true)
	perUser, perUserN, perUserOK := get("per_user", true)
	def, defN, defOK := get("default_per_query", true)
	maxQ, maxN, maxOK := get("max_per_query", false)
	b.Total, b.PerUser, b.DefaultPerQuery, b.MaxPerQuery = total, perUser, def, maxQ
	b.TopKSelectionShare = DefaultTopKSelectionShare
	if sn, has := f["topk_selection_share"]; has {
		if x, ok := p.number(sn); ok {
			if x <= 0 || x >= 1 {
				p.errorf(sn.line, sn.path, "must be in (0, 1) (got %s)", num(x))
			} else {
				b.TopKSelectionShare = x
			}
		}
	}

	if perUserOK && totalOK && perUser > total {
		p.errorf(perUserN.line, perUserN.path, "must be ≤ total (%s)", num(total))
	}
	if defOK && perUserOK && def > perUser {
		p.errorf(defN.line, defN.path, "must be ≤ per_user (%s)", num(perUser))
	}
	if maxOK && defOK && maxQ < def {
		p.errorf(maxN.line, maxN.path, "must be ≥ default_per_query (%s)", num(def))
	}
	if maxOK && perUserOK && maxQ > perUser {
		p.errorf(maxN.line, maxN.path, "must be ≤ per_user (%s)", num(perUser))
	}

	b.SelectionShare = DefaultSelectionShare
	if sn, has := f["selection_share"]; has {
		if x, ok := p.number(sn); ok {
			if x <= 0 || x >= 1 {
				p.errorf(sn.line, sn.path, "must be in (0, 1) (got %s)", num(x))
			} else {
				b.SelectionShare = x
			}
		}
	}
	dn, has := f["delta"]
	switch {
	case !noiseOK:
	case noise == Gaussian && !has:
		p.errorf(n.line, join(n.path, "delta"), "required when noise is gaussian")
	case has:
		if d, ok := p.number(dn); ok {
			if d <= 0 || d >= 1 {
				p.errorf(dn.line, dn.path, "must be in (0, 1) (got %s)", num(d))
			} else {
				b.Delta = d
			}
		}
	default:
		b.Delta = DefaultDelta
	}
	b.DeltaPerQuery = min(DefaultDeltaPerQuery, b.Delta)
	if qn, has := f["delta_per_query"]; has {
		if d, ok := p.number(qn); ok {
			switch {
			case d <= 0 || d >= 1:
				p.errorf(qn.line, qn.path, "must be in (0, 1) (got %s)", num(d))
			case b.Delta > 0 && d > b.Delta:
				p.errorf(qn.line, qn.path, "must be ≤ delta (%s)", num(b.Delta))
			default:
				b.DeltaPerQuery = d
			}
		}
	}
	return b
}

func (p *parser) column(e entry) *Column {
	nameOK := p.name(e.val, e.key)
	f, ok := p.fields(e.val, "type", "min", "max", "width", "edges", "values", "null", "out_of_domain", "open")
	if !ok {
		return nil
	}
	c := &Column{Name: e.key}
	tn, ok := f["type"]
	if !ok {
		p.required(e.val, "type")
		return nil
	}
	typ, ok := p.word(tn, "integer", "numeric", "categorical", "date", "datetime", "timestamp", "text")
	if !ok {
		return nil
	}
	if on, has := f["open"]; has {
		w, good := p.word(on, "true", "false")
		b := w == "true"
		switch {
		case !good:
			return nil
		case typ != "integer" && typ != "text":
			p.errorf(on.line, on.path, "only integer columns are opened (a text column is open already)")
			return nil
		case b && typ == "integer":
			typ = "open integer"
		}
	}
	notFor := func(keys ...string) {
		for _, k := range keys {
			if n, ok := f[k]; ok {
				p.errorf(n.line, n.path, "not allowed for type %s", typ)
			}
		}
	}
	valid := true
	switch typ {
	case "text", "open integer":
		// An open column (open.go): no public list of values.
		c.Kind, c.Open, c.OpenInteger = Categorical, true, typ == "open integer"
		notFor("min", "max", "width", "edges", "values", "out_of_domain")
	case "integer":
		c.Kind = IntegerRange
		notFor("edges", "values")
		valid = p.intRange(e.val, f, c)
	case "numeric":
		c.Kind = Binned
		notFor("min", "max", "width", "values")
		valid = p.edges(e.val, f, c)
	case "categorical":
		c.Kind = Categorical
		notFor("min", "max", "width", "edges")
		valid = p.values(e.val, f, c)
	case "date", "datetime", "timestamp":
		c.Kind = TimeRange
		c.DateOnly = typ == "date"
		notFor("edges", "values")
		valid = p.timeRange(e.val, f, c)
	}

	c.Null = PolicyDrop
	nullN, hasNull := f["null"]
	if hasNull {
		w, ok := p.word(nullN, string(PolicyDrop), string(PolicyCell), string(PolicyOther))
		valid = valid && ok
		c.Null = Policy(w)
	}
	c.OutOfDomain = PolicyClamp
	if c.Kind == Categorical {
		c.OutOfDomain = PolicyDrop
	}
	if n, ok := f["out_of_domain"]; ok {
		w, ok := p.word(n, string(PolicyDrop), string(PolicyClamp), string(PolicyOther))
		if ok && w == string(PolicyClamp) && c.Kind == Categorical {
			p.errorf(n.line, n.path, "clamp is only allowed for integer, numeric, date and datetime columns (use drop or other)")
			ok = false
		}
		valid = valid && ok
		c.OutOfDomain = Policy(w)
	}
	if hasNull && c.Null == PolicyOther && c.OutOfDomain != PolicyOther {
		p.errorf(nullN.line, nullN.path, "other requires out_of_domain: other")
		valid = false
	}
	if c.Kind == Categorical && c.OutOfDomain == PolicyOther {
		for i, v := range c.Values {
			if v == "other" {
				p.errorf(e.val.line, fmt.Sprintf("%s.values[%d]", e.val.path, i), `"other" is the label of the out_of_domain cell; rename the value or use out_of_domain: drop`)
				valid = false
			}
		}
	}
	if valid && c.Size() > MaxColumnCells {
		p.errorf(e.val.line, e.val.path, "domain has %d cells; at most %d are allowed per column", c.Size(), MaxColumnCells)
		valid = false
	}
	if !valid || !nameOK {
		return nil
	}
	return c
}

func (p *parser) intRange(col node, f map[string]node, c *Column) bool {
	minN, hasMin := f["min"]
	maxN, hasMax := f["max"]
	ok := true
	if !hasMin {
		p.required(col, "min")
		ok = false
	} else if c.Min, hasMin = p.integer(minN); !hasMin {
		ok = false
	}
	if !hasMax {
		p.required(col, "max")
		ok = false
	} else if c.Max, hasMax = p.integer(maxN); !hasMax {
		ok = false
	}
	if ok && c.Min > c.Max {
		p.errorf(minN.line, minN.path, "must be ≤ max (%d)", c.Max)
		ok = false
	}
	c.Width = 1
	if n, has := f["width"]; has {
		w, good := p.integer(n)
		switch {
		case !good:
			ok = false
		case w < 1:
			p.errorf(n.line, n.path, "must be ≥ 1")
			ok = false
		default:
			c.Width = w
		}
	}
	if ok && (c.Max-c.Min)/c.Width >= MaxColumnCells {
		p.errorf(col.line, col.path, "domain has more than %d bins; use a larger width", MaxColumnCells)
		ok = false
	}
	return ok
}

// timeRange reads a date or datetime column's min, max (times in UTC, as
// ParseTime reads them; a date column's are dates) and width (ParseWidth;
// default 1d; whole days or months for a date column, and a month width
// needs a min at the start of a month).
func (p *parser) timeRange(col node, f map[string]node, c *Column) bool {
	ok := true
	var maxDateOnly bool
	read := func(key string) (int64, node, bool) {
		n, has := f[key]
		if !has {
			p.required(col, key)
			return 0, n, false
		}
		s, good := p.scalar(n)
		if !good {
			return 0, n, false
		}
		_, maxDateOnly, _ = ParseTime(s)
		sec, dateOnly, good := ParseTime(s)
		switch {
		case !good:
			p.errorf(n.line, n.path, "must be a time in UTC between the years 1000 and 9999, such as 2025-01-01 or 2025-01-01 00:00:00 (got %q)", s)
			return 0, n, false
		case c.DateOnly && !dateOnly:
			p.errorf(n.line, n.path, "must be a date such as 2025-01-01 for a date column (got %q)", s)
			return 0, n, false
		}
		return sec, n, true
	}
	var minN node
	var good bool
	if c.Min, minN, good = read("min"); !good {
		ok = false
	}
	if c.Max, _, good = read("max"); !good {
		ok = false
	} else if maxDateOnly {
		c.Max += 86400 - 1 // a max written as a date covers that day
	}
	if ok && c.Min > c.Max {
		p.errorf(minN.line, minN.path, "must be before max")
		ok = false
	}
	c.Width = 86400
	if n, has := f["width"]; has {
		s, good := p.scalar(n)
		if !good {
			return false
		}
		w, m, err := ParseWidth(s)
		switch {
		case err != nil:
			p.errorf(n.line, n.path, "%s", err.Error())
			return false
		case c.DateOnly && w%86400 != 0:
			p.errorf(n.line, n.path, "a date column's width is whole days or months (got %q)", s)
			return false
		}
		c.Width, c.Months = w, m
	}
	if !ok {
		return false
	}
	if c.Months > 0 {
		if t := time.Unix(c.Min, 0).UTC(); t.Day() != 1 || t.Hour() != 0 || t.Minute() != 0 || t.Second() != 0 {
			p.errorf(minN.line, minN.path, "a width in months needs a min at the start of a month (such as %s)", t.Format("2006-01")+"-01")
			return false
		}
	}
	if c.Months == 0 && (c.Max-c.Min)/c.Width >= MaxColumnCells {
		p.errorf(col.line, col.path, "domain has more than %d bins; use a larger width", MaxColumnCells)
		return false
	}
	return true
}

func (p *parser) edges(col node, f map[string]node, c *Column) bool {
	n, has := f["edges"]
	if !has {
		p.required(col, "edges")
		return false
	}
	items, ok := p.list(n)
	if !ok {
		return false
	}
	if len(items) < 2 {
		p.errorf(n.line, n.path, "must have at least 2 entries (one bin needs two edges)")
		return false
	}
	if len(items) > MaxColumnCells+1 {
		p.errorf(n.line, n.path, "must have at most %d entries", MaxColumnCells+1)
		return false
	}
	for i, it := range items {
		x, good := p.number(it)
		if !good {
			ok = false
			continue
		}
		if i > 0 && ok && x <= c.Edges[i-1] {
			p.errorf(it.line, it.path, "must be greater than the previous edge (%s): edges must increase strictly", num(c.Edges[i-1]))
			ok = false
		}
		c.Edges = append(c.Edges, x)
	}
	return ok
}

func (p *parser) values(col node, f map[string]node, c *Column) bool {
	n, has := f["values"]
	if !has {
		p.required(col, "values")
		return false
	}
	items, ok := p.list(n)
	if !ok {
		return false
	}
	if len(items) == 0 {
		p.errorf(n.line, n.path, "must not be empty")
		return false
	}
	if len(items) > MaxColumnCells {
		p.errorf(n.line, n.path, "must have at most %d entries", MaxColumnCells)
		return false
	}
	seen := make(map[string]int, len(items))
	for i, it := range items {
		if it.y.Kind == yaml.ScalarNode && it.y.ShortTag() == "!!null" {
			p.errorf(it.line, it.path, "must not be null (use null: cell to give NULL its own cell)")
			ok = false
			continue
		}
		v, good := p.scalar(it)
		if !good {
			ok = false
			continue
		}
		if j, dup := seen[v]; dup {
			p.errorf(it.line, it.path, "duplicate value %q (also values[%d])", v, j)
			ok = false
			continue
		}
		seen[v] = i
		c.Values = append(c.Values, v)
	}
	return ok
}

var hashPattern = regexp.MustCompile(`^\*[0-9A-Fa-f]{40}$`)

// user reads one user; maxConnections is the server's, which bounds the
// user's max_user_connections.
func (p *parser) user(e entry, maxConnections int) *User {
	if e.key == "" {
		p.errorf(e.val.line, e.val.path, "user name must not be empty")
		return nil
	}
	f, ok := p.fields(e.val, "password", "password_hash", "role", "default_epsilon", "max_epsilon", "max_user_connections")
	if !ok {
		return nil
	}
	u := &User{Name: e.key}
	valid := true
	pw, hasPW := f["password"]
	hash, hasHash := f["password_hash"]
	switch {
	case hasPW && hasHash:
		p.errorf(e.val.line, e.val.path, "give password or password_hash, not both")
		valid = false
	case hasPW:
		s, ok := p.scalar(pw)
		if ok && s == "" {
			p.errorf(pw.line, pw.path, "must not be empty")
			ok = false
		}
		valid = valid && ok
		u.PasswordHash = NativePasswordHash(s)
	case hasHash:
		s, ok := p.scalar(hash)
		if ok && !hashPattern.MatchString(s) {
			p.errorf(hash.line, hash.path, `must be "*" followed by 40 hex digits (the mysql_native_password hash, as in mysql.user.authentication_string)`)
			ok = false
		}
		valid = valid && ok
		u.PasswordHash = strings.ToUpper(s)
	default:
		p.errorf(e.val.line, e.val.path, "password or password_hash is required")
		valid = false
	}
	if n, ok := f["role"]; !ok {
		p.required(e.val, "role")
		valid = false
	} else if w, ok := p.word(n, string(RoleAnalyst), string(RoleAuditor)); ok {
		u.Role = Role(w)
	} else {
		valid = false
	}
	for key, dst := range map[string]*float64{"default_epsilon": &u.DefaultEpsilon, "max_epsilon": &u.MaxEpsilon} {
		if n, has := f[key]; has {
			x, ok := p.positive(n)
			valid = valid && ok
			*dst = x
		}
	}
	if n, has := f["max_user_connections"]; has {
		i, ok := p.integer(n)
		if ok && (i < 1 || i > int64(maxConnections)) {
			p.errorf(n.line, n.path, "must be between 1 and max_connections = %d (got %d)", maxConnections, i)
			ok = false
		}
		valid = valid && ok
		u.MaxUserConnections = int(i)
	}
	if u.DefaultEpsilon > 0 && u.MaxEpsilon > 0 && u.DefaultEpsilon > u.MaxEpsilon {
		p.errorf(f["default_epsilon"].line, f["default_epsilon"].path, "must be ≤ max_epsilon (%s)", num(u.MaxEpsilon))
		valid = false
	}
	if !valid {
		return nil
	}
	return u
}
