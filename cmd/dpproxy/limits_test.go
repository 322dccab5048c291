package main

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestFileDescriptorExhaustion runs dpproxy with a low RLIMIT_NOFILE and
// opens more sockets than it has descriptors for: accept fails with EMFILE,
// which used to end serve with status 0 and no log. Now it logs the errors,
// keeps running, and answers a normal client once the sockets are gone.
func TestFileDescriptorExhaustion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("needs bash for ulimit")
	}
	bin := dpproxyBinary(t)
	dir := t.TempDir()
	cfg := writeCatalog(t, dir, fmt.Sprintf(`database: demo
sources:
  main: {driver: sqlite, path: %q}
tables:
  people:
    budget: {total: 10, per_user: 10, default_per_query: 0.1}
    columns:
      sex: {type: categorical, values: [Female, Male]}
users:
  analyst: {password: analyst, role: analyst}
server:
  handshake_timeout: 2s
`, smallSource(t, dir)))
	cmd := command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", dir, "--config", cfg)
	// bash sets the soft and hard limits, so that Go's start-up cannot raise them.
	cmd.Args = append([]string{bash, "-c", `ulimit -n 48 && exec "$@"`, "bash"}, cmd.Args...)
	cmd.Path = bash
	c := startChildCmd(t, cmd)

	var socks []net.Conn
	defer func() {
		for _, s := range socks {
			s.Close()
		}
	}()
	for range 120 {
		s, err := net.DialTimeout("tcp", c.addr, 2*time.Second)
		if err != nil {
			break // the backlog is full: enough
		}
		socks = append(socks, s)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(c.log(), "too many open files") {
		if time.Now().After(deadline) {
			t.Fatalf("no accept error logged with %d sockets:\n%s", len(socks), c.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case <-c.exited:
		t.Fatalf("dpproxy exited (%v) when out of file descriptors:\n%s", c.err, c.log())
	case <-time.After(500 * time.Millisecond):
	}
	for _, s := range socks {
		s.Close()
	}
	socks = nil

	db, err := sql.Open("mysql", fmt.Sprintf("analyst:analyst@tcp(%s)/demo?timeout=5s", c.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	deadline = time.Now().Add(20 * time.Second)
	for {
		var n int64
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM people").Scan(&n)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not answered after the sockets closed: %v\n%s", err, c.log())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(c.log(), "accept failed; retrying") {
		t.Fatalf("log:\n%s", c.log())
	}
	db.Close()
	c.stop() // a clean shutdown still exits 0
}
