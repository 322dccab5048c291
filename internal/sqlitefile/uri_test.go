package sqlitefile

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestURI(t *testing.T) {
	dir := t.TempDir()
	uri, abs, err := URI(filepath.Join(dir, "a b#?%.sqlite"), "_pragma=synchronous(FULL)", "mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(abs) || !strings.HasPrefix(uri, "file:/") || !strings.Contains(uri, "a%20b%23%3F%25.sqlite?_pragma=synchronous(FULL)&mode=ro") {
		t.Fatalf("%s %s", uri, abs)
	}
	if _, _, err := URI(""); err == nil {
		t.Fatal("empty path accepted")
	}
}
