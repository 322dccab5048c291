// Package testdb starts real database servers for tests: a PostgreSQL and a
// MariaDB (the Debian packages postgresql and mariadb-server), each in a
// temporary directory, listening on a free loopback port, and a three-shard
// ClickHouse cluster (clickhouse-server, clickhouse.go), all stopped and
// removed by Stop. Start one per test package in TestMain and share it:
//
//	var pg = testdb.NewLazy(testdb.StartPostgres)
//	func TestMain(m *testing.M) { code := m.Run(); pg.Stop(); os.Exit(code) }
//	func TestX(t *testing.T) { srv := pg.Get(t) ... }
//
// A test whose server cannot start skips, except under CI=true, where it
// fails (CI installs both servers).
package testdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Server is a running database server.
type Server struct {
	Kind string // "postgres", "mariadb" or "clickhouse"
	Host string // 127.0.0.1
	Port int
	// AdminDSN connects as the superuser: a pgx connection string, or a
	// go-sql-driver/mysql DSN (over the server's Unix socket).
	AdminDSN string
	// Driver is the database/sql driver name AdminDSN is for ("pgx" or
	// "mysql"); the caller imports the driver.
	Driver string
	// Shards are a ClickHouse cluster's nodes' DSNs, in shard order
	// (AdminDSN is the first's); nil for the other servers.
	Shards []string
	dir    string
	stop   func() error
}

// Stop shuts the server down and removes its directory.
func (s *Server) Stop() error {
	if s == nil {
		return nil
	}
	err := s.stop()
	os.RemoveAll(s.dir)
	return err
}

// Exec runs statements as the superuser.
func (s *Server) Exec(ctx context.Context, stmts ...string) error {
	db, err := sql.Open(s.Driver, s.AdminDSN)
	if err != nil {
		return err
	}
	defer db.Close()
	for _, st := range stmts {
		if _, err := db.ExecContext(ctx, st); err != nil {
			return fmt.Errorf("%s: %w", firstLine(st), err)
		}
	}
	return nil
}

// Open returns a superuser connection pool.
func (s *Server) Open() (*sql.DB, error) { return sql.Open(s.Driver, s.AdminDSN) }

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// ErrMissing means the server's binaries are not installed.
var ErrMissing = errors.New("not installed")

// Lazy starts a server the first time a test asks for it.
type Lazy struct {
	start func(context.Context) (*Server, error)
	once  sync.Once
	srv   *Server
	err   error
}

// NewLazy wraps a Start function.
func NewLazy(start func(context.Context) (*Server, error)) *Lazy { return &Lazy{start: start} }

// TB is what Get needs of a *testing.T or *testing.B (so that this package
// does not import testing and commands such as dpproxy-bench may use it).
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
}

// Get returns the server, starting it once; it skips (fails under CI=true)
// when the server cannot start.
func (l *Lazy) Get(tb TB) *Server {
	tb.Helper()
	l.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		l.srv, l.err = l.start(ctx)
	})
	if l.err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("database server: %v (CI=true: the servers must be installed; .ci/run installs them)", l.err)
		}
		tb.Skipf("database server: %v", l.err)
	}
	return l.srv
}

// Stop stops the server if it was started.
func (l *Lazy) Stop() {
	if l.srv != nil {
		l.srv.Stop()
	}
}

// FreePort returns a TCP port free on the loopback interface.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tempDir(prefix string) (string, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	return dir, os.Chmod(dir, 0o755)
}

// waitReady polls until a superuser connection succeeds or the server exits.
func waitReady(ctx context.Context, driver, dsn string, exited <-chan error, logFile string) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		db, err := sql.Open(driver, dsn)
		if err == nil {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err = db.PingContext(pctx)
			cancel()
			db.Close()
			if err == nil {
				return nil
			}
		}
		select {
		case e := <-exited:
			return fmt.Errorf("server exited: %v; log: %s", e, tail(logFile))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("server not ready after 60s: %v; log: %s", err, tail(logFile))
		}
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// asUser runs a command as the named user when this process is root (the
// way PostgreSQL must run), else as this process's user.
func asUser(name string, args ...string) *exec.Cmd {
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", name, "--"}, args...)...)
	}
	return exec.Command(args[0], args[1:]...)
}

// chown gives dir to the named user when running as root.
func chown(dir, name string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

func detach(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }
