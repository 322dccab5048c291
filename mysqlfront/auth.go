package mysqlfront

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/vitess/go/mysql"

	"github.com/dpproxy/dpproxy/catalog"
)

// Authentication. dpproxy checks passwords itself, against the catalog's
// mysql_native_password hashes (SHA1(SHA1(password))), with two plugins:
//
//   - mysql_native_password: the scramble is checked against the hash.
//   - caching_sha2_password (MySQL 8's default): "fast" authentication
//     checks the SHA-256 scramble against a cached SHA256(SHA256(password))
//     of the user; without a cache entry the server asks for "full"
//     authentication, in which the client sends the password itself, in
//     clear over TLS, or without TLS encrypted with the server's RSA public
//     key (which the client requests: mysql --get-server-public-key,
//     Connector/J allowPublicKeyRetrieval=true, PyMySQL and the Go and Node
//     drivers do it by themselves). The password is checked against the
//     native hash and its SHA-256 verifier cached, so the next logins of
//     the user are fast, as in MySQL. Over plain TCP without RSA support in
//     the client, full authentication fails; native then works.
//
// The greeting announces Config.AuthPlugin (mysql_native_password unless
// set); a client answering with either plugin is checked with that plugin,
// and one answering with any other is switched to the announced one.
// Unknown users and wrong passwords get the same 1045 "Access denied for
// user 'u'@'host' (using password: YES)" after the same exchange, so user
// names cannot be probed.
type authServer struct {
	methods []mysql.AuthMethod
	def     mysql.AuthMethodDescription
}

var _ mysql.AuthServer = (*authServer)(nil)

func (a *authServer) AuthMethods() []mysql.AuthMethod { return a.methods }

func (a *authServer) DefaultAuthMethodDescription() mysql.AuthMethodDescription { return a.def }

// credentials are the users' password hashes and the caching_sha2 cache.
type credentials struct {
	native map[string][]byte // user -> SHA1(SHA1(password))

	mu     sync.Mutex
	sha2   map[string][]byte // user -> SHA256(SHA256(password)), after a full authentication
	rsaKey *rsa.PrivateKey   // for full authentication without TLS; generated on first use
	keyPEM []byte
	keyErr error
}

func newCredentials(users []*catalog.User, key *rsa.PrivateKey) (*credentials, error) {
	cr := &credentials{native: map[string][]byte{}, sha2: map[string][]byte{}, rsaKey: key}
	for _, u := range users {
		if u.Name == "" {
			return nil, fmt.Errorf("mysqlfront: a catalog user has no name")
		}
		if u.PasswordHash == "" {
			continue // no password: the user cannot log in
		}
		if !validNativeHash(u.PasswordHash) {
			return nil, fmt.Errorf("mysqlfront: user %s: password hash is not a mysql_native_password hash (\"*\" + 40 hex digits)", u.Name)
		}
		h, _ := hex.DecodeString(u.PasswordHash[1:])
		cr.native[u.Name] = h
	}
	if key != nil {
		if err := cr.setKeyPEM(); err != nil {
			return nil, err
		}
	}
	return cr, nil
}

func (cr *credentials) setKeyPEM() error {
	der, err := x509.MarshalPKIXPublicKey(&cr.rsaKey.PublicKey)
	if err != nil {
		return fmt.Errorf("mysqlfront: RSA public key: %w", err)
	}
	cr.keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	return nil
}

// key returns the RSA key pair, generating it on first use.
func (cr *credentials) key() (*rsa.PrivateKey, []byte, error) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if cr.rsaKey == nil && cr.keyErr == nil {
		if cr.rsaKey, cr.keyErr = rsa.GenerateKey(rand.Reader, 2048); cr.keyErr == nil {
			cr.keyErr = cr.setKeyPEM()
		}
	}
	return cr.rsaKey, cr.keyPEM, cr.keyErr
}

// checkPassword compares a clear-text password with the user's hash and,
// when it matches, caches the caching_sha2_password verifier.
func (cr *credentials) checkPassword(user, password string) bool {
	want, ok := cr.native[user]
	h1 := sha1.Sum([]byte(password))
	h2 := sha1.Sum(h1[:])
	if !ok || password == "" || subtle.ConstantTimeCompare(h2[:], want) != 1 {
		return false
	}
	s1 := sha256.Sum256([]byte(password))
	s2 := sha256.Sum256(s1[:])
	cr.mu.Lock()
	cr.sha2[user] = s2[:]
	cr.mu.Unlock()
	return true
}

