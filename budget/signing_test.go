package budget

import (
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadSigningKeyAndPublicKey(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, text := range map[string]string{
		"hex seed":    hex.EncodeToString(priv.Seed()) + "\n",
		"base64 seed": base64.StdEncoding.EncodeToString(priv.Seed()),
		"hex key":     hex.EncodeToString(priv),
		"pem":         string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := LoadSigningKey(path)
		if err != nil || !got.Equal(priv) {
			t.Errorf("%s: %v", name, err)
		}
	}
	badKey := append(append([]byte(nil), priv.Seed()...), make([]byte, 32)...) // a seed with a wrong public half
	for name, text := range map[string]string{
		"short":        "abcd",
		"garbage":      "not a key",
		"inconsistent": hex.EncodeToString(badKey),
		"pem public":   string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})),
	} {
		path := filepath.Join(dir, "bad")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadSigningKey(path); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := LoadSigningKey(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file: no error")
	}

	for name, text := range map[string]string{
		"hex":    EncodePublicKey(pub),
		"base64": base64.StdEncoding.EncodeToString(pub),
		"pem":    string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})),
	} {
		got, err := ParsePublicKey(text)
		if err != nil || !got.Equal(pub) {
			t.Errorf("public %s: %v", name, err)
		}
	}
	for _, text := range []string{"", "abcd", hex.EncodeToString(priv)} {
		if _, err := ParsePublicKey(text); err == nil {
			t.Errorf("public %q: accepted", text)
		}
	}
}

func TestSignedHeadsFile(t *testing.T) {
	ctx := context.Background()
	l, path := openTest(t)
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	heads := filepath.Join(t.TempDir(), "ledger.heads")
	first, err := l.AppendSignedHead(ctx, priv, heads) // the empty ledger
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := l.Charge(ctx, lapCharge("a", 0.1, "t"), nil); err != nil {
			t.Fatal(err)
		}
	}
	second, err := l.AppendSignedHead(ctx, priv, heads)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := ReadSignedHeads(heads)
	if err != nil || len(hs) != 2 || hs[0].Head != first.Head || hs[1].String() != second.String() {
		t.Fatalf("ReadSignedHeads: %+v %v", hs, err)
	}
	for _, h := range hs {
		if !VerifyHeadSignature(pub, h.Head, h.Sig) {
			t.Fatalf("signature of %s does not verify", h.Head)
		}
		if err := l.CheckHead(ctx, h.Head); err != nil {
			t.Fatalf("CheckHead(%s): %v", h.Head, err)
		}
	}
	if !strings.Contains(second.Head, "seq=3 ") {
		t.Fatalf("head %s", second.Head)
	}

	// A rolled-back ledger no longer holds the head; a rewritten one holds
	// another hash.
	rawExec(t, path, "DELETE FROM entries WHERE seq = 3")
	var te *TamperError
	if err := l.CheckHead(ctx, second.Head); !errors.As(err, &te) || te.Seq != 3 || !strings.Contains(te.Reason, "missing") {
		t.Fatalf("CheckHead after rollback: %v", err)
	}
	rawExec(t, path, "UPDATE entries SET hash = 'x' WHERE seq = 2")
	h2 := strings.Replace(second.Head, "seq=3", "seq=2", 1)
	if err := l.CheckHead(ctx, h2); !errors.As(err, &te) || te.Seq != 2 || !strings.Contains(te.Reason, "rewritten") {
		t.Fatalf("CheckHead after rewrite: %v", err)
	}
	if err := l.CheckHead(ctx, first.Head); err != nil {
		t.Fatalf("the empty head is held by every ledger: %v", err)
	}

	// Malformed lines are reported with their line number.
	if err := os.WriteFile(heads, []byte("# comment\n\n"+first.String()+"\n"+first.Head+" sig=AAAA\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSignedHeads(heads); err == nil || !strings.Contains(err.Error(), ":4:") {
		t.Fatalf("malformed signature: %v", err)
	}
	for _, line := range []string{"", "hello sig=" + base64.StdEncoding.EncodeToString(make([]byte, 64)), first.Head} {
		if _, err := ParseSignedHead(line); err == nil {
			t.Errorf("ParseSignedHead(%q): accepted", line)
		}
	}
}
