package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
)

// Budget administration: serve writes its pid to <data-dir>/dpproxy.pid and
// re-reads its catalog on SIGHUP; `dpproxy reload` validates the catalog and
// sends that signal. A reload applies the budgets and records each changed
// limit in the ledger (engine.Live.Reload). With a signing key in the
// catalog, serve appends a signed ledger head to <data-dir>/ledger.heads when
// it shuts down.

func (c *commonFlags) pidPath() string   { return filepath.Join(c.dataDir, "dpproxy.pid") }
func (c *commonFlags) headsPath() string { return filepath.Join(c.dataDir, "ledger.heads") }

// keyPath resolves the catalog's signing key path ("" if none).
func (c *commonFlags) keyPath(cat *catalog.Catalog) string {
	k := cat.Ledger.SigningKey
	if k == "" || filepath.IsAbs(k) {
		return k
	}
	return filepath.Join(c.dataDir, k)
}

// admin runs beside serve until stop is called: it writes the pid file,
// holding an flock on it while it runs (a second proxy on the same data
// directory leaves it to the first and logs its own pid), and reloads the
// catalog on SIGHUP. stop removes the pid file, closes the front and, with
// a signing key, signs the ledger head.
func (p *proxy) admin(cf commonFlags, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	pidFile := p.writePidFile(cf, log)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-done:
				return
			case <-hup:
				p.reload(context.Background(), cf, log)
			}
		}
	}()
	return func() {
		if pidFile != nil {
			os.Remove(cf.pidPath())
			pidFile.Close() // drops the lock
		}
		close(done)
		<-finished
		signal.Stop(hup) // only now: a SIGHUP sent before the pid file went is still caught
		p.front.Close()  // no charge after the signed head
		if k := cf.keyPath(p.live.Catalog()); k != "" {
			if sh, err := signHead(context.Background(), p.ledger, k, cf.headsPath()); err != nil {
				log.Error("signing the ledger head", "err", err)
			} else {
				log.Info("ledger head signed", "head", sh.Head, "file", cf.headsPath())
			}
		}
	}
}

// writePidFile writes "<pid>\n<config path>\n" to the pid file and keeps it
// open and locked; nil if another proxy holds it or it cannot be written.
func (p *proxy) writePidFile(cf commonFlags, log *slog.Logger) *os.File {
	f, err := os.OpenFile(cf.pidPath(), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		log.Warn("cannot write the pid file; dpproxy reload will not find this process", "path", cf.pidPath(), "err", err)
		return nil
	}
	ok, err := lockPidFile(f)
	if err != nil || !ok {
		f.Close()
		log.Warn("another dpproxy serves this data directory and owns its pid file; send SIGHUP to this process itself to reload it",
			"pid", os.Getpid(), "path", cf.pidPath(), "err", err)
		return nil
	}
	content := fmt.Sprintf("%d\n%s\n", os.Getpid(), cf.config)
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(content), 0)
	}
	if err != nil {
		log.Warn("cannot write the pid file", "path", cf.pidPath(), "err", err)
	}
	return f
}

// reload re-reads the catalog file and applies its budgets.
func (p *proxy) reload(ctx context.Context, cf commonFlags, log *slog.Logger) {
	if cf.config == "" {
		log.Info("reload: the embedded demo catalog has nothing to reload")
		return
	}
	next, err := catalog.Load(cf.config)
	if err != nil {
		log.Error("reload: catalog not reloaded", "err", err)
		return
	}
	if _, err := p.live.Reload(ctx, next); err != nil {
		log.Error("reload: catalog not reloaded", "err", err)
	}
}

func signHead(ctx context.Context, l *budget.Ledger, keyPath, headsPath string) (budget.SignedHead, error) {
	priv, err := budget.LoadSigningKey(keyPath)
	if err != nil {
		return budget.SignedHead{}, err
	}
	return l.AppendSignedHead(ctx, priv, headsPath)
}

// reloadCmd: `dpproxy reload [--data-dir D] [--config F]` checks the
// catalog the running proxy will read and sends it SIGHUP.
func reloadCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("reload", flag.ContinueOnError)
	var cf commonFlags
	cf.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	held, err := pidFileHeld(cf.pidPath())
	if err != nil {
		return fmt.Errorf("no running dpproxy for %s: %w", cf.dataDir, err)
	}
	if !held {
		return fmt.Errorf("no running dpproxy for %s: %s is stale (its proxy has ended)", cf.dataDir, cf.pidPath())
	}
	b, err := os.ReadFile(cf.pidPath())
	if err != nil {
		return fmt.Errorf("no running dpproxy for %s: %w", cf.dataDir, err)
	}
	lines := strings.Split(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil || pid <= 0 {
		return fmt.Errorf("%s: malformed pid file", cf.pidPath())
	}
	config := cf.config
	if len(lines) > 1 && strings.TrimSpace(lines[1]) != "" {
		if config != "" && config != strings.TrimSpace(lines[1]) {
			return fmt.Errorf("the proxy (pid %d) reads %s, not %s", pid, strings.TrimSpace(lines[1]), config)
		}
		config = strings.TrimSpace(lines[1])
	}
	if config != "" {
		if _, err := catalog.Load(config); err != nil {
			return fmt.Errorf("catalog not valid, nothing reloaded:\n%w", err)
		}
	}
	proc, err := os.FindProcess(pid)
	if err == nil {
		err = proc.Signal(syscall.SIGHUP)
	}
	if errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("dpproxy (pid %d) is not running; stale pid file %s", pid, cf.pidPath())
	}
	if err != nil {
		return fmt.Errorf("signal pid %d: %w", pid, err)
	}
	if config == "" {
		fmt.Fprintf(stdout, "sent SIGHUP to dpproxy (pid %d); it serves the embedded demo catalog, which has nothing to reload\n", pid)
		return nil
	}
	fmt.Fprintf(stdout, "catalog %s is valid; sent SIGHUP to dpproxy (pid %d), which applies its budgets and records changed limits in the ledger (dpproxy audit list --kind limits)\n", config, pid)
	return nil
}

// publicKey is the key audit verify checks signed heads with: --public-key
// (the key, or @file), else the catalog's public_key, else derived from its
// signing_key; nil if none.
func publicKey(flagVal string, cf commonFlags, cat *catalog.Catalog) (ed25519.PublicKey, error) {
	text := flagVal
	if strings.HasPrefix(text, "@") {
		b, err := os.ReadFile(text[1:])
		if err != nil {
			return nil, fmt.Errorf("--public-key: %w", err)
		}
		text = string(b)
	}
	if text == "" {
		text = cat.Ledger.PublicKey
	}
	if text != "" {
		return budget.ParsePublicKey(text)
	}
	if k := cf.keyPath(cat); k != "" {
		priv, err := budget.LoadSigningKey(k)
		if err != nil {
			return nil, err
		}
		return priv.Public().(ed25519.PublicKey), nil
	}
	return nil, nil
}
