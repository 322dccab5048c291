package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/budget"
)

// TestMain runs dpproxy itself when DPPROXY_HELPER_ARGS is set (the test
// binary re-executed as a child process, see dpproxyBinary), and removes
// the binary dpproxyBinary built once the tests are done.
func TestMain(m *testing.M) {
	if args := os.Getenv("DPPROXY_HELPER_ARGS"); args != "" {
		os.Exit(run(context.Background(), strings.Split(args, "\n"), os.Stdout, os.Stderr))
	}
	code := m.Run()
	pgServer.Stop()
	mariaServer.Stop()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var (
	binOnce sync.Once
	binDir  string
	binCmd  []string
	binErr  error
)

// dpproxyBinary builds the dpproxy command, once per test binary, and
// returns the command line that runs it. Tests run real proxy processes
// from it: several on one ledger, killed with SIGKILL, signalled with
// SIGHUP. Without the go tool it falls back to re-executing this test
// binary as dpproxy (see TestMain), which works the same but starts slowly
// under the race detector (go-icu-regex's init alone takes seconds there,
// and the crash test starts 21 processes).
func dpproxyBinary(t *testing.T) []string {
	t.Helper()
	binOnce.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			binCmd = []string{os.Args[0]}
			return
		}
		if binDir, binErr = os.MkdirTemp("", "dpproxy-bin-"); binErr != nil {
			return
		}
		bin := filepath.Join(binDir, "dpproxy")
		out, err := exec.Command(goTool, "build", "-o", bin, "github.com/dpproxy/dpproxy/cmd/dpproxy").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		binCmd = []string{bin}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binCmd
}

// command is an exec.Cmd running dpproxy (from dpproxyBinary) with args.
func command(bin []string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin[0], args...)
	if bin[0] == os.Args[0] {
		cmd = exec.Command(bin[0])
		cmd.Env = append(os.Environ(), "DPPROXY_HELPER_ARGS="+strings.Join(args, "\n"))
	}
	return cmd
}

// child is a dpproxy process started by startChild.
type child struct {
	t      *testing.T
	cmd    *exec.Cmd
	addr   string
	stderr string // path of its log
	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed

	mu  sync.Mutex
	out []string // its standard output's lines so far
}

// waitLine waits up to 30 s for a line of the child's standard output
// matching re and returns re's first submatch.
func (c *child) waitLine(re *regexp.Regexp) string {
	c.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		c.mu.Lock()
		for _, l := range c.out {
			if m := re.FindStringSubmatch(l); m != nil {
				c.mu.Unlock()
				return m[1]
			}
		}
		c.mu.Unlock()
	}
	c.t.Fatalf("dpproxy child printed no line matching %s:\n%s", re, c.log())
	return ""
}

var servingLine = regexp.MustCompile(` on (\S+) \(data: `)

// startChild runs `dpproxy serve --listen 127.0.0.1:0 args...` in a child
// process of the command bin (from dpproxyBinary) and waits until it listens.
func startChild(t *testing.T, bin []string, args ...string) *child {
	t.Helper()
	return startChildCmd(t, command(bin, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...))
}

// startChildCmd starts cmd, a dpproxy serve command (possibly wrapped),
// and waits until it listens.
func startChildCmd(t *testing.T, cmd *exec.Cmd) *child {
	t.Helper()
	logf, err := os.CreateTemp(t.TempDir(), "dpproxy-*.log")
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{t: t, cmd: cmd, stderr: logf.Name(), exited: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sent := false
		for sc.Scan() {
			c.mu.Lock()
			c.out = append(c.out, sc.Text())
			c.mu.Unlock()
			if m := servingLine.FindStringSubmatch(sc.Text()); m != nil && !sent {
				addr <- m[1]
				sent = true
			}
		}
		if !sent {
			close(addr)
		}
		c.err = cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() { c.kill() })
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatalf("dpproxy child exited before listening:\n%s", c.log())
		}
		c.addr = a
	case <-time.After(60 * time.Second):
		c.kill()
		t.Fatalf("dpproxy child did not start:\n%s", c.log())
	}
	return c
}

func (c *child) log() string {
	b, _ := os.ReadFile(c.stderr)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// kill sends SIGKILL and waits for the process to end.
func (c *child) kill() {
	select {
	case <-c.exited:
		return
	default:
	}
	c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.exited
}

// stop sends SIGTERM (a clean shutdown) and waits.
func (c *child) stop() {
	c.t.Helper()
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
		if c.err != nil {
			c.t.Fatalf("dpproxy child: %v\n%s", c.err, c.log())
		}
	case <-time.After(30 * time.Second):
		c.kill()
		c.t.Fatalf("dpproxy child did not stop on SIGTERM:\n%s", c.log())
	}
}

// dpproxyCmd runs a dpproxy command in-process and returns its exit code and
// output.
func dpproxyCmd(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// writeCatalog writes a catalog for the tests into dir; {{DEMO}} is the
// demo data file.
func writeCatalog(t *testing.T, dir, yaml string) string {
	t.Helper()
	path := filepath.Join(dir, "catalog.yaml")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(yaml, "{{DEMO}}", demoData(t))), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// openConns opens n connections of one pool and pings each, so that a race
// starts with every connection established.
func openConns(t *testing.T, ctx context.Context, addr string, n int) []*sql.Conn {
	t.Helper()
	db, err := sql.Open("mysql", fmt.Sprintf("analyst:analyst@tcp(%s)/demo", addr))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	t.Cleanup(func() { db.Close() })
	conns := make([]*sql.Conn, n)
	for i := range conns {
		if conns[i], err = db.Conn(ctx); err != nil {
			t.Fatal(err)
		}
		if err := conns[i].PingContext(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return conns
}

// ledgerEntries opens the ledger of a data directory and lists its entries.
func ledgerEntries(t *testing.T, dataDir string) []budget.Entry {
	t.Helper()
	l, err := budget.Open(context.Background(), filepath.Join(dataDir, "ledger.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	es, err := l.Entries(context.Background(), budget.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return es
}
