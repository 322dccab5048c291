package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/dpproxy/dpproxy/answers"
	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/catalog"
	"github.com/dpproxy/dpproxy/demo"
	"github.com/dpproxy/dpproxy/engine"
	"github.com/dpproxy/dpproxy/measure"
	"github.com/dpproxy/dpproxy/mysqlfront"
	"github.com/dpproxy/dpproxy/sources"
	"github.com/dpproxy/dpproxy/state"
)

// commonFlags are shared by serve and audit.
type commonFlags struct {
	config  string
	dataDir string
}

func (c *commonFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.config, "config", "", "catalog YAML file (default: the embedded demo catalog)")
	fs.StringVar(&c.dataDir, "data-dir", defaultDataDir(), "directory for the demo data and the ledger")
}

func defaultDataDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "dpproxy")
	}
	return filepath.Join(os.TempDir(), "dpproxy")
}

// load returns the catalog and, for the embedded demo, makes sure the demo
// data exists.
func (c *commonFlags) load(ctx context.Context) (*catalog.Catalog, error) {
	if err := os.MkdirAll(c.dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if c.config != "" {
		return catalog.Load(c.config)
	}
	cat := catalog.Demo()
	if err := demo.Generate(ctx, filepath.Join(c.dataDir, cat.Sources["main"].Path), demo.DefaultRows); err != nil {
		return nil, fmt.Errorf("demo data: %w", err)
	}
	return cat, nil
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf commonFlags
	cf.register(fs)
	listen := fs.String("listen", "127.0.0.1:3306", "address to listen on")
	httpAddr := fs.String("http", "", "address of the read-only web console, or \"off\" (default: "+defaultConsoleAddr+" for the embedded demo, off otherwise)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := newLogger(stderr)
	p, err := start(ctx, cf, *listen, log)
	if err != nil {
		return err
	}
	defer p.Close()
	defer p.admin(cf, log)()
	consoleURL, consoleDone, err := p.serveConsole(ctx, cf, *httpAddr, log)
	if err != nil {
		return err
	}
	host, port := splitHostPort(p.front.Addr().String())
	fmt.Fprintf(stdout, "dpproxy is serving database %q on %s (data: %s)\n", p.cat.Database, p.front.Addr(), cf.dataDir)
	if p.cat.State.Shared() {
		fmt.Fprintf(stdout, "state (ledger, answers, measurements) shared in %s\n", p.state.Where)
	}
	if cf.config == "" {
		fmt.Fprintf(stdout, "connect with:\n  mysql -h %s -P %s -u analyst -panalyst %s\n", host, port, p.cat.Database)
		fmt.Fprintf(stdout, "then try:\n  SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 40;\n")
	}
	if consoleURL != "" {
		fmt.Fprintf(stdout, "web console: %s", consoleURL)
		if cf.config == "" {
			fmt.Fprint(stdout, " (log in as auditor/auditor or analyst/analyst)")
		}
		fmt.Fprintln(stdout)
	}
	if p.tls != nil {
		fmt.Fprintf(stdout, "TLS offered (certificate SHA-256 %s)", mysqlfront.Fingerprint(p.tls))
		if cf.config == "" {
			fmt.Fprintf(stdout, "; to verify it: --ssl-ca=%s --ssl-verify-server-cert", filepath.Join(cf.dataDir, "dpproxy-cert.pem"))
		}
		fmt.Fprintln(stdout)
	}
	errc := make(chan error, 1)
	go func() { errc <- p.front.Start() }()
	select {
	case <-ctx.Done():
		log.Info("shutting down")
		if consoleDone != nil {
			<-consoleDone
		}
		return nil
	case err := <-errc:
		// The front only returns by itself when its listener died.
		if err == nil {
			err = errors.New("the MySQL front stopped accepting connections")
		}
		log.Error("serving stopped", "err", err)
		return err
	case err := <-consoleDone:
		return fmt.Errorf("web console: %w", err)
	}
}

// proxy is a running dpproxy: catalog, ledger, sources, engine and front.
type proxy struct {
	cat     *catalog.Catalog
	state   *state.Store   // where the ledger, answers and measurements are kept
	ledger  *budget.Ledger // state.Ledger
	answers *answers.Store // released answers, for free repeats across restarts and proxies
	measure *measure.Store // released measurements, for answers derived from them
	hist    *sources.Set
	live    *engine.Live // the engine; reloads swap its catalog
	front   *mysqlfront.Server
	tls     *tls.Config // nil: clear text only
}

func start(ctx context.Context, cf commonFlags, listen string, log *slog.Logger) (*proxy, error) {
	cat, err := cf.load(ctx)
	if err != nil {
		return nil, err
	}
	p := &proxy{cat: cat}
	if p.state, err = state.Open(ctx, cat.State, cf.dataDir, cat.Cache.MeasurementBytes()); err != nil {
		return nil, err
	}
	p.ledger, p.answers, p.measure = p.state.Ledger, p.state.Answers, p.state.Measurements
	if p.hist, err = sources.Open(ctx, cat, sources.Options{DataDir: cf.dataDir, UnitKey: p.state.UnitKey, Logger: log}); err != nil {
		p.Close()
		return nil, err
	}
	if err := p.hist.LoadPublicTables(ctx, cat); err != nil {
		p.Close()
		return nil, err
	}
	p.live = engine.NewLive(engine.New(engine.Config{Catalog: cat, Ledger: p.ledger, Histograms: p.hist, Logger: log, Answers: p.answers, Measurements: p.measure}))
	if _, err := p.live.SyncLimits(ctx); err != nil { // limits edited while no proxy ran
		p.Close()
		return nil, fmt.Errorf("ledger: %w", err)
	}
	tlsConfig, err := cf.tlsConfig(cat)
	if err != nil {
		p.Close()
		return nil, err
	}
	p.tls = tlsConfig
	p.front, err = mysqlfront.New(mysqlfront.Config{Catalog: cat, Backend: p.live, Address: listen, Version: "8.0.33-dpproxy", Logger: log,
		TLS: tlsConfig, RequireTLS: cat.TLS.Require, AuthPlugin: cat.AuthPlugin,
		Audit: &mysqlfront.Audit{Ledger: p.ledger, Catalog: p.live.Catalog}})
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("listen %s: %w", listen, err)
	}
	return p, nil
}

// tlsConfig is the catalog's certificate, or for the embedded demo a
// self-signed one generated once under the data directory.
func (c *commonFlags) tlsConfig(cat *catalog.Catalog) (*tls.Config, error) {
	switch {
	case cat.TLS.Cert != "":
		abs := func(f string) string {
			if filepath.IsAbs(f) {
				return f
			}
			return filepath.Join(c.dataDir, f)
		}
		cfg, err := mysqlfront.LoadTLS(abs(cat.TLS.Cert), abs(cat.TLS.Key))
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		return cfg, nil
	case c.config == "":
		cfg, err := mysqlfront.SelfSignedTLS(c.dataDir)
		if err != nil {
			return nil, fmt.Errorf("demo certificate: %w", err)
		}
		return cfg, nil
	}
	return nil, nil
}

func (p *proxy) Close() {
	if p.front != nil {
		p.front.Close()
	}
	if p.hist != nil {
		p.hist.Close()
	}
	if p.state != nil {
		p.state.Close()
	}
}

func splitHostPort(addr string) (string, string) {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[:i], addr[i+1:]
		}
	}
	return addr, ""
}
