package catalog

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
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
	p := &yamlReader{file: name}
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

type yamlReader struct {
	file string
	errs Errors
	// spaceNodes holds where each table names its privacy unit space (or
	// the table's own node when it names none), for checkSpaces.
	spaceNodes map[*Table]node
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

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

var identifier = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

func (p *yamlReader) catalog(root node) *Catalog {
	f, ok := p.fields(root, "database", "sources", "tables", "public_tables", "users", "ledger", "tls", "auth_plugin", "server", "cache", "state")
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
	cat.State.Driver = StateSQLite
	if n, ok := f["state"]; ok {
		p.state(n, &cat.State)
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
func (p *yamlReader) tls(n node, t *TLS) {
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
func (p *yamlReader) ledger(n node, l *Ledger) {
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

// connection reads a section's dsn and dsn_env (a source's, the state's),
// and reports which were given. A DSN's value never appears in a
// message: it may hold a password.
func (p *yamlReader) connection(f map[string]node, dsn, env *string) (hasDSN, hasEnv bool) {
	dsnN, hasDSN := f["dsn"]
	if hasDSN {
		if dsnN.y.Kind != yaml.ScalarNode || dsnN.y.ShortTag() == "!!null" || strings.TrimSpace(dsnN.y.Value) == "" {
			p.errorf(dsnN.line, dsnN.path, "must be a non-empty connection string")
		} else {
			*dsn = dsnN.y.Value
		}
	}
	envN, hasEnv := f["dsn_env"]
	if hasEnv {
		if v, ok := p.scalar(envN); ok {
			switch {
			case strings.TrimSpace(v) == "":
				p.errorf(envN.line, envN.path, "must not be empty")
			case !envName.MatchString(v):
				p.errorf(envN.line, envN.path, "invalid environment variable name %q", v)
			}
			*env = v
		}
	}
	return hasDSN, hasEnv
}

// LookupDSN is a connection string given as dsn, or held by the
// environment variable env (dsn_env) when env is set.
func LookupDSN(dsn, env string) (string, error) {
	if env == "" {
		if dsn == "" {
			return "", errors.New("no dsn or dsn_env")
		}
		return dsn, nil
	}
	v, ok := os.LookupEnv(env)
	if !ok || strings.TrimSpace(v) == "" {
		return "", fmt.Errorf("environment variable %s (dsn_env) is not set", env)
	}
	return v, nil
}

func (p *yamlReader) source(e entry) *Source {
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
	hasDSN, hasEnv := p.connection(f, &s.DSN, &s.DSNEnv)
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
func (p *yamlReader) cache(n node, c *Cache) {
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

var sourceTable = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

var hashPattern = regexp.MustCompile(`^\*[0-9A-Fa-f]{40}$`)

// user reads one user; maxConnections is the server's, which bounds the
// user's max_user_connections.
func (p *yamlReader) user(e entry, maxConnections int) *User {
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
