package mysqlfront

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// TLS certificates for the front.
//
// LoadTLS reads a certificate chain and key in PEM, the way a catalog or a
// flag names them. SelfSignedTLS gives the demo a certificate: an ECDSA P-256
// key and a self-signed certificate for localhost, 127.0.0.1 and ::1 (and
// the host names given), written once under a directory and reused, so that
// clients can pin it (mysql --ssl-ca=DIR/dpproxy-cert.pem). Both return a
// configuration with TLS 1.2 as the minimum version.

// Names of the generated demo certificate's files under the data directory.
const (
	SelfSignedCertFile = "dpproxy-cert.pem"
	SelfSignedKeyFile  = "dpproxy-key.pem"
)

// LoadTLS returns a server configuration from PEM files.
func LoadTLS(certFile, keyFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("mysqlfront: TLS certificate: %w", err)
	}
	return serverTLS(cert), nil
}

// SelfSignedTLS returns a configuration with the self-signed certificate
// under dir, generating it (valid for ten years) if the files do not exist.
// The key file is written with mode 0600. hosts are extra DNS names or IP
// addresses the certificate should name.
func SelfSignedTLS(dir string, hosts ...string) (*tls.Config, error) {
	certFile, keyFile := filepath.Join(dir, SelfSignedCertFile), filepath.Join(dir, SelfSignedKeyFile)
	_, errC := os.Stat(certFile)
	_, errK := os.Stat(keyFile)
	switch {
	case errC == nil && errK == nil:
		return LoadTLS(certFile, keyFile)
	case errC == nil || errK == nil:
		return nil, fmt.Errorf("mysqlfront: only one of %s and %s exists; remove it to generate a new pair", certFile, keyFile)
	case !errors.Is(errC, os.ErrNotExist):
		return nil, errC
	}
	certPEM, keyPEM, err := GenerateSelfSigned(hosts...)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := writeNew(keyFile, keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := writeNew(certFile, certPEM, 0o644); err != nil {
		os.Remove(keyFile)
		return nil, err
	}
	return LoadTLS(certFile, keyFile)
}

func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	return f.Close()
}

// GenerateSelfSigned makes an ECDSA P-256 key and a self-signed
// certificate for localhost, 127.0.0.1, ::1 and hosts, in PEM.
func GenerateSelfSigned(hosts ...string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "dpproxy", Organization: []string{"dpproxy self-signed"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true, // so that clients can use it as its own CA (--ssl-ca)
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	for _, h := range hosts {
		if h = strings.TrimSpace(h); h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

// Fingerprint is the SHA-256 fingerprint of a configuration's leaf
// certificate, as "AB:CD:...", for printing next to connection instructions.
func Fingerprint(cfg *tls.Config) string {
	if cfg == nil || len(cfg.Certificates) == 0 || len(cfg.Certificates[0].Certificate) == 0 {
		return ""
	}
	sum := sha256.Sum256(cfg.Certificates[0].Certificate[0])
	h := strings.ToUpper(hex.EncodeToString(sum[:]))
	var b strings.Builder
	for i := 0; i < len(h); i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(h[i : i+2])
	}
	return b.String()
}

func serverTLS(cert tls.Certificate) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
}
