package catalog

import (
	"go/ast"
	goparser "go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// loaderKeys are the keys the loader reads: the string arguments of every
// fields(node, "key", ...) call in the package's code, which is where each
// section lists what it accepts (anything else is "unknown key").
func loaderKeys(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := goparser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); !ok || sel.Sel.Name != "fields" {
				return true
			}
			for _, a := range call.Args[1:] {
				if lit, ok := a.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					k, _ := strconv.Unquote(lit.Value)
					keys[k] = true
				}
			}
			return true
		})
	}
	if len(keys) < 40 {
		t.Fatalf("only %d keys found in the loader's fields(...) calls", len(keys))
	}
	return keys
}

// The catalog reference (docs/catalog.md) documents every key the loader
// reads, and every key its tables document is one the loader reads: the
// reference cannot drift from the code.
func TestCatalogReference(t *testing.T) {
	keys := loaderKeys(t)
	b, err := os.ReadFile(filepath.Join("..", "docs", "catalog.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for k := range keys {
		// `key`, `section.key`, or key: in an example.
		re := regexp.MustCompile("(`(\\w+\\.)*" + regexp.QuoteMeta(k) + "`)|(\\b" + regexp.QuoteMeta(k) + ":)|([{,] ?" + regexp.QuoteMeta(k) + "[,}])")
		if !re.MatchString(doc) {
			t.Errorf("docs/catalog.md does not document the key %q that the loader reads", k)
		}
	}
	// The first column of the key tables ("| table key |", "| server key |").
	inKeyTable := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "| ") && strings.Contains(strings.SplitN(line, "|", 3)[1], " key ") {
			inKeyTable = true
			continue
		}
		if !strings.HasPrefix(line, "|") {
			inKeyTable = false
			continue
		}
		m := regexp.MustCompile("^\\| `([\\w.]+)`").FindStringSubmatch(line)
		if !inKeyTable || m == nil {
			continue
		}
		parts := strings.Split(m[1], ".")
		for _, p := range parts {
			if !keys[p] {
				t.Errorf("docs/catalog.md documents %q, but the loader reads no key %q", m[1], p)
			}
		}
	}
}
