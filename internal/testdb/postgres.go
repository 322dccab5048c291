package testdb

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// postgresBin is where Debian installs the newest PostgreSQL's server
// binaries (/usr/lib/postgresql/<version>/bin), or "" when none is.
func postgresBin() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	best, bestVersion := "", -1
	for _, d := range dirs {
		bin := filepath.Dir(d)
		if v, err := strconv.Atoi(filepath.Base(filepath.Dir(bin))); err == nil && v > bestVersion {
			best, bestVersion = bin, v
		}
	}
	return best
}

// PostgresPassword is the superuser's password.
const PostgresPassword = "dpproxy-test"

// StartPostgres initialises a cluster in a temporary directory and starts
// it as the postgres user (PostgreSQL refuses to run as root), durable
// writes off (a test server), on a free loopback port.
func StartPostgres(ctx context.Context) (*Server, error) {
	return startPostgres(ctx, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
}

// StartPostgresDurable is StartPostgres with PostgreSQL's durable defaults
// (fsync, synchronous_commit and full_page_writes on), for benchmarks
// that compare commit costs with SQLite's synchronous=FULL. Settings given
// on the command line cannot be changed by ALTER SYSTEM, hence a server of
// its own.
func StartPostgresDurable(ctx context.Context) (*Server, error) { return startPostgres(ctx) }

func startPostgres(ctx context.Context, durability ...string) (*Server, error) {
	bin := postgresBin()
	if bin == "" {
		return nil, fmt.Errorf("postgresql: %w (no /usr/lib/postgresql/*/bin/initdb)", ErrMissing)
	}
	initdb := filepath.Join(bin, "initdb")
	if os.Geteuid() == 0 {
		if _, err := exec.LookPath("runuser"); err != nil {
			return nil, fmt.Errorf("postgresql: runuser: %w", ErrMissing)
		}
	}
	dir, err := tempDir("dpproxy-pg-")
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Server, error) { os.RemoveAll(dir); return nil, fmt.Errorf("postgresql: %w", err) }
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte(PostgresPassword+"\n"), 0o600); err != nil {
		return fail(err)
	}
	if err := chown(dir, "postgres"); err != nil {
		return fail(err)
	}
	data := filepath.Join(dir, "data")
	cmd := asUser("postgres", initdb, "-D", data, "-U", "postgres", "--pwfile", pw, "-A", "scram-sha-256",
		"-E", "UTF8", "--locale=C.UTF-8", "--no-sync")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %v: %s", err, out))
	}
	port, err := FreePort()
	if err != nil {
		return fail(err)
	}
	logFile := filepath.Join(dir, "postgres.log")
	lf, err := os.Create(logFile)
	if err != nil {
		return fail(err)
	}
	chown(logFile, "postgres")
	args := append([]string{filepath.Join(bin, "postgres"), "-D", data, "-k", dir, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1"}, durability...)
	args = append(args, "-c", "shared_buffers=256MB", "-c", "max_connections=100", "-c", "max_parallel_workers_per_gather=2")
	srv := asUser("postgres", args...)
	srv.Stdout, srv.Stderr = lf, lf
	detach(srv)
	if err := srv.Start(); err != nil {
		lf.Close()
		return fail(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait(); lf.Close() }()
	s := &Server{Kind: "postgres", Host: "127.0.0.1", Port: port, Driver: "pgx", dir: dir,
		AdminDSN: fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d/postgres?sslmode=disable", PostgresPassword, port)}
	s.stop = func() error {
		stop := asUser("postgres", filepath.Join(bin, "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop")
		out, err := stop.CombinedOutput()
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			if srv.Process != nil {
				srv.Process.Kill()
			}
		}
		if err != nil {
			return fmt.Errorf("pg_ctl stop: %v: %s", err, out)
		}
		return nil
	}
	if err := waitReady(ctx, s.Driver, s.AdminDSN, exited, logFile); err != nil {
		s.Stop()
		return nil, fmt.Errorf("postgresql: %w", err)
	}
	return s, nil
}
