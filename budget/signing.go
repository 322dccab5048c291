package budget

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
)

// A signed-heads file anchors the ledger outside its own file: one line per
// signed head, appended by AppendSignedHead,
//
//	dpproxy-ledger-head/v1 seq=<n> hash=<hex> sig=<base64 Ed25519 signature of the head>
//
// An auditor holding only the public key checks each line's signature and
// that the ledger still holds the signed hash at the signed sequence number
// (CheckHead); a ledger rolled back, truncated or rewritten consistently
// after a head was signed fails that check.

const sigField = " sig="

// SignedHead is a ledger head (see SignHead) and its signature.
type SignedHead struct {
	Head string
	Sig  []byte
}

// String is the head's line in a signed-heads file (without the newline).
func (s SignedHead) String() string {
	return s.Head + sigField + base64.StdEncoding.EncodeToString(s.Sig)
}

// ParseSignedHead parses one line of a signed-heads file. It does not check
// the signature.
func ParseSignedHead(line string) (SignedHead, error) {
	line = strings.TrimSpace(line)
	i := strings.LastIndex(line, sigField)
	if i < 0 {
		return SignedHead{}, fmt.Errorf("budget: signed head %q has no%s", line, sigField)
	}
	head := line[:i]
	if _, _, err := ParseHead(head); err != nil {
		return SignedHead{}, err
	}
	sig, err := base64.StdEncoding.DecodeString(line[i+len(sigField):])
	if err != nil || len(sig) != ed25519.SignatureSize {
		return SignedHead{}, fmt.Errorf("budget: signed head %q: malformed signature", line)
	}
	return SignedHead{Head: head, Sig: sig}, nil
}

// ReadSignedHeads reads a signed-heads file; blank lines and lines starting
// with '#' are skipped. A malformed line is an error naming its number.
func ReadSignedHeads(path string) ([]SignedHead, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []SignedHead
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		sh, err := ParseSignedHead(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		out = append(out, sh)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// AppendSignedHead verifies the ledger, signs its head (SignHead) and
// appends the signed head as one line to the file at path (created with
// mode 0644 if needed), synced to disk before it returns.
func (l *Ledger) AppendSignedHead(ctx context.Context, priv ed25519.PrivateKey, path string) (SignedHead, error) {
	head, sig, err := l.SignHead(ctx, priv)
	if err != nil {
		return SignedHead{}, err
	}
	sh := SignedHead{Head: head, Sig: sig}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return SignedHead{}, fmt.Errorf("budget: signed heads: %w", err)
	}
	_, werr := f.WriteString(sh.String() + "\n")
	if werr == nil {
		werr = f.Sync()
	}
	if err := errors.Join(werr, f.Close()); err != nil {
		return SignedHead{}, fmt.Errorf("budget: signed heads: %w", err)
	}
	return sh, nil
}

// CheckHead reports, as a *TamperError naming the entry, whether the ledger
// no longer holds the head (made by SignHead): entry seq must exist and have
// the head's hash. The head of an empty ledger is held by every ledger. It
// checks nothing else; run Verify for the chain itself.
func (l *Ledger) CheckHead(ctx context.Context, head string) error {
	seq, hash, err := ParseHead(head)
	if err != nil {
		return err
	}
	if seq == 0 {
		return nil
	}
	var got string
	err = l.db.QueryRowContext(ctx, "SELECT hash FROM entries WHERE seq = ?", seq).Scan(&got)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return &TamperError{Seq: seq, Reason: fmt.Sprintf("a signed head records %d entries but entry %d is missing (the ledger was truncated or rolled back)", seq, seq)}
	case err != nil:
		return fmt.Errorf("budget: check head: %w", err)
	case got != hash:
		return &TamperError{Seq: seq, Reason: "the entry's hash is not the one in a signed head (the ledger was rewritten)"}
	}
	return nil
}

// LoadSigningKey reads an Ed25519 private key from a file holding the
// 32-byte seed or the 64-byte private key in hex or base64, or a PEM
// "PRIVATE KEY" block (PKCS #8, as `openssl genpkey -algorithm ed25519`
// writes).
func LoadSigningKey(path string) (ed25519.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("budget: signing key: %w", err)
	}
	if b, _ := pem.Decode(data); b != nil {
		k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("budget: signing key %s: %w", path, err)
		}
		priv, ok := k.(ed25519.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("budget: signing key %s is a %T, not Ed25519", path, k)
		}
		return priv, nil
	}
	raw, ok := decodeKeyText(string(data))
	switch {
	case ok && len(raw) == ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(raw), nil
	case ok && len(raw) == ed25519.PrivateKeySize:
		priv := ed25519.PrivateKey(raw)
		if !ed25519.NewKeyFromSeed(priv.Seed()).Equal(priv) {
			return nil, fmt.Errorf("budget: signing key %s: inconsistent 64-byte private key", path)
		}
		return priv, nil
	}
	return nil, fmt.Errorf("budget: signing key %s: want a 32-byte seed or 64-byte key in hex or base64, or a PEM PKCS #8 key", path)
}

// ParsePublicKey parses an Ed25519 public key: 32 bytes in hex or base64,
// or a PEM "PUBLIC KEY" block (PKIX).
func ParsePublicKey(text string) (ed25519.PublicKey, error) {
	if b, _ := pem.Decode([]byte(text)); b != nil {
		k, err := x509.ParsePKIXPublicKey(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("budget: public key: %w", err)
		}
		pub, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("budget: public key is a %T, not Ed25519", k)
		}
		return pub, nil
	}
	raw, ok := decodeKeyText(text)
	if !ok || len(raw) != ed25519.PublicKeySize {
		return nil, errors.New("budget: public key: want 32 bytes in hex or base64, or a PEM PKIX key")
	}
	return ed25519.PublicKey(raw), nil
}

// EncodePublicKey is the hex form ParsePublicKey reads.
func EncodePublicKey(pub ed25519.PublicKey) string { return hex.EncodeToString(pub) }

func decodeKeyText(s string) ([]byte, bool) {
	s = strings.TrimSpace(s)
	if b, err := hex.DecodeString(s); err == nil {
		return b, true
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, true
		}
	}
	return nil, false
}
