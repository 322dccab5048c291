package sources

import (
	"strings"

	"github.com/dpproxy/dpproxy/catalog"
)

// dsn returns a server source's connection string: the catalog's dsn, or
// the environment variable dsn_env names.
func dsn(cfg *catalog.Source) (string, error) {
	return catalog.LookupDSN(cfg.DSN, cfg.DSNEnv)
}

// redact removes every secret (the whole DSN, its password) from a driver's
// message, so that neither appears in a log or an error.
func redact(msg string, secrets ...string) string {
	for _, s := range secrets {
		if len(s) >= 3 {
			msg = strings.ReplaceAll(msg, s, "<redacted>")
		}
	}
	return msg
}
