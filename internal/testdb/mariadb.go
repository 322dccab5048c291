package testdb

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// StartMariaDB installs a data directory in a temporary directory and
// starts mariadbd on it (as root with --user=root when this process is
// root), durable writes relaxed (a test server), on a free loopback port,
// with the grant tables in force: root connects over the Unix socket with
// no password, other users as their grants say. Its temporary tables go to
// that directory too, not to a shared /tmp that others may clean (a large
// window-function query then failed with "Error on delete of
// '/tmp/#sql-temptable-….MAI'").
func StartMariaDB(ctx context.Context) (*Server, error) {
	install, err := exec.LookPath("mariadb-install-db")
	if err != nil {
		return nil, fmt.Errorf("mariadb: mariadb-install-db: %w", ErrMissing)
	}
	mariadbd, err := exec.LookPath("mariadbd")
	if err != nil {
		if mariadbd, err = exec.LookPath("/usr/sbin/mariadbd"); err != nil {
			return nil, fmt.Errorf("mariadb: mariadbd: %w", ErrMissing)
		}
	}
	dir, err := tempDir("dpproxy-maria-")
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Server, error) { os.RemoveAll(dir); return nil, fmt.Errorf("mariadb: %w", err) }
	data := filepath.Join(dir, "data")
	usr := []string{}
	if os.Geteuid() == 0 {
		usr = []string{"--user=root"}
	}
	args := append([]string{"--no-defaults", "--datadir=" + data, "--auth-root-authentication-method=normal",
		"--skip-test-db"}, usr...)
	if out, err := exec.CommandContext(ctx, install, args...).CombinedOutput(); err != nil {
		return fail(fmt.Errorf("mariadb-install-db: %v: %s", err, out))
	}
	port, err := FreePort()
	if err != nil {
		return fail(err)
	}
	sock := filepath.Join(dir, "mysqld.sock")
	logFile := filepath.Join(dir, "mariadb.log")
	srv := exec.Command(mariadbd, append([]string{"--no-defaults", "--datadir=" + data, "--socket=" + sock,
		"--port=" + strconv.Itoa(port), "--bind-address=127.0.0.1", "--pid-file=" + filepath.Join(dir, "mysqld.pid"),
		"--log-error=" + logFile, "--tmpdir=" + dir, "--skip-log-bin", "--skip-name-resolve", "--innodb-buffer-pool-size=512M",
		"--innodb-flush-log-at-trx-commit=0", "--innodb-doublewrite=0", "--character-set-server=utf8mb4",
		"--collation-server=utf8mb4_general_ci", "--max-connections=200"}, usr...)...)
	detach(srv)
	if err := srv.Start(); err != nil {
		return fail(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	s := &Server{Kind: "mariadb", Host: "127.0.0.1", Port: port, Driver: "mysql", dir: dir,
		AdminDSN: fmt.Sprintf("root@unix(%s)/?multiStatements=true", sock)}
	s.stop = func() error {
		if srv.Process != nil {
			srv.Process.Signal(syscall.SIGTERM)
		}
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			srv.Process.Kill()
			<-exited
		}
		return nil
	}
	if err := waitReady(ctx, s.Driver, s.AdminDSN, exited, logFile); err != nil {
		s.Stop()
		return nil, fmt.Errorf("mariadb: %w", err)
	}
	return s, nil
}
