// Package sqlitefile names SQLite database files for modernc.org/sqlite:
// the one place the proxy's own stores (the ledger, stored answers, stored
// measurements) build their file: URIs, so that every path is made
// absolute and escaped the same way.
package sqlitefile

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
)

// URI returns the file: URI of the database at path (made absolute, every
// character escaped) with params, such as "_pragma=synchronous(FULL)" or
// "mode=ro", which the driver reads for every connection; and the absolute
// path.
func URI(path string, params ...string) (uri, abs string, err error) {
	if path == "" {
		return "", "", fmt.Errorf("empty path")
	}
	if abs, err = filepath.Abs(path); err != nil {
		return "", "", err
	}
	uri = "file:" + (&url.URL{Path: filepath.ToSlash(abs)}).EscapedPath()
	if len(params) > 0 {
		uri += "?" + strings.Join(params, "&")
	}
	return uri, abs, nil
}
