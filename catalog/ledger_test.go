package catalog

import (
	"strings"
	"testing"
)

func TestParseLedgerSection(t *testing.T) {
	c, err := Parse("shop.yaml", []byte(valid+"ledger: {signing_key: keys/ledger.key, public_key: \"ab12\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Ledger != (Ledger{SigningKey: "keys/ledger.key", PublicKey: "ab12"}) {
		t.Fatalf("ledger %+v", c.Ledger)
	}
	if c, err := Parse("shop.yaml", []byte(valid)); err != nil || c.Ledger != (Ledger{}) {
		t.Fatalf("no ledger section: %+v %v", c, err)
	}
	for yaml, want := range map[string]string{
		"ledger: {signing_key: x, key: y}\n": "ledger.key: unknown key (expected one of signing_key, public_key)",
		"ledger: {signing_key: \"\"}\n":      "ledger.signing_key: must not be empty",
		"ledger: {signing_key: [a]}\n":       "ledger.signing_key: must be a single value",
		"ledger: 3\n":                        "ledger: must be a mapping",
	} {
		_, err := Parse("shop.yaml", []byte(valid+yaml))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", yaml, err, want)
		}
	}
}
