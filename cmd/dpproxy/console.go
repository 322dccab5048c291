package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"

	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/console"
	"github.com/dpproxy/dpproxy/engine"
	"github.com/dpproxy/dpproxy/internal/statedb"
	"github.com/dpproxy/dpproxy/state"
)

// defaultConsoleAddr is where the embedded demo serves the web console, and
// `dpproxy console` by default.
const defaultConsoleAddr = "127.0.0.1:8080"

// consoleSettings are the flags and parts a console is built from.
type consoleSettings struct {
	cf        commonFlags
	cat       func() *catalog.Catalog
	ledger    console.Ledger
	explainer console.Explainer
	tls       *tls.Config
	// sessions is the shared state database that keeps the console's
	// sessions, so a login holds on every proxy (nil: in memory).
	sessions *statedb.DB
}

// startConsole listens on addr and serves the console until ctx ends; it
// returns the console's URL and a channel with Serve's result.
func startConsole(ctx context.Context, addr string, st consoleSettings, log *slog.Logger) (string, <-chan error, error) {
	pub, err := publicKey("", st.cf, st.cat())
	if err != nil {
		return "", nil, fmt.Errorf("console: %w", err)
	}
	srv, err := console.New(console.Config{Catalog: st.cat, Ledger: st.ledger, Explainer: st.explainer, SessionDB: st.sessions,
		PublicKey: pub, HeadsPath: st.cf.headsPath(), TLS: st.tls, Logger: log})
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("console: listen %s: %w", addr, err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	return srv.URL(ln.Addr()), done, nil
}

// consoleCmd: `dpproxy console --data-dir DIR [--config FILE] [--http ADDR]`
// serves the web console over a ledger, read-only, without a proxy. EXPLAIN
// plans with the catalog (no source is opened: plans need no data).
func consoleCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("console", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf commonFlags
	cf.register(fs)
	addr := fs.String("http", defaultConsoleAddr, "address for the web console")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := newLogger(stderr)
	cat := catalog.Demo()
	if cf.config != "" {
		var err error
		if cat, err = catalog.Load(cf.config); err != nil {
			return err
		}
	}
	sl, err := state.OpenLedger(ctx, cat.State, cf.dataDir, false)
	if err != nil {
		return err
	}
	defer sl.Close()
	l := sl.Ledger
	tlsConfig, err := cf.tlsConfig(cat)
	if err != nil {
		return err
	}
	current := func() *catalog.Catalog { return cat }
	// EXPLAIN plans over the catalog; the engine reads spends from the
	// read-only ledger, so even a charge could not be written.
	eng := engine.New(engine.Config{Catalog: cat, Ledger: l, Logger: log})
	url, done, err := startConsole(ctx, *addr, consoleSettings{cf: cf, cat: current, ledger: l, explainer: eng, tls: tlsConfig, sessions: sl.DB}, log)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "dpproxy console on %s (ledger %s, read-only)\n", url, sl.Where)
	if cf.config == "" {
		fmt.Fprintln(stdout, "log in as auditor/auditor (everything) or analyst/analyst (own budget)")
	}
	select {
	case <-ctx.Done():
		return <-done
	case err := <-done:
		return err
	}
}

// consoleAddr resolves serve's --http flag: "" (not given) is the default
// address for the embedded demo and off otherwise; "off" is off.
func consoleAddr(flagVal string, demo bool) (addr string, explicit bool) {
	switch strings.ToLower(strings.TrimSpace(flagVal)) {
	case "off", "none", "false", "0":
		return "", true
	case "":
		if demo {
			return defaultConsoleAddr, false
		}
		return "", false
	}
	return flagVal, true
}

// serveConsole starts the console beside a running proxy. A default address
// that is taken (another demo, a test) only logs a warning: the proxy runs on.
func (p *proxy) serveConsole(ctx context.Context, cf commonFlags, flagVal string, log *slog.Logger) (string, <-chan error, error) {
	addr, explicit := consoleAddr(flagVal, cf.config == "")
	if addr == "" {
		return "", nil, nil
	}
	url, done, err := startConsole(ctx, addr, consoleSettings{cf: cf, cat: p.live.Catalog, ledger: p.ledger, explainer: p.live, tls: p.tls, sessions: p.state.DB}, log)
	if err != nil {
		var op *net.OpError
		if !explicit && errors.As(err, &op) {
			log.Warn("web console not started: its default address is taken; pass --http ADDR", "addr", addr, "err", err)
			return "", nil, nil
		}
		return "", nil, err
	}
	return url, done, nil
}