func (cr *credentials) sha2Verifier(user string) []byte {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	return cr.sha2[user]
}

// connectionUser is what GMS sessions know of an authenticated user; the
// host is the one of the user's account, as GMS's own auth methods return.
func connectionUser(user string) mysql.Getter {
	return sql.MysqlConnectionUser{User: user, Host: "%"}
}

// accessDenied is MySQL's 1045, message included (Superset parses it).
func accessDenied(user string, remote net.Addr, usingPassword bool) error {
	yes := "NO"
	if usingPassword {
		yes = "YES"
	}
	return mysql.NewSQLError(mysql.ERAccessDeniedError, mysql.SSAccessDeniedError,
		"Access denied for user '%s'@'%s' (using password: %s)", user, hostOf(remote), yes)
}

func hostOf(a net.Addr) string {
	if a == nil {
		return "localhost"
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if host == "127.0.0.1" || host == "::1" {
		return "localhost"
	}
	return host
}

// noteTLS makes vitess's view of the connection agree with the packet
// layer's: vitess's TLSEnabled reads CLIENT_SSL in the capabilities, which
// it only sets when it runs TLS itself.
func noteTLS(c *mysql.Conn) {
	if fc := frontConnOf(c); fc != nil && fc.TLS() {
		c.Capabilities |= mysql.CapabilityClientSSL
	}
}

func newSalt() ([]byte, error) {
	salt, err := mysql.NewSalt()
	if err != nil {
		return nil, err
	}
	return append(salt, 0), nil // plugin data ends with a NUL
}

// scrambleSalt is the 20-byte salt inside plugin data.
func scrambleSalt(serverData []byte) []byte {
	if n := len(serverData); n > 0 && serverData[n-1] == 0 {
		serverData = serverData[:n-1]
	}
	return serverData
}

// ---- mysql_native_password ----

type nativeMethod struct{ cr *credentials }

func (nativeMethod) Name() mysql.AuthMethodDescription { return mysql.MysqlNativePassword }

// HandleUser accepts every user name: unknown users fail, like wrong
// passwords, in HandleAuthPluginData.
func (nativeMethod) HandleUser(c *mysql.Conn, _ string) bool { noteTLS(c); return true }

func (nativeMethod) AuthPluginData() ([]byte, error) { return newSalt() }

func (nativeMethod) AllowClearTextWithoutTLS() bool { return true }

func (m nativeMethod) HandleAuthPluginData(c *mysql.Conn, user string, serverData, clientData []byte, remote net.Addr) (mysql.Getter, error) {
	want, ok := m.cr.native[user]
	salt := scrambleSalt(serverData)
	if len(clientData) == 0 {
		// A client that announced this plugin without using it (libmariadb
		// with --default-auth when the greeting named another plugin) is
		// asked again, as MySQL does, with a fresh salt.
		var err error
		if salt, clientData, err = switchAuth(c, mysql.MysqlNativePassword); err != nil {
			return nil, err
		}
	}
	if !ok || len(clientData) != sha1.Size || len(salt) != 20 {
		return nil, accessDenied(user, remote, len(clientData) > 0)
	}
	// clientData = SHA1(password) XOR SHA1(salt + SHA1(SHA1(password)))
	h := sha1.New()
	h.Write(salt)
	h.Write(want)
	stage1 := h.Sum(nil)
	for i := range stage1 {
		stage1[i] ^= clientData[i]
	}
	got := sha1.Sum(stage1)
	if subtle.ConstantTimeCompare(got[:], want) != 1 {
		return nil, accessDenied(user, remote, true)
	}
	return connectionUser(user), nil
}

// switchAuth sends an AuthSwitchRequest for plugin with a fresh salt and
// returns the salt and the client's answer.
func switchAuth(c *mysql.Conn, plugin mysql.AuthMethodDescription) ([]byte, []byte, error) {
	fc := frontConnOf(c)
	if fc == nil {
		return nil, nil, nil
	}
	data, err := newSalt()
	if err != nil {
		return nil, nil, err
	}
	pkt := append([]byte{mysql.AuthSwitchRequestPacket}, plugin...)
	pkt = append(append(pkt, 0), data...)
	resp, err := fc.authExchange(pkt)
	if err != nil {
		return nil, nil, err
	}
	return scrambleSalt(data), resp, nil
}

// ---- caching_sha2_password ----

const (
	sha2RequestPublicKey = 0x02
)

type sha2Method struct{ cr *credentials }

func (sha2Method) Name() mysql.AuthMethodDescription { return mysql.CachingSha2Password }

func (sha2Method) HandleUser(c *mysql.Conn, _ string) bool { noteTLS(c); return true }

func (sha2Method) AuthPluginData() ([]byte, error) { return newSalt() }

func (sha2Method) AllowClearTextWithoutTLS() bool { return true }

func (m sha2Method) HandleAuthPluginData(c *mysql.Conn, user string, serverData, clientData []byte, remote net.Addr) (mysql.Getter, error) {
	salt := scrambleSalt(serverData)
	if len(clientData) == 0 || (len(clientData) == 1 && clientData[0] == 0) {
		return nil, accessDenied(user, remote, false) // no password: every catalog user has one
	}
	fc := frontConnOf(c)
	if fc == nil || len(salt) != 20 {
		return nil, accessDenied(user, remote, true)
	}
	if v := m.cr.sha2Verifier(user); v != nil {
		// Fast authentication: clientData = SHA256(pw) XOR SHA256(SHA256(SHA256(pw)) + salt).
		if len(clientData) != sha256.Size {
			return nil, accessDenied(user, remote, true)
		}
		h := sha256.New()
		h.Write(v)
		h.Write(salt)
		stage1 := h.Sum(nil)
		for i := range stage1 {
			stage1[i] ^= clientData[i]
		}
		got := sha256.Sum256(stage1)
		if subtle.ConstantTimeCompare(got[:], v) != 1 {
			return nil, accessDenied(user, remote, true)
		}
		if err := fc.authSend([]byte{mysql.AuthMoreDataPacket, mysql.CachingSha2FastAuth}); err != nil {
			return nil, err
		}
		return connectionUser(user), nil
	}

	// Full authentication: the client sends the password itself.
	resp, err := fc.authExchange([]byte{mysql.AuthMoreDataPacket, mysql.CachingSha2FullAuth})
	if err != nil {
		return nil, err
	}
	var password string
	switch {
	case fc.TLS():
		password = string(bytes.TrimRight(resp, "\x00"))
	case len(resp) == 1 && resp[0] == sha2RequestPublicKey:
		key, pemKey, err := m.cr.key()
		if err != nil {
			return nil, err
		}
		if resp, err = fc.authExchange(append([]byte{mysql.AuthMoreDataPacket}, pemKey...)); err != nil {
			return nil, err
		}
		if password, err = decryptPassword(key, resp, salt); err != nil {
			return nil, accessDenied(user, remote, true)
		}
	default:
		// A client that knows the public key sends the encrypted password at once.
		key, _, kerr := m.cr.key()
		if kerr != nil || len(resp) != key.Size() {
			// A clear-text password over plain TCP is refused, as MySQL does.
			return nil, accessDenied(user, remote, true)
		}
		if password, err = decryptPassword(key, resp, salt); err != nil {
			return nil, accessDenied(user, remote, true)
		}
	}
	if !m.cr.checkPassword(user, password) {
		return nil, accessDenied(user, remote, true)
	}
	return connectionUser(user), nil
}

// decryptPassword undoes the client's RSA-OAEP(SHA-1) encryption of
// (password + NUL) XOR salt.
func decryptPassword(key *rsa.PrivateKey, enc, salt []byte) (string, error) {
	plain, err := rsa.DecryptOAEP(sha1.New(), nil, key, enc, nil)
	if err != nil {
		return "", err
	}
	for i := range plain {
		plain[i] ^= salt[i%len(salt)]
	}
	return strings.TrimRight(string(plain), "\x00"), nil
}

func validNativeHash(h string) bool {
	if len(h) != 41 || h[0] != '*' {
		return false
	}
	_, err := hex.DecodeString(h[1:])
	return err == nil
}
