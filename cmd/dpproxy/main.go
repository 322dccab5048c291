// Command dpproxy is the CLI: serve the MySQL-protocol DP proxy, audit the
// privacy ledger, explain plans. It holds flags and wiring only.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/dpproxy/dpproxy/internal/cli"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		args = []string{"serve"}
	}
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case "serve":
		ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
		err = serve(ctx, rest, stdout, stderr)
	case "console":
		ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
		err = consoleCmd(ctx, rest, stdout, stderr)
	case "audit":
		err = audit(ctx, rest, stdout)
	case "bench":
		// The benchmarks link internal/testdb; they are not shipped.
		fmt.Fprintln(stderr, "dpproxy: the benchmarks moved to their own command: go run ./cmd/dpproxy-bench", strings.Join(rest, " "))
		return 2
	case "reload":
		err = reloadCmd(rest, stdout)
	case "state":
		err = stateCmd(ctx, rest, stdout, stderr)
	case "profile-units":
		err = profileUnits(ctx, rest, stdout)
	case "help", "-h", "--help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "dpproxy: unknown command %q\n", cmd)
		usage(stderr)
		return 2
	}
	return cli.Status(stderr, "dpproxy", err)
}

// exitError ends the command with its code (see package cli).
type exitError = cli.ExitError

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: dpproxy <command> [flags]

commands:
  serve    start the MySQL-protocol proxy (default: embedded demo on 127.0.0.1:3306, web console on 127.0.0.1:8080)
  audit    print ledger entries and spent/remaining budgets; 'audit verify' checks the hash chain
           (and signed heads), 'audit sign' signs the ledger head, 'audit keygen' makes a signing key
  console  serve the read-only web console over a ledger, without a proxy:
           'console --data-dir DIR [--config FILE] [--http ADDR]' (serve has it too: --http ADDR)
  state    'state migrate --config FILE --data-dir DIR' copies a data directory's ledger, answers,
           measurements and unit-hash key into the PostgreSQL database of the catalog's state section
  reload   make the running proxy re-read its catalog's budgets (or send it SIGHUP)
  profile-units  the data owner's exact distribution of rows per privacy unit, to choose max_rows
           ('profile-units --config FILE --data-dir DIR [--table T [--column C]]'); exact data: an
           administrator's command, never reachable over the MySQL protocol

Run 'dpproxy <command> -h' for the command's flags. The benchmarks are a
developer's command of their own: go run ./cmd/dpproxy-bench help.
`)
}

func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}
